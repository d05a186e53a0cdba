// Package transport is the boundary between replica's session layer and the
// network. A Conn carries reliable, ordered messages and, where the network
// allows, unreliable datagrams between a server and one client.
//
// Implementations live in adapter packages (wstransport, quictransport,
// wttransport) so that a program compiles only the networks it uses; this
// package holds the contract, the in-memory implementation used by tests,
// and nothing that imports beyond the standard library. Package
// transporttest has the conformance suite every implementation passes.
//
// # Sending never blocks
//
// The server's tick goroutine calls Send for every client, so Send must
// never block on the network: each Conn owns a bounded send queue drained by
// its own writer goroutine. When a client stops reading and the queue
// overflows, Send closes the connection with CloseSlowConsumer and returns
// ErrSlowConsumer; other clients are unaffected.
//
// Messages passed to Send and SendDatagram are shared, not copied: a tick
// encoded once is handed to every client's Conn, so callers must not modify
// a message after sending it.
package transport

import (
	"context"
	"errors"
	"fmt"
	"net"
)

// Conn is one connection. Send, SendDatagram, Close and the accessors may be
// called from any goroutine. Receive and ReceiveDatagram may each be called
// by one goroutine at a time.
type Conn interface {
	// Send queues msg for reliable, ordered delivery and returns without
	// waiting for the network. It returns ErrMessageTooLarge for a message
	// over the configured maximum, ErrSlowConsumer (after closing the
	// connection) when the send queue overflows, and ErrClosed once the
	// connection is closed. msg must not be modified afterwards.
	Send(msg []byte) error

	// SendDatagram queues msg for unreliable delivery: it may be lost,
	// duplicated or reordered. When the datagram queue is full the oldest
	// queued datagram is dropped. It returns ErrDatagramsUnsupported on
	// networks without datagrams and ErrMessageTooLarge for a message over
	// MaxDatagramSize. msg must not be modified afterwards.
	SendDatagram(msg []byte) error

	// Receive returns the next reliable message. It returns an error
	// wrapping ErrClosed (see CloseInfo for why) when the connection is
	// closed, or ctx.Err().
	Receive(ctx context.Context) ([]byte, error)

	// ReceiveDatagram returns the next datagram, like Receive.
	ReceiveDatagram(ctx context.Context) ([]byte, error)

	// Close closes the connection, telling the peer code and reason when
	// the network allows. Done is closed and Send fails at once, but the
	// messages already queued are still sent, before the close, for a
	// bounded time (two seconds for the transports of this module), so
	// that a message such as a refusal sent just before Close reaches the
	// peer. Close is idempotent; only the first code and reason count.
	Close(code CloseCode, reason string) error

	// Done is closed when the connection is closed, by either side.
	Done() <-chan struct{}

	// CloseInfo reports why the connection closed: the code and reason
	// given by whichever side closed it first, and whether that was the
	// peer. It is meaningful once Done is closed.
	CloseInfo() (code CloseCode, reason string, byPeer bool)

	// MaxDatagramSize returns the largest datagram SendDatagram accepts,
	// or 0 if the network has no datagrams.
	MaxDatagramSize() int

	LocalAddr() net.Addr
	RemoteAddr() net.Addr
}

// A Backlogger reports how much Send has queued and not yet written. The
// transports of this module implement it on their connections; the server
// uses it to pause a client that falls behind before its queue overflows,
// and to resynchronise it once the queue has drained.
type Backlogger interface {
	Backlog() (messages, bytes int)
}

// A Finisher tells when a closed connection is done with the network.
// The transports of this module implement it on their connections.
type Finisher interface {
	// Finished is closed once the connection, closed by either side, is
	// done with the network: the messages queued before Close written
	// and the close told to the peer, or given up on (the transports of
	// this module bound each step). Server.Shutdown waits for it.
	Finished() <-chan struct{}
}

// AwaitFinished waits until tc, closed, is done with the network (see
// Finisher) or ctx ends, when it returns ctx's error. A connection that is
// no Finisher counts as done.
func AwaitFinished(ctx context.Context, tc Conn) error {
	f, ok := tc.(Finisher)
	if !ok {
		return nil
	}
	select {
	case <-f.Finished():
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// A Releaser is a Backlogger whose Backlog counts, in its messages, every
// message given to Send that the connection still refers to: queued,
// being written, or, on an in-memory network, not yet received (Receive
// returns a copy there). Once Backlog reports no messages, the sender may
// reuse the memory of every message it has sent; the server recycles its
// buffers for the clients' messages through it. MemNetwork's connections
// and wstransport's implement it.
type Releaser interface {
	Backlogger
	// ReleasesSent does nothing: it declares the property above.
	ReleasesSent()
}

// A ReadLimiter lets the receiving side of a connection lower, and raise
// back, the largest reliable message it accepts from the peer, so that a
// peer that has not yet proven who it is cannot make the receiver buffer a
// message of the full MaxMessageSize. The transports of this module
// implement it on their connections; the server uses it to bound the
// HELLO.
type ReadLimiter interface {
	// SetReadLimit sets the largest message the connection accepts from
	// now on; n <= 0 or over Config.MaxMessageSize means MaxMessageSize.
	// The limit applies at the transport's read level: a message over it
	// is not buffered past the limit (beyond what a transport had already
	// read when SetReadLimit was called), Receive never returns it, and
	// the connection closes with CloseMessageTooLarge, as for a message
	// over MaxMessageSize. A message being read that is already past the
	// new limit closes the connection at once; one already read ahead and
	// waiting for Receive is checked when Receive takes it.
	SetReadLimit(n int)
}

// A Listener accepts connections.
type Listener interface {
	// Accept waits for the next connection.
	Accept(ctx context.Context) (Conn, error)
	// Addr returns the address clients dial.
	Addr() net.Addr
	// Close stops accepting; established connections stay open.
	Close() error
}

// A Dialer connects to a listener's address.
type Dialer interface {
	Dial(ctx context.Context, addr string) (Conn, error)
}

// Config is the common configuration of every transport. The zero value of
// each field selects its default.
type Config struct {
	// MaxMessageSize bounds one reliable message, in both directions. The
	// default is 1 MiB.
	MaxMessageSize int
	// SendQueueBytes bounds the bytes queued by Send and not yet written.
	// The default is 4 MiB.
	SendQueueBytes int
	// SendQueueMessages bounds the number of messages queued by Send. The
	// default is 1024.
	SendQueueMessages int
	// DatagramQueue bounds the datagrams queued by SendDatagram; the oldest
	// is dropped beyond it. The default is 32.
	DatagramQueue int
}

// WithDefaults returns c with every zero field set to its default.
func (c Config) WithDefaults() Config {
	if c.MaxMessageSize <= 0 {
		c.MaxMessageSize = 1 << 20
	}
	if c.SendQueueBytes <= 0 {
		c.SendQueueBytes = 4 << 20
	}
	if c.SendQueueMessages <= 0 {
		c.SendQueueMessages = 1024
	}
	if c.DatagramQueue <= 0 {
		c.DatagramQueue = 32
	}
	return c
}

// DefaultMaxPending is the listeners' default cap on connections that
// have not finished their handshake (the MaxPending of wstransport,
// quictransport and wttransport): one beyond is closed as it arrives.
const DefaultMaxPending = 1024

// Errors of every transport.
var (
	ErrClosed               = errors.New("transport: connection closed")
	ErrSlowConsumer         = errors.New("transport: send queue overflow: peer too slow")
	ErrMessageTooLarge      = errors.New("transport: message too large")
	ErrDatagramsUnsupported = errors.New("transport: datagrams not supported on this network")
)

// CloseCode is the stable numeric reason a connection closed, carried to
// the peer where the network allows. Codes below 256 are the transport's
// and the session layer's; applications may use 256 to 4095.
type CloseCode uint16

// Close codes.
const (
	CloseNormal           CloseCode = 0  // orderly close
	CloseGoingAway        CloseCode = 1  // server shutdown or client leaving
	CloseProtocolError    CloseCode = 2  // malformed data from the peer
	CloseMessageTooLarge  CloseCode = 3  // the peer sent a message over the limit
	CloseSlowConsumer     CloseCode = 4  // the send queue overflowed
	CloseIdleTimeout      CloseCode = 5  // nothing received for too long
	CloseHandshakeTimeout CloseCode = 6  // the handshake did not complete in time
	CloseAuthFailed       CloseCode = 7  // the connect token was refused
	CloseIncompatible     CloseCode = 8  // protocol or schema versions do not match
	ClosePolicyViolation  CloseCode = 9  // rate limit exceeded or forbidden action
	CloseInternalError    CloseCode = 10 // the server failed
	CloseNetworkError     CloseCode = 11 // the network failed without a close from the peer
	CloseServerBusy       CloseCode = 12 // the server is at a connection limit; try again later
	CloseReplaced         CloseCode = 13 // a newer session of the same user took this one's place
	CloseDuplicate        CloseCode = 14 // the user already has a session, which stays
	MaxCloseCode          CloseCode = 4095
)

var closeNames = map[CloseCode]string{
	CloseNormal: "normal", CloseGoingAway: "going away", CloseProtocolError: "protocol error",
	CloseMessageTooLarge: "message too large", CloseSlowConsumer: "slow consumer",
	CloseIdleTimeout: "idle timeout", CloseHandshakeTimeout: "handshake timeout",
	CloseAuthFailed: "authentication failed", CloseIncompatible: "incompatible protocol or schema",
	ClosePolicyViolation: "policy violation", CloseInternalError: "internal error",
	CloseNetworkError: "network error", CloseServerBusy: "server busy", CloseReplaced: "replaced by a newer session",
	CloseDuplicate: "duplicate session",
}

func (c CloseCode) String() string {
	if s, ok := closeNames[c]; ok {
		return s
	}
	return fmt.Sprintf("close code %d", uint16(c))
}

// A CloseError is what Receive returns on a closed connection. It wraps
// ErrClosed.
type CloseError struct {
	Code   CloseCode
	Reason string
	ByPeer bool
}

func (e *CloseError) Error() string {
	what := "connection closed locally"
	switch {
	case e.ByPeer:
		what = "connection closed by peer"
	case e.Code == CloseNetworkError:
		// Closed here because the network failed: the peer may be gone.
		what = "connection lost"
	}
	if e.Reason == "" {
		return fmt.Sprintf("transport: %s: %s", what, e.Code)
	}
	return fmt.Sprintf("transport: %s: %s: %s", what, e.Code, e.Reason)
}

func (e *CloseError) Unwrap() error { return ErrClosed }
