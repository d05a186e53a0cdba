package replica

import (
	"context"
	"errors"
	"fmt"
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

// A Conn is one client's session on a server.
//
// Its fields are laid out by use: what every tick reads of every client
// first (the first 64 bytes, then the interest state and the held
// entities, then this tick's ownership changes), what a session's start
// and its RPCs read after. In a large zone the clients' records do not
// stay in the CPU's caches from one tick to the next, and each line a tick
// reads of each client is a cache miss per client and tick. (The
// allocator starts a record of this size after a header, at no fixed
// place in a line: the first 64 bytes take one or two lines.)
type Conn struct {
	tc       transport.Conn
	backlog  transport.Backlogger // tc's, if it reports its backlog (lag.go)
	budget   float64              // bytes per second; < 0: none (Config.Budget, Server.SetBudget)
	tokens   float64              // bytes it may be sent now; negative after a burst
	rpcWait  atomic.Bool          // rpcIn holds messages: dispatch passes over a connection without, unlocked
	releases bool                 // tc is a transport.Releaser (lag.go)
	joined   bool
	admitted bool // in the tick: Server.conns
	left     bool // closed, being reaped (Server.reap)
	paused   bool // fallen behind: no ticks until the backlog drains

	view view // interest state (interest.go)
	// held is what the client holds, when it gets nothing but its pairs
	// (no room): its update sections name entities by rank in it.
	held codec.Held

	// This tick's ownership changes (Server.moved): the IDs its TICK
	// lists, and the entities it gets the partition fields of whole.
	gained, lost       []uint32
	levels             []session.Level // this tick's level-of-detail changes (docs/protocol.md §5.8)
	rpcOut             []outRPC        // RPC messages for the client, sent after the tick
	changes            state.Changeset // this tick's changes of entities the connection owns
	gainFull, loseFull []*state.Entity

	srv      *Server
	rpcMu    sync.Mutex
	rpcIn    [][]byte // RPC messages, read goroutine → tick goroutine; nil until the first
	rpcBuf   [][]byte // the tick goroutine's spare, swapped with rpcIn
	identity auth.Identity
	userID   string
	id       uint64
	login    uint64              // the login it continues: id, or the resumed session's (Config.LoginGrace)
	ticket   session.Ticket      // resumes this session (resume.go); zero if the server does not resume
	resume   *session.Resume     // what it holds, until its catch-up is sent
	whole    func(state.ID) bool // with resume: the entities its catch-up sends whole (resume.go)
	sets     []setMark           // the sets its budget sent, the last ones (resume.go)
	setsFrom uint64              // sets lists every set sent after this tick
	replaced atomic.Bool         // closed by a newer session of its user (claim)
	fullTick uint64              // the tick that sent it the full state as a joiner
	lostAt   map[state.ID]uint64 // the tick it lost each entity, for lostGrace

	schema  *schema.Schema // the client's, from its HELLO
	dec     *codec.Decoder // client's schema → server's, for RPC arguments
	limiter ratelimit.Limiter

	lagLow   int       // the smallest backlog (bytes) seen while paused
	progress time.Time // when the backlog last reached a new low
}

// Server returns the server c is a session of.
func (c *Conn) Server() *Server { return c.srv }

// handshake runs the server side of the session handshake. The cheap
// checks come first: the handshake caps, the HELLO's size (the transport's
// read limit, set by Serve), the protocol version, the descriptor's size
// and the token; only then is the client's descriptor decoded.
func (s *Server) handshake(ctx context.Context, tc transport.Conn) {
	// Close sends the REFUSE before it closes (transport.Conn), so the
	// client reads the whole message, not only the close's reason, which
	// a transport may cut.
	refuse := func(code transport.CloseCode, msg string) {
		s.cfg.Logger.Info("replica: refused", "remote", tc.RemoteAddr(), "code", code, "reason", msg)
		msg = session.ClipText(msg) // what a REFUSE may carry
		tc.Send(session.AppendRefuse(nil, &session.Refuse{Code: uint16(code), Message: msg}))
		tc.Close(code, msg)
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		tc.Close(transport.CloseGoingAway, "server closed")
		return
	}
	from, busy := s.shakes.Admit(tc.RemoteAddr())
	if busy == "" {
		s.handshaking[tc] = true
	}
	s.mu.Unlock()
	if busy != "" {
		refuse(transport.CloseServerBusy, busy) // at once, without waiting for the client
		return
	}
	defer func() {
		s.mu.Lock()
		delete(s.handshaking, tc)
		s.shakes.Done(from)
		s.mu.Unlock()
	}()
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
			// A HELLO over MaxHelloBytes ends here: the transport has
			// closed with CloseMessageTooLarge.
			tc.Close(transport.CloseProtocolError, "handshake failed")
			s.cfg.Logger.Info("replica: handshake failed", "remote", tc.RemoteAddr(), "err", err)
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
		// The error may say more than the client should learn (the
		// server's clock, which key failed): it goes to the log only.
		s.cfg.Logger.Info("replica: authentication failed", "remote", tc.RemoteAddr(), "err", err)
		refuse(transport.CloseAuthFailed, auth.Refusal(err))
		return
	}
	clientSchema, err := schema.DecodeDescriptor(hello.Descriptor)
	if err == nil {
		// The client decodes what the server encodes.
		err = schema.CompatibleAs(clientSchema, s.cfg.Schema, "in the client", "in the server")
		if err != nil {
			err = fmt.Errorf("%w: build the client from the server's schema (replicagen's code, -ts for TypeScript)", err)
		}
	}
	if err != nil {
		refuse(transport.CloseIncompatible, "schema: "+err.Error())
		return
	}
	if err := hello.Limits.Below(s.cfg.ClientLimits); err != nil {
		// This client would refuse ticks the server may send, and come
		// back to the same full state in a loop.
		refuse(transport.CloseIncompatible, "client limits: "+err.Error()+" (the server's Config.ClientLimits)")
		return
	}
	user := id.UserID
	dec, err := codec.NewDecoder(s.cfg.Schema, clientSchema, codec.Limits{})
	if err != nil {
		refuse(transport.CloseIncompatible, "schema: "+err.Error())
		return
	}
	// Authenticated: from now on the client sends RPCs, PINGs and PONGs,
	// so messages up to Config.MaxRPCBytes, from before the client can
	// have read the WELCOME.
	if rl, ok := tc.(transport.ReadLimiter); ok {
		rl.SetReadLimit(s.cfg.MaxRPCBytes)
	}
	c := &Conn{srv: s, tc: tc, identity: id, userID: user, id: s.session.Add(1),
		schema: clientSchema, dec: dec, budget: float64(s.cfg.Budget),
		limiter: ratelimit.NewLimiter(ratelimit.Policy{Rate: s.cfg.RPCRate, Burst: s.cfg.RPCBurst})}
	c.login = c.id
	// Asked once: an interface assertion in every tick may allocate (the
	// runtime's caches of them grow at random calls).
	c.backlog, _ = tc.(transport.Backlogger)
	_, c.releases = tc.(transport.Releaser)
	if !s.claim(c) {
		refuse(transport.CloseDuplicate, "this user already has a session")
		return
	}
	resumed := s.admitResume(c, hello.Resume)
	err = tc.Send(session.AppendWelcome(nil, &session.Welcome{Version: session.ProtocolVersion,
		Descriptor: s.desc, Session: c.id, UserID: user, TickRate: uint32(s.cfg.TickRate),
		Ticket: c.ticket, Resumed: resumed, MaxMessage: uint32(min(s.cfg.MaxRPCBytes, 1<<31-1))}))
	if err != nil {
		s.release(c)
		s.dropTicket(c)
		return
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		s.release(c)
		s.dropTicket(c)
		tc.Close(transport.CloseGoingAway, "server closed")
		return
	}
	s.joining = append(s.joining, c)
	s.mu.Unlock()
	s.cfg.Logger.Info("replica: joined", "user", user, "session", c.id, "remote", tc.RemoteAddr(), "resumed", resumed)
	go s.read(c)
}

// read serves one connection's incoming messages until it closes: pings
// are answered, silence past IdleTimeout closes the connection, and
// anything a client may not send closes it with a protocol error.
func (s *Server) read(c *Conn) {
	rx := transport.NewIdleReceiver(c.tc, s.cfg.IdleTimeout, "nothing received")
	for {
		msg, err := rx.Receive()
		if err != nil {
			return
		}
		if len(msg) > s.cfg.MaxRPCBytes {
			// A transport that cannot bound its reads (ReadLimiter)
			// read it whole: refused all the same.
			c.tc.Close(transport.CloseMessageTooLarge, fmt.Sprintf("message of %d bytes over the server's limit of %d (Config.MaxRPCBytes)", len(msg), s.cfg.MaxRPCBytes))
			return
		}
		if len(msg) > 0 && session.Type(msg[0]) == session.TypeRPC {
			ok, kick := c.limiter.AllowN(time.Now(), rpcWeight(len(msg)))
			if kick {
				c.kick(transport.ClosePolicyViolation, "RPC flood")
				return
			}
			if !ok {
				s.rpcsDropped.Add(1) // over the rate: dropped
				continue
			}
			c.rpcMu.Lock()
			full := len(c.rpcIn) >= s.rpcQueue()
			if !full {
				c.rpcIn = append(c.rpcIn, msg) // checked and parsed at the tick
				c.rpcWait.Store(true)
			}
			c.rpcMu.Unlock()
			if full {
				// Only a tick goroutine that has not dispatched for about
				// a second lets an honest client fill the queue: the call
				// is dropped, as over the rate, and the client stays.
				s.rpcsDropped.Add(1)
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

func (c *Conn) kick(code transport.CloseCode, reason string) {
	c.srv.cfg.Logger.Warn("replica: kicked", "user", c.userID, "session", c.id, "code", code, "reason", reason)
	c.srv.kicked.Add(1)
	c.tc.Close(code, reason)
}

// closed reports whether c's connection is closed, by either side.
func (c *Conn) closed() bool {
	select {
	case <-c.tc.Done():
		return true
	default:
		return false
	}
}

// UserID returns the authenticated user of the connection.
func (c *Conn) UserID() string { return c.userID }

// Identity returns what the authenticator established about the client.
func (c *Conn) Identity() auth.Identity { return c.identity }

// Session returns the session ID the server assigned.
func (c *Conn) Session() uint64 { return c.id }

// Resumed reports whether the session resumes one of the same user that
// ended within Config.ResumeWindow (docs/protocol.md §10.5): its client
// kept its replica and gets a catch-up instead of the full state. OnJoin
// runs for it as for any session; ownership is not carried over, so
// OnJoin gives the user's entities back (SetOwner) rather than spawning
// new ones: the catch-up lists only the ownership that differs from what
// the client held.
func (c *Conn) Resumed() bool { return c.login != c.id }

// Close disconnects the client with the given code and reason.
func (c *Conn) Close(code transport.CloseCode, reason string) error {
	return c.tc.Close(code, reason)
}
