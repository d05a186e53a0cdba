package wstransport

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"

	"github.com/replicago/replica/transport"
)

// conn is a transport.Conn over one WebSocket.
//
// Goroutines: one reader, for the connection's life, reads messages and
// hands each to Receive through an unbuffered channel, so that at most one
// received message waits in memory and a peer that sends faster than the
// application receives is pushed back by TCP. A writer runs only while the
// send queue is not empty, so an idle connection has no writer. Close
// starts one short-lived goroutine for the close handshake.
type conn struct {
	ws            *websocket.Conn
	cfg           transport.Config
	local, remote net.Addr

	recv chan []byte   // reader to Receive, unbuffered
	done chan struct{} // closed on close
	// finished is closed when the socket is closed, the close handshake
	// done or given up on (Finished).
	finished   chan struct{}
	finishOnce sync.Once
	limit      atomic.Int64 // read limit (SetReadLimit)
	inMsg      atomic.Int64 // bytes of the message being read
	outq       func() int   // bytes in the kernel's send queue; nil if unknown

	mu       sync.Mutex
	closed   bool
	code     transport.CloseCode
	reason   string
	byPeer   bool
	queue    [][]byte // messages to write, from queue[head]
	head     int
	pending  int           // messages queued or being written
	bytes    int           // bytes queued or being written
	writing  bool          // a writer goroutine is running
	writeErr error         // why the writer stopped
	flushing bool          // closed, and the writer still writes what was queued
	flushed  chan struct{} // closed when the flushing writer stops
	outqN    int           // the last reading of outq
	outqAt   time.Time     // when it was taken
}

// Reading the kernel's send queue is a system call: a server with a
// thousand connections that read it for each of them every tick spent
// milliseconds a tick on it. Backlog reads it afresh when the connection
// is congested (messages wait for the writer, or the last reading was
// over outqQuiet) and otherwise at most every outqEvery, so a peer that
// stops reading is seen within outqEvery and then followed closely.
const (
	outqQuiet = 64 << 10
	outqEvery = time.Second
)

// flushTimeout bounds how long Close waits for the queued messages to be
// written before it sends the close frame.
const flushTimeout = 2 * time.Second

// Backlog implements transport.Backlogger: the messages queued or being
// written, and their bytes plus, where known (see ConnContext), the bytes
// the kernel holds in the socket's send queue, which the peer has not
// acknowledged. A peer that stops reading leaves them there once its
// receive window is full, and the kernel's queue can grow to megabytes.
func (c *conn) Backlog() (messages, bytes int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	messages, bytes = c.pending, c.bytes
	if c.outq != nil {
		if now := time.Now(); messages > 0 || c.outqN > outqQuiet || now.Sub(c.outqAt) >= outqEvery {
			c.outqN, c.outqAt = c.outq(), now
		}
		bytes += c.outqN
	}
	return messages, bytes
}

// ReleasesSent implements transport.Releaser: Backlog's messages count
// those queued and the one being written, and the library keeps no
// reference to a message once its write returns.
func (c *conn) ReleasesSent() {}

// newConn returns a connection over ws; nc, if not nil, is the network
// connection under it, whose kernel send queue Backlog counts.
func newConn(ws *websocket.Conn, nc net.Conn, cfg transport.Config, local, remote net.Addr) *conn {
	// The connection enforces its own limit, which SetReadLimit changes,
	// and closes with CloseMessageTooLarge (status 4003) rather than the
	// library's 1009.
	ws.SetReadLimit(-1)
	c := &conn{
		ws:       ws,
		cfg:      cfg,
		local:    local,
		remote:   remote,
		recv:     make(chan []byte),
		done:     make(chan struct{}),
		finished: make(chan struct{}),
	}
	c.limit.Store(int64(cfg.MaxMessageSize))
	if nc != nil {
		c.outq = kernelQueue(nc)
	}
	go c.readLoop()
	return c
}

// SetReadLimit implements transport.ReadLimiter. The limit is read as the
// message grows, so it applies to the message being read too: one that
// has already grown past it closes the connection at once, even if the
// peer sends no more of it.
func (c *conn) SetReadLimit(n int) {
	if n <= 0 || n > c.cfg.MaxMessageSize {
		n = c.cfg.MaxMessageSize
	}
	c.limit.Store(int64(n))
	if c.inMsg.Load() > int64(n) {
		reason := tooLargeError{n}.Error()
		if c.closeLocal(transport.CloseMessageTooLarge, reason) {
			go c.closeHandshake(transport.CloseMessageTooLarge, reason)
		}
	}
}

func (c *conn) Send(msg []byte) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return transport.ErrClosed
	}
	if len(msg) > c.cfg.MaxMessageSize {
		return transport.ErrMessageTooLarge
	}
	// A message larger than SendQueueBytes is accepted into an empty queue,
	// else it could never be sent.
	if c.pending >= c.cfg.SendQueueMessages || c.bytes > 0 && c.bytes+len(msg) > c.cfg.SendQueueBytes {
		c.closeLocked(transport.CloseSlowConsumer, "send queue overflow", false)
		go c.closeHandshake(transport.CloseSlowConsumer, "send queue overflow")
		return transport.ErrSlowConsumer
	}
	c.queue = append(c.queue, msg)
	c.pending++
	c.bytes += len(msg)
	if !c.writing {
		c.writing = true
		go c.writeLoop()
	}
	return nil
}

// writeLoop writes queued messages until the queue is empty or the
// connection closed.
func (c *conn) writeLoop() {
	for {
		c.mu.Lock()
		if c.closed && !c.flushing || c.head == len(c.queue) {
			c.writing = false
			if c.flushed != nil {
				close(c.flushed)
				c.flushed = nil
			}
			if cap(c.queue) > 64 {
				c.queue = nil // release a burst's backing array
			} else {
				clear(c.queue[c.head:])
				c.queue = c.queue[:0]
			}
			c.head = 0
			c.mu.Unlock()
			return
		}
		msg := c.queue[c.head]
		c.queue[c.head] = nil
		c.head++
		c.mu.Unlock()

		// No context: a canceled context would close the WebSocket. A stuck
		// write ends when Close's handshake gives up and closes the socket.
		err := c.ws.Write(context.Background(), websocket.MessageBinary, msg)

		c.mu.Lock()
		c.pending--
		c.bytes -= len(msg)
		if err != nil {
			// The reader reports the close: the write may have failed
			// because the peer's close frame, not yet seen by the reader,
			// closed the socket. Closing the socket makes sure the reader
			// sees something.
			c.writing = false
			c.writeErr = err
			if c.flushed != nil {
				close(c.flushed)
				c.flushed = nil
			}
			c.mu.Unlock()
			c.ws.CloseNow()
			return
		}
		c.mu.Unlock()
	}
}

// readLoop reads messages and hands them to Receive until the connection
// ends.
func (c *conn) readLoop() {
	for {
		typ, r, err := c.ws.Reader(context.Background())
		if err != nil {
			c.readFailed(err)
			return
		}
		if typ != websocket.MessageBinary {
			if c.closeLocal(transport.CloseProtocolError, "text message") {
				c.closeHandshake(transport.CloseProtocolError, "text message")
			}
			return
		}
		msg, err := c.readMessage(r)
		if tl, ok := err.(tooLargeError); ok {
			if c.closeLocal(transport.CloseMessageTooLarge, tl.Error()) {
				c.closeHandshake(transport.CloseMessageTooLarge, tl.Error())
			}
			return
		}
		if err != nil {
			c.readFailed(err)
			return
		}
		select {
		case c.recv <- msg:
		case <-c.done:
			return
		}
	}
}

// tooLargeError is a message over the read limit.
type tooLargeError struct{ limit int }

func (e tooLargeError) Error() string {
	return fmt.Sprintf("message over the limit of %d bytes", e.limit)
}

// readMessage reads one message from r, checking the read limit as the
// message grows: a message over it is read no further than one byte past
// the limit, so its buffer never outgrows the limit.
func (c *conn) readMessage(r io.Reader) ([]byte, error) {
	defer c.inMsg.Store(0)
	buf := make([]byte, 0, 512)
	for {
		limit := int(c.limit.Load())
		if len(buf) > limit {
			return nil, tooLargeError{limit}
		}
		if len(buf) == cap(buf) {
			buf = append(buf, make([]byte, min(2*cap(buf), limit+1)-len(buf))...)[:len(buf)]
		}
		n, err := r.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		c.inMsg.Store(int64(len(buf))) // before the limit is read again
		if err == io.EOF {
			if limit := int(c.limit.Load()); len(buf) > limit {
				return nil, tooLargeError{limit}
			}
			return buf, nil
		}
		if err != nil {
			return nil, err
		}
	}
}

// readFailed ends the connection after a read error.
func (c *conn) readFailed(err error) {
	defer c.finish() // whichever way, the socket is closed on return
	var ce websocket.CloseError
	switch {
	case errors.As(err, &ce):
		// The peer's close frame: the library answered it and closed.
		code, reason := closeCode(ce.Code, ce.Reason)
		c.mu.Lock()
		c.closeLocked(code, reason, true)
		c.mu.Unlock()
	case errors.Is(err, websocket.ErrMessageTooBig):
		// The library sent the peer a close frame with status 1009. Finish
		// the handshake, discarding the rest of the message.
		reason := fmt.Sprintf("message over the limit of %d bytes", c.cfg.MaxMessageSize)
		c.closeLocal(transport.CloseMessageTooLarge, reason)
		c.ws.Close(websocket.StatusMessageTooBig, "")
	default:
		// The socket failed or was closed, by us (then the connection is
		// already closed and this changes nothing) or by the network.
		c.mu.Lock()
		if c.writeErr != nil {
			err = c.writeErr // the first failure says more
		}
		code := transport.CloseNetworkError
		if !isNetError(err) {
			code = transport.CloseProtocolError
		}
		c.closeLocked(code, err.Error(), false)
		c.mu.Unlock()
		c.ws.CloseNow()
	}
}

func isNetError(err error) bool {
	var ne net.Error
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, net.ErrClosed) || errors.As(err, &ne)
}

// closeLocal closes the connection locally unless it is already closed,
// reporting whether it did.
func (c *conn) closeLocal(code transport.CloseCode, reason string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.closeLocked(code, reason, false)
}

// closeLocked records the close, discards the send queue and closes done;
// c.mu is held. It reports false if the connection was already closed.
func (c *conn) closeLocked(code transport.CloseCode, reason string, byPeer bool) bool {
	if c.closed {
		return false
	}
	c.closed, c.code, c.reason, c.byPeer = true, code, reason, byPeer
	clear(c.queue)
	c.queue, c.head = nil, 0
	close(c.done)
	return true
}

// closeFlushing records a local close like closeLocked but leaves the send
// queue to the writer, and returns a channel closed when the writer has
// written it (nil if there is nothing to write); c.mu is held.
func (c *conn) closeFlushing(code transport.CloseCode, reason string) (first bool, flushed chan struct{}) {
	if c.closed {
		return false, nil
	}
	c.closed, c.code, c.reason = true, code, reason
	close(c.done)
	if c.writing {
		c.flushing = true
		c.flushed = make(chan struct{})
	}
	return true, c.flushed
}

// flushAndClose waits up to flushTimeout for flushed, then stops the
// writer after its current message and runs the close handshake.
func (c *conn) flushAndClose(flushed chan struct{}, code transport.CloseCode, reason string) {
	if flushed != nil {
		t := time.NewTimer(flushTimeout)
		select {
		case <-flushed:
		case <-t.C:
		}
		t.Stop()
	}
	c.mu.Lock()
	c.flushing = false
	clear(c.queue[c.head:]) // what the deadline left unwritten
	c.queue = c.queue[:c.head]
	c.mu.Unlock()
	c.closeHandshake(code, reason)
}

// closeHandshake tells the peer code and reason and closes the socket. It
// waits for a write in progress (so as not to cut a frame) and for the
// peer's answer, each up to 5 seconds (the library's timeouts), so it runs
// on its own goroutine.
func (c *conn) closeHandshake(code transport.CloseCode, reason string) {
	status, wire := closeStatus(code, reason)
	c.ws.Close(status, wire)
	c.finish()
}

// finish closes finished: the socket is closed.
func (c *conn) finish() { c.finishOnce.Do(func() { close(c.finished) }) }

// Finished implements transport.Finisher: it is closed once the close
// handshake is done (or given up on, after the queued messages were
// written for up to flushTimeout and the peer's answer waited for up to
// 5 seconds), or the socket failed.
func (c *conn) Finished() <-chan struct{} { return c.finished }

var _ transport.Finisher = (*conn)(nil)

func (c *conn) SendDatagram([]byte) error { return transport.ErrDatagramsUnsupported }

func (c *conn) Receive(ctx context.Context) ([]byte, error) {
	select {
	case <-c.done:
		return nil, c.closeErr()
	default:
	}
	select {
	case msg := <-c.recv:
		// Read ahead before the limit was lowered.
		if limit := int(c.limit.Load()); len(msg) > limit {
			reason := tooLargeError{limit}.Error()
			if c.closeLocal(transport.CloseMessageTooLarge, reason) {
				go c.closeHandshake(transport.CloseMessageTooLarge, reason)
			}
			return nil, c.closeErr()
		}
		return msg, nil
	case <-c.done:
		return nil, c.closeErr()
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (c *conn) closeErr() error {
	code, reason, byPeer := c.CloseInfo()
	return &transport.CloseError{Code: code, Reason: reason, ByPeer: byPeer}
}

func (c *conn) ReceiveDatagram(context.Context) ([]byte, error) {
	return nil, transport.ErrDatagramsUnsupported
}

// Close closes Done at once; the messages already queued are still
// written, for up to flushTimeout, before the close frame.
func (c *conn) Close(code transport.CloseCode, reason string) error {
	c.mu.Lock()
	first, flushed := c.closeFlushing(code, reason)
	c.mu.Unlock()
	if first {
		go c.flushAndClose(flushed, code, reason)
	}
	return nil
}

func (c *conn) Done() <-chan struct{} { return c.done }

func (c *conn) CloseInfo() (code transport.CloseCode, reason string, byPeer bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.code, c.reason, c.byPeer
}

func (c *conn) MaxDatagramSize() int { return 0 }

func (c *conn) LocalAddr() net.Addr { return c.local }

func (c *conn) RemoteAddr() net.Addr { return c.remote }
