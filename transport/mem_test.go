package transport_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/replicago/replica/transport"
	"github.com/replicago/replica/transport/transporttest"
)

func memFactory(t *testing.T, server, client transport.Config) (transport.Listener, transport.Dialer) {
	n := transport.NewMemNetwork()
	ln, err := n.Listen("", server)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	return ln, n.Dialer(client)
}

func TestMemConformance(t *testing.T) {
	transporttest.Run(t, memFactory)
}

func TestMemConformanceNoDatagrams(t *testing.T) {
	transporttest.Run(t, func(t *testing.T, server, client transport.Config) (transport.Listener, transport.Dialer) {
		n := transport.NewMemNetwork()
		n.SetMaxDatagramSize(0)
		ln, err := n.Listen("", server)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ln.Close() })
		return ln, n.Dialer(client)
	})
}

// TestMemSynctest runs a server and clients on a MemNetwork inside a
// synctest bubble: no real time passes, every goroutine blocks durably on
// the network, and closing ends them all.
func TestMemSynctest(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := transport.NewMemNetwork()
		ln, err := n.Listen("game", transport.Config{})
		if err != nil {
			t.Fatal(err)
		}
		// An echo server.
		go func() {
			for {
				c, err := ln.Accept(context.Background())
				if err != nil {
					return
				}
				go func() {
					for {
						msg, err := c.Receive(context.Background())
						if err != nil {
							return
						}
						c.Send(msg)
					}
				}()
			}
		}()
		d := n.Dialer(transport.Config{})
		var clients []transport.Conn
		for i := range 3 {
			c, err := d.Dial(context.Background(), "game")
			if err != nil {
				t.Fatal(err)
			}
			clients = append(clients, c)
			msg := fmt.Appendf(nil, "hello %d", i)
			if err := c.Send(msg); err != nil {
				t.Fatal(err)
			}
			got, err := c.Receive(context.Background())
			if err != nil || !bytes.Equal(got, msg) {
				t.Fatalf("echo = %q, %v", got, err)
			}
		}
		// Timeouts run on the bubble's clock: an hour passes at once.
		start := time.Now()
		ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
		defer cancel()
		if _, err := clients[0].Receive(ctx); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Receive = %v, want DeadlineExceeded", err)
		}
		if time.Since(start) != time.Hour {
			t.Fatalf("bubble time advanced %v, want 1h", time.Since(start))
		}
		synctest.Wait() // every goroutine is durably blocked on the network
		for _, c := range clients {
			c.Close(transport.CloseGoingAway, "bye")
		}
		ln.Close()
		synctest.Wait()
	})
}

func TestMemSlowConsumerExact(t *testing.T) {
	n := transport.NewMemNetwork()
	cfg := transport.Config{SendQueueMessages: 4, SendQueueBytes: 100}
	client, server := n.Pipe(cfg, cfg)
	for i := range 4 {
		if err := server.Send(make([]byte, 10)); err != nil {
			t.Fatalf("Send #%d: %v", i, err)
		}
	}
	if err := server.Send(nil); !errors.Is(err, transport.ErrSlowConsumer) {
		t.Fatalf("fifth Send = %v, want ErrSlowConsumer", err)
	}
	if code, _, byPeer := client.CloseInfo(); code != transport.CloseSlowConsumer || !byPeer {
		t.Fatalf("client CloseInfo = %v, %v", code, byPeer)
	}

	// Bytes: the queue takes one message larger than SendQueueBytes when
	// empty, and nothing more.
	client, server = n.Pipe(cfg, cfg)
	if err := server.Send(make([]byte, 150)); err != nil {
		t.Fatal(err)
	}
	if err := server.Send(make([]byte, 1)); !errors.Is(err, transport.ErrSlowConsumer) {
		t.Fatalf("Send past SendQueueBytes = %v, want ErrSlowConsumer", err)
	}

	// Receiving makes room.
	client, server = n.Pipe(cfg, cfg)
	for i := range 100 {
		if err := server.Send(make([]byte, 50)); err != nil {
			t.Fatalf("Send #%d: %v", i, err)
		}
		if _, err := client.Receive(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
}

func TestMemDatagramLoss(t *testing.T) {
	run := func(seed uint64) []int {
		n := transport.NewMemNetwork()
		n.SetDatagramLoss(transport.RandomLoss(0.3, seed))
		client, server := n.Pipe(transport.Config{DatagramQueue: 1000}, transport.Config{})
		for i := range 1000 {
			if err := client.SendDatagram([]byte{byte(i), byte(i >> 8)}); err != nil {
				t.Fatal(err)
			}
		}
		var got []int
		for {
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			msg, err := server.ReceiveDatagram(ctx)
			if err != nil {
				return got
			}
			got = append(got, int(msg[0])|int(msg[1])<<8)
		}
	}
	a, b, c := run(1), run(1), run(2)
	if len(a) < 600 || len(a) > 800 {
		t.Fatalf("30%% loss delivered %d of 1000", len(a))
	}
	if fmt.Sprint(a) != fmt.Sprint(b) {
		t.Fatal("the same seed lost different datagrams")
	}
	if fmt.Sprint(a) == fmt.Sprint(c) {
		t.Fatal("different seeds lost the same datagrams")
	}
}

func TestMemDatagramQueueDropsOldest(t *testing.T) {
	n := transport.NewMemNetwork()
	client, server := n.Pipe(transport.Config{DatagramQueue: 3}, transport.Config{})
	for i := range 5 {
		client.SendDatagram([]byte{byte(i)})
	}
	for want := 2; want < 5; want++ {
		msg, err := server.ReceiveDatagram(context.Background())
		if err != nil || msg[0] != byte(want) {
			t.Fatalf("datagram = %v, %v; want %d", msg, err, want)
		}
	}
}

func TestMemAddresses(t *testing.T) {
	n := transport.NewMemNetwork()
	ln, err := n.Listen("server", transport.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := n.Listen("server", transport.Config{}); err == nil {
		t.Fatal("a second Listen on one address succeeded")
	}
	if _, err := n.Dialer(transport.Config{}).Dial(context.Background(), "nowhere"); err == nil {
		t.Fatal("Dial to an address nobody listens on succeeded")
	}
	if ln.Addr().Network() != "mem" || ln.Addr().String() != "server" {
		t.Fatalf("Addr = %s %s", ln.Addr().Network(), ln.Addr())
	}
	ln.Close()
	// The address is free again once closed.
	ln, err = n.Listen("server", transport.Config{})
	if err != nil {
		t.Fatal(err)
	}
	ln.Close()
}

// TestMemReleased checks that a message is the sender's again once
// received: Receive returns a copy, and Backlog, which counts the messages
// the connection still refers to, no longer counts it.
func TestMemReleased(t *testing.T) {
	client, server := transport.NewMemNetwork().Pipe(transport.Config{}, transport.Config{})
	var _ transport.Releaser = server.(transport.Releaser)
	msg := []byte("tick")
	server.Send(msg)
	if n, _ := server.(transport.Backlogger).Backlog(); n != 1 {
		t.Fatalf("backlog %d messages before the peer received, want 1", n)
	}
	got, _ := client.Receive(context.Background())
	if n, _ := server.(transport.Backlogger).Backlog(); n != 0 {
		t.Fatalf("backlog %d messages after the peer received, want 0", n)
	}
	copy(msg, "xxxx") // the sender reuses its buffer
	if string(got) != "tick" {
		t.Fatalf("received %q, changed by the sender after it was received", got)
	}
	if cap(got) != len(got) {
		t.Fatal("the received message's capacity is not clipped")
	}
}

func TestMemListenerClosePending(t *testing.T) {
	n := transport.NewMemNetwork()
	ln, _ := n.Listen("", transport.Config{})
	c, err := n.Dialer(transport.Config{}).Dial(context.Background(), ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	ln.Close()
	if code, _, byPeer := c.CloseInfo(); code != transport.CloseGoingAway || !byPeer {
		t.Fatalf("CloseInfo = %v, %v; want CloseGoingAway by peer", code, byPeer)
	}
}
