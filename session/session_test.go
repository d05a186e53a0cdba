package session_test

import (
	"cmp"
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/replicago/replica/codec"
	"github.com/replicago/replica/session"
	"github.com/replicago/replica/wire"
)

func messages() []any {
	return []any{
		&session.Hello{Version: session.ProtocolVersion, Descriptor: []byte{1, 2, 3}, Token: []byte("tok"),
			Limits: codec.Limits{}.WithDefaults()},
		&session.Hello{Version: session.ProtocolVersion, Descriptor: []byte{}, Token: []byte{},
			Limits: codec.Limits{MaxSegmentBytes: 1, MaxStringBytes: 2, MaxContainerLen: 3, MaxDepth: 4, MaxEntities: 1<<31 - 1, MaxValues: 6}},
		&session.Hello{Version: session.ProtocolVersion, Descriptor: []byte{7}, Token: []byte{},
			Limits: codec.Limits{}.WithDefaults(), Resume: &session.Resume{Ticket: session.Ticket{1 << 63, 42}, Tick: 1 << 33,
				Held: []session.Held{{ID: 0x01000000}, {ID: 0xFF000001, Level: 4, Owned: true}, {ID: 1<<24 - 1, Level: 2}}}},
		&session.Hello{Version: session.ProtocolVersion, Descriptor: []byte{7}, Token: []byte{},
			Limits: codec.Limits{}.WithDefaults(), Resume: &session.Resume{Tick: 0}},
		&session.Welcome{Version: 1, Descriptor: []byte{9}, Session: 1 << 40, UserID: "ana", TickRate: 20},
		&session.Welcome{Version: 1, Descriptor: []byte{9}, Session: 2, UserID: "", TickRate: 60,
			Ticket: session.Ticket{^uint64(0), 5}, Resumed: true, MaxMessage: 16 << 10},
		&session.Refuse{Code: 8, Message: "field hp: int16 here, int32 on the server"},
		&session.Tick{Tick: 123456, Segments: 3},
		&session.Ping{Nonce: 0xDEADBEEFCAFE},
		&session.Pong{Nonce: 1},
		&session.RPC{Entity: 0x01000005, RPC: 3, Args: []byte{1, 2}},
		&session.RPC{Entity: 1, RPC: 1 << 20, Args: []byte{}},
		&session.Resync{},
	}
}

func encode(m any) []byte {
	switch m := m.(type) {
	case *session.Hello:
		return session.AppendHello(nil, m)
	case *session.Welcome:
		return session.AppendWelcome(nil, m)
	case *session.Refuse:
		return session.AppendRefuse(nil, m)
	case *session.Tick:
		return session.AppendTick(nil, m)
	case *session.Ping:
		return session.AppendPing(nil, m)
	case *session.Pong:
		return session.AppendPong(nil, m)
	case *session.RPC:
		return session.AppendRPC(nil, m)
	case *session.Resync:
		return session.AppendResync(nil)
	}
	panic("unknown message")
}

func TestRoundTrip(t *testing.T) {
	for _, m := range messages() {
		b := encode(m)
		got, err := session.Parse(b)
		if err != nil {
			t.Fatalf("%T: %v", m, err)
		}
		if !reflect.DeepEqual(got, m) {
			t.Errorf("%T: got %+v, want %+v", m, got, m)
		}
		// Appending to a prefix keeps the prefix.
		if p := session.AppendTick([]byte{0xAA}, &session.Tick{Tick: 1, Segments: 1}); p[0] != 0xAA || p[1] != byte(session.TypeTick) {
			t.Fatalf("append lost the prefix: % x", p)
		}
	}
}

func TestMalformed(t *testing.T) {
	bad := [][]byte{
		nil,
		{0},
		{99, 0},
		{byte(session.TypeTick)}, // truncated
		append(encode(&session.Ping{Nonce: 5}), 1),               // trailing data
		append([]byte{byte(session.TypeTick)}, 0xFF, 0xFF, 0xFF), // segment count over the limit
	}
	for _, b := range bad {
		if _, err := session.Parse(b); !errors.Is(err, session.ErrMalformed) {
			t.Errorf("Parse(% x) = %v, want ErrMalformed", b, err)
		}
	}
	// Every truncation of every valid message is refused. An RPC's
	// arguments run to the end of the message and are checked by the
	// record decoder, so only its header is cut here.
	for _, m := range messages() {
		b := encode(m)
		n := len(b)
		if r, ok := m.(*session.RPC); ok {
			n -= len(r.Args)
		}
		for i := 0; i < n; i++ {
			if _, err := session.Parse(b[:i]); err == nil {
				t.Errorf("%T truncated to %d bytes parsed", m, i)
			}
		}
	}
}

// TestHelloVersions checks that a HELLO of another protocol version
// parses to its version alone, whatever follows, so that a server can
// name the version it refuses; and that limits out of range are refused.
func TestHelloVersions(t *testing.T) {
	for _, tail := range [][]byte{nil, {0xFF, 0x13}} {
		var w wire.Writer
		w.U(1, 0)
		b := append(append([]byte{byte(session.TypeHello)}, w.Finish()...), tail...)
		m, err := session.Parse(b)
		if h, ok := m.(*session.Hello); err != nil || !ok || !reflect.DeepEqual(h, &session.Hello{Version: 1}) {
			t.Errorf("version 1 HELLO % x: %+v, %v", b, m, err)
		}
	}
	for i, v := range []uint64{0, 1 << 31} {
		var w wire.Writer
		w.U(session.ProtocolVersion, 0)
		w.Bytes(nil)
		w.Bytes(nil)
		for j := range 6 {
			if j == i*5 { // the first limit, then the last
				w.U(v, 8)
			} else {
				w.U(100, 8)
			}
		}
		b := append([]byte{byte(session.TypeHello)}, w.Finish()...)
		if _, err := session.Parse(b); !errors.Is(err, session.ErrMalformed) || !errors.Is(err, wire.ErrMalformed) {
			t.Errorf("limit %d: err = %v", v, err)
		}
	}
}

// TestResumeMalformed checks the resume block's bounds: slots below
// 2^24 and ascending (by construction of the gaps), levels at most
// MaxLevel, at most MaxResume entities.
func TestResumeMalformed(t *testing.T) {
	hello := func(body func(w *wire.Writer)) []byte {
		var w wire.Writer
		w.U(session.ProtocolVersion, 0)
		w.Bytes(nil)
		w.Bytes(nil)
		codec.Limits{}.AppendTo(&w)
		w.Bits(1, 1)
		w.Bits(7, 64)
		w.Bits(9, 64)
		w.U(100, 8)
		body(&w)
		return append([]byte{byte(session.TypeHello)}, w.Finish()...)
	}
	entry := func(w *wire.Writer, gap uint64, level uint64) {
		w.U(gap, 2)
		w.Bits(1, 8)
		w.U(level, 0)
		w.Bits(0, 1)
	}
	cases := map[string]func(w *wire.Writer){
		"slot 2^24":       func(w *wire.Writer) { w.U(1, 3); entry(w, 1<<24, 0) },
		"slots past 2^24": func(w *wire.Writer) { w.U(2, 3); entry(w, 1<<24-1, 0); entry(w, 0, 0) },
		"level 5":         func(w *wire.Writer) { w.U(1, 3); entry(w, 0, 5) },
		"too many":        func(w *wire.Writer) { w.U(session.MaxResume+1, 3) },
		"count past data": func(w *wire.Writer) { w.U(1000, 3); entry(w, 0, 0) },
	}
	for name, body := range cases {
		if m, err := session.Parse(hello(body)); !errors.Is(err, session.ErrMalformed) {
			t.Errorf("%s: Parse = %+v, %v; want ErrMalformed", name, m, err)
		}
	}
	// The largest slot, and the largest block, parse.
	if _, err := session.Parse(hello(func(w *wire.Writer) { w.U(1, 3); entry(w, 1<<24-1, 4) })); err != nil {
		t.Errorf("slot 2^24-1: %v", err)
	}
	held := make([]session.Held, session.MaxResume)
	for i := range held {
		held[i] = session.Held{ID: uint32(i * 2047), Level: 4, Owned: true}
	}
	slices.SortFunc(held, func(a, b session.Held) int { return cmp.Compare(a.ID, b.ID) })
	b := session.AppendHello(nil, &session.Hello{Version: session.ProtocolVersion, Limits: codec.Limits{}.WithDefaults(),
		Resume: &session.Resume{Ticket: session.Ticket{1, 2}, Tick: 1 << 40, Held: held}})
	if len(b) > session.MaxResumeBytes+64 {
		t.Errorf("a resume block of %d entities took %d bytes, over MaxResumeBytes %d", len(held), len(b), session.MaxResumeBytes)
	}
	if m, err := session.Parse(b); err != nil || len(m.(*session.Hello).Resume.Held) != len(held) {
		t.Errorf("largest block: %v", err)
	}
}

func FuzzParse(f *testing.F) {
	for _, m := range messages() {
		f.Add(encode(m))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := session.Parse(b)
		if len(b) > 0 && session.Type(b[0]) == session.TypeTick {
			// ParseTick, the read loops' TICK path, agrees with Parse.
			k, kerr := session.ParseTick(b)
			if (kerr == nil) != (err == nil) || err == nil && !reflect.DeepEqual(&k, m) {
				t.Fatalf("ParseTick gave %+v, %v; Parse %+v, %v", k, kerr, m, err)
			}
			if kerr != nil && !errors.Is(kerr, session.ErrMalformed) {
				t.Fatalf("error %v does not wrap ErrMalformed", kerr)
			}
		} else if _, kerr := session.ParseTick(b); !errors.Is(kerr, session.ErrMalformed) {
			t.Fatalf("ParseTick of % x: %v", b, kerr)
		}
		if err != nil {
			if !errors.Is(err, session.ErrMalformed) {
				t.Fatalf("error %v does not wrap ErrMalformed", err)
			}
			return
		}
		// What parses re-encodes to the same bytes, but for a HELLO of
		// another version, of which only the version is read.
		if h, ok := m.(*session.Hello); ok && h.Version != session.ProtocolVersion {
			return
		}
		if again := encode(m); string(again) != string(b) {
			t.Fatalf("re-encoding % x gave % x", b, again)
		}
	})
}

// TestDocumentedBytes pins the byte layouts docs/protocol.md §10.2 gives,
// worked out by hand from the document, so that the two cannot drift.
func TestDocumentedBytes(t *testing.T) {
	for _, c := range []struct {
		name string
		got  []byte
		want []byte
	}{
		// A RESYNC is the type byte alone.
		{"resync", session.AppendResync(nil), []byte{0x08}},
		// bits(64) nonce, least-significant bit first: little-endian bytes.
		{"ping", session.AppendPing(nil, &session.Ping{Nonce: 0x0102030405060708}),
			[]byte{0x05, 0x08, 0x07, 0x06, 0x05, 0x04, 0x03, 0x02, 0x01}},
		// Type, entity ID little-endian, RPC ID 300 as LEB128 (AC 02), args.
		{"rpc", session.AppendRPC(nil, &session.RPC{Entity: 0x01000005, RPC: 300, Args: []byte{0xAA}}),
			[]byte{0x07, 0x05, 0x00, 0x00, 0x01, 0xAC, 0x02, 0xAA}},
		// U(8) of 1 is the bit 0 then 8 bits of 1 (stream bits 0–8:
		// 0 1 0000000); U(1) of 2 is one 1, the 0 terminator, then the low
		// bit of 2 (stream bits 9–11: 1 0 0); the two ownership counts
		// U(3) of 0 are 0 000 each (bits 12–19).
		{"tick", session.AppendTick(nil, &session.Tick{Tick: 1, Segments: 2}), []byte{0x04, 0x02, 0x02, 0x00}},
		// Gaining entity 0x01000005: U(3) of 1 is 0 then 1 0 0 (bits
		// 12–15), the ID as bits(32) from bit 16 (little-endian bytes),
		// then U(3) of 0 for the lost list and padding.
		{"tick, gained", session.AppendTick(nil, &session.Tick{Tick: 1, Segments: 2, Gained: []uint32{0x01000005}}),
			[]byte{0x04, 0x02, 0x22, 0x05, 0x00, 0x00, 0x01, 0x00}},
	} {
		if !reflect.DeepEqual(c.got, c.want) {
			t.Errorf("%s: % x, documented % x", c.name, c.got, c.want)
		}
	}
}

// TestAppendTickNoAllocs: a TICK header appended to a buffer with room
// allocates nothing, and reads back.
func TestAppendTickNoAllocs(t *testing.T) {
	m := &session.Tick{Tick: 1 << 40, Segments: 3, Gained: []uint32{7, 9}, Lost: []uint32{1},
		Levels: []session.Level{{ID: 5, Level: 0}, {ID: 1 << 24, Level: session.MaxLevel}}}
	buf := make([]byte, 0, 64)
	if n := testing.AllocsPerRun(100, func() { buf = session.AppendTick(buf[:0], m) }); n != 0 {
		t.Fatalf("%v allocations", n)
	}
	msg, err := session.Parse(append([]byte("x"), buf...)[1:])
	if err != nil {
		t.Fatal(err)
	}
	got, ok := msg.(*session.Tick)
	if !ok || got.Tick != m.Tick || got.Segments != 3 || len(got.Gained) != 2 || got.Gained[1] != 9 || len(got.Lost) != 1 ||
		!reflect.DeepEqual(got.Levels, m.Levels) {
		t.Fatalf("read back %+v", msg)
	}
	// A level above MaxLevel is malformed.
	bad := session.AppendTick(nil, &session.Tick{Levels: []session.Level{{ID: 1, Level: session.MaxLevel + 1}}})
	if _, err := session.Parse(bad); !errors.Is(err, session.ErrMalformed) {
		t.Fatalf("level %d: %v", session.MaxLevel+1, err)
	}
}

func TestClipText(t *testing.T) {
	long := strings.Repeat("a", session.MaxText-1) + "é" + "tail" // é straddles the limit
	for _, c := range []struct{ in, want string }{
		{"", ""},
		{"short", "short"},
		{strings.Repeat("x", session.MaxText), strings.Repeat("x", session.MaxText)},
		{strings.Repeat("x", session.MaxText+1), strings.Repeat("x", session.MaxText)},
		{long, strings.Repeat("a", session.MaxText-1)},
	} {
		got := session.ClipText(c.in)
		if got != c.want || !utf8.ValidString(got) {
			t.Errorf("ClipText(%d bytes) = %d bytes, want %d", len(c.in), len(got), len(c.want))
		}
	}
}
