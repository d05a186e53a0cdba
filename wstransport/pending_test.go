package wstransport_test

import (
	"bufio"
	"errors"
	"io"
	"net"
	"net/http"
	"syscall"
	"testing"
	"time"

	"github.com/replicago/replica/transport"
	"github.com/replicago/replica/transport/transporttest"
	"github.com/replicago/replica/wstransport"
)

// TestIdleHTTPClosed has a client make a plain HTTP request of the
// listener (not an upgrade), read the answer, and keep the connection
// open without another request: the listener closes it within its
// HandshakeTimeout, as it does a connection that never finishes its
// upgrade request. Kept open, such connections would outlive every
// handshake bound.
func TestIdleHTTPClosed(t *testing.T) {
	const handshake = 500 * time.Millisecond
	ln, addr := listen(t, wstransport.Config{HandshakeTimeout: handshake, Path: "/replica"})
	defer ln.Close()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := io.WriteString(c, "GET /elsewhere HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(c)
	rsp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, rsp.Body)
	rsp.Body.Close()
	if rsp.StatusCode != http.StatusNotFound {
		t.Fatalf("status %d, want 404", rsp.StatusCode)
	}
	// Idle now: the server must end the connection, well within this.
	c.SetReadDeadline(time.Now().Add(20 * time.Second))
	if _, err := br.ReadByte(); !errors.Is(err, io.EOF) && !isReset(err) {
		t.Fatalf("an idle HTTP connection got %v, want it closed by the server", err)
	}
}

// TestMaxPending fills the listener's MaxPending with connections that
// never send their upgrade request: the next connection is closed at once,
// long before the HandshakeTimeout, and once the silent ones are gone a
// client connects again.
func TestMaxPending(t *testing.T) {
	const pending = 4
	ln, addr := listen(t, wstransport.Config{HandshakeTimeout: time.Minute, MaxPending: pending})
	defer ln.Close()
	var silent []net.Conn
	for range pending {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		silent = append(silent, c)
	}
	// The server counts a connection once its accept loop has it: dial
	// again until one is refused (closed without a byte), within a bound
	// far below the minute of HandshakeTimeout.
	deadline := time.Now().Add(20 * time.Second)
	for {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		c.SetReadDeadline(time.Now().Add(time.Second))
		_, err = c.Read(make([]byte, 1))
		c.Close()
		if errors.Is(err, io.EOF) || isReset(err) {
			break // refused
		}
		if time.Now().After(deadline) {
			t.Fatalf("a connection beyond MaxPending still open after 20 s: %v", err)
		}
	}
	for _, c := range silent {
		c.Close()
	}
	// The silent ones gone, an honest client connects.
	transporttest.Reconnects(t, ln, wstransport.NewDialer(transport.Config{}), ln.Addr().String())
}

// listen serves WebSocket with cfg on a loopback TCP listener, and returns
// it and its TCP address, for raw connections.
func listen(t *testing.T, cfg wstransport.Config) (transport.Listener, string) {
	t.Helper()
	tl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return wstransport.NewListener(tl, cfg), tl.Addr().String()
}

// isReset reports whether err is a connection reset by the peer.
func isReset(err error) bool { return errors.Is(err, syscall.ECONNRESET) }
