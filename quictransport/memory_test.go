package quictransport_test

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"runtime/pprof"
	"strconv"
	"testing"
	"time"

	"github.com/replicago/replica/quictransport"
	"github.com/replicago/replica/transport"
)

// TestIdleConnMemory measures the server's memory per idle connection: live
// heap and goroutine stacks after GC, with the clients in another process.
// It runs only with REPLICA_MEASURE_MEMORY set (to the number of
// connections, default 500).
func TestIdleConnMemory(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv("REPLICA_MEASURE_MEMORY"))
	if os.Getenv("REPLICA_MEASURE_MEMORY") == "" {
		t.Skip("set REPLICA_MEASURE_MEMORY=N to measure")
	}
	if n <= 0 {
		n = 500
	}
	if os.Getenv("REPLICA_HEAP_PROFILE") != "" {
		runtime.MemProfileRate = 1
	}
	stls, _ := devTLS(t)
	ln, err := quictransport.Listen("127.0.0.1:0", quictransport.Config{TLS: stls})
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()

	before := measure()
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperIdleClients$", "-test.v")
	cmd.Env = append(os.Environ(),
		"REPLICA_HELPER_ADDR="+ln.Addr().String(),
		"REPLICA_HELPER_N="+strconv.Itoa(n),
		"REPLICA_HELPER_CERT="+string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: stls.Certificates[0].Certificate[0]})),
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
	// One round trip each, so every connection has used its stream, then
	// let them idle past a keep-alive.
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
	t.Logf("%d idle QUIC connections, server side: %.1f KiB live heap + %.1f KiB stacks = %.1f KiB per connection; %.1f goroutines per connection",
		n, heap/1024, stack/1024, (heap+stack)/1024, gor)
	if p := os.Getenv("REPLICA_HEAP_PROFILE"); p != "" {
		f, err := os.Create(p)
		if err == nil {
			pprof.WriteHeapProfile(f)
			f.Close()
		}
	}
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
	block, _ := pem.Decode([]byte(os.Getenv("REPLICA_HELPER_CERT")))
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	d := &quictransport.Dialer{Config: quictransport.Config{TLS: &tls.Config{RootCAs: pool}}}
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
	// Wait for the parent to close stdin.
	bufio.NewReader(os.Stdin).ReadString('\n')
	fmt.Fprintln(os.Stderr, "helper: done")
	for _, c := range conns {
		c.Close(transport.CloseNormal, "")
	}
}
