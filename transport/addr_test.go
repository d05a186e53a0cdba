package transport_test

import (
	"net"
	"testing"

	"github.com/replicago/replica/transport"
)

type strAddr struct{ network, s string }

func (a strAddr) Network() string { return a.network }
func (a strAddr) String() string  { return a.s }

func TestSourceAddr(t *testing.T) {
	for _, c := range []struct {
		addr net.Addr
		want string
	}{
		{nil, ""},
		{&net.TCPAddr{IP: net.IPv4(198, 51, 100, 7), Port: 4000}, "198.51.100.7"},
		{&net.UDPAddr{IP: net.ParseIP("2001:db8::1"), Port: 443}, "2001:db8::1"},
		{strAddr{"ws", "203.0.113.9:8080"}, "203.0.113.9"},
		{strAddr{"mem", "client-3"}, "client-3"},
	} {
		if got := transport.SourceAddr(c.addr); got != c.want {
			t.Errorf("SourceAddr(%v) = %q, want %q", c.addr, got, c.want)
		}
	}
}

func TestLoopback(t *testing.T) {
	for _, c := range []struct {
		addr net.Addr
		want bool
	}{
		{nil, false},
		{&net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 80}, true},
		{&net.UDPAddr{IP: net.IPv6loopback, Port: 443}, true},
		{&net.TCPAddr{IP: net.IPv4zero, Port: 80}, false},
		{&net.TCPAddr{IP: net.IPv4(192, 0, 2, 1), Port: 80}, false},
		{strAddr{"ws", "ws://localhost:8080/replica"}, true},
		{strAddr{"ws", "ws://127.0.0.1:8080/replica"}, true},
		{strAddr{"ws", "ws://example.com:8080/replica"}, false},
		{strAddr{"tcp", "localhost:9000"}, true},
		{strAddr{"mem", "server-1"}, true},
	} {
		if got := transport.Loopback(c.addr); got != c.want {
			t.Errorf("Loopback(%v) = %v, want %v", c.addr, got, c.want)
		}
	}
}

// TestHandshakeCaps: past Max handshakes in all or MaxPerAddr from one
// source, Admit refuses and counts nothing; Done frees a place.
func TestHandshakeCaps(t *testing.T) {
	a := &net.TCPAddr{IP: net.IPv4(198, 51, 100, 7), Port: 1}
	a2 := &net.TCPAddr{IP: net.IPv4(198, 51, 100, 7), Port: 2} // same source, another port
	b := &net.TCPAddr{IP: net.IPv4(198, 51, 100, 8), Port: 1}
	h := transport.HandshakeCaps{Max: 3, MaxPerAddr: 2}
	admit := func(addr net.Addr, want string) string {
		t.Helper()
		from, busy := h.Admit(addr)
		if busy != want {
			t.Fatalf("Admit(%v) refused %q, want %q", addr, busy, want)
		}
		return from
	}
	fa := admit(a, "")
	admit(a2, "")
	admit(a, "too many handshakes in progress from this address")
	admit(b, "")
	admit(b, "too many handshakes in progress")
	h.Done(fa)
	admit(b, "")
	admit(a, "too many handshakes in progress")
	var none transport.HandshakeCaps
	for range 100 {
		if _, busy := none.Admit(a); busy != "" {
			t.Fatalf("the zero value refused: %q", busy)
		}
	}
}

// TestCloseErrorText checks what a CloseError says of who closed: a
// network failure reads as a lost connection, not as a local close.
func TestCloseErrorText(t *testing.T) {
	for _, c := range []struct {
		err  transport.CloseError
		want string
	}{
		{transport.CloseError{Code: transport.CloseGoingAway, Reason: "server shutting down", ByPeer: true}, "transport: connection closed by peer: going away: server shutting down"},
		{transport.CloseError{Code: transport.CloseNormal}, "transport: connection closed locally: normal"},
		{transport.CloseError{Code: transport.CloseNetworkError, Reason: "EOF"}, "transport: connection lost: network error: EOF"},
	} {
		if got := c.err.Error(); got != c.want {
			t.Errorf("%+v: %q, want %q", c.err, got, c.want)
		}
	}
}
