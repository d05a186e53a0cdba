package replica_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/replicago/replica"
	"github.com/replicago/replica/auth"
	"github.com/replicago/replica/client"
	"github.com/replicago/replica/internal/demo"
	"github.com/replicago/replica/session"
	"github.com/replicago/replica/transport"
)

// TestKeepAlive runs in virtual time: a client that answers the server's
// pings stays connected through a long quiet spell, one that completes the
// handshake and then goes silent is closed with CloseIdleTimeout, a server
// that stops ticking keeps its clients, and a client whose server goes
// silent closes on its own.
func TestKeepAlive(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		nw := transport.NewMemNetwork()
		ln, err := nw.Listen("", transport.Config{})
		if err != nil {
			t.Fatal(err)
		}
		srv, err := replica.NewServer(replica.Config{Schema: demo.Schema(), Auth: auth.Anonymous{}, TickRate: 10, IdleTimeout: 3 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		go srv.Serve(ctx, ln)
		d := nw.Dialer(transport.Config{})

		good, err := client.Dial(ctx, d, ln.Addr().String(), demo.Schema(), client.DialConfig{IdleTimeout: 3 * time.Second})
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

		// A server that stops ticking is still alive: it answers the
		// client's pings, so the client stays.
		stop()
		time.Sleep(10 * time.Second)
		synctest.Wait()
		select {
		case <-good.Done():
			code, reason, _ := good.CloseInfo()
			t.Fatalf("client left a live server: %s %s", code, reason)
		default:
		}

		// A server that completes the handshake and then goes silent
		// (dead, or cut off) is left by the client after its idle timeout.
		deadLn, _ := nw.Listen("", transport.Config{})
		go func() {
			tc, err := deadLn.Accept(ctx)
			if err != nil {
				return
			}
			tc.Receive(ctx) // HELLO
			tc.Send(session.AppendWelcome(nil, &session.Welcome{Version: session.ProtocolVersion, Descriptor: demo.Schema().AppendDescriptor(nil), TickRate: 10}))
			<-ctx.Done() // never reads or sends again
		}()
		lonely, err := client.Dial(ctx, d, deadLn.Addr().String(), demo.Schema(), client.DialConfig{IdleTimeout: 2 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(5 * time.Second)
		synctest.Wait()
		if code, _, byPeer := lonely.CloseInfo(); code != transport.CloseIdleTimeout || byPeer {
			t.Fatalf("client closed with %s (by peer %v), want its own %s", code, byPeer, transport.CloseIdleTimeout)
		}
		deadLn.Close()
		cancel()
		srv.Close()
		ln.Close()
	})
}
