// Package quicconn is the part of quictransport and wttransport they share:
// a transport.Conn built on one reliable byte stream plus unreliable
// datagrams, with the framing, the bounded send queue and its writer
// goroutine, the drop-oldest datagram mailbox, and the mapping of QUIC
// errors to close codes.
//
// # Framing
//
// The client writes [Preamble] first. After it, each message is a frame: its
// length as a uvarint, then its bytes. A frame over the receiver's
// MaxMessageSize (or read limit) closes the connection with
// CloseMessageTooLarge.
//
// # Closing
//
// QUIC discards the stream data a peer has not read when the connection
// closes, so Close first writes what is queued and ends the stream (FIN);
// the peer, once it has read to the end, ends its side too; then the
// closer closes the connection with the code and reason. Close waits at
// most FlushTimeout for this, and a peer whose stream ended closes the
// connection itself if the close does not come within twice that.
package quicconn

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/quic-go/quic-go"

	"github.com/replicago/replica/transport"
)

// A Backend is the network under a Conn: a QUIC connection or a WebTransport
// session.
type Backend interface {
	// SendDatagram sends one datagram. It may block.
	SendDatagram([]byte) error
	// ReceiveDatagram returns the next datagram.
	ReceiveDatagram(context.Context) ([]byte, error)
	// Close closes the network connection, telling the peer code and
	// reason if it is still open. It is called once, and may block for
	// about a round trip.
	Close(code transport.CloseCode, reason string)
	// MapError says why the connection ended, given err: an error from the
	// stream, from a datagram call, or the cause of the network
	// connection's end.
	MapError(err error) (code transport.CloseCode, reason string, byPeer bool)
}

// Options configure a Conn.
type Options struct {
	Config transport.Config // with defaults applied
	// MaxDatagramSize is what MaxDatagramSize reports; 0 means no datagrams.
	MaxDatagramSize int
	LocalAddr       net.Addr
	RemoteAddr      net.Addr
}

// MaxDatagramSize caps the datagram payload every QUIC path should carry:
// a 1200-byte packet (the QUIC minimum), less the largest QUIC short header,
// AEAD tag, DATAGRAM frame header and a WebTransport quarter stream ID.
const MaxDatagramSize = 1150

// MaxReasonLen bounds the close reason sent to the peer, in bytes.
const MaxReasonLen = 256

// readBufferSize is the read buffer of each connection. It is small so that
// idle connections are cheap; large payloads are read past it.
const readBufferSize = 512

// Conn implements transport.Conn over a Backend and its message stream.
type Conn struct {
	cfg      transport.Config
	b        Backend
	str      io.ReadWriter
	maxDgram int
	local    net.Addr
	remote   net.Addr

	done  chan struct{}
	limit atomic.Int64  // read limit (SetReadLimit)
	inMsg atomic.Int64  // length of the frame being read
	recv  chan []byte   // from the read loop
	wake  chan struct{} // to the write loop
	dwake chan struct{} // to the datagram loop

	mu       sync.Mutex
	closed   bool
	code     transport.CloseCode
	reason   string
	byPeer   bool
	q        ring[[]byte] // messages not yet written
	qBytes   int
	dq       ring[[]byte] // datagrams not yet sent
	dStarted bool
	flushing bool          // closed locally; the writer still writes q
	flushed  chan struct{} // closed when the writer stops, if flushing

	finReq  bool          // the peer ended its side of the stream: end ours
	ended   chan struct{} // closed when the stream or the connection ended
	endOnce sync.Once

	finished   chan struct{} // closed once the backend's connection is closed (Finished)
	finishOnce sync.Once
}

// FlushTimeout bounds how long Close lets the writer write the messages
// already queued, and the peer read them and close, before it closes the
// network connection.
const FlushTimeout = 2 * time.Second

var _ transport.Conn = (*Conn)(nil)

// New returns a Conn that frames messages on str and sends datagrams
// through b. It starts the connection's reader and writer goroutines; a
// datagram writer starts with the first datagram. The caller arranges for
// Ended to be called when the network connection ends.
func New(str io.ReadWriter, b Backend, o Options) *Conn {
	c := &Conn{
		cfg:      o.Config.WithDefaults(),
		b:        b,
		str:      str,
		maxDgram: o.MaxDatagramSize,
		local:    o.LocalAddr,
		remote:   o.RemoteAddr,
		done:     make(chan struct{}),
		recv:     make(chan []byte),
		wake:     make(chan struct{}, 1),
		dwake:    make(chan struct{}, 1),
		ended:    make(chan struct{}),
		finished: make(chan struct{}),
	}
	c.limit.Store(int64(c.cfg.MaxMessageSize))
	go c.readLoop()
	go c.writeLoop()
	return c
}

// Send implements transport.Conn.
func (c *Conn) Send(msg []byte) error {
	if len(msg) > c.cfg.MaxMessageSize {
		return transport.ErrMessageTooLarge
	}
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return transport.ErrClosed
	}
	if c.q.len() >= c.cfg.SendQueueMessages || c.qBytes+len(msg) > c.cfg.SendQueueBytes {
		const reason = "send queue overflow"
		c.shutLocked(transport.CloseSlowConsumer, reason, false)
		c.mu.Unlock()
		go c.closeBackend(transport.CloseSlowConsumer, reason) // Send never blocks
		return transport.ErrSlowConsumer
	}
	c.q.push(msg)
	c.qBytes += len(msg)
	c.mu.Unlock()
	select {
	case c.wake <- struct{}{}:
	default:
	}
	return nil
}

// SendDatagram implements transport.Conn.
func (c *Conn) SendDatagram(msg []byte) error {
	if c.maxDgram == 0 {
		return transport.ErrDatagramsUnsupported
	}
	if len(msg) > c.maxDgram {
		return transport.ErrMessageTooLarge
	}
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return transport.ErrClosed
	}
	if c.dq.len() >= c.cfg.DatagramQueue {
		c.dq.pop() // the oldest is the least useful
	}
	c.dq.push(msg)
	if !c.dStarted {
		c.dStarted = true
		go c.datagramLoop()
	}
	c.mu.Unlock()
	select {
	case c.dwake <- struct{}{}:
	default:
	}
	return nil
}

// Receive implements transport.Conn.
func (c *Conn) Receive(ctx context.Context) ([]byte, error) {
	select {
	case <-c.done:
		return nil, c.closeError()
	default:
	}
	select {
	case m := <-c.recv:
		// Read ahead before the limit was lowered.
		if limit := int(c.limit.Load()); len(m) > limit {
			c.Close(transport.CloseMessageTooLarge, (&tooLargeError{uint64(len(m)), uint64(limit)}).Error())
			return nil, c.closeError()
		}
		return m, nil
	case <-c.done:
		return nil, c.closeError()
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// SetReadLimit implements transport.ReadLimiter. The limit is read when a
// frame's header starts to arrive; a frame being read that is over it
// closes the connection at once.
func (c *Conn) SetReadLimit(n int) {
	if n <= 0 || n > c.cfg.MaxMessageSize {
		n = c.cfg.MaxMessageSize
	}
	c.limit.Store(int64(n))
	if m := c.inMsg.Load(); m > int64(n) {
		c.Close(transport.CloseMessageTooLarge, (&tooLargeError{uint64(m), uint64(n)}).Error())
	}
}

// ReceiveDatagram implements transport.Conn. It returns
// ErrDatagramsUnsupported at once when the connection has no datagrams.
func (c *Conn) ReceiveDatagram(ctx context.Context) ([]byte, error) {
	if c.maxDgram == 0 {
		return nil, transport.ErrDatagramsUnsupported
	}
	select {
	case <-c.done:
		return nil, c.closeError()
	default:
	}
	m, err := c.b.ReceiveDatagram(ctx)
	if err == nil {
		return m, nil
	}
	select {
	case <-c.done:
		return nil, c.closeError()
	default:
	}
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	c.Ended(err)
	return nil, c.closeError()
}

// Close implements transport.Conn. Done is closed at once; the messages
// already queued are still written to the stream before the network
// connection is closed. QUIC discards stream data the peer has not read
// when the connection closes, so Close ends the stream after the queued
// messages and waits for the peer to have read them, which it shows by
// ending its side of the stream in turn, before it closes the connection
// with code and reason: all in at most FlushTimeout, on a goroutine of its
// own.
func (c *Conn) Close(code transport.CloseCode, reason string) error {
	reason = TruncateReason(reason)
	c.mu.Lock()
	first := c.closeLocked(code, reason, false, true)
	var flushed chan struct{}
	if first {
		c.flushing = true
		c.flushed = make(chan struct{})
		flushed = c.flushed
	}
	c.mu.Unlock()
	if !first {
		return nil
	}
	select {
	case c.wake <- struct{}{}:
	default:
	}
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), FlushTimeout)
		defer cancel()
		select {
		case <-flushed:
		case <-ctx.Done():
		}
		select {
		case <-c.ended:
		case <-ctx.Done():
		}
		c.closeBackend(code, reason)
	}()
	return nil
}

// Ended closes c because the network connection or the stream ended with
// err; the Backend maps err to the close code. It does nothing if c is
// already closed.
func (c *Conn) Ended(err error) {
	c.endOnce.Do(func() { close(c.ended) })
	c.shut(c.b.MapError(err))
}

// shut closes c with code and reason, the backend's connection too, unless
// c is already closed.
func (c *Conn) shut(code transport.CloseCode, reason string, byPeer bool) {
	reason = TruncateReason(reason)
	c.mu.Lock()
	first := c.shutLocked(code, reason, byPeer)
	c.mu.Unlock()
	if first {
		c.closeBackend(code, reason)
	}
}

// closeBackend closes the backend's connection with code and reason,
// then finished.
func (c *Conn) closeBackend(code transport.CloseCode, reason string) {
	c.b.Close(code, reason)
	c.finishOnce.Do(func() { close(c.finished) })
}

// Finished implements transport.Finisher: it is closed once the network
// connection is closed with the close code, after the queued messages
// were written and read by the peer, for up to FlushTimeout.
func (c *Conn) Finished() <-chan struct{} { return c.finished }

var _ transport.Finisher = (*Conn)(nil)

// Done implements transport.Conn.
func (c *Conn) Done() <-chan struct{} { return c.done }

// CloseInfo implements transport.Conn.
func (c *Conn) CloseInfo() (transport.CloseCode, string, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.code, c.reason, c.byPeer
}

// MaxDatagramSize implements transport.Conn.
func (c *Conn) MaxDatagramSize() int { return c.maxDgram }

// LocalAddr implements transport.Conn.
func (c *Conn) LocalAddr() net.Addr { return c.local }

// RemoteAddr implements transport.Conn.
func (c *Conn) RemoteAddr() net.Addr { return c.remote }

// Backlog implements transport.Backlogger.
func (c *Conn) Backlog() (messages, bytes int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.q.len(), c.qBytes
}

// QueuedBytes returns the bytes queued by Send and not yet written.
func (c *Conn) QueuedBytes() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.qBytes
}

func (c *Conn) closeError() error {
	code, reason, byPeer := c.CloseInfo()
	return &transport.CloseError{Code: code, Reason: reason, ByPeer: byPeer}
}

// shutLocked records the close, discards the queues and wakes every
// goroutine; it reports whether this was the first close.
func (c *Conn) shutLocked(code transport.CloseCode, reason string, byPeer bool) bool {
	return c.closeLocked(code, reason, byPeer, false)
}

// closeLocked is shutLocked, keeping the message queue for the writer to
// flush if flush is set.
func (c *Conn) closeLocked(code transport.CloseCode, reason string, byPeer, flush bool) bool {
	if c.closed {
		return false
	}
	c.closed = true
	c.code, c.reason, c.byPeer = code, reason, byPeer
	if !flush {
		c.dropQueueLocked()
	}
	c.dq.reset()
	close(c.done)
	return true
}

// dropQueueLocked discards the messages not yet written; c.mu is held. A
// flush in progress ends after the message being written.
func (c *Conn) dropQueueLocked() {
	c.q.reset()
	c.qBytes = 0
	c.flushing = false
}

func (c *Conn) readLoop() {
	br := bufio.NewReaderSize(c.str, readBufferSize)
	for {
		// The limit in force when the frame starts to arrive.
		if _, err := br.Peek(1); err != nil {
			if err == io.EOF {
				c.peerEnded()
				return
			}
			c.Ended(err)
			return
		}
		n, err := readHeader(br, int(c.limit.Load()))
		if err != nil {
			var tl *tooLargeError
			switch {
			case errors.As(err, &tl):
				c.Close(transport.CloseMessageTooLarge, tl.Error())
			case errors.Is(err, errMalformed):
				c.Close(transport.CloseProtocolError, err.Error())
			default:
				c.Ended(err)
				return
			}
			// Discard the rest, to the peer's end of the stream, which
			// Close waits for.
			if _, err := io.Copy(io.Discard, br); err == nil {
				c.peerEnded()
			}
			return
		}
		c.inMsg.Store(int64(n))
		if limit := c.limit.Load(); int64(n) > limit { // lowered meanwhile
			c.inMsg.Store(0)
			c.Close(transport.CloseMessageTooLarge, (&tooLargeError{uint64(n), uint64(limit)}).Error())
			if _, err := io.Copy(io.Discard, br); err == nil {
				c.peerEnded()
			}
			return
		}
		msg, err := readBody(br, n)
		c.inMsg.Store(0)
		if err != nil {
			if err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			c.Ended(err)
			return
		}
		select {
		case c.recv <- msg:
		case <-c.done:
			// Closed here: read on, discarding, to the peer's end of the
			// stream, which tells Close the peer has read all.
		}
	}
}

// peerEnded handles the end of the peer's side of the stream, at a frame
// boundary: the peer is closing and has read everything we sent (or has
// closed already). Closed here, it is the answer Close waits for. Else the
// peer waits for us to end our side too before it closes the connection
// with its code and reason; if that close does not come within twice
// FlushTimeout (the peer gives up after one), the connection ends as if
// the stream had failed.
func (c *Conn) peerEnded() {
	c.endOnce.Do(func() { close(c.ended) })
	c.mu.Lock()
	closed := c.closed
	if !closed {
		c.finReq = true
	}
	c.mu.Unlock()
	if closed {
		return
	}
	select {
	case c.wake <- struct{}{}:
	default:
	}
	time.AfterFunc(2*FlushTimeout, func() { c.Ended(io.EOF) })
}

// Writes gather queued messages up to batchBytes into one stream write;
// a payload over directWrite is written from the caller's slice instead of
// being copied.
const (
	batchBytes    = 32 << 10
	batchMessages = 256
	directWrite   = 4 << 10
)

var writeBufs = sync.Pool{New: func() any { b := make([]byte, 0, batchBytes+2*binaryMaxVarintLen); return &b }}

const binaryMaxVarintLen = 10

func (c *Conn) writeLoop() {
	defer func() {
		c.mu.Lock()
		if c.flushed != nil {
			close(c.flushed)
			c.flushed = nil
		}
		c.mu.Unlock()
	}()
	var batch [][]byte
	for {
		select {
		case <-c.wake:
		case <-c.done:
		}
		for {
			c.mu.Lock()
			if c.closed && !c.flushing {
				c.mu.Unlock()
				return
			}
			n := c.q.len()
			if n == 0 || c.finReq {
				closed, fin := c.closed, c.flushing || c.finReq // and flushed
				c.flushing = false
				c.mu.Unlock()
				if fin {
					// The end of the stream tells the peer all is sent.
					if cl, ok := c.str.(io.Closer); ok {
						cl.Close()
					}
					return
				}
				if closed {
					return
				}
				break
			}
			size := 0
			for i := 0; i < n && len(batch) < batchMessages; i++ {
				m := c.q.at(i)
				if len(batch) > 0 && size+len(m) > batchBytes {
					break
				}
				batch = append(batch, m)
				size += len(m)
			}
			c.mu.Unlock()

			err := c.writeFrames(batch)

			c.mu.Lock()
			if !c.closed || c.flushing {
				c.q.drop(len(batch))
				c.qBytes -= size
			}
			c.mu.Unlock()
			clear(batch)
			batch = batch[:0]
			if err != nil {
				c.Ended(err)
				return
			}
		}
		if cap(batch) > 64 {
			batch = nil
		}
	}
}

func (c *Conn) writeFrames(msgs [][]byte) error {
	bp := writeBufs.Get().(*[]byte)
	defer writeBufs.Put(bp)
	buf := (*bp)[:0]
	defer func() { *bp = buf[:0] }()
	for _, m := range msgs {
		buf = appendHeader(buf, len(m))
		if len(m) <= directWrite {
			buf = append(buf, m...)
			continue
		}
		if _, err := c.str.Write(buf); err != nil {
			return err
		}
		buf = buf[:0]
		if _, err := c.str.Write(m); err != nil {
			return err
		}
	}
	if len(buf) > 0 {
		if _, err := c.str.Write(buf); err != nil {
			return err
		}
	}
	return nil
}

func (c *Conn) datagramLoop() {
	for {
		c.mu.Lock()
		if c.closed {
			c.mu.Unlock()
			return
		}
		if c.dq.len() == 0 {
			c.dq.shrink()
			c.mu.Unlock()
			select {
			case <-c.dwake:
			case <-c.done:
				return
			}
			continue
		}
		m := c.dq.pop()
		c.mu.Unlock()
		if err := c.b.SendDatagram(m); err != nil {
			if _, ok := errors.AsType[*quic.DatagramTooLargeError](err); ok {
				continue // the path shrank; datagrams may be lost anyway
			}
			c.Ended(err)
			return
		}
	}
}

// TruncateReason cuts reason to MaxReasonLen bytes on a UTF-8 boundary.
func TruncateReason(reason string) string {
	if len(reason) <= MaxReasonLen {
		return reason
	}
	i := MaxReasonLen
	for i > 0 && reason[i]&0xc0 == 0x80 {
		i--
	}
	return reason[:i]
}
