package client

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/replicago/replica/codec"
	"github.com/replicago/replica/schema"
	"github.com/replicago/replica/session"
	"github.com/replicago/replica/state"
	"github.com/replicago/replica/transport"
)

// DialConfig configures Dial. The zero value is valid.
type DialConfig struct {
	// Token is the connect token the server's authenticator checks.
	Token []byte
	// Refresh, if set, gives Reconnect a fresh token: connect tokens are
	// short-lived, and one that was valid at Dial may have expired by the
	// time the client reconnects. If nil, Reconnect sends Token again.
	Refresh func(ctx context.Context) ([]byte, error)
	// Limits bound what the replica accepts from the server. They travel
	// in the HELLO: a server that may send more (its
	// Config.ClientLimits) refuses the session, naming the limit.
	Limits codec.Limits
	// HandshakeTimeout bounds the handshake. The default is 5 seconds.
	HandshakeTimeout time.Duration
	// Buffer is the number of received ticks held for Poll before the
	// connection stops reading (and the server eventually drops a client
	// that never polls). The default is 256.
	Buffer int
	// IdleTimeout closes the connection with CloseIdleTimeout when the
	// server sends nothing (no tick, no ping) for this long. The default
	// is 15 seconds.
	IdleTimeout time.Duration
	// NoResume makes Reconnect start a new session with the full state
	// instead of asking the server to resume the old one.
	NoResume bool
}

// RefusedError is returned by Dial when the server declines the session.
type RefusedError struct {
	Code    transport.CloseCode
	Message string
}

func (e *RefusedError) Error() string {
	return fmt.Sprintf("client: server refused the session: %s: %s", e.Code, e.Message)
}

// A Conn is a session with a replica server: a Replica kept up to date by
// the ticks the server sends. Received ticks queue up until the game
// applies them with Poll on its own goroutine, where callbacks run.
type Conn struct {
	dialer  transport.Dialer
	addr    string
	cfg     DialConfig
	tc      transport.Conn
	r       *Replica
	welcome session.Welcome
	ticks   chan tick
	last    uint64 // the last tick applied
	applied bool   // a tick of this session's state has been applied: its replica can resume

	mu  sync.Mutex
	err error // why reading stopped

	enc      codec.Encoder // RPC arguments
	handlers map[rpcKey][]*rpcHandler
}

type rpcKey struct {
	class *schema.Struct
	rpc   uint32
}

type rpcHandler struct {
	fn func(e *state.Entity, args *state.Record)
}

// Dial connects to a server, performs the handshake and starts receiving.
// local is the client's own schema (the Schema() of its generated package);
// the server's may be a newer compatible version.
func Dial(ctx context.Context, d transport.Dialer, addr string, local *schema.Schema, cfg DialConfig) (*Conn, error) {
	if d == nil || local == nil {
		return nil, errors.New("client: Dial needs a transport.Dialer and the client's schema (its generated package's Schema())")
	}
	if cfg.HandshakeTimeout <= 0 {
		cfg.HandshakeTimeout = 5 * time.Second
	}
	if cfg.Buffer <= 0 {
		cfg.Buffer = 256
	}
	if cfg.IdleTimeout <= 0 {
		cfg.IdleTimeout = 15 * time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, cfg.HandshakeTimeout)
	defer cancel()
	tc, err := d.Dial(ctx, addr)
	if err != nil {
		return nil, err
	}
	c, err := handshake(ctx, tc, local, cfg, nil, nil, nil)
	if err != nil {
		tc.Close(transport.CloseNormal, "handshake failed")
		return nil, err
	}
	c.dialer, c.addr, c.cfg = d, addr, cfg
	go c.read(cfg.IdleTimeout)
	go c.keepAlive(c.tc, cfg.IdleTimeout)
	return c, nil
}

// keepAlive pings the server every third of the idle timeout until tc
// closes. The server answers, but the point is the PING itself: the
// client→server direction is never stuck behind a backlog of ticks, so a
// client that lags on a slow network still shows the server it is alive.
func (c *Conn) keepAlive(tc transport.Conn, idle time.Duration) {
	t := time.NewTicker(idle / 3)
	defer t.Stop()
	var nonce uint64
	for {
		select {
		case <-tc.Done():
			return
		case <-t.C:
			nonce++
			tc.Send(session.AppendPing(nil, &session.Ping{Nonce: nonce}))
		}
	}
}

// Reconnect closes the session, if it is still open, and starts a new one
// with the same server, keeping the Replica and its callbacks. Call it on
// the goroutine that polls; ticks not yet polled from the old session are
// dropped.
//
// Reconnect first asks the server to resume the session
// (docs/protocol.md §10.5): it sends the session's ticket, the last tick
// applied and what the replica holds, and a server that accepts (within
// its Config.ResumeWindow of the old session's end) sends one catch-up
// tick with what changed since: callbacks then report only those
// changes. Otherwise, or with DialConfig.NoResume, the replica is reset
// (see Replica.Reset) and the new session's first tick is the full
// state. Resumed reports which happened.
func (c *Conn) Reconnect(ctx context.Context) error {
	c.tc.Close(transport.CloseNormal, "reconnecting")
	for range c.ticks {
		// Drain until the old reader has stopped.
	}
	cfg := c.cfg
	if cfg.Refresh != nil {
		token, err := cfg.Refresh(ctx)
		if err != nil {
			return fmt.Errorf("client: refreshing the token: %w", err)
		}
		cfg.Token = token
	}
	ctx, cancel := context.WithTimeout(ctx, c.cfg.HandshakeTimeout)
	defer cancel()
	tc, err := c.dialer.Dial(ctx, c.addr)
	if err != nil {
		return err
	}
	var resume *session.Resume
	if !cfg.NoResume && !c.welcome.Ticket.IsZero() && c.applied && c.r.Len() <= session.MaxResume {
		resume = c.resumeBlock()
	}
	n, err := handshake(ctx, tc, c.r.local, cfg, c.r, resume, c.welcome.Descriptor)
	if err != nil {
		tc.Close(transport.CloseNormal, "handshake failed")
		return err
	}
	c.mu.Lock()
	c.tc, c.welcome, c.ticks, c.err = n.tc, n.welcome, n.ticks, nil
	if !n.welcome.Resumed {
		c.last, c.applied = 0, false
	}
	c.mu.Unlock()
	go c.read(c.cfg.IdleTimeout)
	go c.keepAlive(c.tc, c.cfg.IdleTimeout)
	return nil
}

// resumeBlock returns what the replica holds, for a HELLO that resumes the
// session (docs/protocol.md §10.5).
func (c *Conn) resumeBlock() *session.Resume {
	ents := c.r.Entities(nil)
	held := make([]session.Held, len(ents))
	for i, e := range ents {
		level, all := e.Level()
		if all {
			level = session.MaxLevel // every band, whatever the class has
		}
		held[i] = session.Held{ID: uint32(e.ID()), Level: uint8(level), Owned: e.Owned()}
	}
	slices.SortFunc(held, func(a, b session.Held) int { return cmp.Compare(a.ID&(1<<24-1), b.ID&(1<<24-1)) })
	return &session.Resume{Ticket: c.welcome.Ticket, Tick: c.last, Held: held}
}

// handshake runs the client side of the handshake. With keep set, the new
// session reuses that replica: as it is if resume is set and the server
// resumes the session, else reset for the server's schema. prev is the
// descriptor of keep's session, which a resumed one must have.
func handshake(ctx context.Context, tc transport.Conn, local *schema.Schema, cfg DialConfig, keep *Replica, resume *session.Resume, prev []byte) (*Conn, error) {
	lim := cfg.Limits
	if keep != nil {
		lim = keep.dec.Limits()
	}
	hello := &session.Hello{Version: session.ProtocolVersion, Descriptor: local.AppendDescriptor(nil), Token: cfg.Token,
		Limits: lim, Resume: resume}
	if err := tc.Send(session.AppendHello(nil, hello)); err != nil {
		return nil, err
	}
	msg, err := tc.Receive(ctx)
	if err != nil {
		// The close carries the same code and reason as the REFUSE, which
		// a transport may drop once the connection closes.
		var ce *transport.CloseError
		if errors.As(err, &ce) && ce.ByPeer {
			return nil, &RefusedError{Code: ce.Code, Message: ce.Reason}
		}
		return nil, fmt.Errorf("client: handshake: %w", err)
	}
	m, err := session.Parse(msg)
	if err != nil {
		return nil, fmt.Errorf("client: handshake: %w", err)
	}
	switch m := m.(type) {
	case *session.Refuse:
		return nil, &RefusedError{Code: transport.CloseCode(m.Code), Message: m.Message}
	case *session.Welcome:
		if m.Version != session.ProtocolVersion {
			return nil, fmt.Errorf("client: server speaks protocol %d, this client %d", m.Version, session.ProtocolVersion)
		}
		if m.Resumed {
			// The replica goes on as it is: the first tick is a catch-up
			// decoded against the same schema.
			if resume == nil || keep == nil || !bytes.Equal(m.Descriptor, prev) {
				tc.Close(transport.CloseProtocolError, "unexpected resume")
				return nil, errors.New("client: handshake: WELCOME resumes a session the client did not ask to resume, or with another schema")
			}
			return &Conn{tc: tc, r: keep, welcome: *m, ticks: make(chan tick, cfg.Buffer)}, nil
		}
		remote, err := schema.DecodeDescriptor(m.Descriptor)
		if err != nil {
			return nil, fmt.Errorf("client: server schema: %w", err)
		}
		r := keep
		if r == nil {
			r, err = New(local, Config{Remote: remote, Limits: cfg.Limits})
		} else {
			err = r.Reset(remote)
		}
		if err != nil {
			return nil, err
		}
		return &Conn{tc: tc, r: r, welcome: *m, ticks: make(chan tick, cfg.Buffer)}, nil
	}
	return nil, fmt.Errorf("client: handshake: expected WELCOME, got %T", m)
}

// read receives messages until the connection closes: ticks are queued
// for Poll, pings answered.
func (c *Conn) read(idle time.Duration) {
	defer close(c.ticks)
	rx := transport.NewIdleReceiver(c.tc, idle, "nothing received from the server")
	receive := func() ([]byte, error) {
		msg, err := rx.Receive()
		if err != nil && rx.TimedOut() {
			err = fmt.Errorf("client: nothing received from the server for %v: %w", idle, context.DeadlineExceeded)
		}
		return msg, err
	}
	resync := false // a RESYNC came: the next tick is the full state
	for {
		msg, err := receive()
		if err != nil {
			c.stop(err)
			return
		}
		var m any
		var k session.Tick // a TICK, parsed without allocating for it
		if len(msg) > 0 && session.Type(msg[0]) == session.TypeTick {
			k, err = session.ParseTick(msg)
		} else {
			m, err = session.Parse(msg)
		}
		if err != nil {
			c.tc.Close(transport.CloseProtocolError, err.Error())
			c.stop(err)
			return
		}
		switch m := m.(type) {
		case nil: // the TICK in k
			segs := make([][]byte, k.Segments)
			for i := range segs {
				if segs[i], err = receive(); err != nil {
					c.stop(err)
					return
				}
			}
			t := tick{n: k.Tick, segs: segs, resync: resync, gained: ids(k.Gained), lost: ids(k.Lost), levels: levels(k.Levels)}
			resync = false
			select {
			case c.ticks <- t:
			case <-c.tc.Done():
				c.stop(transport.ErrClosed)
				return
			}
		case *session.Ping:
			c.tc.Send(session.AppendPong(nil, &session.Pong{Nonce: m.Nonce}))
		case *session.Pong:
		case *session.Resync:
			// The server paused this client and now sends the full
			// state: the next tick resets the replica before it applies,
			// in one step, so Poll never shows an empty replica.
			resync = true
		case *session.RPC:
			// In order with the ticks: Poll runs it after the tick it
			// followed.
			select {
			case c.ticks <- tick{rpc: msg}:
			case <-c.tc.Done():
				c.stop(transport.ErrClosed)
				return
			}
		default:
			c.tc.Close(transport.CloseProtocolError, fmt.Sprintf("unexpected %T", m))
			c.stop(fmt.Errorf("client: unexpected %T from the server", m))
			return
		}
	}
}

func (c *Conn) stop(err error) {
	c.mu.Lock()
	if c.err == nil {
		c.err = err
	}
	c.mu.Unlock()
}

// Replica returns the client's replica. Read it, and register callbacks,
// on the goroutine that calls Poll.
func (c *Conn) Replica() *Replica { return c.r }

// UserID returns the user the server authenticated.
func (c *Conn) UserID() string { return c.welcome.UserID }

// TickRate returns the server's ticks per second.
func (c *Conn) TickRate() int { return int(c.welcome.TickRate) }

// Poll applies every tick received so far, in order, firing callbacks on
// the calling goroutine, runs the server RPCs that came with them, and
// returns how many ticks it applied (RPCs are not counted). It returns an
// error once the connection has closed and every received tick has been
// applied, or if a tick does not decode (the connection is then closed
// with a protocol error: the replica keeps the last good state).
func (c *Conn) Poll() (int, error) {
	n := 0
	for {
		select {
		case t, ok := <-c.ticks:
			if !ok {
				return n, c.closedErr()
			}
			if err := c.apply(t); err != nil {
				return n, err
			}
			if t.rpc == nil {
				n++
			}
		default:
			return n, nil
		}
	}
}

// tick is a tick's segments (after a reset, for a resync), or an RPC
// message.
type tick struct {
	n            uint64
	segs         [][]byte
	gained, lost []state.ID // ownership changes
	levels       []Level    // level-of-detail changes
	rpc          []byte
	resync       bool
}

// ids converts the network IDs of a TICK.
func ids(v []uint32) []state.ID {
	if len(v) == 0 {
		return nil
	}
	out := make([]state.ID, len(v))
	for i, id := range v {
		out[i] = state.ID(id)
	}
	return out
}

func levels(v []session.Level) []Level {
	if len(v) == 0 {
		return nil
	}
	out := make([]Level, len(v))
	for i, l := range v {
		out[i] = Level{ID: state.ID(l.ID), Level: l.Level}
	}
	return out
}

func (c *Conn) apply(t tick) error {
	if t.rpc != nil {
		return c.run(t.rpc)
	}
	if t.resync {
		// Callbacks see every entity destroyed, then created again by
		// the full state this tick carries.
		if err := c.r.Reset(c.r.remote); err != nil {
			return err
		}
	}
	if err := c.r.ApplyTickInfo(TickInfo{Gained: t.gained, Lost: t.lost, Levels: t.levels}, t.segs...); err != nil {
		c.tc.Close(transport.CloseProtocolError, "bad tick")
		c.applied = false // the next session starts over with the full state (docs/protocol.md §10.4)
		return err
	}
	c.last, c.applied = t.n, true
	return nil
}

// LastTick returns the number of the last tick applied (0 before the
// first).
func (c *Conn) LastTick() uint64 { return c.last }

// Resumed reports whether the session resumed the one before it
// (Reconnect): its first tick was a catch-up, not the full state.
func (c *Conn) Resumed() bool { return c.welcome.Resumed }

// Wait blocks until a tick or a server RPC has arrived, or ctx is done, or
// the connection has closed, and then polls. It returns the number of
// ticks applied, which is 0 if only RPCs came. Its error ends a game's
// loop: ctx's error, or the reason the session ended once every tick
// received before has been applied.
func (c *Conn) Wait(ctx context.Context) (int, error) {
	select {
	case t, ok := <-c.ticks:
		if !ok {
			return 0, c.closedErr()
		}
		if err := c.apply(t); err != nil {
			return 0, err
		}
		n, err := c.Poll()
		if t.rpc == nil {
			n++
		}
		return n, err
	case <-ctx.Done():
		return 0, ctx.Err()
	}
}

func (c *Conn) closedErr() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err != nil {
		return c.err
	}
	return transport.ErrClosed
}

// Done is closed when the connection closes.
func (c *Conn) Done() <-chan struct{} { return c.tc.Done() }

// CloseInfo reports why the connection closed (see transport.Conn).
func (c *Conn) CloseInfo() (transport.CloseCode, string, bool) { return c.tc.CloseInfo() }

// Close leaves the session: it tells the server and returns once that is
// sent (transport.Finisher), waiting at most closeWait, so that a program
// exiting right after Close is seen to leave, not to lose its connection.
func (c *Conn) Close() error {
	tc := c.tc
	err := tc.Close(transport.CloseNormal, "client left")
	ctx, cancel := context.WithTimeout(context.Background(), closeWait)
	defer cancel()
	transport.AwaitFinished(ctx, tc) // past closeWait, the goodbye is the transport's to finish
	return err
}

// closeWait bounds how long Close waits for the server to be told.
const closeWait = 2 * time.Second

// ErrRefused reports whether err is a refusal by the server.
func ErrRefused(err error) bool {
	var r *RefusedError
	return errors.As(err, &r)
}

// Errors of CallRPC.
var (
	ErrNoRPC = errors.New("client: no such client RPC")
	// ErrNotOwned is returned for a call on an entity the replica does
	// not hold as owned, as of the last tick applied: a nil entity (the
	// zero view of a generated class, before the client has its avatar),
	// an entity of another replica, or one another client owns. The
	// server would close the connection for such a call
	// (transport.ClosePolicyViolation).
	ErrNotOwned = errors.New("client: RPC on an entity this client does not own")
	// ErrRPCTooLarge is returned for a call whose message is over the
	// largest the server accepts (its WELCOME says; replica's
	// Config.MaxRPCBytes, 16 KiB by default): sent, it would close the
	// connection (transport.CloseMessageTooLarge). Nothing is sent.
	ErrRPCTooLarge = errors.New("client: RPC over the server's message limit")
)

// CallRPC calls client→server RPC rpc on e, an entity this client owns,
// with the given arguments (a record of the RPC's argument struct). It
// returns when the call is queued; the server runs it at its next tick.
// Call it from the goroutine that polls.
func (c *Conn) CallRPC(e *state.Entity, rpc uint32, args *state.Record) error {
	if e == nil || c.r.Entity(e.ID()) != e || !e.Owned() {
		return fmt.Errorf("%w: entity %v", ErrNotOwned, e.ID())
	}
	r := e.Class().RPC(rpc)
	if r == nil || r.Dir != schema.ClientToServer || args == nil || args.Type() != r.Args {
		return fmt.Errorf("%w: %d on %s", ErrNoRPC, rpc, e.Class().Name)
	}
	msg := session.AppendRPC(nil, &session.RPC{Entity: uint32(e.ID()), RPC: rpc, Args: c.enc.AppendRecord(nil, args)})
	if max := c.welcome.MaxMessage; max > 0 && len(msg) > int(max) {
		return fmt.Errorf("%w: %s on %s is %d bytes, the server takes %d", ErrRPCTooLarge, r.Name, e.Class().Name, len(msg), max)
	}
	return c.tc.Send(msg)
}

// HandleRPC registers h to run, on the polling goroutine, for every
// server→client RPC rpc on an entity of class. args is valid only during
// the call. It returns a func that unregisters h.
func (c *Conn) HandleRPC(class *schema.Struct, rpc uint32, h func(e *state.Entity, args *state.Record)) (cancel func()) {
	if c.handlers == nil {
		c.handlers = make(map[rpcKey][]*rpcHandler)
	}
	k := rpcKey{class, rpc}
	hd := &rpcHandler{fn: h}
	c.handlers[k] = append(c.handlers[k], hd)
	return func() {
		hs := c.handlers[k]
		for i, x := range hs {
			if x == hd {
				c.handlers[k] = append(hs[:i:i], hs[i+1:]...)
				return
			}
		}
	}
}

// run dispatches one server RPC. An RPC on an entity this client does
// not have (destroyed since) or without a handler is dropped; one that
// does not decode closes the connection.
func (c *Conn) run(msg []byte) error {
	m, err := session.ParseRPC(msg)
	if err != nil {
		c.tc.Close(transport.CloseProtocolError, "bad RPC")
		return err
	}
	e := c.r.Entity(state.ID(m.Entity))
	if e == nil {
		return nil
	}
	hs := c.handlers[rpcKey{e.Class(), m.RPC}]
	if len(hs) == 0 {
		return nil
	}
	local := e.Class().RPC(m.RPC)
	var remote *schema.RPC
	if rc := c.r.remote.Class(e.Class().ID); rc != nil {
		remote = rc.RPC(m.RPC)
	}
	if local == nil || remote == nil || remote.Dir != schema.ServerToClient {
		c.tc.Close(transport.CloseProtocolError, "unknown RPC")
		return fmt.Errorf("client: server sent unknown RPC %d on %s", m.RPC, e.Class().Name)
	}
	args, err := c.r.dec.DecodeRecord(remote.Args, local.Args, m.Args)
	if err != nil {
		c.tc.Close(transport.CloseProtocolError, "bad RPC arguments")
		return err
	}
	for _, h := range hs {
		h.fn(e, args)
	}
	return nil
}
