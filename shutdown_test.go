package replica_test

import (
	"context"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/replicago/replica"
	"github.com/replicago/replica/client"
	"github.com/replicago/replica/internal/demo"
	"github.com/replicago/replica/transport"
	"github.com/replicago/replica/wstransport"
)

// socketsListener keeps the sockets it accepts, so that a test can cut
// them as a process exiting would, and makes each write to them take
// 20 ms, as a slow network would.
type socketsListener struct {
	net.Listener
	mu    sync.Mutex
	conns []net.Conn
}

func (l *socketsListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil {
		l.mu.Lock()
		l.conns = append(l.conns, c)
		l.mu.Unlock()
		c = slowWriter{c}
	}
	return c, err
}

type slowWriter struct{ net.Conn }

func (w slowWriter) Write(p []byte) (int, error) {
	time.Sleep(20 * time.Millisecond)
	return w.Conn.Write(p)
}

// cut closes every socket accepted.
func (l *socketsListener) cut() {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, c := range l.conns {
		c.Close()
	}
}

// TestShutdown checks that Shutdown returns once the clients have been
// told: the server's sockets cut right after it returns, as a program
// exiting would cut them, every client over WebSocket has read "server
// shutting down" (CloseGoingAway), not a lost connection. (Close returns
// before the close frames are written: with it, most clients read a
// network error here.)
func TestShutdown(t *testing.T) {
	raw, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	sockets := &socketsListener{Listener: raw}
	ln := wstransport.NewListener(sockets, wstransport.Config{})
	srv := serveOn(t, ln, replica.Config{})
	ctx := context.Background()
	const n = 8
	var clients []*client.Conn
	for range n {
		c, err := client.Dial(ctx, wstransport.NewDialer(transport.Config{}), ln.Addr().String(), demo.Schema(), client.DialConfig{})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		clients = append(clients, c)
	}
	tickUntilJoined(t, srv, n)
	srv.Tick()
	sctx, scancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer scancel()
	if err := srv.Shutdown(sctx); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	sockets.cut()
	for i, c := range clients {
		select {
		case <-c.Done():
		case <-time.After(20 * time.Second):
			t.Fatalf("client %d still open", i)
		}
		if code, reason, _ := c.CloseInfo(); code != transport.CloseGoingAway || reason != "server shutting down" {
			t.Errorf("client %d closed with %s %q, want %s \"server shutting down\"", i, code, reason, transport.CloseGoingAway)
		}
	}
}

// TestClientCloseTellsServer checks that client.Conn.Close returns once
// the server has been told: each client's socket cut right after Close
// returns (writes slowed to 20 ms), as a bot exiting would cut it, the
// server still logs every client as having left ("client left"), not as
// a lost connection.
func TestClientCloseTellsServer(t *testing.T) {
	var logged syncBuffer
	ln, err := wstransport.Listen("127.0.0.1:0", wstransport.Config{})
	if err != nil {
		t.Fatal(err)
	}
	srv := serveOn(t, ln, replica.Config{Logger: slog.New(slog.NewTextHandler(&logged, nil))})
	ctx := context.Background()
	sockets := &socketsListener{} // its record of sockets, filled by the dialer
	d := &wstransport.Dialer{}
	d.NetDial = func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		sockets.mu.Lock()
		sockets.conns = append(sockets.conns, c)
		sockets.mu.Unlock()
		return slowWriter{c}, nil
	}
	const n = 6
	var clients []*client.Conn
	for range n {
		c, err := client.Dial(ctx, d, ln.Addr().String(), demo.Schema(), client.DialConfig{})
		if err != nil {
			t.Fatal(err)
		}
		clients = append(clients, c)
	}
	tickUntilJoined(t, srv, n)
	for _, c := range clients {
		c.Close()
	}
	sockets.cut()
	for deadline := time.Now().Add(20 * time.Second); len(srv.Conns()) > 0; {
		if time.Now().After(deadline) {
			t.Fatalf("%d clients still joined", len(srv.Conns()))
		}
		srv.Tick()
		time.Sleep(time.Millisecond)
	}
	if got := strings.Count(logged.String(), `reason="client left"`); got != n {
		t.Fatalf("%d of %d clients left with \"client left\"; the log:\n%s", got, n, logged.String())
	}
}
