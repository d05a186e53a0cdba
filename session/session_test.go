package session_test

import (
	"errors"
	"reflect"
	"testing"

	"github.com/replicago/replica/session"
)

func messages() []any {
	return []any{
		&session.Hello{Version: 1, Descriptor: []byte{1, 2, 3}, Token: []byte("tok")},
		&session.Hello{Version: 7, Descriptor: []byte{}, Token: []byte{}},
		&session.Welcome{Version: 1, Descriptor: []byte{9}, Session: 1 << 40, UserID: "ana", TickRate: 20},
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

func FuzzParse(f *testing.F) {
	for _, m := range messages() {
		f.Add(encode(m))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := session.Parse(b)
		if err != nil {
			if !errors.Is(err, session.ErrMalformed) {
				t.Fatalf("error %v does not wrap ErrMalformed", err)
			}
			return
		}
		// What parses re-encodes to the same bytes.
		if again := encode(m); string(again) != string(b) {
			t.Fatalf("re-encoding % x gave % x", b, again)
		}
	})
}
