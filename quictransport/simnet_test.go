package quictransport_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/quic-go/quic-go/testutils/simnet"

	"github.com/replicago/replica/quictransport"
	"github.com/replicago/replica/transport"
)

var (
	simClientAddr = &net.UDPAddr{IP: net.ParseIP("1.0.0.1"), Port: 9001}
	simServerAddr = &net.UDPAddr{IP: net.ParseIP("1.0.0.2"), Port: 9002}
)

// lossyRouter drops packets: each with probability loss, and every packet
// while blackhole is set.
type lossyRouter struct {
	simnet.PerfectRouter
	mu        sync.Mutex
	rng       *rand.Rand
	loss      float64
	blackhole atomic.Bool
	dropped   atomic.Int64
}

func (r *lossyRouter) SendPacket(p simnet.Packet) error {
	r.mu.Lock()
	drop := r.rng.Float64() < r.loss
	r.mu.Unlock()
	if drop || r.blackhole.Load() {
		r.dropped.Add(1)
		return nil
	}
	return r.PerfectRouter.SendPacket(p)
}

// simLink is a simulated network of a client and a server with the given
// round-trip time and packet loss; it must be made inside a synctest
// bubble.
type simLink struct {
	router         *lossyRouter
	client, server *simnet.SimConn
}

func newSimLink(t *testing.T, rtt time.Duration, loss float64) *simLink {
	t.Helper()
	r := &lossyRouter{rng: rand.New(rand.NewPCG(1, 2)), loss: loss}
	n := &simnet.Simnet{Router: r}
	settings := simnet.NodeBiDiLinkSettings{Latency: rtt / 2}
	l := &simLink{
		router: r,
		client: n.NewEndpoint(simClientAddr, settings),
		server: n.NewEndpoint(simServerAddr, settings),
	}
	if err := n.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		l.client.Close()
		l.server.Close()
		n.Close()
	})
	return l
}

func simTLS(t *testing.T) (server, client *tls.Config) {
	t.Helper()
	server, client, err := quictransport.DevTLS(simServerAddr.IP.String())
	if err != nil {
		t.Fatal(err)
	}
	return server, client
}

// simPair connects a client and a server over l.
func simPair(t *testing.T, l *simLink, serverCfg, clientCfg quictransport.Config) (client, server transport.Conn) {
	t.Helper()
	ln, err := quictransport.ListenPacket(l.server, serverCfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	d := &quictransport.Dialer{Config: clientCfg, PacketConn: func() (net.PacketConn, error) { return l.client, nil }}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	accepted := make(chan transport.Conn, 1)
	go func() {
		c, err := ln.Accept(ctx)
		if err != nil {
			t.Errorf("Accept: %v", err)
		}
		accepted <- c
	}()
	client, err = d.Dial(ctx, simServerAddr.String())
	if err != nil {
		t.Fatalf("Dial: %v", err)
	}
	server = <-accepted
	if server == nil {
		t.FailNow()
	}
	t.Cleanup(func() {
		client.Close(transport.CloseNormal, "")
		server.Close(transport.CloseNormal, "")
	})
	return client, server
}

// TestSimnetLossyOrdered sends messages both ways over a link with 80 ms
// RTT and 5% loss, in virtual time: every message arrives, in order, and a
// close reaches the peer about half a round trip later.
func TestSimnetLossyOrdered(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const rtt = 80 * time.Millisecond
		l := newSimLink(t, rtt, 0.05)
		stls, ctls := simTLS(t)
		client, server := simPair(t, l,
			quictransport.Config{TLS: stls},
			quictransport.Config{TLS: ctls})

		const n = 300
		msg := func(dir string, i int) []byte {
			return []byte(fmt.Sprintf("%s %04d %s", dir, i, bytes.Repeat([]byte{byte(i)}, i%700)))
		}
		start := time.Now()
		var wg sync.WaitGroup
		for _, d := range []struct {
			name     string
			from, to transport.Conn
		}{{"c2s", client, server}, {"s2c", server, client}} {
			wg.Go(func() {
				for i := range n {
					// A tick every 20 ms, like a game server.
					if err := d.from.Send(msg(d.name, i)); err != nil {
						t.Errorf("%s: Send %d: %v", d.name, i, err)
						return
					}
					time.Sleep(20 * time.Millisecond)
				}
			})
			wg.Go(func() {
				for i := range n {
					got, err := d.to.Receive(context.Background())
					if err != nil {
						t.Errorf("%s: Receive %d: %v", d.name, i, err)
						return
					}
					if want := msg(d.name, i); !bytes.Equal(got, want) {
						t.Errorf("%s: message %d = %.20q..., want %.20q...", d.name, i, got, want)
						return
					}
				}
			})
		}
		wg.Wait()
		elapsed := time.Since(start)
		t.Logf("%d messages each way in %v of virtual time; %d packets dropped", n, elapsed, l.router.dropped.Load())
		if l.router.dropped.Load() == 0 {
			t.Error("the link dropped no packet: the test did not exercise loss")
		}

		// Close propagates in virtual time: in one and a half round trips
		// (the end of the stream, the client's end of the stream in answer
		// once it has read everything, then the CONNECTION_CLOSE) unless a
		// packet is lost, then within a few round trips.
		l.router.mu.Lock()
		l.router.loss = 0
		l.router.mu.Unlock()
		closed := time.Now()
		server.Close(transport.CloseAuthFailed, "token expired")
		<-client.Done()
		if d := time.Since(closed); d != 3*rtt/2 {
			t.Errorf("close reached the client after %v, want %v (1.5 RTT)", d, 3*rtt/2)
		}
		code, reason, byPeer := client.CloseInfo()
		if code != transport.CloseAuthFailed || reason != "token expired" || !byPeer {
			t.Errorf("client CloseInfo = (%v, %q, %v), want (%v, %q, true)", code, reason, byPeer, transport.CloseAuthFailed, "token expired")
		}
	})
}

// TestSimnetIdleTimeout cuts the link: both sides close with
// CloseIdleTimeout, not by the peer. QUIC restarts the idle timer when it
// sends the first ack-eliciting packet after receiving (RFC 9000, 10.1),
// here the keep-alive PING sent IdleTimeout/2 after the cut, so the close
// comes between IdleTimeout and 1.5 IdleTimeout after it.
func TestSimnetIdleTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := newSimLink(t, 20*time.Millisecond, 0)
		stls, ctls := simTLS(t)
		const idle = 3 * time.Second
		client, server := simPair(t, l,
			quictransport.Config{TLS: stls, IdleTimeout: idle},
			quictransport.Config{TLS: ctls, IdleTimeout: idle})
		if err := client.Send([]byte("hi")); err != nil {
			t.Fatal(err)
		}
		if _, err := server.Receive(context.Background()); err != nil {
			t.Fatal(err)
		}

		l.router.blackhole.Store(true)
		cut := time.Now()
		for _, c := range []struct {
			name string
			conn transport.Conn
		}{{"client", client}, {"server", server}} {
			<-c.conn.Done()
			if d := time.Since(cut); d < idle || d > idle*3/2 {
				t.Errorf("%s closed %v after the cut, want %v to %v", c.name, d, idle, idle*3/2)
			}
			code, _, byPeer := c.conn.CloseInfo()
			if code != transport.CloseIdleTimeout || byPeer {
				t.Errorf("%s CloseInfo = (%v, byPeer %v), want (%v, false)", c.name, code, byPeer, transport.CloseIdleTimeout)
			}
			_, err := c.conn.Receive(context.Background())
			var ce *transport.CloseError
			if !errors.As(err, &ce) || ce.Code != transport.CloseIdleTimeout {
				t.Errorf("%s Receive = %v, want a CloseError with CloseIdleTimeout", c.name, err)
			}
		}
	})
}

// TestSimnetKeepAlive: with keep-alives an idle connection outlives the
// idle timeout many times over.
func TestSimnetKeepAlive(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := newSimLink(t, 50*time.Millisecond, 0)
		stls, ctls := simTLS(t)
		client, server := simPair(t, l,
			quictransport.Config{TLS: stls, IdleTimeout: 2 * time.Second, KeepAlivePeriod: 500 * time.Millisecond},
			quictransport.Config{TLS: ctls, IdleTimeout: 2 * time.Second, KeepAlivePeriod: 500 * time.Millisecond})
		time.Sleep(time.Minute)
		select {
		case <-client.Done():
			code, reason, _ := client.CloseInfo()
			t.Fatalf("an idle connection with keep-alives closed: %v %q", code, reason)
		case <-server.Done():
			t.Fatal("an idle connection with keep-alives closed on the server")
		default:
		}
		if err := server.Send([]byte("still here")); err != nil {
			t.Fatal(err)
		}
		if got, err := client.Receive(context.Background()); err != nil || string(got) != "still here" {
			t.Fatalf("Receive = %q, %v", got, err)
		}
	})
}
