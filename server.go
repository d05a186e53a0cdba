package replica

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/replicago/replica/auth"
	"github.com/replicago/replica/codec"
	"github.com/replicago/replica/ratelimit"
	"github.com/replicago/replica/schema"
	"github.com/replicago/replica/session"
	"github.com/replicago/replica/state"
	"github.com/replicago/replica/transport"
)

// Config configures a Server. Schema is required; the zero value of every
// other field selects its default.
type Config struct {
	// Schema holds the replicated classes: the Schema() of a generated
	// package.
	Schema *schema.Schema
	// TickRate is the number of ticks per second Run drives. The default
	// is 20.
	TickRate int
	// Auth authenticates clients from the token of their HELLO; see
	// auth.HMAC for signed, expiring tokens. If nil, every client is
	// accepted anonymously (auth.Anonymous), which suits development only.
	Auth auth.Authenticator
	// HandshakeTimeout bounds the time from accepting a connection to
	// receiving its HELLO. The default is 5 seconds.
	HandshakeTimeout time.Duration
	// IdleTimeout closes a connection that sends nothing for this long.
	// The default is 15 seconds; the server pings every IdleTimeout/3.
	IdleTimeout time.Duration
	// Logger receives connection events. The default discards them.
	Logger *slog.Logger
	// OnJoin runs on the tick goroutine when a connection joins, before it
	// receives the full state: spawn its avatar and SetOwner here.
	OnJoin func(*Conn)
	// OnLeave runs on the tick goroutine after a connection closed; the
	// entities it owned are still there and no longer owned.
	OnLeave func(*Conn)
	// RPCRate and RPCBurst bound the RPCs one client may send: RPCRate per
	// second on average, RPCBurst at once. Calls over the limit are
	// dropped, and a client that keeps flooding is closed with
	// ClosePolicyViolation within about two seconds. The defaults are 60
	// per second and a burst of ten seconds' worth: calls made at an honest
	// rate arrive bunched after a network stall, and must not be dropped
	// for it.
	RPCRate  float64
	RPCBurst int
	// MaxDescriptorBytes bounds the schema descriptor a client may send in
	// its HELLO; larger ones are refused before they are decoded. The
	// default is four times the server's own, and at least 64 KiB.
	MaxDescriptorBytes int
	// LagMessages and LagBytes are the backlog (what the connection has
	// queued and not yet written) past which a client counts as fallen
	// behind: the server stops sending it ticks, holds its RPCs, and once
	// the backlog has drained to an eighth sends RESYNC and the full
	// state. Keep them under the transport's SendQueueMessages and
	// SendQueueBytes, or the queue overflows first and the client is
	// dropped as a slow consumer. The defaults are 512 messages and 1 MiB,
	// half and a quarter of the transports' defaults.
	LagMessages int
	LagBytes    int
	// LagTimeout drops, as a slow consumer, a paused client whose backlog
	// has not shrunk for this long: one that has stopped reading, as
	// opposed to one draining slowly over a poor network. The default is
	// 30 seconds.
	LagTimeout time.Duration
}

func (c Config) withDefaults() Config {
	if c.TickRate <= 0 {
		c.TickRate = 20
	}
	if c.HandshakeTimeout <= 0 {
		c.HandshakeTimeout = 5 * time.Second
	}
	if c.IdleTimeout <= 0 {
		c.IdleTimeout = 15 * time.Second
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Auth == nil {
		c.Auth = auth.Anonymous{}
	}
	if c.RPCRate <= 0 {
		c.RPCRate = 60
	}
	if c.LagMessages <= 0 {
		c.LagMessages = 512
	}
	if c.LagBytes <= 0 {
		c.LagBytes = 1 << 20
	}
	if c.LagTimeout <= 0 {
		c.LagTimeout = 30 * time.Second
	}
	if c.RPCBurst < 2 {
		c.RPCBurst = int(10 * c.RPCRate)
	}
	return c
}

// ErrServerClosed is returned by Serve after Close.
var ErrServerClosed = errors.New("replica: server closed")

// A Server owns the world of one space: its entities, the connections that
// watch them and the tick that sends every change. Game code mutates
// entities on the tick goroutine (in the function given to Run, or between
// calls to Tick); connections are accepted and served on goroutines of
// their own, and join or leave at the next tick.
type Server struct {
	cfg     Config
	tr      *state.Tracker
	enc     codec.Encoder
	desc    []byte // the schema descriptor sent to clients
	tick    uint64
	session atomic.Uint64
	kicked  atomic.Uint64

	mu          sync.Mutex
	joining     []*Conn
	handshaking map[transport.Conn]bool
	closed      bool
	lns         []transport.Listener

	conns    []*Conn // joined; owned by the tick goroutine
	owners   []*Conn // by entity slot
	seg      [][]byte
	scratch  []byte
	handlers map[rpcKey]RPCHandler
	lastPing time.Time
	rpcEnc   codec.Encoder
	stats    Stats
}

type rpcKey struct {
	class *schema.Struct
	rpc   uint32
}

// Stats counts what a server has done since it started. Read it on the
// tick goroutine.
type Stats struct {
	RPCs         uint64 // client RPCs handled
	RPCsRejected uint64 // refused by their handler or without one
	RPCsStale    uint64 // aimed at an entity that no longer exists
	RPCsSent     uint64 // server RPCs queued for clients
	Kicked       uint64 // connections closed for misbehaving
	Paused       uint64 // times a client fell behind and was paused
	Resyncs      uint64 // paused clients brought back with the full state
}

// A Conn is one client's session on a server.
type Conn struct {
	srv      *Server
	tc       transport.Conn
	identity auth.Identity
	userID   string
	id       uint64
	joined   bool
	changes  state.Changeset // this tick's changes of entities the connection owns

	schema  *schema.Schema // the client's, from its HELLO
	dec     *codec.Decoder // client's schema → server's, for RPC arguments
	limiter ratelimit.Limiter
	rpcMu   sync.Mutex
	rpcIn   [][]byte // RPC messages, read goroutine → tick goroutine; nil until the first
	rpcBuf  [][]byte // the tick goroutine's spare, swapped with rpcIn
	rpcOut  [][]byte // RPC messages for the client, sent after the tick

	paused   bool      // fallen behind: no ticks until the backlog drains
	lagLow   int       // the smallest backlog (messages) seen while paused
	progress time.Time // when the backlog last reached a new low
}

// UserID returns the authenticated user of the connection.
func (c *Conn) UserID() string { return c.userID }

// Identity returns what the authenticator established about the client.
func (c *Conn) Identity() auth.Identity { return c.identity }

// Session returns the session ID the server assigned.
func (c *Conn) Session() uint64 { return c.id }

// Close disconnects the client with the given code and reason.
func (c *Conn) Close(code transport.CloseCode, reason string) error {
	return c.tc.Close(code, reason)
}

// NewServer returns a server for cfg.Schema.
func NewServer(cfg Config) (*Server, error) {
	if cfg.Schema == nil {
		return nil, errors.New("replica: Config.Schema is required")
	}
	cfg = cfg.withDefaults()
	desc := cfg.Schema.AppendDescriptor(nil)
	if cfg.MaxDescriptorBytes <= 0 {
		cfg.MaxDescriptorBytes = max(64<<10, 4*len(desc))
	}
	return &Server{cfg: cfg, tr: state.NewTracker(cfg.Schema), desc: desc, handshaking: map[transport.Conn]bool{}}, nil
}

// Tracker returns the server's entity tracker: spawn, find and destroy
// entities through it, on the tick goroutine.
func (s *Server) Tracker() *state.Tracker { return s.tr }

// SetOwner makes c the owner of e (nil for none): c receives e's
// owner-only fields, the others do not, and c may call its RPCs. Call it
// on the tick goroutine; ownership ends when e is destroyed.
func (s *Server) SetOwner(e *state.Entity, c *Conn) { s.setOwner(e, c) }

func (s *Server) setOwner(e *state.Entity, c *Conn) {
	slot := int(e.ID().Slot())
	for len(s.owners) <= slot {
		s.owners = append(s.owners, nil)
	}
	s.owners[slot] = c
}

// Owner returns the connection that owns e, or nil.
func (s *Server) Owner(e *state.Entity) *Conn { return s.ownerOf(e) }

func (s *Server) ownerOf(e *state.Entity) *Conn {
	if slot := int(e.ID().Slot()); slot < len(s.owners) {
		return s.owners[slot]
	}
	return nil
}

// Serve accepts connections from ln until ctx is done or the server is
// closed. Each connection is handshaken on its own goroutine and joins at
// the next tick.
func (s *Server) Serve(ctx context.Context, ln transport.Listener) error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return ErrServerClosed
	}
	s.lns = append(s.lns, ln)
	s.mu.Unlock()
	for {
		tc, err := ln.Accept(ctx)
		if err != nil {
			s.mu.Lock()
			closed := s.closed
			s.mu.Unlock()
			if closed {
				return ErrServerClosed
			}
			return err
		}
		go s.handshake(ctx, tc)
	}
}

// handshake runs the server side of the session handshake. The cheap
// checks come first: the protocol version, the descriptor's size and the
// token; only then is the client's descriptor decoded.
func (s *Server) handshake(ctx context.Context, tc transport.Conn) {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		tc.Close(transport.CloseGoingAway, "server closed")
		return
	}
	s.handshaking[tc] = true
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.handshaking, tc)
		s.mu.Unlock()
	}()
	refuse := func(code transport.CloseCode, msg string) {
		tc.Send(session.AppendRefuse(nil, &session.Refuse{Code: uint16(code), Message: msg}))
		tc.Close(code, msg)
		s.cfg.Logger.Info("replica: refused", "remote", tc.RemoteAddr(), "code", code, "reason", msg)
	}
	hctx, cancel := context.WithTimeout(ctx, s.cfg.HandshakeTimeout)
	msg, err := tc.Receive(hctx)
	cancel()
	if err != nil {
		s.mu.Lock()
		closed := s.closed
		s.mu.Unlock()
		switch {
		case closed || ctx.Err() != nil:
			tc.Close(transport.CloseGoingAway, "server shutting down")
		case errors.Is(err, context.DeadlineExceeded):
			refuse(transport.CloseHandshakeTimeout, "no HELLO in time")
		default:
			tc.Close(transport.CloseProtocolError, "handshake failed")
		}
		return
	}
	m, err := session.Parse(msg)
	hello, ok := m.(*session.Hello)
	switch {
	case err != nil:
		refuse(transport.CloseProtocolError, err.Error())
		return
	case !ok:
		refuse(transport.CloseProtocolError, "expected HELLO")
		return
	case hello.Version != session.ProtocolVersion:
		refuse(transport.CloseIncompatible, fmt.Sprintf("protocol version %d, server speaks %d", hello.Version, session.ProtocolVersion))
		return
	}
	if len(hello.Descriptor) > s.cfg.MaxDescriptorBytes {
		refuse(transport.CloseIncompatible, fmt.Sprintf("schema descriptor of %d bytes, over the server's limit of %d", len(hello.Descriptor), s.cfg.MaxDescriptorBytes))
		return
	}
	id, err := s.cfg.Auth.Authenticate(ctx, hello.Token)
	if err != nil {
		refuse(transport.CloseAuthFailed, err.Error())
		return
	}
	clientSchema, err := schema.DecodeDescriptor(hello.Descriptor)
	if err == nil {
		// The client decodes what the server encodes.
		err = schema.Compatible(clientSchema, s.cfg.Schema)
	}
	if err != nil {
		refuse(transport.CloseIncompatible, "schema: "+err.Error())
		return
	}
	user := id.UserID
	dec, err := codec.NewDecoder(s.cfg.Schema, clientSchema, codec.Limits{})
	if err != nil {
		refuse(transport.CloseIncompatible, "schema: "+err.Error())
		return
	}
	c := &Conn{srv: s, tc: tc, identity: id, userID: user, id: s.session.Add(1),
		schema: clientSchema, dec: dec,
		limiter: ratelimit.NewLimiter(ratelimit.Policy{Rate: s.cfg.RPCRate, Burst: s.cfg.RPCBurst})}
	err = tc.Send(session.AppendWelcome(nil, &session.Welcome{Version: session.ProtocolVersion,
		Descriptor: s.desc, Session: c.id, UserID: user, TickRate: uint32(s.cfg.TickRate)}))
	if err != nil {
		return
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		tc.Close(transport.CloseGoingAway, "server closed")
		return
	}
	s.joining = append(s.joining, c)
	s.mu.Unlock()
	s.cfg.Logger.Info("replica: joined", "user", user, "session", c.id, "remote", tc.RemoteAddr())
	go s.read(c)
}

// read serves one connection's incoming messages until it closes: pings
// are answered, silence past IdleTimeout closes the connection, and
// anything a client may not send closes it with a protocol error.
func (s *Server) read(c *Conn) {
	for {
		ctx, cancel := context.WithTimeout(context.Background(), s.cfg.IdleTimeout)
		msg, err := c.tc.Receive(ctx)
		cancel()
		if errors.Is(err, context.DeadlineExceeded) {
			c.tc.Close(transport.CloseIdleTimeout, "nothing received")
			return
		}
		if err != nil {
			return
		}
		if len(msg) > 0 && session.Type(msg[0]) == session.TypeRPC {
			ok, kick := c.limiter.Allow(time.Now())
			if kick {
				c.kick(transport.ClosePolicyViolation, "RPC flood")
				return
			}
			if !ok {
				continue // over the rate: dropped
			}
			c.rpcMu.Lock()
			full := len(c.rpcIn) >= rpcQueue
			if !full {
				c.rpcIn = append(c.rpcIn, msg) // checked and parsed at the tick
			}
			c.rpcMu.Unlock()
			if full {
				c.kick(transport.ClosePolicyViolation, "RPC queue overflow")
				return
			}
			continue
		}
		m, err := session.Parse(msg)
		switch m := m.(type) {
		case *session.Ping:
			c.tc.Send(session.AppendPong(nil, &session.Pong{Nonce: m.Nonce}))
		case *session.Pong:
			// Liveness only: receiving it reset the idle timer.
		default:
			reason := "clients send no state"
			if err != nil {
				reason = err.Error()
			}
			c.tc.Close(transport.CloseProtocolError, reason)
			return
		}
	}
}

// Tick ends the current tick: it commits the changeset, encodes it once per
// partition and sends every connection its TICK with the segments it may
// see. Connections that joined since the last tick get the full state
// instead. Tick must be called from the goroutine that mutates entities.
//
// Segments are shared: every client gets the same PartAll bytes, and
// every client gets the same PartOthers bytes unless one of its own
// entities changed a field of that partition, in which case it gets a
// copy without its own entities. PartOwner is encoded per owner, from the
// owner's changes only, so a tick costs O(changes + connections).
func (s *Server) Tick() {
	// Joiners first: what OnJoin spawns belongs to this tick, which the
	// joiners receive as their full state and everyone else as creates.
	s.admit()
	s.dispatch()
	cs := s.tr.Commit()
	s.tick++

	// Transports keep a reference to what they send until it is written,
	// so each tick's segments are fresh slices.
	all := s.enc.Delta(nil, cs, codec.PartAll, nil)
	others := s.enc.Delta(nil, cs, codec.PartOthers, nil)

	// Bucket the changes by owning connection.
	for _, c := range s.conns {
		c.changes.Changes = c.changes.Changes[:0]
	}
	for _, ch := range cs.Changes {
		if o := s.ownerOf(ch.Entity); o != nil && o.joined {
			o.changes.Changes = append(o.changes.Changes, ch)
		}
	}
	// Ping every third of the idle timeout, by the clock: ticks may be
	// slow or manual.
	now := time.Now()
	ping := now.Sub(s.lastPing) >= s.cfg.IdleTimeout/3
	if ping {
		s.lastPing = now
	}
	for _, c := range s.conns {
		if !c.joined {
			s.sendFull(c)
			s.flushRPCs(c)
			continue
		}
		if s.behind(c) {
			continue
		}
		segs := append(s.seg[:0], all, others)
		if len(c.changes.Changes) > 0 {
			c.changes.Schema, c.changes.Tick = cs.Schema, cs.Tick
			segs = append(segs, s.enc.Delta(nil, &c.changes, codec.PartOwner, nil))
			// Its own entities changed: does the shared PartOthers
			// mention them? Then this client needs a copy without them.
			if s.scratch = s.enc.Delta(s.scratch[:0], &c.changes, codec.PartOthers, nil); !empty(s.scratch) {
				notMine := func(e *state.Entity) bool { return s.ownerOf(e) != c }
				segs[1] = s.enc.Delta(nil, cs, codec.PartOthers, notMine)
			}
		}
		s.send(c, segs)
		s.flushRPCs(c)
		if ping {
			c.tc.Send(session.AppendPing(nil, &session.Ping{Nonce: s.tick}))
		}
	}
	// A destroyed entity's slot may be reused from the next tick on: it
	// belongs to nobody.
	for _, ch := range cs.Changes {
		if ch.Destroyed {
			s.setOwner(ch.Entity, nil)
		}
	}
	s.reap()
}

// admit moves handshaken connections into the tick.
func (s *Server) admit() {
	s.mu.Lock()
	joining := s.joining
	s.joining = nil
	s.mu.Unlock()
	s.conns = append(s.conns, joining...)
	if s.cfg.OnJoin != nil {
		for _, c := range joining {
			s.cfg.OnJoin(c)
		}
	}
}

// sendFull sends a joining connection the full state.
func (s *Server) sendFull(c *Conn) {
	all := s.tr.AppendEntities(nil)
	var mine, others []*state.Entity
	for _, e := range all {
		if s.ownerOf(e) == c {
			mine = append(mine, e)
		} else {
			others = append(others, e)
		}
	}
	segs := [][]byte{
		s.enc.Full(nil, all, codec.PartAll),
		s.enc.Full(nil, others, codec.PartOthers),
		s.enc.Full(nil, mine, codec.PartOwner),
	}
	c.joined = true
	s.send(c, segs)
}

// send writes a TICK and its segments, leaving out empty ones. A failed
// send has already closed the connection; reap removes it.
func (s *Server) send(c *Conn, segs [][]byte) {
	n := 0
	for _, seg := range segs {
		if !empty(seg) {
			segs[n] = seg
			n++
		}
	}
	if c.tc.Send(session.AppendTick(nil, &session.Tick{Tick: s.tick, Segments: n})) != nil {
		return
	}
	for _, seg := range segs[:n] {
		if c.tc.Send(seg) != nil {
			return
		}
	}
}

func empty(seg []byte) bool { return len(seg) == 1 && seg[0] == 0 }

// reap drops closed connections and their ownerships.
func (s *Server) reap() {
	live := s.conns[:0]
	for _, c := range s.conns {
		select {
		case <-c.tc.Done():
			for i, o := range s.owners {
				if o == c {
					s.owners[i] = nil
				}
			}
			code, reason, byPeer := c.tc.CloseInfo()
			s.cfg.Logger.Info("replica: left", "user", c.userID, "session", c.id, "code", code, "reason", reason, "by_peer", byPeer)
			if s.cfg.OnLeave != nil {
				s.cfg.OnLeave(c)
			}
		default:
			live = append(live, c)
		}
	}
	clear(s.conns[len(live):])
	s.conns = live
}

// TickNumber returns the number of the last tick sent.
func (s *Server) TickNumber() uint64 { return s.tick }

// Conns returns the connections that have joined, for the tick goroutine.
func (s *Server) Conns() []*Conn { return s.conns }

// Run drives the tick loop at the configured rate until ctx is done:
// update runs game logic for the tick, then the tick is sent.
func (s *Server) Run(ctx context.Context, update func(tick uint64)) error {
	t := time.NewTicker(time.Second / time.Duration(s.cfg.TickRate))
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
			if update != nil {
				update(s.tick + 1)
			}
			s.Tick()
		}
	}
}

// Close stops the listeners and disconnects every client with
// CloseGoingAway, including those still in their handshake; OnLeave runs
// for every joined one. Call it from the tick goroutine (or after Run
// returns).
func (s *Server) Close() error {
	s.mu.Lock()
	s.closed = true
	lns := s.lns
	joining := s.joining
	s.joining = nil
	var shaking []transport.Conn
	for tc := range s.handshaking {
		shaking = append(shaking, tc)
	}
	s.mu.Unlock()
	for _, ln := range lns {
		ln.Close()
	}
	for _, tc := range shaking {
		tc.Close(transport.CloseGoingAway, "server shutting down")
	}
	for _, c := range joining {
		c.tc.Close(transport.CloseGoingAway, "server shutting down")
	}
	for _, c := range s.conns {
		c.tc.Close(transport.CloseGoingAway, "server shutting down")
		if s.cfg.OnLeave != nil {
			s.cfg.OnLeave(c)
		}
	}
	s.conns = nil
	return nil
}

// rpcQueue bounds the RPCs a connection may have waiting for the tick.
const rpcQueue = 256

func (c *Conn) kick(code transport.CloseCode, reason string) {
	c.srv.cfg.Logger.Warn("replica: kicked", "user", c.userID, "session", c.id, "code", code, "reason", reason)
	c.srv.kicked.Add(1)
	c.tc.Close(code, reason)
}

// RPCHandler handles a client→server RPC on the tick goroutine. e is the
// entity it was called on, which c owns; args holds the arguments and is
// valid only during the call. Returning an error refuses the call: it is
// counted in Stats.RPCsRejected and logged, and has no other effect.
type RPCHandler func(c *Conn, e *state.Entity, args *state.Record) error

// HandleRPC registers h for RPC rpc of class. Register handlers before
// serving.
func (s *Server) HandleRPC(class *schema.Struct, rpc uint32, h RPCHandler) {
	if s.handlers == nil {
		s.handlers = make(map[rpcKey]RPCHandler)
	}
	s.handlers[rpcKey{class, rpc}] = h
}

// dispatch runs the handlers of the RPCs that arrived since the last tick,
// connection by connection, each connection's in arrival order.
func (s *Server) dispatch() {
	for _, c := range s.conns {
		select {
		case <-c.tc.Done():
			continue // gone: its pending calls are dropped with it
		default:
		}
		c.rpcMu.Lock()
		in := c.rpcIn
		c.rpcIn = c.rpcBuf[:0]
		c.rpcMu.Unlock()
		for i, msg := range in {
			s.call(c, msg)
			in[i] = nil
		}
		c.rpcBuf = in[:0]
	}
}

// call checks and runs one client RPC. A call the client could not have
// made in good faith closes its connection: a malformed message, an RPC
// the class does not have or that only the server may send, or an entity
// it does not own. A call on an entity that has since been destroyed is
// dropped: the client could not have known.
func (s *Server) call(c *Conn, msg []byte) {
	m, err := session.ParseRPC(msg)
	if err != nil {
		c.kick(transport.CloseProtocolError, err.Error())
		return
	}
	e := s.tr.Entity(state.ID(m.Entity))
	if e == nil {
		s.stats.RPCsStale++
		return
	}
	rpc := e.Class().RPC(m.RPC)
	var remote *schema.RPC
	if rc := c.schema.Class(e.Class().ID); rc != nil {
		remote = rc.RPC(m.RPC)
	}
	switch {
	case rpc == nil || remote == nil || rpc.Dir != schema.ClientToServer:
		c.kick(transport.CloseProtocolError, fmt.Sprintf("no client RPC %d on %s", m.RPC, e.Class().Name))
		return
	case s.ownerOf(e) != c:
		c.kick(transport.ClosePolicyViolation, fmt.Sprintf("RPC %s on an entity the client does not own", rpc.Name))
		return
	}
	args, err := c.dec.DecodeRecord(remote.Args, rpc.Args, m.Args)
	if err != nil {
		c.kick(transport.CloseProtocolError, "RPC arguments: "+err.Error())
		return
	}
	h := s.handlers[rpcKey{e.Class(), m.RPC}]
	if h == nil {
		s.stats.RPCsRejected++
		return
	}
	if err := h(c, e, args); err != nil {
		s.stats.RPCsRejected++
		s.cfg.Logger.Debug("replica: RPC refused", "user", c.userID, "rpc", rpc.Name, "err", err)
		return
	}
	s.stats.RPCs++
}

// RPCTarget says which clients a server RPC goes to.
type RPCTarget struct {
	kind uint8
	conn *Conn
}

// RPC targets.
var (
	ToOwner     = RPCTarget{kind: 1} // the entity's owner
	ToObservers = RPCTarget{kind: 2} // every client that sees the entity
)

// ToConn targets one connection.
func ToConn(c *Conn) RPCTarget { return RPCTarget{kind: 3, conn: c} }

// Errors of SendRPC.
var (
	ErrNoRPC    = errors.New("replica: no such server RPC")
	ErrNoTarget = errors.New("replica: RPC target has no connection")
)

// SendRPC sends server→client RPC rpc on e with the given arguments (a
// record of the RPC's argument struct) to the clients of to. Call it on
// the tick goroutine. The arguments are encoded once; every target
// receives the call after the state of the current tick, so an entity
// created in the same tick already exists on the client.
func (s *Server) SendRPC(to RPCTarget, e *state.Entity, rpc uint32, args *state.Record) error {
	r := e.Class().RPC(rpc)
	if r == nil || r.Dir != schema.ServerToClient || args.Type() != r.Args {
		return fmt.Errorf("%w: %d on %s", ErrNoRPC, rpc, e.Class().Name)
	}
	msg := session.AppendRPC(nil, &session.RPC{Entity: uint32(e.ID()), RPC: rpc, Args: s.rpcEnc.AppendRecord(nil, args)})
	queue := func(c *Conn) {
		c.rpcOut = append(c.rpcOut, msg)
		s.stats.RPCsSent++
	}
	switch to.kind {
	case 1:
		c := s.ownerOf(e)
		if c == nil {
			return ErrNoTarget
		}
		queue(c)
	case 2:
		for _, c := range s.conns {
			queue(c)
		}
	case 3:
		if to.conn == nil {
			return ErrNoTarget
		}
		queue(to.conn)
	default:
		return ErrNoTarget
	}
	return nil
}

// flushRPCs sends the RPCs queued for c during this tick.
func (s *Server) flushRPCs(c *Conn) {
	for i, msg := range c.rpcOut {
		if c.tc.Send(msg) != nil {
			break
		}
		c.rpcOut[i] = nil
	}
	c.rpcOut = c.rpcOut[:0]
}

// Stats returns the server's counters.
func (s *Server) Stats() Stats {
	st := s.stats
	st.Kicked = s.kicked.Load()
	return st
}

// maxHeldRPCs bounds the server RPCs held for a paused client.
const maxHeldRPCs = 4096

// behind reports whether c gets no regular tick now: it has fallen behind
// (its backlog passed LagMessages or LagBytes) and is paused, or it has
// just caught up and was sent RESYNC and the full state instead. The
// client keeps applying what is queued; its replica reaches the server's
// state at the resync. RPCs for it are held while it is paused and sent
// after the full state, so none overtakes the state it was sent against.
func (s *Server) behind(c *Conn) bool {
	bl, ok := c.tc.(transport.Backlogger)
	if !ok {
		return false
	}
	msgs, bytes := bl.Backlog()
	if !c.paused {
		if msgs <= s.cfg.LagMessages && bytes <= s.cfg.LagBytes {
			return false
		}
		c.paused, c.lagLow, c.progress = true, msgs, time.Now()
		s.stats.Paused++
		s.cfg.Logger.Info("replica: client fell behind; paused", "user", c.userID, "session", c.id, "messages", msgs, "bytes", bytes)
		return true
	}
	if msgs > s.cfg.LagMessages/8 || bytes > s.cfg.LagBytes/8 {
		if msgs < c.lagLow {
			c.lagLow, c.progress = msgs, time.Now()
		}
		if time.Since(c.progress) > s.cfg.LagTimeout || len(c.rpcOut) > maxHeldRPCs {
			c.kick(transport.CloseSlowConsumer, "fell behind and stopped catching up")
		}
		return true
	}
	c.paused = false
	s.stats.Resyncs++
	if c.tc.Send(session.AppendResync(nil)) == nil {
		s.sendFull(c)
		s.flushRPCs(c)
	}
	return true
}
