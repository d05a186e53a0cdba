package crosslang_test

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"os"
	"strconv"
	"testing"

	"github.com/replicago/replica/codec"
	"github.com/replicago/replica/internal/demo"
	"github.com/replicago/replica/session"
)

// sessionVectorsPath is the Go-encoded input of ts/test/session.test.ts's
// golden test: HELLOs and WELCOMEs of protocol version 7 (docs/protocol.md
// §10.2, §10.5), which the TypeScript runtime must encode to the same
// bytes and parse back to the same fields.
const sessionVectorsPath = "../../ts/test/testdata/session-v7.json"

type heldVector struct {
	ID    uint32 `json:"id"`
	Level uint8  `json:"level"`
	Owned bool   `json:"owned"`
}

type resumeVector struct {
	Ticket [2]string    `json:"ticket"` // decimal, as BigInt takes them
	Tick   string       `json:"tick"`
	Held   []heldVector `json:"held"`
}

type helloVector struct {
	Comment    string        `json:"comment"`
	Descriptor string        `json:"descriptor"`
	Token      string        `json:"token"`
	Limits     limitsVector  `json:"limits"`
	Resume     *resumeVector `json:"resume,omitempty"`
	Bytes      string        `json:"bytes"`
}

type welcomeVector struct {
	Comment    string    `json:"comment"`
	Descriptor string    `json:"descriptor"`
	Session    string    `json:"session"`
	UserID     string    `json:"userId"`
	TickRate   uint32    `json:"tickRate"`
	Ticket     [2]string `json:"ticket"`
	Resumed    bool      `json:"resumed"`
	MaxMessage uint32    `json:"maxMessage"`
	Bytes      string    `json:"bytes"`
}

type sessionVectors struct {
	Comment  string          `json:"comment"`
	Hellos   []helloVector   `json:"hellos"`
	Welcomes []welcomeVector `json:"welcomes"`
}

// dec is v in decimal, as JSON cannot hold every uint64 as a number.
func dec(v uint64) string { return strconv.FormatUint(v, 10) }

// limitsVector is codec.Limits with the TypeScript runtime's names.
type limitsVector struct {
	MaxSegmentBytes int `json:"maxSegmentBytes"`
	MaxStringBytes  int `json:"maxStringBytes"`
	MaxContainerLen int `json:"maxContainerLen"`
	MaxDepth        int `json:"maxDepth"`
	MaxEntities     int `json:"maxEntities"`
	MaxValues       int `json:"maxValues"`
}

func buildSessionVectors(t *testing.T) []byte {
	desc := demo.Schema().AppendDescriptor(nil)
	limits := codec.Limits{MaxSegmentBytes: 1 << 20, MaxStringBytes: 300, MaxContainerLen: 70000, MaxDepth: 9, MaxEntities: 1 << 14, MaxValues: 1<<31 - 1}
	v := sessionVectors{Comment: "HELLO and WELCOME of protocol version 7 as the Go session package encodes them; written by go test ./internal/crosslang -run TestSessionVectors -update"}
	ticket := session.Ticket{0x0123456789abcdef, 0xfedcba9876543210}
	hellos := []struct {
		comment string
		resume  *session.Resume
	}{
		{"a new session: resume bit 0", nil},
		{"resume with an empty replica", &session.Resume{Ticket: ticket, Tick: 0}},
		{"resume: slots 0, 1, 900 and 2^24 − 1, levels 0 to 4, generations 0 to 255, owned or not", &session.Resume{
			Ticket: ticket, Tick: 1<<40 + 77,
			Held: []session.Held{
				{ID: 0, Level: 0, Owned: false},
				{ID: 3<<24 | 1, Level: 4, Owned: true},
				{ID: 255<<24 | 900, Level: 2, Owned: false},
				{ID: 17<<24 | (1<<24 - 1), Level: 1, Owned: true},
			},
		}},
	}
	for _, h := range hellos {
		m := &session.Hello{Version: session.ProtocolVersion, Descriptor: desc, Token: []byte("tok"), Limits: limits, Resume: h.resume}
		hv := helloVector{Comment: h.comment, Descriptor: hex.EncodeToString(desc), Token: hex.EncodeToString(m.Token), Limits: limitsVector(limits),
			Bytes: hex.EncodeToString(session.AppendHello(nil, m))}
		if r := h.resume; r != nil {
			rv := &resumeVector{Ticket: [2]string{dec(r.Ticket[0]), dec(r.Ticket[1])}, Tick: dec(r.Tick), Held: []heldVector{}}
			for _, e := range r.Held {
				rv.Held = append(rv.Held, heldVector{ID: e.ID, Level: e.Level, Owned: e.Owned})
			}
			hv.Resume = rv
		}
		v.Hellos = append(v.Hellos, hv)
	}
	welcomes := []struct {
		comment string
		ticket  session.Ticket
		resumed bool
		max     uint32
	}{
		{"a server that does not resume: zero ticket, no message limit stated", session.Ticket{}, false, 0},
		{"a new session with a ticket", ticket, false, 16 << 10},
		{"a resumed session", session.Ticket{1, 1 << 63}, true, 1<<31 - 1},
	}
	for _, w := range welcomes {
		m := &session.Welcome{Version: session.ProtocolVersion, Descriptor: desc, Session: 1<<64 - 1, UserID: "ünï", TickRate: 30,
			Ticket: w.ticket, Resumed: w.resumed, MaxMessage: w.max}
		v.Welcomes = append(v.Welcomes, welcomeVector{Comment: w.comment, Descriptor: hex.EncodeToString(desc), Session: dec(m.Session),
			UserID: m.UserID, TickRate: m.TickRate, Ticket: [2]string{dec(w.ticket[0]), dec(w.ticket[1])}, Resumed: w.resumed,
			MaxMessage: w.max, Bytes: hex.EncodeToString(session.AppendWelcome(nil, m))})
	}
	// The Go side reads its own vectors back.
	for _, h := range v.Hellos {
		b, _ := hex.DecodeString(h.Bytes)
		if _, err := session.Parse(b); err != nil {
			t.Fatalf("%s: %v", h.Comment, err)
		}
	}
	out, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	return append(out, '\n')
}

// TestSessionVectors checks that the committed session vectors are what
// the session package encodes today (-update rewrites them).
func TestSessionVectors(t *testing.T) {
	got := buildSessionVectors(t)
	if *update {
		if err := os.WriteFile(sessionVectorsPath, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(sessionVectorsPath)
	if err != nil {
		t.Fatalf("%v; run go test ./internal/crosslang -run TestSessionVectors -update", err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("%s is out of date; run go test ./internal/crosslang -run TestSessionVectors -update", sessionVectorsPath)
	}
}
