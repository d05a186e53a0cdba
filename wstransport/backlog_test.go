package wstransport

import (
	"context"
	"testing"
	"time"

	"github.com/replicago/replica/transport"
)

// TestBacklogCountsKernelQueue has a client that stops reading while the
// server sends: once the server's writer has handed everything to the
// kernel, its backlog still counts what the peer has not taken (on Linux,
// where the kernel's send queue is measured), instead of dropping to zero
// while the kernel holds megabytes for a peer that reads nothing.
func TestBacklogCountsKernelQueue(t *testing.T) {
	if !kernelMeasured {
		t.Skip("the kernel's send queue is not measured on this system")
	}
	ln, err := Listen("127.0.0.1:0", Config{Config: transport.Config{SendQueueBytes: 64 << 20, SendQueueMessages: 1 << 16}})
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	client, err := Dial(ctx, ln.Addr().String(), transport.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close(transport.CloseNormal, "")
	server, err := ln.Accept(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer server.Close(transport.CloseNormal, "")
	// The client never calls Receive: its reader holds one message, and
	// TCP holds the rest.
	const total = 8 << 20
	msg := make([]byte, 16<<10)
	for sent := 0; sent < total; sent += len(msg) {
		if err := server.Send(msg); err != nil {
			t.Fatal(err)
		}
	}
	// Wait until the writer is stuck: the backlog stops changing.
	bl := server.(transport.Backlogger)
	var last int
	for stable := 0; stable < 10; {
		time.Sleep(50 * time.Millisecond)
		_, bytes := bl.Backlog()
		if bytes == last {
			stable++
		} else {
			stable, last = 0, bytes
		}
		if ctx.Err() != nil {
			t.Fatal("the backlog never settled")
		}
	}
	c := server.(*conn)
	c.mu.Lock()
	queued := c.bytes
	c.mu.Unlock()
	_, bytes := bl.Backlog()
	t.Logf("of %d KiB sent to a peer that reads nothing: %d KiB queued, %d KiB in the backlog", total>>10, queued>>10, bytes>>10)
	// What the peer took: its reader's one message and its socket's
	// receive buffer, which does not grow for a reader that reads
	// nothing (about 100 KiB here). Before the kernel's queue counted,
	// the backlog left out the ~4 MB it holds.
	if bytes < total-1<<20 {
		t.Fatalf("backlog of %d KiB after sending %d KiB to a peer that reads nothing", bytes>>10, total>>10)
	}
}
