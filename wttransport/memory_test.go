package wttransport_test

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/replicago/replica/transport"
	"github.com/replicago/replica/wttransport"
)

// TestIdleConnMemory measures the server's memory per idle WebTransport
// connection, with the clients in another process. It runs only with
// REPLICA_MEASURE_MEMORY set (to the number of connections, default 500).
func TestIdleConnMemory(t *testing.T) {
	if os.Getenv("REPLICA_MEASURE_MEMORY") == "" {
		t.Skip("set REPLICA_MEASURE_MEMORY=N to measure")
	}
	n, _ := strconv.Atoi(os.Getenv("REPLICA_MEASURE_MEMORY"))
	if n <= 0 {
		n = 500
	}
	cert, hash, err := wttransport.GenerateCert(0)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := wttransport.Listen("127.0.0.1:0", wttransport.Config{TLS: &tls.Config{Certificates: []tls.Certificate{cert}}})
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()

	before := measure()
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperIdleClients$")
	cmd.Env = append(os.Environ(),
		"REPLICA_HELPER_ADDR="+ln.Addr().String(),
		"REPLICA_HELPER_N="+strconv.Itoa(n),
		"REPLICA_HELPER_HASH="+hex.EncodeToString(hash[:]),
	)
	stdin, _ := cmd.StdinPipe()
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		stdin.Close()
		cmd.Wait()
	}()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	conns := make([]transport.Conn, 0, n)
	for range n {
		c, err := ln.Accept(ctx)
		if err != nil {
			t.Fatalf("Accept after %d: %v", len(conns), err)
		}
		conns = append(conns, c)
	}
	for _, c := range conns {
		if err := c.Send([]byte("tick")); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(6 * time.Second)
	after := measure()
	heap := float64(after.heap-before.heap) / float64(n)
	stack := float64(after.stack-before.stack) / float64(n)
	gor := float64(after.goroutines-before.goroutines) / float64(n)
	t.Logf("%d idle WebTransport connections, server side: %.1f KiB live heap + %.1f KiB stacks = %.1f KiB per connection; %.1f goroutines per connection",
		n, heap/1024, stack/1024, (heap+stack)/1024, gor)
	for _, c := range conns {
		c.Close(transport.CloseNormal, "")
	}
}

type mem struct{ heap, stack, goroutines uint64 }

func measure() mem {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return mem{heap: ms.HeapAlloc, stack: ms.StackInuse, goroutines: uint64(runtime.NumGoroutine())}
}

// TestHelperIdleClients is the client process of TestIdleConnMemory.
func TestHelperIdleClients(t *testing.T) {
	addr := os.Getenv("REPLICA_HELPER_ADDR")
	if addr == "" {
		t.Skip("helper process only")
	}
	n, _ := strconv.Atoi(os.Getenv("REPLICA_HELPER_N"))
	var hash [32]byte
	hex.Decode(hash[:], []byte(os.Getenv("REPLICA_HELPER_HASH")))
	d := &wttransport.Dialer{CertHashes: [][32]byte{hash}}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var conns []transport.Conn
	for range n {
		c, err := d.Dial(ctx, addr)
		if err != nil {
			t.Fatalf("Dial after %d: %v", len(conns), err)
		}
		conns = append(conns, c)
	}
	for _, c := range conns {
		go func() {
			for {
				if _, err := c.Receive(context.Background()); err != nil {
					return
				}
			}
		}()
	}
	bufio.NewReader(os.Stdin).ReadString('\n')
	fmt.Fprintln(os.Stderr, "helper: done")
	for _, c := range conns {
		c.Close(transport.CloseNormal, "")
	}
}
