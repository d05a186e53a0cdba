package demo

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"math"
	"net"
	"net/netip"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/replicago/replica"
	"github.com/replicago/replica/auth"
	"github.com/replicago/replica/client"
	"github.com/replicago/replica/quictransport"
	"github.com/replicago/replica/state"
	"github.com/replicago/replica/transport"
	"github.com/replicago/replica/wstransport"
)

// Config selects a demo run.
type Config struct {
	Entities int           // bots in the arena: NPCs plus one per client
	Clients  int           // bot clients, half over WebSocket and half over QUIC
	Hz       int           // ticks per second
	Duration time.Duration // how long to run, in ticks of simulated time; 0 runs until the context is done
	Seed     uint64        // seed of the simulation
	WSAddr   string        // TCP address of the WebSocket listener
	QUICAddr string        // UDP address of the QUIC listener

	// HTTPAddr is the TCP address of the browser page, which also serves
	// WebSocket to it at /replica; empty for no page.
	HTTPAddr string
	// WTAddr is the UDP address of the WebTransport listener for the
	// page; empty for none (browsers then use WebSocket).
	WTAddr string

	// Room puts every bot in one room, where every client sees every bot.
	// By default the bots live in an AOI space: each client sees the bots
	// within Radius of its own.
	Room    bool
	Radius  float64 // AOI visibility radius, in arena units; hysteresis is a tenth of it
	Explain int     // bots whose visibility to the first client each status line explains

	// Record, if set, is a file to record the run to, as a spectator sees
	// it (package replay): every bot in a room, the bots seen from the
	// arena's centre in the AOI space. "replica replay" plays it.
	Record string
}

// Bounds of a Config. A client may see every bot (in a room it does; in
// an AOI space when the bots gather), at about 1.3 KB a copy, so MaxCopies
// bounds Entities × Clients. Every client is one or two sockets.
const (
	MaxEntities = 50000
	MaxClients  = 1000
	MaxCopies   = 1000000
	MaxHz       = 1000
	MaxRadius   = worldSize // the arena's side
	MaxExplain  = 20
)

// DefaultRadius is the default AOI radius: a client's view covers about 5%
// of the arena (π·250² of 2000²), and as bots gather to fight a client sees
// about 6% of them.
const DefaultRadius = 250

// DefaultConfig returns the configuration of "replica demo" without flags.
func DefaultConfig() Config {
	return Config{Entities: 500, Clients: 50, Hz: 20, Seed: 1, WSAddr: "127.0.0.1:0", QUICAddr: "127.0.0.1:0",
		HTTPAddr: "127.0.0.1:0", WTAddr: "127.0.0.1:0", Radius: DefaultRadius}
}

// Validate reports the first problem with c. Messages name the fields by
// their command-line flags.
func (c Config) Validate() error {
	switch {
	case c.Entities < 1:
		return fmt.Errorf("-entities must be at least 1, got %d", c.Entities)
	case c.Entities > MaxEntities:
		return fmt.Errorf("-entities must be at most %d, got %d", MaxEntities, c.Entities)
	case c.Clients < 1:
		return fmt.Errorf("-clients must be at least 1, got %d", c.Clients)
	case c.Clients > MaxClients:
		return fmt.Errorf("-clients must be at most %d, got %d", MaxClients, c.Clients)
	case c.Clients > c.Entities:
		return fmt.Errorf("need at least as many entities as clients, each client owns a bot: -clients %d > -entities %d", c.Clients, c.Entities)
	case c.Entities*c.Clients > MaxCopies:
		return fmt.Errorf("-entities × -clients must be at most %d, got %d × %d: a client may hold a copy of every bot", MaxCopies, c.Entities, c.Clients)
	case c.Hz < 1 || c.Hz > MaxHz:
		return fmt.Errorf("-hz must be between 1 and %d, got %d", MaxHz, c.Hz)
	case c.Duration < 0:
		return fmt.Errorf("-duration must not be negative, got %v", c.Duration)
	case !c.Room && !(c.Radius > 0 && c.Radius <= MaxRadius): // NaN too
		return fmt.Errorf("-radius must be more than 0 and at most %d (the arena's side), got %v", MaxRadius, c.Radius)
	case c.Explain < 0 || c.Explain > MaxExplain:
		return fmt.Errorf("-explain must be between 0 and %d, got %d", MaxExplain, c.Explain)
	}
	if _, _, err := net.SplitHostPort(c.WSAddr); err != nil {
		return fmt.Errorf("-ws-addr must be host:port, got %q", c.WSAddr)
	}
	if _, _, err := net.SplitHostPort(c.QUICAddr); err != nil {
		return fmt.Errorf("-quic-addr must be host:port, got %q", c.QUICAddr)
	}
	if _, _, err := net.SplitHostPort(c.HTTPAddr); err != nil && c.HTTPAddr != "" {
		return fmt.Errorf("-http must be host:port or empty, got %q", c.HTTPAddr)
	}
	if _, _, err := net.SplitHostPort(c.WTAddr); err != nil && c.WTAddr != "" {
		return fmt.Errorf("-wt-addr must be host:port or empty, got %q", c.WTAddr)
	}
	return nil
}

// ticks returns the number of ticks Duration lasts, at least one, or 0
// for no limit.
func (c Config) ticks() uint64 {
	if c.Duration <= 0 {
		return 0
	}
	return uint64(max(1, math.Ceil(c.Duration.Seconds()*float64(c.Hz))))
}

// ErrVerify is returned (wrapped) by Run when a client's replica differs
// from the server's state for that client.
var ErrVerify = errors.New("verification failed")

// Timeouts of a run.
const (
	// roundTimeout bounds the wait for every client to reach the tick of
	// a verification round.
	roundTimeout = 10 * time.Second
	// closeTimeout bounds the wait for the clients to see the server
	// close their connections.
	closeTimeout = 10 * time.Second
	// dialers is the number of clients that connect at a time.
	dialers = 16
)

// Report sums up a run.
type Report struct {
	Ticks     uint64
	Checks    int            // verification rounds passed, the final one included
	Checked   int            // clients compared in the last round
	Joined    map[string]int // clients that joined, by transport ("WebSocket", "QUIC")
	Closed    map[string]int // how the clients' connections ended, by close code
	World     Stats
	Callbacks Callbacks             // client callbacks run, joins included
	Bytes     int64                 // message bytes the clients received, handshakes included
	Visible   Visible               // bots the clients saw at the verification rounds
	Interest  replica.InterestStats // the server's interest state after the last tick
}

// Visible sums up how many bots clients saw at the verification rounds,
// as the server counts them (Server.Sees), which every verified replica
// matched: one sample per client per round.
type Visible struct {
	Samples  int
	Min, Max int
	Mean     float64
}

func (v *Visible) add(n int) {
	if v.Samples == 0 || n < v.Min {
		v.Min = n
	}
	v.Max = max(v.Max, n)
	v.Mean += (float64(n) - v.Mean) / float64(v.Samples+1)
	v.Samples++
}

// String renders v as "24.3 (min 9, max 41)", or "-" without samples.
func (v Visible) String() string {
	if v.Samples == 0 {
		return "-"
	}
	return fmt.Sprintf("%.1f (min %d, max %d)", v.Mean, v.Min, v.Max)
}

// runner is one run of the demo. Its fields belong to the tick goroutine,
// the one that calls Run.
type runner struct {
	cfg     Config
	out     io.Writer
	srv     *replica.Server
	world   *world
	players []*player
	byName  map[string]*player
	hub     *hub

	lns       []transport.Listener
	wsURL     string
	quicAddr  string
	page      *page // the browser page; nil without one
	rec       *recording
	recNote   string // how the recording ended, for the summary
	serving   sync.WaitGroup
	playing   sync.WaitGroup
	dial      func(*player) (*client.Conn, error)
	stopServe context.CancelFunc
	stopDial  context.CancelFunc
	abandon   context.CancelFunc

	ents     []*state.Entity
	checks   int
	checked  int     // clients compared in the last round
	seen     Visible // bots the clients saw in the last round
	seenRun  Visible // and in every round
	interest replica.InterestStats
	win      window
	ticks    histogram // update and Tick
	verify   histogram // verification rounds
	started  time.Time
	elapsed  time.Duration // of ticking
}

// window collects the figures of one status line.
type window struct {
	ticks  int
	server []time.Duration
	start  time.Time
	bytes  int64 // received by all players when the window started
	events int64
	rpcs   uint64 // RPCs the server had handled when the window started
	held   uint64 // entity sends budgets had held back (Stats.Deferred) when it started
}

// Run runs the demo of cfg: a replica.Server listening on WebSocket and
// QUIC, its arena of bots moved at cfg.Hz, and cfg.Clients bot clients
// connected to it over loopback sockets, half over each transport. It
// writes a header, one status line per second of ticks and a summary to
// w, and runs until cfg.Duration of ticks has run or ctx is done; stopping
// through ctx is not an error. Every second, and at the end, every client's
// replica is compared with the server's state as that client may see it; a
// difference is returned as an error wrapping ErrVerify that describes it.
func Run(ctx context.Context, cfg Config, w io.Writer) (*Report, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	fmt.Fprint(w, intro(cfg))
	r := &runner{cfg: cfg, out: w, byName: make(map[string]*player, cfg.Clients)}
	if err := r.start(); err != nil {
		return nil, err
	}
	fmt.Fprintf(w, "listening on %s (WebSocket) and quic://%s (QUIC, self-signed development certificate)\n", r.wsURL, r.quicAddr)
	if r.page != nil {
		fmt.Fprintf(w, "watch and steer a bot in a browser (%s):\n%s\n", r.page.transports(), r.page.url)
	}
	r.connect()

	reason, err := r.loop(ctx)
	r.elapsed = time.Since(r.started)
	if err == nil {
		// A final round, at the last tick.
		if err = r.round(); err != nil {
			reason = "verification failed"
		}
	}
	r.interest = r.srv.InterestStats()
	closeErr := r.stop()
	rep := r.report()
	fmt.Fprint(w, r.summary(rep, reason, err, closeErr))
	if err != nil {
		return rep, fmt.Errorf("%w %v", ErrVerify, err)
	}
	return rep, nil
}

// intro describes the run of c.
func intro(c Config) string {
	until := "until interrupted (Ctrl-C)"
	if c.Duration > 0 {
		until = "for " + c.Duration.String()
	}
	ws := (c.Clients + 1) / 2
	var b strings.Builder
	fmt.Fprintf(&b, "replica demo: %d bots in a %d×%d arena (%d NPCs and one per client), %d clients (%d WebSocket, %d QUIC), %d Hz, seed %d, %s\n",
		c.Entities, worldSize, worldSize, c.Entities-c.Clients, c.Clients, ws, c.Clients-ws, c.Hz, c.Seed, until)
	if c.Room {
		b.WriteString("Interest: one room (-room), every client sees every bot.\n")
	} else {
		sp := aoiSpace(c.Radius)
		area := min(100, 100*math.Pi*sp.Radius*sp.Radius/(worldSize*worldSize)) // the view's disc, edges and all
		fmt.Fprintf(&b, "Interest: AOI, each client sees the bots within %g units of its own (hysteresis %g), about %.0f%% of the arena.\n",
			sp.Radius, sp.Hysteresis, area)
	}
	b.WriteString("A replica.Server moves every bot; bot clients connect over loopback sockets, watch, and call\n")
	b.WriteString("their bot's emote RPC once a second. Every second each client's replica is checked against\n")
	b.WriteString("what the server says that client sees, with the clients held at the same tick.\n")
	return b.String()
}

// start opens the listeners, makes the server and its arena and starts
// serving.
func (r *runner) start() (err error) {
	defer func() {
		if err != nil {
			for _, ln := range r.lns {
				ln.Close()
			}
		}
	}()
	quiet := log.New(io.Discard, "", 0)
	wsln, err := wstransport.Listen(r.cfg.WSAddr, wstransport.Config{ErrorLog: quiet})
	if err != nil {
		return fmt.Errorf("WebSocket listener: %w", err)
	}
	r.lns = append(r.lns, wsln)
	serverTLS, clientTLS, err := quictransport.DevTLS()
	if err != nil {
		return err
	}
	qln, err := quictransport.Listen(r.cfg.QUICAddr, quictransport.Config{TLS: serverTLS})
	if err != nil {
		return fmt.Errorf("QUIC listener: %w", err)
	}
	r.lns = append(r.lns, qln)
	if r.cfg.HTTPAddr != "" {
		if r.page, err = r.servePage(); err != nil {
			return err
		}
		r.lns = append(r.lns, r.page.lns...)
	}

	u, err := url.Parse(wsln.Addr().String())
	if err != nil {
		return err
	}
	r.wsURL = wsln.Addr().String()
	wsAddr, quicAddr := loopback(u.Host), loopback(qln.Addr().String())
	r.quicAddr = qln.Addr().String()

	r.srv, err = replica.NewServer(replica.Config{
		Schema:   Schema(),
		TickRate: r.cfg.Hz,
		Auth:     auth.Anonymous{}, // the clients' tokens are their names
		OnJoin:   r.join,
		OnLeave:  r.leave,
	})
	if err != nil {
		return err
	}
	// An emote makes the bot's owner visible as busy for a moment: the
	// server only counts it (Stats().RPCs); it must come from the owner,
	// which the runtime checks before the handler runs.
	HandleBotEmote(r.srv, func(*replica.Conn, Bot, uint32, uint8) error { return nil })
	// A browser viewer steers its bot.
	HandleBotSteer(r.srv, func(c *replica.Conn, b Bot, x, y float32) error {
		return r.world.steer(c, b.ID(), x, y)
	})
	radius := r.cfg.Radius
	if r.cfg.Room {
		radius = 0
	}
	if r.world, err = newWorld(r.srv, r.cfg.Seed, r.cfg.Entities-r.cfg.Clients, radius); err != nil {
		return err
	}

	serveCtx, stopServe := context.WithCancel(context.Background())
	r.stopServe = stopServe
	for _, ln := range r.lns {
		r.serving.Add(1)
		go func() {
			defer r.serving.Done()
			r.srv.Serve(serveCtx, ln)
		}()
	}
	if r.cfg.Record != "" {
		if r.rec, err = r.startRecording(serveCtx); err != nil {
			stopServe()
			r.serving.Wait()
			return err
		}
	}

	base, abandon := context.WithCancel(context.Background())
	r.abandon = abandon
	r.hub = newHub(base)
	dialCtx, stopDial := context.WithCancel(base)
	r.stopDial = stopDial
	wsd := wstransport.NewDialer(transport.Config{})
	qd := &quictransport.Dialer{Config: quictransport.Config{TLS: clientTLS}}
	sem := make(chan struct{}, dialers)
	r.dial = func(p *player) (*client.Conn, error) {
		select {
		case sem <- struct{}{}:
		case <-dialCtx.Done():
			return nil, dialCtx.Err()
		}
		defer func() { <-sem }()
		var d transport.Dialer = wsd
		addr := wsAddr
		if p.net == overQUIC {
			d, addr = qd, quicAddr
		}
		return client.Dial(dialCtx, transport.CountReceived(d, &p.recv), addr, Schema(), client.DialConfig{Token: []byte(p.name)})
	}

	width := len(fmt.Sprint(r.cfg.Clients - 1))
	for i := range r.cfg.Clients {
		p := &player{name: fmt.Sprintf("player-%0*d", width, i), partial: !r.cfg.Room}
		if i%2 == 1 {
			p.net = overQUIC
		}
		r.players = append(r.players, p)
		r.byName[p.name] = p
	}
	return nil
}

// loopback returns the address to dial a listener on hostport at: the
// loopback address if it listens on every address (or names no host).
func loopback(hostport string) string {
	host, port, err := net.SplitHostPort(hostport)
	if err != nil {
		return hostport
	}
	if host == "" {
		host = "127.0.0.1"
	} else if a, err := netip.ParseAddr(host); err == nil && a.IsUnspecified() {
		host = "127.0.0.1"
		if a.Is6() {
			host = "::1"
		}
	}
	return net.JoinHostPort(host, port)
}

// connect starts the players' goroutines, which dial the server.
func (r *runner) connect() {
	for _, p := range r.players {
		r.playing.Add(1)
		go func() {
			defer r.playing.Done()
			p.run(r.hub, r.dial)
		}()
	}
}

// join runs on the tick goroutine when a connection joins: it gets a bot.
func (r *runner) join(c *replica.Conn) {
	if r.rec != nil && c.UserID() == r.rec.user {
		if err := r.world.watch(c); err != nil {
			c.Close(transport.CloseInternalError, err.Error())
		}
		return
	}
	if err := r.world.join(c); err != nil {
		c.Close(transport.CloseInternalError, err.Error())
		return
	}
	if p := r.byName[c.UserID()]; p != nil && p.srv == nil {
		p.srv, p.joinedAt = c, r.srv.TickNumber()+1
	}
}

// leave runs on the tick goroutine once a connection has closed.
func (r *runner) leave(c *replica.Conn) {
	r.world.leave(c)
	if p := r.byName[c.UserID()]; p != nil && p.srv == c {
		p.left = true
	}
}

// loop ticks until ctx is done, the run's duration is reached or a
// verification fails.
func (r *runner) loop(ctx context.Context) (string, error) {
	limit := r.cfg.ticks()
	t := time.NewTicker(time.Second / time.Duration(r.cfg.Hz))
	defer t.Stop()
	r.started = time.Now()
	r.win.start = r.started
	for limit == 0 || r.world.stats.Ticks < limit {
		select {
		case <-ctx.Done():
			return "interrupted", nil
		case <-t.C:
		}
		if ctx.Err() != nil {
			return "interrupted", nil
		}
		// This is what Server.Run does, timed: Run has no hook after
		// Tick, and Tick (encoding and sending) is most of the cost.
		start := time.Now()
		r.world.step()
		r.srv.Tick()
		d := time.Since(start)
		r.win.server = append(r.win.server, d)
		r.win.ticks++
		r.ticks.add(d)
		if r.win.ticks == r.cfg.Hz {
			err := r.round()
			fmt.Fprintln(r.out, r.status(err))
			if r.cfg.Explain > 0 {
				fmt.Fprint(r.out, r.explain(r.cfg.Explain))
			}
			if err != nil {
				return "verification failed", err
			}
		}
	}
	return "duration reached", nil
}

// round verifies every client that has joined against the server's state
// after the last tick. The tick goroutine does not tick meanwhile, so the
// server's state is the one that tick sent; the round holds every client
// once it has applied that tick, so its replica stays put while it is
// compared.
func (r *runner) round() error {
	start := time.Now()
	tick := r.srv.TickNumber()
	rd := &round{tick: tick, arrived: make(chan *player, len(r.players)), release: make(chan struct{})}
	r.hub.announce(rd)
	defer close(rd.release)
	expected := func(p *player) bool { return p.srv != nil && !p.left && p.joinedAt <= tick }
	arrived := make(map[*player]bool, len(r.players))
	timeout := time.NewTimer(roundTimeout)
	defer timeout.Stop()
	for {
		var late *player
		for _, p := range r.players {
			if expected(p) && !arrived[p] && !p.exited.Load() {
				late = p
				break
			}
		}
		if late == nil {
			break
		}
		select {
		case p := <-rd.arrived:
			arrived[p] = true
		case <-r.hub.exits:
		case <-timeout.C:
			return fmt.Errorf("after tick %d, client %s (%s) did not reach it within %v: it is at tick %d",
				tick, late.name, late.net, roundTimeout, late.tick.Load())
		}
	}
	r.ents = r.srv.Tracker().AppendEntities(r.ents[:0])
	r.checked, r.seen = 0, Visible{}
	for _, p := range r.players {
		if !arrived[p] || !expected(p) {
			continue
		}
		if err := r.verifyPlayer(p, tick); err != nil {
			return fmt.Errorf("after tick %d, client %s (%s): %w", tick, p.name, p.net, err)
		}
		n := p.conn.Replica().Len()
		r.seen.add(n)
		r.seenRun.add(n)
		r.checked++
	}
	r.checks++
	r.verify.add(time.Since(start))
	return nil
}

// verifyPlayer checks that what the server says the player sees follows
// the arena's rule (checkInterest), and that the player's replica, at
// tick, is exactly that (verifyView). The player must be waiting at a
// round.
func (r *runner) verifyPlayer(p *player, tick uint64) error {
	if p.badRef != "" {
		return errors.New(p.badRef)
	}
	if got := p.conn.LastTick(); got != tick {
		return fmt.Errorf("the client is at tick %d, want %d", got, tick)
	}
	x := serverSays(r.srv, p.srv)
	me, ok := r.world.botOf(p.srv)
	if !ok {
		return errors.New("the arena has no bot of the client's")
	}
	if err := checkInterest(r.ents, x, me, r.world.aoi); err != nil {
		return fmt.Errorf("interest: %w", err)
	}
	return verifyView(r.ents, x, p.conn.Replica())
}

// stop closes the server, which closes every connection with
// CloseGoingAway (a page's too: Shutdown waits, at most three seconds,
// until the close is sent), and waits for the clients to see it.
func (r *runner) stop() error {
	r.stopDial() // clients still dialing give up
	bye, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	r.srv.Shutdown(bye)
	cancel()
	if r.rec != nil {
		last, err := r.rec.stop()
		r.recNote = fmt.Sprintf("to tick %d in %s", last, r.cfg.Record)
		if err != nil {
			r.recNote = fmt.Sprintf("%s: %v", r.cfg.Record, err)
		}
	}
	var err error
	done := make(chan struct{})
	go func() {
		r.playing.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(closeTimeout):
		err = fmt.Errorf("clients still connected %v after the server closed", closeTimeout)
		r.abandon()
		<-done
	}
	r.abandon()
	r.stopServe()
	r.serving.Wait()
	if r.page != nil {
		r.page.close()
	}
	for _, p := range r.players {
		if p.conn != nil {
			p.conn.Close()
		}
	}
	return err
}

// connected counts the players connected now, by transport, and the other
// connections (guests).
func (r *runner) connected() (ws, quic, guests int) {
	for _, p := range r.players {
		if p.srv != nil && !p.left {
			if p.net == overQUIC {
				quic++
			} else {
				ws++
			}
		}
	}
	return ws, quic, len(r.srv.Conns()) - ws - quic
}

// totals sums the players' received bytes and callbacks.
func (r *runner) totals() (bytes int64, ev Callbacks) {
	for _, p := range r.players {
		bytes += p.recv.Load()
		ev.add(p.ev.load())
	}
	return bytes, ev
}

// status returns the status line of the ticks since the last one and
// starts a new window. err is the result of the verification that goes
// with it.
func (r *runner) status(err error) string {
	w := &r.win
	wall := time.Since(w.start).Seconds()
	slices.Sort(w.server)
	ws, quic, guests := r.connected()
	bytes, ev := r.totals()
	clients := fmt.Sprintf("%d (ws %d, quic %d)", ws+quic, ws, quic)
	if guests > 0 {
		clients = fmt.Sprintf("%d (ws %d, quic %d, %d guests)", ws+quic+guests, ws, quic, guests)
	}
	verified := fmt.Sprintf("ok (%d clients at tick %d)", r.checked, r.srv.TickNumber())
	if err != nil {
		verified = "FAILED"
	}
	rpcs, held := r.srv.Stats().RPCs, r.srv.Stats().Deferred
	var line strings.Builder
	fmt.Fprintf(&line, "t=%s clients=%s entities=%d", simTime(r.world.stats.Ticks, r.cfg.Hz), clients, r.srv.Tracker().Len())
	// Bots each verified client sees, as the server counts them: its
	// replica matched.
	fmt.Fprintf(&line, " visible/client=%v", r.seen)
	// Entity sends the clients' bandwidth budgets put off (Config.Budget).
	fmt.Fprintf(&line, " deferred=%d/s", int64(math.Round(float64(held-w.held)/wall)))
	fmt.Fprintf(&line, " tick p50=%.2fms p99=%.2fms  in=%s/client/s  events=%d/s  rpc=%d/s  verified=%s",
		ms(percentile(w.server, 0.50)), ms(percentile(w.server, 0.99)),
		kb(float64(bytes-w.bytes)/float64(max(ws+quic, 1))/wall),
		int64(math.Round(float64(ev.Total()-w.events)/wall)),
		int64(math.Round(float64(rpcs-w.rpcs)/wall)), verified)
	// The ticker drops ticks the process cannot keep up with: say so.
	if secs := float64(w.ticks) / float64(r.cfg.Hz); wall > 1.2*secs {
		fmt.Fprintf(&line, "  (behind: %.1fs of ticks took %.1fs)", secs, wall)
	}
	*w = window{server: w.server[:0], start: time.Now(), bytes: bytes, events: ev.Total(), rpcs: rpcs, held: held}
	return line.String()
}

// report sums up the run; the players' goroutines have returned.
func (r *runner) report() *Report {
	rep := &Report{Ticks: r.world.stats.Ticks, Checks: r.checks, Checked: r.checked, World: r.world.stats,
		Visible: r.seenRun, Interest: r.interest, Joined: map[string]int{}, Closed: map[string]int{}}
	rep.Bytes, rep.Callbacks = r.totals()
	for _, p := range r.players {
		if p.joinedAt != 0 {
			rep.Joined[p.net.String()]++
		}
		switch {
		case p.conn == nil:
			rep.Closed["never connected"]++
		case p.closed.byPeer:
			rep.Closed["closed by the server: "+p.closed.code.String()]++
		default:
			rep.Closed["closed by the client: "+p.closed.code.String()]++
		}
	}
	return rep
}

// summary describes the whole run: why it stopped, err the verification
// that failed if one did, closeErr a problem closing.
func (r *runner) summary(rep *Report, why string, err, closeErr error) string {
	var b strings.Builder
	result := fmt.Sprintf("verified ok (%d %s)", r.checks, plural(r.checks, "check"))
	if err != nil {
		result = fmt.Sprintf("verification FAILED after %d good %s", r.checks, plural(r.checks, "check"))
	}
	st := rep.World
	elapsed := r.elapsed
	fmt.Fprintf(&b, "stopped (%s) after %s: %d ticks in %.1fs, %s\n",
		why, simTime(st.Ticks, r.cfg.Hz), st.Ticks, elapsed.Seconds(), result)
	joined := rep.Joined["WebSocket"] + rep.Joined["QUIC"]
	fmt.Fprintf(&b, "  clients: %d joined (%d WebSocket, %d QUIC); %s\n",
		joined, rep.Joined["WebSocket"], rep.Joined["QUIC"], counts(rep.Closed))
	if closeErr != nil {
		fmt.Fprintf(&b, "  shutdown: %v\n", closeErr)
	}
	fmt.Fprintf(&b, "  bots:    %d destroyed and respawned (%d in fights, %d by hazards), %d retargets\n",
		st.Destroyed, st.Kills, st.Destroyed-st.Kills, st.Retargets)
	fmt.Fprintf(&b, "  bags:    %d items added, %d counts changed, %d items removed\n",
		st.BagAdds, st.BagUpdates, st.BagRemoves)
	where := "one room"
	if !r.cfg.Room {
		sp := aoiSpace(r.cfg.Radius)
		where = fmt.Sprintf("AOI radius %g, hysteresis %g", sp.Radius, sp.Hysteresis)
	}
	fmt.Fprintf(&b, "  views:   %s; bots visible per client at the checks %v; at the end %d client-bot pairs beyond rooms, %s of interest state\n",
		where, rep.Visible, rep.Interest.Pairs, kb(float64(rep.Interest.Bytes)))
	var join int64
	for _, p := range r.players {
		join += p.joinBytes.Load()
	}
	secs := max(elapsed.Seconds(), 1e-3)
	n := float64(max(joined, 1))
	fmt.Fprintf(&b, "  traffic: %s/client/s received on average, %s/client to join (handshake and full state)\n",
		kb(float64(rep.Bytes-join)/n/secs), kb(float64(join)/n))
	ev := rep.Callbacks
	fmt.Fprintf(&b, "  events:  %d client callbacks: %d creates, %d destroys, %d hp, %d target, %d score, %d/%d/%d items added/changed/removed\n",
		ev.Total(), ev.Creates, ev.Destroys, ev.HP, ev.Targets, ev.Scores, ev.ItemsAdded, ev.ItemsChanged, ev.ItemsRemoved)
	fmt.Fprintf(&b, "  timing:  server tick (update and Tick) p50=%.2fms p99=%.2fms; verification round p50=%.2fms p99=%.2fms\n",
		r.ticks.quantile(0.50), r.ticks.quantile(0.99), r.verify.quantile(0.50), r.verify.quantile(0.99))
	fmt.Fprintf(&b, "  rpc:     %d emote calls handled\n", r.srv.Stats().RPCs)
	if r.recNote != "" {
		fmt.Fprintf(&b, "  record:  %s\n", r.recNote)
	}
	return b.String()
}

// counts renders a count per key, most frequent first.
func counts(m map[string]int) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b string) int {
		if m[a] != m[b] {
			return m[b] - m[a]
		}
		return strings.Compare(a, b)
	})
	var parts []string
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%d %s", m[k], k))
	}
	return strings.Join(parts, ", ")
}

func plural(n int, word string) string {
	if n == 1 {
		return word
	}
	return word + "s"
}

func simTime(ticks uint64, hz int) string {
	if ticks%uint64(hz) == 0 {
		return fmt.Sprintf("%ds", ticks/uint64(hz))
	}
	return fmt.Sprintf("%.2fs", float64(ticks)/float64(hz))
}

// kb formats a byte count in kilobytes (1000 bytes), or bytes below 1 KB.
func kb(n float64) string {
	if n < 1000 {
		return fmt.Sprintf("%.0f B", n)
	}
	return fmt.Sprintf("%.1f KB", n/1000)
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1e3 }

// percentile returns the nearest-rank p-percentile of sorted v.
func percentile(v []time.Duration, p float64) time.Duration {
	if len(v) == 0 {
		return 0
	}
	i := int(math.Ceil(p*float64(len(v)))) - 1
	return v[max(i, 0)]
}

// histogram counts durations in 10 µs buckets up to 1 s, for run-long
// percentiles in constant space.
type histogram struct {
	n      int64
	counts []uint32
	max    int64 // µs
}

const histBucket = 10 // µs

func (h *histogram) add(d time.Duration) {
	us := d.Microseconds()
	if h.counts == nil {
		h.counts = make([]uint32, 1e6/histBucket+1)
	}
	h.counts[min(us/histBucket, int64(len(h.counts)-1))]++
	h.n++
	h.max = max(h.max, us)
}

// quantile returns the q-quantile in milliseconds, at the upper edge of
// its bucket.
func (h *histogram) quantile(q float64) float64 {
	if h.n == 0 {
		return 0
	}
	rank := max(int64(math.Ceil(q*float64(h.n))), 1)
	var seen int64
	for i, c := range h.counts {
		if seen += int64(c); seen >= rank {
			return math.Min(float64((i+1)*histBucket), float64(h.max)) / 1e3
		}
	}
	return float64(h.max) / 1e3
}
