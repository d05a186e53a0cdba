package chaos_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/replicago/replica/session"
	"github.com/replicago/replica/transport"
)

// backlog measures, per client, the reliable messages the server has sent
// and the client has not yet received: an upper bound on what waits in the
// server's send queue, which closes the connection with CloseSlowConsumer
// beyond transport.Config.SendQueueMessages or SendQueueBytes (1024 and
// 4 MiB by default). It also times the keep-alive PINGs and their PONGs,
// which travel on the same stream, behind the ticks. Server and client
// conns are matched by the client's address.
type backlog struct {
	mu    sync.Mutex
	links map[string]*linkBacklog
}

type linkBacklog struct {
	sent, received           int // messages
	sentBytes, receivedBytes int
	peak, peakBytes          int

	// Session messages, as opposed to the segments that follow a TICK.
	down, up           sessionStream // server to client, client to server
	pings, pongs       map[uint64]time.Time
	maxPing, maxPong   time.Duration // the longest transit of one
	pingsSeen, pongsOK int

	// The server's lag logic (replica's lag.go) as seen through Backlog,
	// which the server calls for every connection at every tick: a pause
	// starts when the backlog passes lagMessages or lagBytes and ends once
	// it is down to an eighth. stall is the current pause's time since the
	// backlog last reached a new low; the server drops the client when
	// that exceeds Config.LagTimeout.
	paused   bool
	lagLow   int
	progress time.Time
	pauses   int
	maxStall time.Duration
}

// sessionStream tells session messages from the segments following a
// TICK, on one side of one direction.
type sessionStream struct{ segs [2]int } // [sender, receiver]: segments still expected

// classify returns the session message msg is, or nil for a segment.
func (s *sessionStream) classify(side int, msg []byte) any {
	if s.segs[side] > 0 {
		s.segs[side]--
		return nil
	}
	m, err := session.Parse(msg)
	if err != nil {
		return nil
	}
	if t, ok := m.(*session.Tick); ok {
		s.segs[side] = t.Segments
	}
	return m
}

func (b *backlog) link(clientAddr string) *linkBacklog {
	if b.links == nil {
		b.links = map[string]*linkBacklog{}
	}
	l := b.links[clientAddr]
	if l == nil {
		l = &linkBacklog{}
		b.links[clientAddr] = l
	}
	return l
}

func (b *backlog) sent(clientAddr string, msg []byte) {
	b.mu.Lock()
	defer b.mu.Unlock()
	l := b.link(clientAddr)
	l.sent++
	l.sentBytes += len(msg)
	l.peak = max(l.peak, l.sent-l.received)
	l.peakBytes = max(l.peakBytes, l.sentBytes-l.receivedBytes)
	if m, ok := l.down.classify(0, msg).(*session.Ping); ok {
		if l.pings == nil {
			l.pings = map[uint64]time.Time{}
		}
		l.pings[m.Nonce] = time.Now()
	}
}

func (b *backlog) received(clientAddr string, msg []byte) {
	b.mu.Lock()
	defer b.mu.Unlock()
	l := b.link(clientAddr)
	l.received++
	l.receivedBytes += len(msg)
	if m, ok := l.down.classify(1, msg).(*session.Ping); ok {
		if at, ok := l.pings[m.Nonce]; ok {
			l.maxPing = max(l.maxPing, time.Since(at))
			l.pingsSeen++
		}
	}
}

func (b *backlog) pongSent(clientAddr string, msg []byte) {
	b.mu.Lock()
	defer b.mu.Unlock()
	l := b.link(clientAddr)
	if m, ok := l.up.classify(0, msg).(*session.Pong); ok {
		if l.pongs == nil {
			l.pongs = map[uint64]time.Time{}
		}
		l.pongs[m.Nonce] = time.Now()
	}
}

func (b *backlog) pongReceived(clientAddr string, msg []byte) {
	b.mu.Lock()
	defer b.mu.Unlock()
	l := b.link(clientAddr)
	if m, ok := l.up.classify(1, msg).(*session.Pong); ok {
		if at, ok := l.pongs[m.Nonce]; ok {
			l.maxPong = max(l.maxPong, time.Since(at))
			l.pongsOK++
		}
	}
}

// lag follows the server's lag logic for one connection, from the backlog
// the server just read.
func (b *backlog) lag(clientAddr string, msgs, bytes int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	l := b.link(clientAddr)
	switch {
	case !l.paused:
		if msgs > lagMessages || bytes > lagBytes {
			l.paused, l.lagLow, l.progress = true, msgs, time.Now()
			l.pauses++
		}
	case msgs > lagMessages/8 || bytes > lagBytes/8:
		if msgs < l.lagLow {
			l.lagLow, l.progress = msgs, time.Now()
		}
		l.maxStall = max(l.maxStall, time.Since(l.progress))
	default:
		l.paused = false
	}
}

// stalls returns the longest a paused client's backlog went without
// shrinking, over every client, and the number of pauses.
func (b *backlog) stalls() (pauses int, longest time.Duration) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, l := range b.links {
		pauses += l.pauses
		longest = max(longest, l.maxStall)
	}
	return pauses, longest
}

// summary lists each client's peak backlog, in the given address order.
func (b *backlog) summary(addrs []string) string {
	b.mu.Lock()
	defer b.mu.Unlock()
	var parts []string
	for _, a := range addrs {
		if l := b.links[a]; l != nil {
			parts = append(parts, fmt.Sprintf("%d msgs/%d B, PING transit max %v (%d), PONG max %v (%d), %d pauses, longest without progress %v",
				l.peak, l.peakBytes, l.maxPing.Round(time.Millisecond), l.pingsSeen, l.maxPong.Round(time.Millisecond), l.pongsOK,
				l.pauses, l.maxStall.Round(time.Millisecond)))
		}
	}
	return strings.Join(parts, "; ")
}

// listener wraps a server's listener to count what it sends.
func (b *backlog) listener(ln transport.Listener) transport.Listener {
	return backlogListener{ln, b}
}

type backlogListener struct {
	transport.Listener
	b *backlog
}

func (l backlogListener) Accept(ctx context.Context) (transport.Conn, error) {
	c, err := l.Listener.Accept(ctx)
	if err != nil {
		return nil, err
	}
	return serverCounting{c, l.b, c.RemoteAddr().String()}, nil
}

type serverCounting struct {
	transport.Conn
	b    *backlog
	addr string
}

// Backlog forwards transport.Backlogger, which the server relies on to
// notice a client falling behind.
func (c serverCounting) Backlog() (messages, bytes int) {
	bl, ok := c.Conn.(transport.Backlogger)
	if !ok {
		return 0, 0
	}
	messages, bytes = bl.Backlog()
	c.b.lag(c.addr, messages, bytes)
	return messages, bytes
}

func (c serverCounting) Send(msg []byte) error {
	err := c.Conn.Send(msg)
	if err == nil {
		c.b.sent(c.addr, msg)
	}
	return err
}

func (c serverCounting) Receive(ctx context.Context) ([]byte, error) {
	msg, err := c.Conn.Receive(ctx)
	if err == nil {
		c.b.pongReceived(c.addr, msg)
	}
	return msg, err
}

// dialer wraps a client's dialer to count what it receives.
func (b *backlog) dialer(d transport.Dialer) transport.Dialer { return backlogDialer{d, b} }

type backlogDialer struct {
	d transport.Dialer
	b *backlog
}

func (d backlogDialer) Dial(ctx context.Context, addr string) (transport.Conn, error) {
	c, err := d.d.Dial(ctx, addr)
	if err != nil {
		return nil, err
	}
	return clientCounting{c, d.b, c.LocalAddr().String()}, nil
}

type clientCounting struct {
	transport.Conn
	b    *backlog
	addr string
}

func (c clientCounting) Receive(ctx context.Context) ([]byte, error) {
	msg, err := c.Conn.Receive(ctx)
	if err == nil {
		c.b.received(c.addr, msg)
	}
	return msg, err
}

func (c clientCounting) Send(msg []byte) error {
	err := c.Conn.Send(msg)
	if err == nil {
		c.b.pongSent(c.addr, msg)
	}
	return err
}
