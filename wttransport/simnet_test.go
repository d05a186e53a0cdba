package wttransport_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"math/rand/v2"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/quic-go/quic-go/testutils/simnet"

	"github.com/replicago/replica/transport"
	"github.com/replicago/replica/wttransport"
)

var (
	simClientAddr = &net.UDPAddr{IP: net.ParseIP("1.0.0.1"), Port: 9001}
	simServerAddr = &net.UDPAddr{IP: net.ParseIP("1.0.0.2"), Port: 9002}
)

type lossyRouter struct {
	simnet.PerfectRouter
	mu      sync.Mutex
	rng     *rand.Rand
	loss    float64
	dropped atomic.Int64
}

func (r *lossyRouter) SendPacket(p simnet.Packet) error {
	r.mu.Lock()
	drop := r.rng.Float64() < r.loss
	r.mu.Unlock()
	if drop {
		r.dropped.Add(1)
		return nil
	}
	return r.PerfectRouter.SendPacket(p)
}

// TestSimnet runs a WebTransport connection over a simulated link with
// 60 ms RTT and 3% loss in virtual time: messages arrive in order, and a
// session close reaches the peer with its code and reason.
func TestSimnet(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const rtt = 60 * time.Millisecond
		r := &lossyRouter{rng: rand.New(rand.NewPCG(3, 4)), loss: 0.03}
		n := &simnet.Simnet{Router: r}
		settings := simnet.NodeBiDiLinkSettings{Latency: rtt / 2}
		cpc := n.NewEndpoint(simClientAddr, settings)
		spc := n.NewEndpoint(simServerAddr, settings)
		if err := n.Start(); err != nil {
			t.Fatal(err)
		}
		defer n.Close()
		defer spc.Close()
		defer cpc.Close()

		cert, hash, err := wttransport.GenerateCert(0, simServerAddr.IP.String())
		if err != nil {
			t.Fatal(err)
		}
		ln, err := wttransport.ListenPacket(spc, wttransport.Config{TLS: &tls.Config{Certificates: []tls.Certificate{cert}}})
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		d := &wttransport.Dialer{CertHashes: [][32]byte{hash}, PacketConn: func() (net.PacketConn, error) { return cpc, nil }}

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
		client, err := d.Dial(ctx, simServerAddr.String())
		if err != nil {
			t.Fatalf("Dial: %v", err)
		}
		server := <-accepted
		if server == nil {
			t.FailNow()
		}

		const count = 200
		msg := func(i int) []byte { return []byte(fmt.Sprintf("tick %04d %s", i, bytes.Repeat([]byte{'x'}, i*7%1500))) }
		done := make(chan struct{})
		go func() {
			defer close(done)
			for i := range count {
				got, err := client.Receive(ctx)
				if err != nil {
					t.Errorf("Receive %d: %v", i, err)
					return
				}
				if !bytes.Equal(got, msg(i)) {
					t.Errorf("message %d = %.12q..., want %.12q...", i, got, msg(i))
					return
				}
			}
		}()
		for i := range count {
			if err := server.Send(msg(i)); err != nil {
				t.Fatalf("Send %d: %v", i, err)
			}
			time.Sleep(20 * time.Millisecond)
		}
		<-done
		t.Logf("%d messages; %d packets dropped", count, r.dropped.Load())

		r.mu.Lock()
		r.loss = 0
		r.mu.Unlock()
		start := time.Now()
		client.Close(transport.CloseGoingAway, "tab closed")
		<-server.Done()
		t.Logf("session close reached the server after %v", time.Since(start))
		if d := time.Since(start); d > 2*rtt {
			t.Errorf("session close took %v, want about %v", d, rtt/2)
		}
		code, reason, byPeer := server.CloseInfo()
		if code != transport.CloseGoingAway || reason != "tab closed" || !byPeer {
			t.Errorf("server CloseInfo = (%v, %q, %v)", code, reason, byPeer)
		}
	})
}
