package transport_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/replicago/replica/transport"
)

// TestIdleReceiver: messages that come within the idle timeout keep the
// connection open however long it lives; silence past it closes the
// connection with CloseIdleTimeout, and Receive returns ErrClosed.
func TestIdleReceiver(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		client, server := transport.NewMemNetwork().Pipe(transport.Config{}, transport.Config{})
		rx := transport.NewIdleReceiver(server, time.Second, "silent")
		go func() {
			for range 5 {
				time.Sleep(900 * time.Millisecond)
				client.Send([]byte("ping"))
			}
		}()
		for i := range 5 {
			msg, err := rx.Receive()
			if err != nil || string(msg) != "ping" {
				t.Fatalf("message %d: %q, %v", i, msg, err)
			}
		}
		if rx.TimedOut() {
			t.Fatal("timed out while messages came within the timeout")
		}
		start := time.Now()
		_, err := rx.Receive()
		if !errors.Is(err, transport.ErrClosed) || !rx.TimedOut() {
			t.Fatalf("after silence: %v, timed out %v", err, rx.TimedOut())
		}
		if waited := time.Since(start); waited != time.Second {
			t.Fatalf("closed after %v of silence, want 1s", waited)
		}
		if code, reason, byPeer := server.CloseInfo(); code != transport.CloseIdleTimeout || reason != "silent" || byPeer {
			t.Fatalf("closed with %s %q (by peer %v)", code, reason, byPeer)
		}
	})
}

// TestIdleReceiverAllocs: a busy read loop allocates nothing per message
// for its timeout: no more than receiving without one.
func TestIdleReceiverAllocs(t *testing.T) {
	client, server := transport.NewMemNetwork().Pipe(transport.Config{}, transport.Config{})
	defer client.Close(transport.CloseNormal, "")
	rx := transport.NewIdleReceiver(server, time.Minute, "silent")
	msg := []byte("tick")
	per := func(receive func() ([]byte, error)) float64 {
		return testing.AllocsPerRun(100, func() {
			client.Send(msg)
			if _, err := receive(); err != nil {
				t.Fatal(err)
			}
		})
	}
	bare := per(func() ([]byte, error) { return server.Receive(context.Background()) })
	if idle := per(rx.Receive); idle != bare {
		t.Fatalf("%v allocations per message with the idle timeout, %v without", idle, bare)
	}
}
