package replica_test

// Slowloris: floods of connections that open the transport and never
// complete the handshake, with the handshake caps raised out of the way,
// so that only the timeouts bound them. An honest client must join while
// the flood holds, every attacker must be closed within the timeouts, and
// the goroutines and file descriptors the flood took must come back.

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"runtime"
	"testing"
	"time"

	"github.com/quic-go/quic-go"

	"github.com/replicago/replica"
	"github.com/replicago/replica/client"
	"github.com/replicago/replica/internal/demo"
	"github.com/replicago/replica/transport"
	"github.com/replicago/replica/wstransport"
)

// openFDs returns the file descriptors the process has open, or -1 where
// /proc/self/fd is not there.
func openFDs() int {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return -1
	}
	return len(ents)
}

// slowlorisJoin dials an honest client while the flood holds and ticks
// until it has joined and applied a tick, polling the other clients.
func slowlorisJoin(t *testing.T, r *rig, token string, others ...*client.Conn) *client.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	start := time.Now()
	dialed := make(chan error, 1)
	var c *client.Conn
	go func() {
		var err error
		c, err = client.Dial(ctx, r.dialer, r.ln.Addr().String(), demo.Schema(), client.DialConfig{Token: []byte(token)})
		dialed <- err
	}()
	for {
		r.srv.Tick()
		for _, o := range others {
			if _, err := o.Poll(); err != nil {
				t.Fatalf("client %s: %v", o.UserID(), err)
			}
		}
		select {
		case err := <-dialed:
			if err != nil {
				t.Fatalf("an honest client could not join during the flood: %v", err)
			}
			t.Cleanup(func() { c.Close() })
			t.Logf("an honest client joined during the flood in %v", time.Since(start))
			r.tickUntilUser(token) // admitted at a tick, which may have run already
			return c
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// TestAttackSlowlorisWebSocket opens 150 WebSocket connections that never
// send a HELLO and 150 TCP connections whose upgrade request never ends.
// The first are refused with status 4006 after Config.HandshakeTimeout,
// the second have their sockets closed after wstransport's
// HandshakeTimeout; an honest client joins meanwhile.
func TestAttackSlowlorisWebSocket(t *testing.T) {
	const n = 150
	const handshake = 3 * time.Second
	r, ev := wsLogRig(t, replica.Config{HandshakeTimeout: handshake, MaxHandshakes: 10 * n, MaxHandshakesPerAddr: 10 * n},
		wstransport.Config{HandshakeTimeout: handshake})
	good := r.dial("good")
	r.tickUntilJoined(1)
	goroutines, fds := runtime.NumGoroutine(), openFDs()

	u, err := url.Parse(r.ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	var silent, headers []net.Conn
	var readers []*bufio.Reader
	for range n {
		nc, br := wsUpgrade(t, r.ln.Addr().String())
		nc.SetReadDeadline(time.Time{})
		silent, readers = append(silent, nc), append(readers, br)
		hc, err := net.Dial("tcp", u.Host)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { hc.Close() })
		fmt.Fprintf(hc, "GET %s HTTP/1.1\r\nHost: %s\r\nUpgrade: websocket\r\n", u.Path, u.Host)
		headers = append(headers, hc)
	}
	t.Logf("%d silent WebSockets and %d unfinished upgrade requests opened in %v", n, n, time.Since(start))
	if d := time.Since(start); d < handshake {
		// Only meaningful while the flood holds: every attacker is still
		// connected (the first ones time out from here on).
		late := slowlorisJoin(t, r, "late", good)
		late.Close()
		waitLeftWithin(t, r, ev, "late", transport.CloseNormal, time.Minute)
	} else {
		t.Logf("the flood took longer than the handshake timeout to open: no join during it")
	}

	bound := time.Now().Add(time.Minute)
	for i, nc := range silent {
		nc.SetReadDeadline(bound)
		status, err := readCloseStatus(nc, readers[i])
		if err != nil {
			t.Fatalf("silent WebSocket %d: no close frame: %v", i, err)
		}
		if want := 4000 + int(transport.CloseHandshakeTimeout); status != want {
			t.Fatalf("silent WebSocket %d: close status %d, want %d", i, status, want)
		}
		nc.Close()
	}
	for i, hc := range headers {
		hc.SetReadDeadline(bound)
		if _, err := io.ReadAll(hc); err != nil {
			t.Fatalf("unfinished upgrade request %d: the server did not close the socket: %v", i, err)
		}
		hc.Close()
	}
	t.Logf("all attackers closed %v after the flood began", time.Since(start))
	checkGoroutines(t, goroutines)
	checkFDs(t, fds)
	settle(t, r, good)
}

// TestAttackSlowlorisQUIC opens 100 QUIC connections that never open their
// message stream: quictransport closes each with code 6 after its
// HandshakeTimeout; an honest client joins meanwhile.
func TestAttackSlowlorisQUIC(t *testing.T) {
	const n = 100
	const handshake = 3 * time.Second
	r, ev, clientTLS := quicRig(t, replica.Config{MaxHandshakes: 10 * n, MaxHandshakesPerAddr: 10 * n}, handshake)
	good := r.dial("good")
	r.tickUntilJoined(1)
	goroutines, fds := runtime.NumGoroutine(), openFDs()
	start := time.Now()
	var conns []*quic.Conn
	for range n {
		conns = append(conns, quicRaw(t, r.ln.Addr().String(), clientTLS))
	}
	t.Logf("%d QUIC connections without a stream opened in %v", n, time.Since(start))
	if time.Since(start) < handshake {
		late := slowlorisJoin(t, r, "late", good)
		late.Close()
		waitLeftWithin(t, r, ev, "late", transport.CloseNormal, time.Minute)
	}
	for i, c := range conns {
		if code := quicClosed(t, c, time.Minute); code != transport.CloseHandshakeTimeout {
			t.Fatalf("connection %d closed with %s, want %s", i, code, transport.CloseHandshakeTimeout)
		}
	}
	t.Logf("all attackers closed %v after the flood began", time.Since(start))
	for _, c := range conns {
		c.CloseWithError(0, "")
	}
	checkGoroutines(t, goroutines)
	checkFDs(t, fds)
	settle(t, r, good)
}

// checkFDs waits until the process has at most want file descriptors
// open.
func checkFDs(t *testing.T, want int) {
	t.Helper()
	if want < 0 {
		return
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		n := openFDs()
		if n <= want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d file descriptors open, want at most %d: the flood's sockets were not all closed", n, want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
