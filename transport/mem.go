package transport

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"sync"
)

// DefaultMemDatagramSize is the MaxDatagramSize of the connections of a new
// MemNetwork: about what fits in one QUIC packet on the internet.
const DefaultMemDatagramSize = 1200

// memBacklog bounds the connections dialed and not yet accepted.
const memBacklog = 128

// A MemNetwork is an in-memory network for tests. Its listeners and
// connections use no goroutines, timers or sockets: every operation is a
// mutex and a channel, so a MemNetwork is deterministic and works inside a
// testing/synctest bubble (create it inside the bubble).
//
// A MemNetwork behaves like a network with no buffer between the two ends:
// a message sent is queued until the peer receives it, and the queue is
// bounded by the sender's Config, so a peer that stops receiving makes the
// sender's queue overflow exactly after SendQueueMessages messages (or
// SendQueueBytes bytes). A message over the receiver's MaxMessageSize, or
// its read limit (SetReadLimit), but within the sender's MaxMessageSize,
// makes the receiver close the connection with CloseMessageTooLarge as
// soon as it is sent; a message queued before the receiver lowered its
// read limit is checked when it is received. Close closes both ends at
// once; the messages the closing end had queued are still received by the
// peer, before the close (Close flushes), and those queued towards the
// closing end are discarded. A close for a send queue overflow or an
// oversized message discards both directions.
//
// Messages are not copied by Send: a sender that modifies a message
// after Send, before the peer receives it, shows up as corrupted data.
// Receive returns a copy, as a network would, so that once a message is
// received the sender's memory is its own again: a connection is a
// Releaser, whose Backlog counts the messages not yet received.
type MemNetwork struct {
	mu        sync.Mutex
	listeners map[string]*memListener
	nextID    int
	dgramSize int
	drop      func(msg []byte) bool
}

// NewMemNetwork returns an empty in-memory network.
func NewMemNetwork() *MemNetwork {
	return &MemNetwork{listeners: make(map[string]*memListener), dgramSize: DefaultMemDatagramSize}
}

// SetMaxDatagramSize sets the MaxDatagramSize of the connections made from
// now on; 0 makes a network without datagrams, whose SendDatagram and
// ReceiveDatagram return ErrDatagramsUnsupported.
func (n *MemNetwork) SetMaxDatagramSize(size int) {
	n.mu.Lock()
	n.dgramSize = max(size, 0)
	n.mu.Unlock()
}

// SetDatagramLoss makes every connection of the network, existing or
// future, drop each datagram for which drop returns true, in SendDatagram.
// drop may be called from several goroutines at once. nil loses nothing.
// See RandomLoss.
func (n *MemNetwork) SetDatagramLoss(drop func(msg []byte) bool) {
	n.mu.Lock()
	n.drop = drop
	n.mu.Unlock()
}

// RandomLoss returns a loss function for SetDatagramLoss that drops each
// datagram with probability p, drawn from a generator seeded with seed: the
// same sequence of SendDatagram calls loses the same datagrams.
func RandomLoss(p float64, seed uint64) func(msg []byte) bool {
	var mu sync.Mutex
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	return func([]byte) bool {
		mu.Lock()
		defer mu.Unlock()
		return r.Float64() < p
	}
}

// MemAddr is the address of an in-memory listener or connection end.
type MemAddr string

// Network returns "mem".
func (a MemAddr) Network() string { return "mem" }

func (a MemAddr) String() string { return string(a) }

var (
	errMemRefused        = errors.New("transport: connection refused")
	errMemListenerClosed = fmt.Errorf("transport: listener closed: %w", net.ErrClosed)
)

// Listen listens on addr, any non-empty name not already listened on; ""
// picks a fresh name. The listener's connections use cfg.
func (n *MemNetwork) Listen(addr string, cfg Config) (Listener, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	for addr == "" {
		n.nextID++
		if name := fmt.Sprintf("listener-%d", n.nextID); n.listeners[name] == nil {
			addr = name
		}
	}
	if _, ok := n.listeners[addr]; ok {
		return nil, fmt.Errorf("transport: listen %s: address already in use", addr)
	}
	l := &memListener{
		net:     n,
		addr:    MemAddr(addr),
		cfg:     cfg.WithDefaults(),
		backlog: make(chan *memConn, memBacklog),
		done:    make(chan struct{}),
	}
	n.listeners[addr] = l
	return l, nil
}

// Dialer returns a Dialer whose connections use cfg.
func (n *MemNetwork) Dialer(cfg Config) Dialer {
	return &memDialer{net: n, cfg: cfg.WithDefaults()}
}

// Pipe returns the two ends of a new connection, without a listener: the
// client end uses clientCfg and the server end serverCfg.
func (n *MemNetwork) Pipe(clientCfg, serverCfg Config) (client, server Conn) {
	c, s := n.pipe(clientCfg.WithDefaults(), serverCfg.WithDefaults(), n.newAddr("client"), n.newAddr("server"))
	return c, s
}

// newAddr returns a fresh address.
func (n *MemNetwork) newAddr(kind string) MemAddr {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.nextID++
	return MemAddr(fmt.Sprintf("%s-%d", kind, n.nextID))
}

func (n *MemNetwork) pipe(clientCfg, serverCfg Config, clientAddr, serverAddr MemAddr) (client, server *memConn) {
	n.mu.Lock()
	dgram := n.dgramSize
	n.mu.Unlock()
	p := &memPipe{net: n, done: make(chan struct{}), dgramSize: dgram}
	p.ends[0] = memEnd{cfg: clientCfg, addr: clientAddr, ready: make(chan struct{}, 1), dready: make(chan struct{}, 1)}
	p.ends[1] = memEnd{cfg: serverCfg, addr: serverAddr, ready: make(chan struct{}, 1), dready: make(chan struct{}, 1)}
	return &memConn{p: p, side: 0}, &memConn{p: p, side: 1}
}

type memDialer struct {
	net *MemNetwork
	cfg Config
}

func (d *memDialer) Dial(ctx context.Context, addr string) (Conn, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	n := d.net
	n.mu.Lock()
	l := n.listeners[addr]
	n.mu.Unlock()
	if l == nil {
		return nil, fmt.Errorf("transport: dial %s: %w", addr, errMemRefused)
	}
	client, server := n.pipe(d.cfg, l.cfg, n.newAddr("client"), l.addr)
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return nil, fmt.Errorf("transport: dial %s: %w", addr, errMemRefused)
	}
	select {
	case l.backlog <- server:
		return client, nil
	default:
		return nil, fmt.Errorf("transport: dial %s: %w: backlog of %d connections full", addr, errMemRefused, memBacklog)
	}
}

type memListener struct {
	net     *MemNetwork
	addr    MemAddr
	cfg     Config
	backlog chan *memConn
	done    chan struct{}

	mu     sync.Mutex
	closed bool
}

func (l *memListener) Accept(ctx context.Context) (Conn, error) {
	select {
	case c := <-l.backlog:
		return c, nil
	case <-l.done:
		return nil, errMemListenerClosed
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (l *memListener) Addr() net.Addr { return l.addr }

// Close stops accepting and closes, with CloseGoingAway, the connections
// dialed and not yet accepted.
func (l *memListener) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return nil
	}
	l.closed = true
	close(l.done)
	l.net.mu.Lock()
	if l.net.listeners[string(l.addr)] == l {
		delete(l.net.listeners, string(l.addr))
	}
	l.net.mu.Unlock()
	for {
		select {
		case c := <-l.backlog:
			c.Close(CloseGoingAway, "listener closed")
		default:
			return nil
		}
	}
}

// A memPipe is one connection: two ends sharing one lock and one close.
type memPipe struct {
	net       *MemNetwork
	done      chan struct{}
	dgramSize int

	mu     sync.Mutex
	closed bool
	code   CloseCode
	reason string
	closer int // the side that closed
	ends   [2]memEnd
}

// A memEnd holds one side's configuration and what is on its way to it.
type memEnd struct {
	cfg   Config
	addr  MemAddr
	limit int // read limit (SetReadLimit); 0 means cfg.MaxMessageSize

	q      [][]byte // reliable messages to this end, from q[head]
	head   int
	qBytes int
	ready  chan struct{} // signaled when q grows

	dq     [][]byte // datagrams to this end
	dready chan struct{}
}

func (e *memEnd) queued() int { return len(e.q) - e.head }

// readLimit returns the largest message the end accepts.
func (e *memEnd) readLimit() int {
	if e.limit > 0 {
		return e.limit
	}
	return e.cfg.MaxMessageSize
}

// popDatagram removes and returns the oldest datagram, capped to its
// length so that appending to it cannot write into the sender's buffer.
func (e *memEnd) popDatagram() ([]byte, bool) {
	if len(e.dq) == 0 {
		return nil, false
	}
	msg := e.dq[0]
	k := copy(e.dq, e.dq[1:])
	e.dq[k] = nil
	e.dq = e.dq[:k]
	return msg[:len(msg):len(msg)], true
}

// pop removes and returns the oldest message, copied (see MemNetwork)
// under the pipe's lock: once Backlog stops counting it, the sender may
// write over the original.
func (e *memEnd) pop() ([]byte, bool) {
	if e.head == len(e.q) {
		return nil, false
	}
	m := e.q[e.head]
	e.q[e.head] = nil
	e.head++
	e.qBytes -= len(m)
	if e.head == len(e.q) {
		e.q, e.head = e.q[:0], 0
	} else if e.head >= 64 && e.head*2 >= len(e.q) {
		k := copy(e.q, e.q[e.head:])
		clear(e.q[k:])
		e.q, e.head = e.q[:k], 0
	}
	return append(make([]byte, 0, len(m)), m...), true
}

func signal(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

// closeLocked closes the pipe on behalf of side; p.mu is held. With flush,
// the messages side sent and the peer has not received stay for the peer
// to receive.
func (p *memPipe) closeLocked(side int, code CloseCode, reason string, flush bool) bool {
	if p.closed {
		return false
	}
	p.closed, p.code, p.reason, p.closer = true, code, reason, side
	for i := range p.ends {
		e := &p.ends[i]
		e.dq = nil
		if !flush || i == side {
			e.q, e.head, e.qBytes = nil, 0, 0
		}
	}
	close(p.done)
	return true
}

// memConn is one end of a memPipe.
type memConn struct {
	p    *memPipe
	side int
}

// ReleasesSent implements Releaser: Receive returns copies, so what the
// peer has received (and what a close discarded) is the sender's again.
func (c *memConn) ReleasesSent() {}

// Backlog implements Backlogger: what this end sent and the peer has not
// received.
func (c *memConn) Backlog() (messages, bytes int) {
	c.p.mu.Lock()
	defer c.p.mu.Unlock()
	peer := &c.p.ends[1-c.side]
	return peer.queued(), peer.qBytes
}

func (c *memConn) Send(msg []byte) error {
	p := c.p
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return ErrClosed
	}
	me, peer := &p.ends[c.side], &p.ends[1-c.side]
	if len(msg) > me.cfg.MaxMessageSize {
		return ErrMessageTooLarge
	}
	if lim := peer.readLimit(); len(msg) > lim {
		// The peer reads a message over its limit and closes.
		p.closeLocked(1-c.side, CloseMessageTooLarge, tooLarge(len(msg), lim), false)
		return nil
	}
	// A message larger than SendQueueBytes is accepted into an empty queue,
	// else it could never be sent.
	if peer.queued() >= me.cfg.SendQueueMessages || peer.qBytes > 0 && peer.qBytes+len(msg) > me.cfg.SendQueueBytes {
		p.closeLocked(c.side, CloseSlowConsumer, "send queue overflow", false)
		return ErrSlowConsumer
	}
	peer.q = append(peer.q, msg)
	peer.qBytes += len(msg)
	signal(peer.ready)
	return nil
}

func (c *memConn) SendDatagram(msg []byte) error {
	p := c.p
	if p.dgramSize == 0 {
		return ErrDatagramsUnsupported
	}
	p.net.mu.Lock()
	drop := p.net.drop
	p.net.mu.Unlock()
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return ErrClosed
	}
	if len(msg) > p.dgramSize {
		return ErrMessageTooLarge
	}
	if drop != nil && drop(msg) {
		return nil
	}
	peer := &p.ends[1-c.side]
	if len(peer.dq) >= p.ends[c.side].cfg.DatagramQueue {
		peer.popDatagram() // the oldest is dropped
	}
	peer.dq = append(peer.dq, msg)
	signal(peer.dready)
	return nil
}

func tooLarge(size, limit int) string {
	return fmt.Sprintf("message of %d bytes over the limit of %d", size, limit)
}

// SetReadLimit implements ReadLimiter.
func (c *memConn) SetReadLimit(n int) {
	c.p.mu.Lock()
	defer c.p.mu.Unlock()
	e := &c.p.ends[c.side]
	e.limit = 0
	if n > 0 && n < e.cfg.MaxMessageSize {
		e.limit = n
	}
}

func (c *memConn) Receive(ctx context.Context) ([]byte, error) {
	e := &c.p.ends[c.side]
	return c.receive(ctx, e.ready, func() ([]byte, bool) {
		// A message queued before the limit was lowered.
		if e.head < len(e.q) {
			if m, lim := e.q[e.head], e.readLimit(); len(m) > lim {
				c.p.closeLocked(c.side, CloseMessageTooLarge, tooLarge(len(m), lim), false)
				return nil, false
			}
		}
		return e.pop()
	})
}

func (c *memConn) ReceiveDatagram(ctx context.Context) ([]byte, error) {
	if c.p.dgramSize == 0 {
		return nil, ErrDatagramsUnsupported
	}
	e := &c.p.ends[c.side]
	return c.receive(ctx, e.dready, e.popDatagram)
}

// receive waits for pop, run under the pipe's lock, to return a message;
// ready is signaled when there may be one.
func (c *memConn) receive(ctx context.Context, ready chan struct{}, pop func() ([]byte, bool)) ([]byte, error) {
	p := c.p
	for {
		p.mu.Lock()
		msg, ok := pop() // after a close, what the closing peer flushed
		if !ok && p.closed {
			err := c.closeErrLocked()
			p.mu.Unlock()
			return nil, err
		}
		p.mu.Unlock()
		if ok {
			return msg, nil
		}
		select {
		case <-ready:
		case <-p.done:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

func (c *memConn) closeErrLocked() error {
	return &CloseError{Code: c.p.code, Reason: c.p.reason, ByPeer: c.p.closer != c.side}
}

// Close closes both ends at once; the peer's Receive returns the messages
// this end had queued, then a CloseError with the same code and reason and
// ByPeer set.
func (c *memConn) Close(code CloseCode, reason string) error {
	c.p.mu.Lock()
	c.p.closeLocked(c.side, code, reason, true)
	c.p.mu.Unlock()
	return nil
}

func (c *memConn) Done() <-chan struct{} { return c.p.done }

// Finished implements Finisher: an in-memory close is told to the peer at
// once, the messages queued before it staying readable.
func (c *memConn) Finished() <-chan struct{} { return c.p.done }

func (c *memConn) CloseInfo() (code CloseCode, reason string, byPeer bool) {
	c.p.mu.Lock()
	defer c.p.mu.Unlock()
	if !c.p.closed {
		return 0, "", false
	}
	return c.p.code, c.p.reason, c.p.closer != c.side
}

func (c *memConn) MaxDatagramSize() int { return c.p.dgramSize }

func (c *memConn) LocalAddr() net.Addr { return c.p.ends[c.side].addr }

func (c *memConn) RemoteAddr() net.Addr { return c.p.ends[1-c.side].addr }
