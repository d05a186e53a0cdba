package replay

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"sync"
	"time"

	"github.com/replicago/replica"
	"github.com/replicago/replica/auth"
	"github.com/replicago/replica/client"
	"github.com/replicago/replica/codec"
	"github.com/replicago/replica/schema"
	"github.com/replicago/replica/session"
	"github.com/replicago/replica/transport"
)

// PlayerConfig configures a Player. The zero value is valid.
type PlayerConfig struct {
	// ClientLimits are what the recording's segments, and the full states
	// the player encodes, stay within; a client whose limits are lower is
	// refused, as a server refuses it. Zero fields select codec's
	// defaults, which a recorder with default limits records within.
	ClientLimits codec.Limits
	// HandshakeTimeout bounds a client's handshake. The default is 5
	// seconds.
	HandshakeTimeout time.Duration
	// MaxHandshakes bounds the connections waiting for their HELLO at
	// once, and MaxHandshakesPerAddr those from one source address (IP);
	// one over either is refused at once with CloseServerBusy. The
	// defaults are a server's: 512 and 32.
	MaxHandshakes        int
	MaxHandshakesPerAddr int
	// Auth, if set, authenticates clients from the token of their HELLO,
	// as a server's Config.Auth does: one it refuses is refused with
	// CloseAuthFailed and a generic reason (auth.Refusal), and a
	// spectator's user ID is its identity's. Nil admits every client as
	// "spectator": a recording is then for whoever may reach the player,
	// and Serve logs a warning on an address that is not loopback.
	Auth auth.Authenticator
	// Ping is how often the player pings its clients, which close a
	// session they hear nothing from (a paused one, say) for their idle
	// timeout. The default is 5 seconds.
	Ping time.Duration
	// IdleTimeout closes a session that sends nothing, not even the
	// answer to a PING, for this long: a client gone without closing,
	// or one that only takes. The default is 15 seconds or three Pings,
	// whichever is longer; it must be longer than Ping.
	IdleTimeout time.Duration
	// Logger receives the player's refusals (Info) and warnings. Nil
	// passes warnings and errors to slog.Default and drops the rest.
	Logger *slog.Logger
}

// ErrPlayerClosed is returned by Serve and Run after Close.
var ErrPlayerClosed = errors.New("replay: Player closed")

// spectatorMaxMessage is the largest message a spectator may send: it
// sends nothing but PINGs and PONGs (9 bytes).
const spectatorMaxMessage = 64

// A Player serves a recording to clients through the session protocol,
// as if they were spectators of the recorded server: each client gets the
// full state at the playhead when it joins or the playhead jumps (Seek),
// then the recorded ticks as they are played (Step, Run).
//
// The Player keeps a replica at the playhead, which every tick played is
// applied to before it is sent: a recording whose segments do not decode
// stops playback with an error rather than reaching the clients.
type Player struct {
	cfg    PlayerConfig
	rd     *Reader
	remote *schema.Schema
	h      Header

	mu       sync.Mutex
	head     *client.Replica // the state at tick
	tick     uint64          // the playhead
	cur      *Cursor
	peek     *record // the record after the playhead, read ahead
	full     *fuller
	fullMsgs [][]byte // the full state at tick, encoded for the first joiner; nil until then
	sessions map[*psession]struct{}
	nextID   uint64
	paused   bool
	speed    float64
	closed   bool
	shakes   transport.HandshakeCaps // the connections waiting for their HELLO
	wake     chan struct{}           // Run waits on it for a resume or a speed change
}

type record struct {
	kind byte
	f    Frame
}

type psession struct {
	tc transport.Conn
}

// NewPlayer returns a player of the recording rd, its playhead at the
// recording's first tick.
func NewPlayer(rd *Reader, cfg PlayerConfig) (*Player, error) {
	if cfg.HandshakeTimeout <= 0 {
		cfg.HandshakeTimeout = 5 * time.Second
	}
	if cfg.Ping <= 0 {
		cfg.Ping = 5 * time.Second
	}
	if cfg.MaxHandshakes <= 0 {
		cfg.MaxHandshakes = transport.DefaultMaxHandshakes
	}
	if cfg.MaxHandshakesPerAddr <= 0 {
		cfg.MaxHandshakesPerAddr = transport.DefaultMaxHandshakesPerAddr
	}
	if cfg.IdleTimeout <= 0 {
		cfg.IdleTimeout = max(15*time.Second, 3*cfg.Ping)
	}
	if cfg.IdleTimeout <= cfg.Ping {
		return nil, fmt.Errorf("replay: PlayerConfig.IdleTimeout %v must be longer than Ping %v, or a client answering every PING would be closed", cfg.IdleTimeout, cfg.Ping)
	}
	if cfg.Logger == nil {
		cfg.Logger = replica.DefaultLogger()
	}
	cfg.ClientLimits = cfg.ClientLimits.WithDefaults()
	h := rd.Header()
	remote, err := schema.DecodeDescriptor(h.Descriptor)
	if err != nil {
		return nil, formatErr(0, ErrCorrupt, "schema descriptor: %v", err)
	}
	head, err := client.New(remote, client.Config{Remote: remote, Limits: cfg.ClientLimits})
	if err != nil {
		return nil, err
	}
	p := &Player{cfg: cfg, rd: rd, remote: remote, h: h, head: head, full: newFuller(remote, cfg.ClientLimits),
		sessions: make(map[*psession]struct{}), speed: 1, wake: make(chan struct{}, 1),
		shakes: transport.HandshakeCaps{Max: cfg.MaxHandshakes, MaxPerAddr: cfg.MaxHandshakesPerAddr}}
	if err := p.seek(rd.FirstTick()); err != nil {
		return nil, err
	}
	return p, nil
}

// Schema returns the recorded server's schema, as its clients saw it.
func (p *Player) Schema() *schema.Schema { return p.remote }

// Tick returns the playhead: the last tick played.
func (p *Player) Tick() uint64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.tick
}

// Replica returns the player's replica at the playhead. Read it only
// while the player is not playing (no Step, Seek or Run running).
func (p *Player) Replica() *client.Replica { return p.head }

// Seek moves the playhead to tick (the last tick recorded at or before
// it, if the recorded server skipped some): the player applies the ticks
// after the keyframe at or before tick to its replica, and every client
// is sent RESYNC and the full state at the new playhead.
func (p *Player) Seek(tick uint64) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return ErrPlayerClosed
	}
	if err := p.seek(tick); err != nil {
		return err
	}
	p.resyncAll()
	return nil
}

// seek rebuilds the head replica at tick.
func (p *Player) seek(tick uint64) error {
	kf, cur, err := p.rd.Seek(tick)
	if err != nil {
		return err
	}
	if err := p.applyFull(kf); err != nil {
		return err
	}
	p.cur, p.peek = cur, nil
	for {
		r, err := p.next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		if r.f.Tick > tick {
			return nil
		}
		p.peek = nil
		if err := p.play(r); err != nil {
			return err
		}
	}
}

// next returns the record after the playhead, leaving it in peek.
func (p *Player) next() (*record, error) {
	if p.peek == nil {
		kind, f, err := p.cur.Next()
		if err != nil {
			return nil, err
		}
		p.peek = &record{kind, f}
	}
	return p.peek, nil
}

// applyFull resets the head replica to the full state f.
func (p *Player) applyFull(f Frame) error {
	if err := p.head.Reset(p.remote); err != nil {
		return err
	}
	if err := p.applyFrame(f); err != nil {
		return err
	}
	p.tick, p.fullMsgs = f.Tick, nil
	return nil
}

func (p *Player) applyFrame(f Frame) error {
	m, err := session.Parse(f.Messages[0])
	if err != nil {
		return err // parseFrame has parsed it already
	}
	t := m.(*session.Tick)
	if len(t.Gained) > 0 || len(t.Lost) > 0 {
		return formatErr(0, ErrCorrupt, "tick %d: ownership changes in a spectator's recording", f.Tick)
	}
	if err := p.head.ApplyTickInfo(tickInfo(t), f.Messages[1:]...); err != nil {
		return fmt.Errorf("%w: tick %d: %w", ErrCorrupt, f.Tick, err)
	}
	return nil
}

// play applies record r, which follows the playhead, to the head replica.
// It reports whether r resynchronises the clients: a keyframe of a tick
// other than the playhead's, where the recorder itself was resynced.
func (p *Player) play(r *record) error {
	switch {
	case r.kind == KindKeyframe && r.f.Tick == p.tick:
		return nil // a checkpoint of the state the head already has
	case r.kind == KindKeyframe:
		return p.applyFull(r.f)
	}
	if err := p.applyFrame(r.f); err != nil {
		return err
	}
	p.tick, p.fullMsgs = r.f.Tick, nil
	return nil
}

// Step plays the next recorded tick to every client. It returns io.EOF at
// the end of the recording.
func (p *Player) Step() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return ErrPlayerClosed
	}
	for {
		r, err := p.next()
		if err != nil {
			return err
		}
		p.peek = nil
		if r.kind == KindKeyframe && r.f.Tick == p.tick {
			continue
		}
		if err := p.play(r); err != nil {
			return err
		}
		if r.kind == KindKeyframe {
			p.resyncAll()
			return nil
		}
		for s := range p.sessions {
			for _, m := range r.f.Messages {
				if s.tc.Send(m) != nil {
					break
				}
			}
		}
		return nil
	}
}

// fullState returns the full state at the playhead, encoded once per
// playhead for every client that needs it.
func (p *Player) fullState() ([][]byte, error) {
	if p.fullMsgs == nil {
		msgs, err := p.full.frame(p.head, p.tick)
		if err != nil {
			return nil, err
		}
		p.fullMsgs = msgs
	}
	return p.fullMsgs, nil
}

// resyncAll sends every client RESYNC and the full state.
func (p *Player) resyncAll() {
	if len(p.sessions) == 0 {
		return
	}
	msgs, err := p.fullState()
	for s := range p.sessions {
		if err != nil {
			s.tc.Close(transport.CloseInternalError, err.Error())
			delete(p.sessions, s)
			continue
		}
		s.tc.Send(session.AppendResync(nil))
		for _, m := range msgs {
			if s.tc.Send(m) != nil {
				break
			}
		}
	}
}

// Pause stops Run from playing until Resume.
func (p *Player) Pause() { p.set(func() { p.paused = true }) }

// Resume lets Run play again.
func (p *Player) Resume() { p.set(func() { p.paused = false }) }

// SetSpeed sets Run's speed as a multiple of the recorded tick rate: 2
// plays twice as fast. It must be positive and finite, and not so small
// that a tick would take over a century (Pause stops the playhead).
func (p *Player) SetSpeed(speed float64) error {
	if !(speed > 0) || math.IsInf(speed, 0) || p.interval(speed) > 100*365*24*time.Hour {
		return fmt.Errorf("replay: speed %v", speed)
	}
	p.set(func() { p.speed = speed })
	return nil
}

func (p *Player) set(fn func()) {
	p.mu.Lock()
	fn()
	p.mu.Unlock()
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// interval returns the time between two ticks played at speed, at most
// 2^62 ns rather than past time.Duration's range.
func (p *Player) interval(speed float64) time.Duration {
	rate := float64(p.h.TickRate)
	if rate <= 0 {
		rate = 30
	}
	return time.Duration(min(float64(time.Second)/(rate*speed), 1<<62))
}

// Run plays the recording at its tick rate times the speed until the end
// (it then returns io.EOF), ctx is done or the player is closed.
func (p *Player) Run(ctx context.Context) error {
	for {
		p.mu.Lock()
		paused, speed, closed := p.paused, p.speed, p.closed
		p.mu.Unlock()
		if closed {
			return ErrPlayerClosed
		}
		var wait <-chan time.Time
		var t *time.Timer
		if !paused {
			t = time.NewTimer(p.interval(speed))
			wait = t.C
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-p.wake:
			if t != nil {
				t.Stop()
			}
		case <-wait:
			if err := p.Step(); err != nil {
				return err
			}
		}
	}
}

// Serve accepts clients from ln until ctx is done or ln is closed. Without
// PlayerConfig.Auth any connect token is accepted, and Serve logs a warning
// when ln's address is not loopback.
func (p *Player) Serve(ctx context.Context, ln transport.Listener) error {
	if (p.cfg.Auth == nil || auth.IsAnonymous(p.cfg.Auth)) && !transport.Loopback(ln.Addr()) {
		p.cfg.Logger.Warn("replay: serving without authentication on a non-loopback address: anyone who reaches it may watch; set PlayerConfig.Auth to restrict it",
			"addr", ln.Addr().String())
	}
	for {
		tc, err := ln.Accept(ctx)
		if err != nil {
			p.mu.Lock()
			closed := p.closed
			p.mu.Unlock()
			if closed {
				return ErrPlayerClosed
			}
			return err
		}
		p.mu.Lock()
		from, busy := p.shakes.Admit(tc.RemoteAddr())
		p.mu.Unlock()
		if busy != "" {
			p.refuse(tc, transport.CloseServerBusy, busy)
			continue
		}
		go p.handshake(ctx, tc, from)
	}
}

func (p *Player) refuse(tc transport.Conn, code transport.CloseCode, msg string) {
	p.cfg.Logger.Info("replay: refused", "remote", tc.RemoteAddr(), "code", code, "reason", msg)
	msg = session.ClipText(msg)
	tc.Send(session.AppendRefuse(nil, &session.Refuse{Code: uint16(code), Message: msg}))
	tc.Close(code, msg)
}

// handshake checks a client's HELLO as a server does (docs/protocol.md
// §10.3, without authentication), welcomes it with the recorded
// descriptor and sends it the full state at the playhead.
func (p *Player) handshake(ctx context.Context, tc transport.Conn, from string) {
	if rl, ok := tc.(transport.ReadLimiter); ok {
		rl.SetReadLimit(session.MaxDescriptor + session.MaxToken + 1024)
	}
	hctx, cancel := context.WithTimeout(ctx, p.cfg.HandshakeTimeout)
	msg, err := tc.Receive(hctx)
	cancel()
	p.mu.Lock()
	p.shakes.Done(from)
	p.mu.Unlock()
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) {
			p.refuse(tc, transport.CloseHandshakeTimeout, "no HELLO in time")
		} else {
			tc.Close(transport.CloseProtocolError, "handshake failed")
		}
		return
	}
	m, err := session.Parse(msg)
	hello, ok := m.(*session.Hello)
	switch {
	case err != nil:
		p.refuse(tc, transport.CloseProtocolError, err.Error())
		return
	case !ok:
		p.refuse(tc, transport.CloseProtocolError, "expected HELLO")
		return
	case hello.Version != session.ProtocolVersion:
		p.refuse(tc, transport.CloseIncompatible, fmt.Sprintf("protocol version %d, the player speaks %d", hello.Version, session.ProtocolVersion))
		return
	}
	user := "spectator"
	if p.cfg.Auth != nil {
		id, err := p.cfg.Auth.Authenticate(ctx, hello.Token)
		if err != nil {
			// The error may say more than the client should learn: it
			// goes to the log only.
			p.cfg.Logger.Info("replay: authentication failed", "remote", tc.RemoteAddr(), "err", err)
			p.refuse(tc, transport.CloseAuthFailed, auth.Refusal(err))
			return
		}
		user = id.UserID
	}
	local, err := schema.DecodeDescriptor(hello.Descriptor)
	if err == nil {
		err = schema.Compatible(local, p.remote)
	}
	if err != nil {
		p.refuse(tc, transport.CloseIncompatible, "schema: "+err.Error())
		return
	}
	if err := hello.Limits.Below(p.cfg.ClientLimits); err != nil {
		p.refuse(tc, transport.CloseIncompatible, "client limits: "+err.Error())
		return
	}
	if rl, ok := tc.(transport.ReadLimiter); ok {
		rl.SetReadLimit(spectatorMaxMessage)
	}
	s := &psession{tc: tc}
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		tc.Close(transport.CloseGoingAway, "player closed")
		return
	}
	p.nextID++
	err = tc.Send(session.AppendWelcome(nil, &session.Welcome{Version: session.ProtocolVersion,
		Descriptor: p.h.Descriptor, Session: p.nextID, UserID: user, TickRate: p.h.TickRate, MaxMessage: spectatorMaxMessage}))
	if err == nil {
		var msgs [][]byte
		if msgs, err = p.fullState(); err == nil {
			for _, m := range msgs {
				if err = tc.Send(m); err != nil {
					break
				}
			}
		}
	}
	if err != nil {
		p.mu.Unlock()
		tc.Close(transport.CloseInternalError, err.Error())
		return
	}
	p.sessions[s] = struct{}{}
	p.mu.Unlock()
	go p.keepAlive(s)
	p.serveSession(s)
}

// serveSession reads what a client sends: it answers PINGs and closes
// the session on anything but PING and PONG (a spectator calls no RPC),
// and after IdleTimeout without a message.
func (p *Player) serveSession(s *psession) {
	rx := transport.NewIdleReceiver(s.tc, p.cfg.IdleTimeout, "nothing received")
	defer func() {
		p.mu.Lock()
		delete(p.sessions, s)
		p.mu.Unlock()
	}()
	for {
		msg, err := rx.Receive()
		if err != nil {
			return
		}
		m, err := session.Parse(msg)
		switch m := m.(type) {
		case *session.Ping:
			s.tc.Send(session.AppendPong(nil, &session.Pong{Nonce: m.Nonce}))
		case *session.Pong:
		default:
			if err == nil {
				err = fmt.Errorf("unexpected %T", m)
			}
			s.tc.Close(transport.CloseProtocolError, err.Error())
			return
		}
	}
}

func (p *Player) keepAlive(s *psession) {
	t := time.NewTicker(p.cfg.Ping)
	defer t.Stop()
	var nonce uint64
	for {
		select {
		case <-s.tc.Done():
			return
		case <-t.C:
			nonce++
			s.tc.Send(session.AppendPing(nil, &session.Ping{Nonce: nonce}))
		}
	}
}

// Close disconnects every client with CloseGoingAway and stops Run and
// Serve's handshakes.
func (p *Player) Close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closed = true
	for s := range p.sessions {
		s.tc.Close(transport.CloseGoingAway, "player closed")
	}
	select {
	case p.wake <- struct{}{}:
	default:
	}
	return nil
}
