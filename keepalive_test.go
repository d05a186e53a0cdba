package replica_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/replicago/replica"
	"github.com/replicago/replica/client"
	"github.com/replicago/replica/internal/demo"
	"github.com/replicago/replica/session"
	"github.com/replicago/replica/transport"
)

// TestKeepAlive runs in virtual time: a client that answers the server's
// pings stays connected through a long quiet spell, one that completes the
// handshake and then goes silent is closed with CloseIdleTimeout, and a
// client whose server stops sending closes on its own.
func TestKeepAlive(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		nw := transport.NewMemNetwork()
		ln, err := nw.Listen("", transport.Config{})
		if err != nil {
			t.Fatal(err)
		}
		srv, err := replica.NewServer(replica.Config{Schema: demo.Schema(), TickRate: 10, IdleTimeout: 3 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		go srv.Serve(ctx, ln)
		d := nw.Dialer(transport.Config{})

		good, err := client.Dial(ctx, d, ln.Addr().String(), demo.Schema(), client.DialConfig{IdleTimeout: 2 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		silent, err := d.Dial(ctx, ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		silent.Send(session.AppendHello(nil, &session.Hello{Version: session.ProtocolVersion, Descriptor: demo.Schema().AppendDescriptor(nil)}))
		if _, err := silent.Receive(ctx); err != nil { // WELCOME, then nothing more is read or sent
			t.Fatal(err)
		}

		// Tick for 30 virtual seconds; the good client drains its ticks.
		run, stop := context.WithCancel(ctx)
		go srv.Run(run, nil)
		go func() {
			for {
				if _, err := good.Wait(ctx); err != nil {
					return
				}
			}
		}()
		time.Sleep(30 * time.Second)
		synctest.Wait()

		select {
		case <-silent.Done():
		default:
			t.Fatal("the silent client is still connected")
		}
		if code, _, byPeer := silent.CloseInfo(); code != transport.CloseIdleTimeout || !byPeer {
			t.Fatalf("silent client closed with %s (by peer %v), want %s by the server", code, byPeer, transport.CloseIdleTimeout)
		}
		select {
		case <-good.Done():
			code, reason, _ := good.CloseInfo()
			t.Fatalf("the pinging client was closed: %s %s", code, reason)
		default:
		}

		// The server stops ticking and pinging: the client gives up after
		// its own idle timeout (2 s, shorter than the server's 3 s, so it
		// is the client that notices first).
		stop()
		time.Sleep(5 * time.Second)
		synctest.Wait()
		if code, _, byPeer := good.CloseInfo(); code != transport.CloseIdleTimeout || byPeer {
			t.Fatalf("client closed with %s (by peer %v), want its own %s", code, byPeer, transport.CloseIdleTimeout)
		}
		cancel()
		srv.Close()
		ln.Close()
	})
}
