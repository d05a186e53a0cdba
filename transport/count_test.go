package transport_test

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/replicago/replica/transport"
)

func TestCountReceived(t *testing.T) {
	nw := transport.NewMemNetwork()
	ln, err := nw.Listen("", transport.Config{})
	if err != nil {
		t.Fatal(err)
	}
	var n atomic.Int64
	ctx := context.Background()
	accepted := make(chan transport.Conn, 1)
	go func() {
		c, _ := ln.Accept(ctx)
		accepted <- c
	}()
	c, err := transport.CountReceived(nw.Dialer(transport.Config{}), &n).Dial(ctx, ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	srv := <-accepted
	srv.Send(make([]byte, 10))
	srv.Send(make([]byte, 5))
	for range 2 {
		if _, err := c.Receive(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if n.Load() != 15 {
		t.Fatalf("counted %d bytes, want 15", n.Load())
	}
}
