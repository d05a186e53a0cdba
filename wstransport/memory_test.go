package wstransport

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/http"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/replicago/replica/transport"
)

// idleConnBudget is the runtime milestone's target of server memory per
// idle WebSocket connection.
const idleConnBudget = 32 << 10

// TestIdleConnMemory opens idle connections and measures the server's
// memory per connection: live heap and goroutine stacks, after GC. The
// clients are raw sockets that did the WebSocket handshake by hand, so
// that nearly everything measured is the server's (a client socket adds a
// few hundred bytes; kernel socket buffers are not Go memory).
func TestIdleConnMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("opens hundreds of sockets")
	}
	perConn, goroutines := measureIdleConns(t, 500)
	t.Logf("server memory per idle WebSocket connection: %.1f KiB (heap + stacks), %.2f goroutines", perConn/1024, goroutines)
	if raceEnabled {
		return // the race detector inflates memory
	}
	if perConn > idleConnBudget {
		t.Errorf("%.1f KiB per idle connection, over the %d KiB budget", perConn/1024, idleConnBudget>>10)
	}
	if goroutines > 1.05 {
		t.Errorf("%.2f goroutines per idle connection, want 1 (the reader)", goroutines)
	}
}

// BenchmarkIdleConnMemory reports the same measure as TestIdleConnMemory
// as the metric bytes/conn.
func BenchmarkIdleConnMemory(b *testing.B) {
	var perConn, goroutines float64
	for b.Loop() {
		perConn, goroutines = measureIdleConns(b, 1000)
	}
	b.ReportMetric(perConn, "bytes/conn")
	b.ReportMetric(goroutines, "goroutines/conn")
}

func measureIdleConns(tb testing.TB, n int) (perConn, goroutinesPerConn float64) {
	ln, err := Listen("127.0.0.1:0", Config{Path: "/ws"})
	if err != nil {
		tb.Fatal(err)
	}
	defer ln.Close()
	hostport := strings.TrimSuffix(strings.TrimPrefix(ln.Addr().String(), "ws://"), "/ws")
	clients := make([]net.Conn, 0, n)
	conns := make([]transport.Conn, 0, n)
	defer func() {
		for _, c := range clients {
			c.Close()
		}
		for _, c := range conns {
			c.Close(transport.CloseNormal, "")
		}
	}()

	settle := func() (heap uint64, goroutines int) {
		var ms runtime.MemStats
		for range 3 {
			runtime.GC()
		}
		runtime.ReadMemStats(&ms)
		if testing.Verbose() {
			tb.Logf("heap %d KiB, stacks %d KiB, goroutines %d", ms.HeapAlloc>>10, ms.StackInuse>>10, runtime.NumGoroutine())
		}
		return ms.HeapAlloc + ms.StackInuse, runtime.NumGoroutine()
	}
	// Warm up: the first connection allocates the server's one-time state.
	before := runtime.NumGoroutine()
	clients = append(clients, rawDial(tb, hostport, "/ws"))
	conns = append(conns, acceptOne(tb, ln))
	waitGoroutines(before + 1)

	heap0, g0 := settle()
	for range n {
		clients = append(clients, rawDial(tb, hostport, "/ws"))
		conns = append(conns, acceptOne(tb, ln))
	}
	waitGoroutines(g0 + n)
	heap1, g1 := settle()
	return float64(int64(heap1)-int64(heap0)) / float64(n), float64(g1-g0) / float64(n)
}

func acceptOne(tb testing.TB, ln transport.Listener) transport.Conn {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := ln.Accept(ctx)
	if err != nil {
		tb.Fatal(err)
	}
	return c
}

// waitGoroutines waits, for up to 10 s (a busy machine may run them late;
// the wait ends as soon as they have gone), until the HTTP server's
// handshake goroutines have exited and at most want goroutines are left
// (plus the test's own).
func waitGoroutines(want int) {
	deadline := time.Now().Add(10 * time.Second)
	for runtime.NumGoroutine() > want && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
}

// rawDial does a WebSocket handshake by hand and returns the bare socket.
func rawDial(tb testing.TB, hostport, path string) net.Conn {
	c, err := net.Dial("tcp", hostport)
	if err != nil {
		tb.Fatal(err)
	}
	fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: %s\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"+
		"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n", path, hostport)
	resp, err := http.ReadResponse(bufio.NewReaderSize(c, 256), nil)
	if err != nil {
		tb.Fatal(err)
	}
	if resp.StatusCode != http.StatusSwitchingProtocols {
		tb.Fatalf("handshake: %s", resp.Status)
	}
	return c
}
