package wstransport

import (
	"context"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/replicago/replica/transport"
)

// TestReadLimitLoweredMidMessage has a peer send part of a message and
// stop: once the connection has read past the limit set afterwards, it
// closes at once with status 4003, without waiting for the rest.
func TestReadLimitLoweredMidMessage(t *testing.T) {
	ln, err := Listen("127.0.0.1:0", Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ws, _, err := websocket.Dial(ctx, ln.Addr().String(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ws.CloseNow()
	tc, err := ln.Accept(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tc.Close(transport.CloseNormal, "")
	c := tc.(*conn)
	w, err := ws.Writer(ctx, websocket.MessageBinary)
	if err != nil {
		t.Fatal(err)
	}
	const part = 100 << 10
	if _, err := w.Write(make([]byte, part)); err != nil {
		t.Fatal(err)
	}
	// Never finished. Wait until the connection has read well past the
	// limit to come (the library sends what fills its buffer).
	for c.inMsg.Load() < 16<<10 {
		if ctx.Err() != nil {
			t.Fatalf("read %d of %d bytes", c.inMsg.Load(), part)
		}
		time.Sleep(time.Millisecond)
	}
	c.SetReadLimit(1000)
	select {
	case <-tc.Done():
	case <-ctx.Done():
		t.Fatal("still open with a message past the new limit")
	}
	if code, _, byPeer := tc.CloseInfo(); code != transport.CloseMessageTooLarge || byPeer {
		t.Fatalf("CloseInfo = %v, byPeer %v; want %v locally", code, byPeer, transport.CloseMessageTooLarge)
	}
	if _, _, err := ws.Read(ctx); websocket.CloseStatus(err) != 4003 {
		t.Fatalf("peer read %v, want close status 4003", err)
	}
}
