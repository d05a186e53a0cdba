package quicconn

import (
	"context"
	"errors"
	"net"
	"sync"
	"sync/atomic"

	"github.com/quic-go/quic-go"

	"github.com/replicago/replica/transport"
)

// An Endpoint owns the quic.Transport a listener and its connections share.
// Closing the listener must not close established connections, so the
// transport (and the packet conn, when the endpoint opened it) closes only
// once the listener is closed and every connection it accepted has ended.
type Endpoint struct {
	Transport *quic.Transport

	pc      net.PacketConn
	ownPC   bool
	OnClose func() // called once, before the transport closes

	refusing atomic.Bool

	mu   sync.Mutex
	refs int // the listener, plus one per connection
}

// NewEndpoint returns an Endpoint on pc holding one reference, the
// listener's. If ownPC, closing the endpoint closes pc.
func NewEndpoint(pc net.PacketConn, ownPC bool) *Endpoint {
	e := &Endpoint{pc: pc, ownPC: ownPC, refs: 1}
	e.Transport = &quic.Transport{Conn: pc, ConnContext: e.connContext}
	return e
}

var errRefused = errors.New("listener closed")

// connContext refuses new connections once the listener is closed: the
// client's Dial then fails at once with CONNECTION_REFUSED instead of
// timing out, while the transport still serves established connections.
func (e *Endpoint) connContext(ctx context.Context, _ *quic.ClientInfo) (context.Context, error) {
	if e.refusing.Load() {
		return nil, errRefused
	}
	return ctx, nil
}

// Refuse makes the endpoint refuse new connections.
func (e *Endpoint) Refuse() { e.refusing.Store(true) }

// Track holds a reference until qc ends.
func (e *Endpoint) Track(qc *quic.Conn) {
	e.mu.Lock()
	e.refs++
	e.mu.Unlock()
	context.AfterFunc(qc.Context(), e.Release)
}

// Release drops a reference; the last one closes the transport.
func (e *Endpoint) Release() {
	e.mu.Lock()
	e.refs--
	last := e.refs == 0
	e.mu.Unlock()
	if !last {
		return
	}
	if e.OnClose != nil {
		e.OnClose()
	}
	e.Transport.Close()
	if e.ownPC {
		e.pc.Close()
	}
}

// ErrListenerClosed is what Accept returns on a closed listener. It matches
// both transport.ErrClosed and net.ErrClosed.
var ErrListenerClosed error = listenerClosed{}

type listenerClosed struct{}

func (listenerClosed) Error() string { return "transport: listener closed" }
func (listenerClosed) Is(target error) bool {
	return target == transport.ErrClosed || target == net.ErrClosed
}

// AcceptQueue hands connections that finished their handshake to Accept.
type AcceptQueue struct {
	conns     chan transport.Conn
	closed    <-chan struct{}
	ctx       context.Context
	cancel    context.CancelFunc
	closeOnce sync.Once
}

// NewAcceptQueue returns an empty queue.
func NewAcceptQueue() *AcceptQueue {
	ctx, cancel := context.WithCancel(context.Background())
	return &AcceptQueue{conns: make(chan transport.Conn), closed: ctx.Done(), ctx: ctx, cancel: cancel}
}

// Push waits until Accept takes c, or closes c with CloseGoingAway if the
// queue closes or c's handshake deadline (ctx) passes first.
func (q *AcceptQueue) Push(ctx context.Context, c transport.Conn) {
	select {
	case q.conns <- c:
	case <-q.closed:
		c.Close(transport.CloseGoingAway, "server is not accepting connections")
	case <-ctx.Done():
		select {
		case <-q.closed:
			c.Close(transport.CloseGoingAway, "server is not accepting connections")
		default:
			c.Close(transport.CloseHandshakeTimeout, "server did not accept the connection in time")
		}
	case <-c.Done():
	}
}

// Accept returns the next connection.
func (q *AcceptQueue) Accept(ctx context.Context) (transport.Conn, error) {
	select {
	case <-q.closed:
		return nil, ErrListenerClosed
	default:
	}
	select {
	case c := <-q.conns:
		return c, nil
	case <-q.closed:
		return nil, ErrListenerClosed
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// Close makes Accept fail; it reports whether this was the first Close.
func (q *AcceptQueue) Close() (first bool) {
	q.closeOnce.Do(func() {
		q.cancel()
		first = true
	})
	return first
}

// Closed is closed by Close.
func (q *AcceptQueue) Closed() <-chan struct{} { return q.closed }

// Context is canceled by Close.
func (q *AcceptQueue) Context() context.Context { return q.ctx }
