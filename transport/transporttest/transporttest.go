// Package transporttest is the conformance suite of transport.Conn,
// transport.Listener and transport.Dialer implementations.
//
// An adapter package tests itself with one call:
//
//	func TestConformance(t *testing.T) {
//		transporttest.Run(t, func(t *testing.T, server, client transport.Config) (transport.Listener, transport.Dialer) {
//			ln, err := mytransport.Listen("127.0.0.1:0", server)
//			if err != nil {
//				t.Fatal(err)
//			}
//			t.Cleanup(func() { ln.Close() })
//			return ln, mytransport.NewDialer(client)
//		})
//	}
//
// Every subtest is independent and asks the Factory for a fresh listener, so
// a failing subtest names the broken behaviour. The suite relies on no
// timing except that Send returns within SendBound; every wait is bounded by
// a generous timeout so that a broken implementation fails instead of
// hanging, and a loaded machine does not cause false failures.
package transporttest

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/replicago/replica/transport"
)

// A Factory returns a listener configured with server and a dialer whose
// connections are configured with client, such that the dialer reaches the
// listener at ln.Addr().String(). Most subtests pass the same Config twice;
// the oversized-message subtest gives the two sides different limits.
//
// The Factory should register the listener's Close with t.Cleanup; the suite
// closes the connections it makes.
type Factory func(t *testing.T, server, client transport.Config) (transport.Listener, transport.Dialer)

// SendBound is the longest a single Send may take, even when the network
// and the send queue are full, not counting the time the whole process
// could not run (a loaded machine starves it, whatever Send does). The
// contract says Send never blocks; the bound leaves room for the race
// detector.
const SendBound = 100 * time.Millisecond

// timeout bounds every wait of the suite: long enough for a loaded machine,
// short enough that a broken implementation fails rather than hangs.
const timeout = 10 * time.Second

// Run runs the conformance suite against the transport made by f. Its
// subtests check: dialing, accepting and the four addresses; Accept's
// context; round trips both ways; the order of 1,000 messages; messages of
// 0 bytes to MaxMessageSize, and ErrMessageTooLarge beyond; a peer sending
// over the receiver's limit (CloseMessageTooLarge); concurrent Sends from
// many goroutines; one message sent to two connections, unmodified; Close
// codes and reasons as seen by both sides (Done, CloseInfo, the
// *CloseError of Receive, ErrClosed from Send); idempotent and concurrent
// Close; Receive's context; the backlog a Backlogger reports; a slow
// consumer (Send never blocks, then
// ErrSlowConsumer, CloseSlowConsumer on both sides, other connections
// unaffected); datagrams, or ErrDatagramsUnsupported; many independent
// connections on one listener; and listener Close, which ends Accept and
// keeps established connections. Every connection must implement
// transport.ReadLimiter (a lowered read limit closes with
// CloseMessageTooLarge, a raised one accepts up to MaxMessageSize again),
// and Close must deliver the messages queued before it.
func Run(t *testing.T, f Factory) {
	tests := []struct {
		name string
		fn   func(*testing.T, Factory)
	}{
		{"DialAccept", testDialAccept},
		{"AcceptContext", testAcceptContext},
		{"RoundTrip", testRoundTrip},
		{"Order", testOrder},
		{"Sizes", testSizes},
		{"OversizedFromPeer", testOversizedFromPeer},
		{"ReadLimit", testReadLimit},
		{"CloseFlushes", testCloseFlushes},
		{"ConcurrentSend", testConcurrentSend},
		{"SharedMessage", testSharedMessage},
		{"Close", testClose},
		{"CloseByServer", testCloseByServer},
		{"CloseIdempotent", testCloseIdempotent},
		{"ReceiveContext", testReceiveContext},
		{"SlowConsumer", testSlowConsumer},
		{"Backlog", testBacklog},
		{"Datagrams", testDatagrams},
		{"ManyConns", testManyConns},
		{"ListenerClose", testListenerClose},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { tt.fn(t, f) })
	}
}

// testConfig is the configuration of most subtests: small limits keep the
// suite fast.
func testConfig() transport.Config {
	return transport.Config{
		MaxMessageSize:    64 << 10,
		SendQueueBytes:    1 << 20,
		SendQueueMessages: 1024,
		DatagramQueue:     32,
	}.WithDefaults()
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	t.Cleanup(cancel)
	return ctx
}

// pair dials ln with d and accepts the connection, returning the client and
// server ends; both are closed at the end of the test.
func pair(t *testing.T, ln transport.Listener, d transport.Dialer) (client, server transport.Conn) {
	t.Helper()
	ctx := ctxT(t)
	type result struct {
		c   transport.Conn
		err error
	}
	accepted := make(chan result, 1)
	go func() {
		c, err := ln.Accept(ctx)
		accepted <- result{c, err}
	}()
	client, err := d.Dial(ctx, ln.Addr().String())
	if err != nil {
		t.Fatalf("Dial(%q): %v", ln.Addr().String(), err)
	}
	t.Cleanup(func() { client.Close(transport.CloseNormal, "") })
	r := <-accepted
	if r.err != nil {
		t.Fatalf("Accept: %v", r.err)
	}
	t.Cleanup(func() { r.c.Close(transport.CloseNormal, "") })
	return client, r.c
}

func newPair(t *testing.T, f Factory, cfg transport.Config) (client, server transport.Conn) {
	t.Helper()
	ln, d := f(t, cfg, cfg)
	return pair(t, ln, d)
}

func send(t *testing.T, c transport.Conn, msg []byte) {
	t.Helper()
	if err := c.Send(msg); err != nil {
		t.Fatalf("Send(%d bytes): %v", len(msg), err)
	}
}

func receive(t *testing.T, c transport.Conn) []byte {
	t.Helper()
	msg, err := c.Receive(ctxT(t))
	if err != nil {
		t.Fatalf("Receive: %v", err)
	}
	return msg
}

func expect(t *testing.T, c transport.Conn, want []byte) {
	t.Helper()
	got := receive(t, c)
	if !bytes.Equal(got, want) {
		t.Fatalf("Receive = %s, want %s", show(got), show(want))
	}
}

func show(b []byte) string {
	if len(b) <= 32 {
		return fmt.Sprintf("%q", b)
	}
	return fmt.Sprintf("%d bytes %q...", len(b), b[:32])
}

// pattern returns n bytes that depend on seed and on each byte's position,
// so that truncation, corruption and interleaving show.
func pattern(seed uint32, n int) []byte {
	b := make([]byte, n)
	x := seed*2654435761 + 1
	for i := range b {
		x ^= x << 13
		x ^= x >> 17
		x ^= x << 5
		b[i] = byte(x)
	}
	return b
}

func waitDone(t *testing.T, c transport.Conn, who string) {
	t.Helper()
	select {
	case <-c.Done():
	case <-time.After(timeout):
		t.Fatalf("%s: Done not closed after %v", who, timeout)
	}
}

func isDone(c transport.Conn) bool {
	select {
	case <-c.Done():
		return true
	default:
		return false
	}
}

// checkClosed checks every observable of a closed connection: Done, the
// CloseInfo, the *CloseError of Receive and ErrClosed from Send.
func checkClosed(t *testing.T, c transport.Conn, who string, code transport.CloseCode, reason string, byPeer bool) {
	t.Helper()
	waitDone(t, c, who)
	gc, gr, gp := c.CloseInfo()
	if gc != code || gr != reason || gp != byPeer {
		t.Errorf("%s: CloseInfo() = (%v, %q, byPeer %v), want (%v, %q, byPeer %v)", who, gc, gr, gp, code, reason, byPeer)
	}
	_, err := c.Receive(ctxT(t))
	checkCloseError(t, err, who, code, reason, byPeer)
	if err := c.Send([]byte("late")); !errors.Is(err, transport.ErrClosed) {
		t.Errorf("%s: Send after close = %v, want ErrClosed", who, err)
	}
}

func checkCloseError(t *testing.T, err error, who string, code transport.CloseCode, reason string, byPeer bool) {
	t.Helper()
	var ce *transport.CloseError
	if !errors.As(err, &ce) {
		t.Errorf("%s: Receive error = %v (%T), want a *transport.CloseError", who, err, err)
		return
	}
	if !errors.Is(err, transport.ErrClosed) {
		t.Errorf("%s: Receive error %v does not wrap ErrClosed", who, err)
	}
	if ce.Code != code || ce.Reason != reason || ce.ByPeer != byPeer {
		t.Errorf("%s: Receive error = %+v, want {Code:%v Reason:%q ByPeer:%v}", who, *ce, code, reason, byPeer)
	}
}

func testDialAccept(t *testing.T, f Factory) {
	ln, d := f(t, testConfig(), testConfig())
	if ln.Addr() == nil || ln.Addr().String() == "" {
		t.Fatalf("listener Addr() = %v, want a dialable address", ln.Addr())
	}
	client, server := pair(t, ln, d)
	for _, a := range []struct {
		name string
		addr net.Addr
	}{
		{"client LocalAddr", client.LocalAddr()},
		{"client RemoteAddr", client.RemoteAddr()},
		{"server LocalAddr", server.LocalAddr()},
		{"server RemoteAddr", server.RemoteAddr()},
	} {
		if a.addr == nil || a.addr.String() == "" {
			t.Fatalf("%s = %v, want an address", a.name, a.addr)
		}
	}
	if got, want := server.RemoteAddr().String(), client.LocalAddr().String(); got != want {
		t.Errorf("server RemoteAddr %q != client LocalAddr %q", got, want)
	}
	if got, want := client.RemoteAddr().String(), server.LocalAddr().String(); got != want {
		t.Errorf("client RemoteAddr %q != server LocalAddr %q", got, want)
	}
	if isDone(client) || isDone(server) {
		t.Fatal("a new connection is already Done")
	}
	if code, reason, byPeer := client.CloseInfo(); code != 0 || reason != "" || byPeer {
		t.Errorf("CloseInfo of an open connection = (%v, %q, %v), want zero", code, reason, byPeer)
	}

	// A second connection to the same listener is a different connection.
	client2, server2 := pair(t, ln, d)
	if client2 == client || server2 == server {
		t.Fatal("second Dial/Accept returned the first connection")
	}
	// (Two connections may share an address: QUIC multiplexes them on one
	// socket. They are told apart by what they carry.)
	send(t, client2, []byte("second"))
	send(t, client, []byte("first"))
	expect(t, server2, []byte("second"))
	expect(t, server, []byte("first"))
}

func testAcceptContext(t *testing.T, f Factory) {
	ln, _ := f(t, testConfig(), testConfig())
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	c, err := returns(t, "Accept past its deadline", func() (transport.Conn, error) { return ln.Accept(ctx) })
	if err == nil {
		c.Close(transport.CloseNormal, "")
		t.Fatal("Accept with no client returned a connection")
	}
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Accept after its deadline = %v, want context.DeadlineExceeded", err)
	}
}

// returns calls f on another goroutine and fails the test if f does not
// return within the suite's timeout, so that an implementation ignoring a
// context fails rather than hangs.
func returns[T any](t *testing.T, what string, f func() (T, error)) (T, error) {
	t.Helper()
	type result struct {
		v   T
		err error
	}
	c := make(chan result, 1)
	go func() {
		v, err := f()
		c <- result{v, err}
	}()
	select {
	case r := <-c:
		return r.v, r.err
	case <-time.After(timeout):
		t.Fatalf("%s did not return in %v", what, timeout)
		panic("unreachable")
	}
}

func testRoundTrip(t *testing.T, f Factory) {
	client, server := newPair(t, f, testConfig())
	send(t, client, []byte("hello server"))
	expect(t, server, []byte("hello server"))
	send(t, server, []byte("hello client"))
	expect(t, client, []byte("hello client"))
	// Both directions at once, several times.
	for i := range 10 {
		a, b := pattern(uint32(i), 100+i), pattern(uint32(i+100), 200+i)
		send(t, client, a)
		send(t, server, b)
		expect(t, server, a)
		expect(t, client, b)
	}
}

func testOrder(t *testing.T, f Factory) {
	const n = 1000
	client, server := newPair(t, f, testConfig())
	for _, dir := range []struct {
		name     string
		from, to transport.Conn
	}{{"client to server", client, server}, {"server to client", server, client}} {
		errc := make(chan error, 1)
		ctx := ctxT(t)
		go func() {
			for i := range n {
				msg, err := dir.to.Receive(ctx)
				if err != nil {
					errc <- fmt.Errorf("Receive #%d: %v", i, err)
					return
				}
				if len(msg) < 4 || binary.BigEndian.Uint32(msg) != uint32(i) || !bytes.Equal(msg, seqMsg(i)) {
					errc <- fmt.Errorf("message #%d = %s, want %s", i, show(msg), show(seqMsg(i)))
					return
				}
			}
			errc <- nil
		}()
		for i := range n {
			if err := dir.from.Send(seqMsg(i)); err != nil {
				t.Fatalf("%s: Send #%d: %v", dir.name, i, err)
			}
		}
		if err := <-errc; err != nil {
			t.Fatalf("%s: %v", dir.name, err)
		}
	}
}

func seqMsg(i int) []byte {
	b := binary.BigEndian.AppendUint32(nil, uint32(i))
	return append(b, pattern(uint32(i), i%97)...)
}

func testSizes(t *testing.T, f Factory) {
	cfg := testConfig()
	client, server := newPair(t, f, cfg)
	for _, n := range []int{0, 1, 2, 125, 126, 127, 65535 - 1024, cfg.MaxMessageSize - 1, cfg.MaxMessageSize} {
		msg := pattern(uint32(n), n)
		send(t, client, msg)
		expect(t, server, msg)
		send(t, server, msg)
		expect(t, client, msg)
	}
	for _, c := range []transport.Conn{client, server} {
		over := make([]byte, cfg.MaxMessageSize+1)
		if err := c.Send(over); !errors.Is(err, transport.ErrMessageTooLarge) {
			t.Fatalf("Send(MaxMessageSize+1) = %v, want ErrMessageTooLarge", err)
		}
	}
	// A refused message neither closes the connection nor reaches the peer.
	if isDone(client) || isDone(server) {
		t.Fatal("refusing an oversized message closed the connection")
	}
	send(t, client, []byte("after"))
	expect(t, server, []byte("after"))
	send(t, server, []byte("after"))
	expect(t, client, []byte("after"))
}

func testOversizedFromPeer(t *testing.T, f Factory) {
	serverCfg, clientCfg := testConfig(), testConfig()
	serverCfg.MaxMessageSize = 1024
	clientCfg.MaxMessageSize = 4096
	ln, d := f(t, serverCfg, clientCfg)
	client, server := pair(t, ln, d)

	// Up to the server's limit is fine.
	ok := pattern(1, 1024)
	send(t, client, ok)
	expect(t, server, ok)

	// Over the server's limit, within the client's: the client may queue
	// it, and the server closes the connection when it arrives.
	if err := client.Send(pattern(2, 2000)); err != nil && !errors.Is(err, transport.ErrClosed) {
		t.Fatalf("Send(2000 bytes) within the sender's limit = %v, want nil or ErrClosed", err)
	}
	msg, err := server.Receive(ctxT(t))
	if err == nil {
		t.Fatalf("server received %s over its 1024-byte limit", show(msg))
	}
	var ce *transport.CloseError
	if !errors.As(err, &ce) || ce.Code != transport.CloseMessageTooLarge || ce.ByPeer {
		t.Fatalf("server Receive of an oversized message = %v, want a *CloseError with CloseMessageTooLarge not by peer", err)
	}
	waitDone(t, server, "server")
	if code, _, byPeer := server.CloseInfo(); code != transport.CloseMessageTooLarge || byPeer {
		t.Errorf("server CloseInfo = (%v, byPeer %v), want (%v, byPeer false)", code, byPeer, transport.CloseMessageTooLarge)
	}
	waitDone(t, client, "client")
	if code, _, byPeer := client.CloseInfo(); code != transport.CloseMessageTooLarge || !byPeer {
		t.Errorf("client CloseInfo = (%v, byPeer %v), want (%v, byPeer true)", code, byPeer, transport.CloseMessageTooLarge)
	}
	if _, err := client.Receive(ctxT(t)); !errors.As(err, &ce) || ce.Code != transport.CloseMessageTooLarge || !ce.ByPeer {
		t.Errorf("client Receive = %v, want a *CloseError with CloseMessageTooLarge by peer", err)
	}
}

// testReadLimit lowers the server's read limit, as a server does before
// the handshake: a message within it arrives, one over it closes the
// connection with CloseMessageTooLarge; raised back, the limit is the
// MaxMessageSize again.
func testReadLimit(t *testing.T, f Factory) {
	cfg := testConfig()
	cfg.MaxMessageSize = 64 << 10
	ln, d := f(t, cfg, cfg)
	client, server := pair(t, ln, d)
	rl, ok := server.(transport.ReadLimiter)
	if !ok {
		t.Fatalf("%T does not implement transport.ReadLimiter", server)
	}
	rl.SetReadLimit(1000)
	send(t, client, pattern(1, 1000))
	expect(t, server, pattern(1, 1000))
	rl.SetReadLimit(0) // back to MaxMessageSize
	send(t, client, pattern(2, 64<<10))
	expect(t, server, pattern(2, 64<<10))

	client, server = pair(t, ln, d)
	server.(transport.ReadLimiter).SetReadLimit(1000)
	if err := client.Send(pattern(3, 32<<10)); err != nil && !errors.Is(err, transport.ErrClosed) {
		t.Fatalf("Send = %v", err)
	}
	msg, err := server.Receive(ctxT(t))
	var ce *transport.CloseError
	if !errors.As(err, &ce) || ce.Code != transport.CloseMessageTooLarge || ce.ByPeer {
		t.Fatalf("Receive of a message over the read limit = %s, %v; want a *CloseError with CloseMessageTooLarge not by peer", show(msg), err)
	}
	waitDone(t, client, "client")
	if code, _, byPeer := client.CloseInfo(); code != transport.CloseMessageTooLarge || !byPeer {
		t.Errorf("client CloseInfo = (%v, byPeer %v), want (%v, byPeer true)", code, byPeer, transport.CloseMessageTooLarge)
	}

	// A message sent before the limit is lowered, which the transport may
	// have read ahead in part or in whole, is refused all the same.
	client, server = pair(t, ln, d)
	send(t, client, pattern(4, 32<<10))
	server.(transport.ReadLimiter).SetReadLimit(1000)
	msg, err = server.Receive(ctxT(t))
	if !errors.As(err, &ce) || ce.Code != transport.CloseMessageTooLarge || ce.ByPeer {
		t.Fatalf("Receive of a message sent before the limit was lowered = %s, %v; want a *CloseError with CloseMessageTooLarge not by peer", show(msg), err)
	}
}

// testCloseFlushes sends messages and closes at once, as a server refusing
// a client does: the peer receives them, then the close.
func testCloseFlushes(t *testing.T, f Factory) {
	client, server := newPair(t, f, testConfig())
	for i := range 20 {
		send(t, server, seqMsg(i))
	}
	server.Close(transport.CloseAuthFailed, "refused")
	for i := range 20 {
		msg, err := client.Receive(ctxT(t))
		if err != nil {
			t.Fatalf("message %d of 20 sent before Close: %v", i, err)
		}
		if !bytes.Equal(msg, seqMsg(i)) {
			t.Fatalf("message %d = %s, want %s", i, show(msg), show(seqMsg(i)))
		}
	}
	checkClosed(t, client, "client", transport.CloseAuthFailed, "refused", true)
}

func testConcurrentSend(t *testing.T, f Factory) {
	const senders, each = 16, 100
	cfg := testConfig()
	cfg.SendQueueMessages = 2 * senders * each // room for all: this is not the slow-consumer test
	cfg.SendQueueBytes = 16 << 20
	client, server := newPair(t, f, cfg)

	for _, dir := range []struct {
		name     string
		from, to transport.Conn
	}{{"client to server", client, server}, {"server to client", server, client}} {
		// Message: sender id, sequence number, then a pattern of both.
		mk := func(g, i int) []byte {
			b := binary.BigEndian.AppendUint16(nil, uint16(g))
			b = binary.BigEndian.AppendUint16(b, uint16(i))
			return append(b, pattern(uint32(g<<16|i), 50+(g*31+i*17)%900)...)
		}
		var wg sync.WaitGroup
		errs := make(chan error, senders)
		start := make(chan struct{})
		for g := range senders {
			wg.Go(func() {
				<-start
				for i := range each {
					if err := dir.from.Send(mk(g, i)); err != nil {
						errs <- fmt.Errorf("sender %d: Send #%d: %v", g, i, err)
						return
					}
				}
			})
		}
		close(start)
		next := make([]int, senders)
		ctx := ctxT(t)
		for n := 0; n < senders*each; n++ {
			msg, err := dir.to.Receive(ctx)
			if err != nil {
				select {
				case e := <-errs:
					t.Fatalf("%s: %v", dir.name, e)
				default:
				}
				t.Fatalf("%s: Receive after %d messages: %v", dir.name, n, err)
			}
			if len(msg) < 4 {
				t.Fatalf("%s: message %s too short", dir.name, show(msg))
			}
			g, i := int(binary.BigEndian.Uint16(msg)), int(binary.BigEndian.Uint16(msg[2:]))
			if g >= senders || !bytes.Equal(msg, mk(g, i)) {
				t.Fatalf("%s: corrupted message %s", dir.name, show(msg))
			}
			if i != next[g] {
				t.Fatalf("%s: sender %d: got message %d, want %d (one goroutine's sends must stay in order)", dir.name, g, i, next[g])
			}
			next[g]++
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatalf("%s: %v", dir.name, err)
		}
	}
}

func testSharedMessage(t *testing.T, f Factory) {
	ln, d := f(t, testConfig(), testConfig())
	c1, s1 := pair(t, ln, d)
	c2, s2 := pair(t, ln, d)

	// One encoded message handed to two connections, as a tick is.
	msg := pattern(7, 3000)
	orig := bytes.Clone(msg)
	send(t, s1, msg)
	send(t, s2, msg)
	got1, got2 := receive(t, c1), receive(t, c2)
	if !bytes.Equal(got1, orig) || !bytes.Equal(got2, orig) {
		t.Fatalf("shared message arrived as %s and %s, want %s", show(got1), show(got2), show(orig))
	}
	// The transport must not have written to the caller's slice (such as
	// masking or framing in place).
	if !bytes.Equal(msg, orig) {
		t.Fatal("Send modified the caller's message")
	}

	// The same from the clients' side, whose writes may be masked.
	send(t, c1, msg)
	send(t, c2, msg)
	expect(t, s1, orig)
	expect(t, s2, orig)
	if !bytes.Equal(msg, orig) {
		t.Fatal("client Send modified the caller's message")
	}
}

func testClose(t *testing.T, f Factory) {
	for _, tc := range []struct {
		code   transport.CloseCode
		reason string
	}{
		{transport.CloseNormal, ""},
		{300, "application code 300"},
		{transport.MaxCloseCode, "the largest code"},
	} {
		t.Run(fmt.Sprintf("code%d", tc.code), func(t *testing.T) {
			client, server := newPair(t, f, testConfig())
			send(t, client, []byte("before close"))
			expect(t, server, []byte("before close"))

			if err := client.Close(tc.code, tc.reason); err != nil {
				t.Fatalf("Close: %v", err)
			}
			if !isDone(client) {
				t.Error("Done not closed when Close returned")
			}
			checkClosed(t, client, "client (closer)", tc.code, tc.reason, false)
			checkClosed(t, server, "server (peer)", tc.code, tc.reason, true)
			if err := client.SendDatagram([]byte("x")); err == nil {
				t.Error("SendDatagram after Close = nil, want an error")
			}
		})
	}
}

func testCloseByServer(t *testing.T, f Factory) {
	client, server := newPair(t, f, testConfig())
	send(t, server, []byte("welcome"))
	expect(t, client, []byte("welcome"))
	if err := server.Close(transport.CloseAuthFailed, "bad token"); err != nil {
		t.Fatalf("Close: %v", err)
	}
	checkClosed(t, server, "server (closer)", transport.CloseAuthFailed, "bad token", false)
	checkClosed(t, client, "client (peer)", transport.CloseAuthFailed, "bad token", true)
}

func testCloseIdempotent(t *testing.T, f Factory) {
	client, server := newPair(t, f, testConfig())
	if err := client.Close(transport.CloseGoingAway, "first"); err != nil {
		t.Fatalf("first Close: %v", err)
	}
	if err := client.Close(transport.CloseInternalError, "second"); err != nil {
		t.Errorf("second Close = %v, want nil (Close is idempotent)", err)
	}
	checkClosed(t, client, "client", transport.CloseGoingAway, "first", false)
	checkClosed(t, server, "server", transport.CloseGoingAway, "first", true)
	// Closing the peer afterwards changes nothing either.
	if err := server.Close(transport.CloseNormal, "late"); err != nil {
		t.Errorf("peer Close after close = %v, want nil", err)
	}
	checkClosed(t, server, "server", transport.CloseGoingAway, "first", true)

	// Concurrent Close calls: exactly one wins, and the peer sees that one.
	client, server = newPair(t, f, testConfig())
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() { client.Close(transport.CloseCode(300+i), fmt.Sprint("closer ", i)) })
	}
	wg.Wait()
	waitDone(t, client, "client")
	code, reason, byPeer := client.CloseInfo()
	if code < 300 || code >= 308 || reason != fmt.Sprint("closer ", int(code)-300) || byPeer {
		t.Fatalf("after concurrent Close, CloseInfo = (%v, %q, %v), want one closer's", code, reason, byPeer)
	}
	checkClosed(t, server, "server", code, reason, true)
}

func testReceiveContext(t *testing.T, f Factory) {
	client, server := newPair(t, f, testConfig())

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := returns(t, "Receive with a canceled context", func() ([]byte, error) { return server.Receive(ctx) }); !errors.Is(err, context.Canceled) {
		t.Fatalf("Receive with a canceled context = %v, want context.Canceled", err)
	}

	ctx, cancel = context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if _, err := returns(t, "Receive past its deadline", func() ([]byte, error) { return client.Receive(ctx) }); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Receive past its deadline = %v, want context.DeadlineExceeded", err)
	}

	// Canceling a Receive in progress returns it.
	ctx, cancel = context.WithCancel(context.Background())
	time.AfterFunc(10*time.Millisecond, cancel)
	if _, err := returns(t, "canceled Receive", func() ([]byte, error) { return server.Receive(ctx) }); !errors.Is(err, context.Canceled) {
		t.Fatalf("canceled Receive = %v, want context.Canceled", err)
	}

	// The connection survives canceled Receives, in both directions.
	if isDone(server) || isDone(client) {
		t.Fatal("canceling Receive closed the connection")
	}
	send(t, client, []byte("still open"))
	expect(t, server, []byte("still open"))
	send(t, server, []byte("still open"))
	expect(t, client, []byte("still open"))
}

func testSlowConsumer(t *testing.T, f Factory) {
	cfg := testConfig()
	cfg.SendQueueMessages = 64
	cfg.SendQueueBytes = 256 << 10
	ln, d := f(t, cfg, cfg)
	client, server := pair(t, ln, d)
	// A second client that keeps reading is not affected.
	other, otherServer := pair(t, ln, d)

	// The client never reads. The server sends until the network buffers
	// and the send queue are full.
	msg := pattern(3, 32<<10)
	deadline := time.Now().Add(2 * timeout)
	var (
		err     error
		n       int
		slowest time.Duration // of a Send, less the process's stall meanwhile
	)
	meter := StartStallMeter()
	defer meter.Close()
	for err == nil {
		if time.Now().After(deadline) {
			t.Fatalf("no ErrSlowConsumer after %d messages (%d MiB) to a client that never reads", n, n*len(msg)>>20)
		}
		meter.Reset()
		start := time.Now()
		err = server.Send(msg)
		if d := time.Since(start) - meter.Stalled(); d > slowest {
			slowest = d
		}
		n++
		// Pace the sends so that the writer keeps up until the network
		// buffers are full: the queue must overflow because the peer does
		// not read, not because this loop outruns the writer.
		time.Sleep(time.Millisecond)
		if n%64 == 0 {
			// Keep the other client's traffic flowing meanwhile.
			send(t, otherServer, []byte("tick"))
			expect(t, other, []byte("tick"))
		}
	}
	if slowest > SendBound {
		t.Errorf("a Send took %v more than the process was stalled (limit %v): Send must never block", slowest, SendBound)
	}
	if !errors.Is(err, transport.ErrSlowConsumer) {
		t.Fatalf("Send to a client that never reads = %v after %d messages, want ErrSlowConsumer", err, n)
	}
	t.Logf("ErrSlowConsumer after %d messages of %d KiB; slowest Send %v", n, len(msg)>>10, slowest)
	if !isDone(server) {
		t.Error("ErrSlowConsumer returned but the connection is not Done")
	}
	if code, _, byPeer := server.CloseInfo(); code != transport.CloseSlowConsumer || byPeer {
		t.Errorf("server CloseInfo = (%v, byPeer %v), want (%v, false)", code, byPeer, transport.CloseSlowConsumer)
	}
	if err := server.Send(msg); !errors.Is(err, transport.ErrClosed) {
		t.Errorf("Send after ErrSlowConsumer = %v, want ErrClosed", err)
	}

	// The client finally reads: whatever was in flight, then the close.
	ctx := ctxT(t)
	received := 0
	for {
		got, err := client.Receive(ctx)
		if err != nil {
			var ce *transport.CloseError
			if !errors.As(err, &ce) || ce.Code != transport.CloseSlowConsumer || !ce.ByPeer {
				t.Fatalf("slow client Receive after %d messages = %v, want a *CloseError with CloseSlowConsumer by peer", received, err)
			}
			break
		}
		if !bytes.Equal(got, msg) {
			t.Fatalf("slow client message #%d = %s, want %s", received, show(got), show(msg))
		}
		received++
		if received > n {
			t.Fatalf("slow client received %d messages, more than the %d sent", received, n)
		}
	}
	t.Logf("the slow client received %d messages before the close", received)
	waitDone(t, client, "slow client")
	if code, _, byPeer := client.CloseInfo(); code != transport.CloseSlowConsumer || !byPeer {
		t.Errorf("slow client CloseInfo = (%v, byPeer %v), want (%v, true)", code, byPeer, transport.CloseSlowConsumer)
	}

	if isDone(other) || isDone(otherServer) {
		t.Fatal("a slow consumer closed another connection")
	}
	send(t, otherServer, []byte("after"))
	expect(t, other, []byte("after"))
}

func testDatagrams(t *testing.T, f Factory) {
	client, server := newPair(t, f, testConfig())
	max := client.MaxDatagramSize()
	if smax := server.MaxDatagramSize(); (smax > 0) != (max > 0) {
		t.Fatalf("MaxDatagramSize: client %d, server %d: one side has datagrams and the other not", max, smax)
	}
	if max <= 0 {
		for _, c := range []transport.Conn{client, server} {
			if err := c.SendDatagram([]byte("x")); !errors.Is(err, transport.ErrDatagramsUnsupported) {
				t.Fatalf("SendDatagram with MaxDatagramSize 0 = %v, want ErrDatagramsUnsupported", err)
			}
		}
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
		defer cancel()
		if msg, err := server.ReceiveDatagram(ctx); err == nil {
			t.Fatalf("ReceiveDatagram without datagrams returned %s", show(msg))
		}
		return
	}

	for _, dir := range []struct {
		name     string
		from, to transport.Conn
	}{{"client to server", client, server}, {"server to client", server, client}} {
		size := min(dir.from.MaxDatagramSize(), dir.to.MaxDatagramSize())
		want := pattern(9, size)
		// Datagrams are unreliable: retry until one arrives.
		arrived := false
		for try := 0; try < 50 && !arrived; try++ {
			if err := dir.from.SendDatagram(want); err != nil {
				t.Fatalf("%s: SendDatagram(%d bytes): %v", dir.name, size, err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
			got, err := dir.to.ReceiveDatagram(ctx)
			cancel()
			if err == nil {
				if !bytes.Equal(got, want) {
					t.Fatalf("%s: datagram %s, want %s", dir.name, show(got), show(want))
				}
				arrived = true
			} else if !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("%s: ReceiveDatagram: %v", dir.name, err)
			}
		}
		if !arrived {
			t.Fatalf("%s: no datagram arrived in 50 tries", dir.name)
		}
		if err := dir.from.SendDatagram(make([]byte, dir.from.MaxDatagramSize()+1)); !errors.Is(err, transport.ErrMessageTooLarge) {
			t.Fatalf("%s: SendDatagram(MaxDatagramSize+1) = %v, want ErrMessageTooLarge", dir.name, err)
		}
	}
	// Datagrams do not disturb the reliable stream.
	send(t, client, []byte("reliable"))
	expect(t, server, []byte("reliable"))
}

func testManyConns(t *testing.T, f Factory) {
	const n = 20
	ln, d := f(t, testConfig(), testConfig())
	clients := make([]transport.Conn, n)
	servers := make([]transport.Conn, n)
	for i := range n {
		clients[i], servers[i] = pair(t, ln, d)
	}
	// Each server end talks to its own client only (pair accepts the one
	// connection it dialed): tag every message.
	roundTrip := func(i int, tag string) {
		t.Helper()
		msg := []byte(fmt.Sprintf("%s %d", tag, i))
		send(t, clients[i], msg)
		expect(t, servers[i], msg)
		send(t, servers[i], msg)
		expect(t, clients[i], msg)
	}
	for i := range n {
		roundTrip(i, "first")
	}

	// Closing some connections leaves the others working.
	for i := 0; i < n; i += 3 {
		if i%2 == 0 {
			clients[i].Close(transport.CloseGoingAway, "leaving")
		} else {
			servers[i].Close(transport.CloseIdleTimeout, "idle")
		}
	}
	for i := 0; i < n; i += 3 {
		waitDone(t, clients[i], fmt.Sprint("client ", i))
		waitDone(t, servers[i], fmt.Sprint("server ", i))
	}
	for i := range n {
		if i%3 == 0 {
			continue
		}
		if isDone(clients[i]) || isDone(servers[i]) {
			t.Fatalf("closing other connections closed connection %d", i)
		}
		roundTrip(i, "second")
	}
}

func testListenerClose(t *testing.T, f Factory) {
	ln, d := f(t, testConfig(), testConfig())
	client, server := pair(t, ln, d)
	addr := ln.Addr().String()

	acceptErr := make(chan error, 1)
	go func() {
		c, err := ln.Accept(ctxT(t))
		if c != nil {
			c.Close(transport.CloseNormal, "")
		}
		acceptErr <- err
	}()
	time.Sleep(10 * time.Millisecond) // let Accept block, usually
	if err := ln.Close(); err != nil {
		t.Fatalf("listener Close: %v", err)
	}
	select {
	case err := <-acceptErr:
		if err == nil {
			t.Fatal("Accept blocked across listener Close returned a connection")
		}
		if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
			t.Fatalf("Accept returned %v: it waited for its context instead of the listener Close", err)
		}
	case <-time.After(timeout):
		t.Fatal("listener Close did not return a blocked Accept")
	}
	if c, err := ln.Accept(ctxT(t)); err == nil {
		c.Close(transport.CloseNormal, "")
		t.Fatal("Accept after listener Close returned a connection")
	}
	ln.Close() // a second Close must not panic

	// Established connections stay open.
	if isDone(client) || isDone(server) {
		t.Fatal("listener Close closed an established connection")
	}
	send(t, client, []byte("still here"))
	expect(t, server, []byte("still here"))
	send(t, server, []byte("still here"))
	expect(t, client, []byte("still here"))

	// New connections are refused.
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	if c, err := d.Dial(ctx, addr); err == nil {
		c.Close(transport.CloseNormal, "")
		t.Fatal("Dial to a closed listener succeeded")
	}
}

// testBacklog checks a connection that implements transport.Backlogger:
// while the peer does not read, what Send queued shows in Backlog; once
// the peer has read everything, Backlog is back to zero. Connections
// without it are not required to report anything.
func testBacklog(t *testing.T, f Factory) {
	cfg := testConfig()
	cfg.SendQueueMessages = 1 << 16
	cfg.SendQueueBytes = 64 << 20
	client, server := newPair(t, f, cfg)
	bl, ok := server.(transport.Backlogger)
	if !ok {
		t.Skip("the connection does not report a backlog (optional)")
	}
	if m, b := bl.Backlog(); m != 0 || b != 0 {
		t.Fatalf("Backlog of a new connection = %d messages, %d bytes", m, b)
	}
	// Send until something stays queued: network buffers absorb the first
	// messages, the queue the rest.
	msg := pattern(7, 16<<10)
	sent := 0
	deadline := time.Now().Add(timeout)
	for {
		send(t, server, msg)
		sent++
		if m, b := bl.Backlog(); m > 0 && b >= len(msg) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("Backlog stayed empty after %d unread messages of %d KiB", sent, len(msg)>>10)
		}
	}
	ctx := ctxT(t)
	for range sent {
		if _, err := client.Receive(ctx); err != nil {
			t.Fatal(err)
		}
	}
	for deadline := time.Now().Add(timeout); ; time.Sleep(time.Millisecond) {
		if m, b := bl.Backlog(); m == 0 && b == 0 {
			return
		} else if time.Now().After(deadline) {
			t.Fatalf("Backlog = %d messages, %d bytes after the peer read everything", m, b)
		}
	}
}

// A StallMeter measures how long the process as a whole could not run: a
// goroutine that wakes every millisecond records the longest gap between
// its wake-ups. A Send that is slow because the machine starved the whole
// process shows the same gap; a Send that blocked while the rest of the
// process ran does not.
type StallMeter struct {
	mu   sync.Mutex
	last time.Time
	max  time.Duration
	stop chan struct{}
	done chan struct{}
}

// StartStallMeter starts measuring; Close stops it. Tests that bound how
// long an operation takes subtract the stall, so that a busy machine does
// not fail them.
func StartStallMeter() *StallMeter {
	m := &StallMeter{last: time.Now(), stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(m.done)
		for {
			select {
			case <-m.stop:
				return
			case <-time.After(time.Millisecond):
			}
			now := time.Now()
			m.mu.Lock()
			m.max = max(m.max, now.Sub(m.last))
			m.last = now
			m.mu.Unlock()
		}
	}()
	return m
}

// Reset starts a new measurement.
func (m *StallMeter) Reset() {
	m.mu.Lock()
	m.max, m.last = 0, time.Now()
	m.mu.Unlock()
}

// Stalled returns the longest gap since Reset, the current one included.
func (m *StallMeter) Stalled() time.Duration {
	m.mu.Lock()
	defer m.mu.Unlock()
	return max(m.max, time.Since(m.last))
}

// Close stops the meter.
func (m *StallMeter) Close() {
	close(m.stop)
	<-m.done
}

// DialUntilRefused dials with dial, keeping every connection open, until
// refused reports one of them (or of open, those dialed before) closed by
// the listener, within 20 seconds, and returns them all for the caller to
// close: for a listener with a cap on connections it has not accepted
// yet, once open fills it. A listener counts connections in an order of
// its own, so closing each probe before dialing the next could keep its
// count at the cap, the probe counted before one of open: no refusal
// ever. refused may fail t on a refusal of the wrong kind.
func DialUntilRefused[C any](t *testing.T, open []C, dial func() C, refused func(C) bool) []C {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		if time.Now().After(deadline) {
			t.Fatal("no connection beyond the cap refused in 20 s")
		}
		open = append(open, dial())
		time.Sleep(100 * time.Millisecond)
		done := false
		for _, c := range open {
			done = refused(c) || done // every one, for refused's checks
		}
		if done {
			return open
		}
	}
}

// Reconnects checks that a client dialing addr with d is accepted by ln
// within 20 seconds, dialing again while dials fail: for a listener that
// refused connections over a limit and has room again, once it learns
// that those holding it are gone.
func Reconnects(t *testing.T, ln transport.Listener, d transport.Dialer, addr string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	accepted := make(chan error, 1)
	go func() {
		c, err := ln.Accept(ctx)
		if err == nil {
			c.Close(transport.CloseNormal, "")
		}
		accepted <- err
	}()
	for {
		c, err := d.Dial(ctx, addr)
		if err == nil {
			c.Close(transport.CloseNormal, "")
			if err := <-accepted; err != nil {
				t.Fatalf("accepting the client: %v", err)
			}
			return
		}
		if ctx.Err() != nil {
			t.Fatalf("no client connects: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// FixedAddr returns ln with every connection it accepts reporting addr as
// its remote address (and keeping its read limit, if it has one): a
// test's way to open many connections "from" one source, or from several,
// over a transport whose dials all come from one host.
func FixedAddr(ln transport.Listener, addr net.Addr) transport.Listener {
	return fixedAddr{ln, addr}
}

type fixedAddr struct {
	transport.Listener
	addr net.Addr
}

func (l fixedAddr) Accept(ctx context.Context) (transport.Conn, error) {
	c, err := l.Listener.Accept(ctx)
	if err != nil {
		return nil, err
	}
	return addrConn{c, l.addr}, nil
}

type addrConn struct {
	transport.Conn
	addr net.Addr
}

func (c addrConn) RemoteAddr() net.Addr { return c.addr }

func (c addrConn) SetReadLimit(n int) {
	if rl, ok := c.Conn.(transport.ReadLimiter); ok {
		rl.SetReadLimit(n)
	}
}
