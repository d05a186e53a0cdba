package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/replicago/replica"
	"github.com/replicago/replica/auth"
	rclient "github.com/replicago/replica/client"
	"github.com/replicago/replica/schema"
	"github.com/replicago/replica/session"
	"github.com/replicago/replica/transport"
)

// The interest scenarios (W1 in AOI mode, W2) run a real replica.Server
// with interest management and real client.Conns over the in-memory
// transport, ticked by hand on one goroutine: each tick the workload step
// goes through the generated setters, Server.Tick runs, and then every
// client applies its TICK. The timed section is the step and Server.Tick
// alone: while it runs, the clients' reading goroutines are held at a
// gate in front of their connections (gatedConn), so that neither their
// CPU time nor their allocations land in the server's figures.

// InterestResult is the outcome of an interest scenario run (W1 in AOI
// mode, W2). Times are in microseconds, sizes in bytes.
type InterestResult struct {
	Scenario string `json:"scenario"` // "w1" or "w2"
	Mode     string `json:"mode"`     // "aoi" (W1) or "zone" (W2)
	Clients  int    `json:"clients"`
	Entities int    `json:"entities"`
	// Ticks counts the workload's ticks, warm-up included; the server
	// ticks that admit the clients come before them and are not counted.
	Ticks       int `json:"ticks"`
	WarmupTicks int `json:"warmup_ticks"`
	GOMAXPROCS  int `json:"gomaxprocs"`
	// LOD reports whether the run checks W2's distance level of detail
	// (gear and emote seen only within 50 units, and by the owner): the
	// verification then expects them only there. W2 only.
	LOD *bool `json:"lod,omitempty"`
	// Machine is the machine's speed just before the first tick and
	// just after the last: see MachineSpeed.
	Machine machineRuns `json:"machine"`
	// Verified reports that, after the last tick (and after every tick
	// in a run with InterestConfig.VerifyEveryTick), every client's
	// replica held exactly the entities the workload's brute-force
	// visibility says, with the workload's values in every field the
	// client may see and zeros in the others; VerifyError says why not.
	Verified    bool   `json:"verified"`
	VerifyError string `json:"verify_error,omitempty"`
	// ReferenceOK reports that the server's entities hold the workload's
	// check values after the reference's number of ticks; Reference
	// lists the values read.
	ReferenceOK bool     `json:"reference_ok"`
	Reference   []string `json:"reference"`
	// BytesPerClientTick and BytesPerClientTickP99 are the TICK segment
	// bytes a client received per measured tick, mean and 99th
	// percentile over every (client, tick): the segment messages that
	// follow each TICK message, as the client's connection returned them
	// (the in-memory transport adds no framing). The TICK messages
	// themselves are TickHeaderBytesPerClientTick.
	BytesPerClientTick           float64 `json:"bytes_per_client_tick"`
	BytesPerClientTickP99        float64 `json:"bytes_per_client_tick_p99"`
	TickHeaderBytesPerClientTick float64 `json:"tick_header_bytes_per_client_tick"`
	// JoinBytes is the mean over clients of the segment bytes of their
	// first TICK: the full state of what they see when they join.
	JoinBytes float64 `json:"join_bytes"`
	// ServerUSPerTick times the workload step through the generated
	// setters plus Server.Tick (interest, encoding, queueing every TICK
	// on the in-memory connections); TickUSPerTick Server.Tick alone.
	ServerUSPerTick Percentiles `json:"server_us_per_tick"`
	TickUSPerTick   Percentiles `json:"tick_us_per_tick"`
	// ClientsApplyUSPerTick is the wall time, after Server.Tick, until
	// every client has received, decoded and applied the tick. Not part
	// of the server's time.
	ClientsApplyUSPerTick Percentiles `json:"clients_apply_us_per_tick"`
	// AllocsPerTick is the heap allocations of Server.Tick per measured
	// tick (runtime.MemStats.Mallocs around it, the clients held);
	// StepAllocsPerTick those of the workload step and the setters.
	AllocsPerTick     float64 `json:"allocs_per_tick"`
	StepAllocsPerTick float64 `json:"step_allocs_per_tick"`
	tickAllocs        uint64  // the measured Server.Ticks' allocations, in all
	// GCCycles is the garbage collections that ended during the measured
	// ticks. The server allocates nothing per tick; the in-process
	// clients' garbage drives them, and a cycle in progress slows the
	// ticks it overlaps (server_us_per_tick's p99 with GOMAXPROCS=1).
	GCCycles uint32 `json:"gc_cycles"`
	// VisiblePerClient is the mean number of entities in a client's
	// replica after each measured tick.
	VisiblePerClient float64 `json:"visible_per_client"`
	// InterestBytesPerClient and InterestPairsPerClient are
	// Server.InterestStats' Bytes and Pairs after the run, over clients.
	InterestBytesPerClient float64 `json:"interest_bytes_per_client"`
	InterestPairsPerClient float64 `json:"interest_pairs_per_client"`
}

// InterestConfig selects an interest scenario run. Zero fields take the
// scenario's defaults.
type InterestConfig struct {
	Clients  int // clients; W1: 100, W2: 500 (at most the workload's players)
	Warmup   int // unmeasured workload ticks; W1: 100, W2: 20
	Measured int // measured workload ticks; W1: 500, W2: 200
	// VerifyEveryTick checks every client after every tick instead of
	// after the last one only (slower: a brute-force visibility query
	// per client and tick).
	VerifyEveryTick bool
	// CPUProfile, if set, receives a CPU profile of the measured ticks;
	// samples of the timed section carry the label section=server.
	CPUProfile io.Writer
	// MemProfile, if set, receives a heap profile ("allocs") in which
	// every allocation of the measured Server.Ticks is recorded, and
	// no other made after the run began: the steady state's
	// allocations, each with its stack.
	MemProfile io.Writer
	// Series, if set, receives one CSV line per measured tick, after
	// the run (nothing is written while ticks are timed): the tick, the
	// workload step's and Server.Tick's microseconds, the clients'
	// apply microseconds, the bytes sent to all clients, and the garbage
	// collections that ended during the step or the tick. For looking
	// at which ticks make a p99.
	Series io.Writer
}

// interestWorld is one scenario's workload on the server.
type interestWorld interface {
	// spawn creates the workload's entities in the server's world.
	spawn(srv *replica.Server) error
	// join sets up client i's view, in OnJoin.
	join(srv *replica.Server, i int, c *replica.Conn) error
	// step runs one workload tick through the generated setters.
	step()
	// verify checks client i's replica against the workload.
	verify(i int, r *rclient.Replica) error
}

// interestRun is a server, its world and its clients.
type interestRun struct {
	srv     *replica.Server
	world   interestWorld
	gate    *gate
	clients []*interestClient
	cancel  func()
	joinErr error // the first OnJoin error
}

type interestClient struct {
	conn  *rclient.Conn
	stats *tickCounts
	last  int64 // stats.segments after the previous tick
}

// startInterest starts a server for sc holding the world, and connects n
// clients to it, which have all joined and applied the full state when it
// returns.
func startInterest(sc *schema.Schema, world interestWorld, n int) (*interestRun, error) {
	r := &interestRun{world: world, gate: newGate()}
	index := func(c *replica.Conn) (int, bool) {
		i, err := strconv.Atoi(strings.TrimPrefix(c.UserID(), "client-"))
		return i, err == nil && i >= 0 && i < n
	}
	srv, err := replica.NewServer(replica.Config{
		Schema: sc,
		Auth:   auth.Anonymous{},
		// The clients may all join in one tick.
		MaxJoinsPerTick: n,
		// Keep-alive pings go out with the first tick only: the timed
		// ticks send TICKs alone.
		IdleTimeout: time.Hour,
		OnJoin: func(c *replica.Conn) {
			i, ok := index(c)
			if !ok {
				r.joinErr = firstErr(r.joinErr, fmt.Errorf("bench: unexpected user %q joined", c.UserID()))
				return
			}
			if err := world.join(r.srv, i, c); err != nil {
				r.joinErr = firstErr(r.joinErr, fmt.Errorf("bench: client %d joining: %w", i, err))
			}
		},
	})
	if err != nil {
		return nil, err
	}
	r.srv = srv
	if err := world.spawn(srv); err != nil {
		return nil, err
	}
	srv.Tick() // commits the world, before any client
	net := transport.NewMemNetwork()
	ln, err := net.Listen("server", transport.Config{})
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	r.cancel = func() { cancel(); srv.Close() }
	go srv.Serve(ctx, ln)
	for i := range n {
		cl := &interestClient{stats: &tickCounts{}}
		d := &gatedDialer{Dialer: net.Dialer(transport.Config{}), gate: r.gate, stats: cl.stats}
		cl.conn, err = rclient.Dial(ctx, d, ln.Addr().String(), sc,
			rclient.DialConfig{Token: fmt.Appendf(nil, "client-%d", i), IdleTimeout: time.Hour})
		if err != nil {
			r.close()
			return nil, fmt.Errorf("bench: client %d: %w", i, err)
		}
		r.clients = append(r.clients, cl)
	}
	// The handshakes end on the server's goroutines: tick until every
	// client has been admitted, then until every one has applied.
	for deadline := time.Now().Add(time.Minute); len(srv.Conns()) < n; {
		if time.Now().After(deadline) {
			r.close()
			return nil, fmt.Errorf("bench: only %d of %d clients joined", len(srv.Conns()), n)
		}
		srv.Tick()
		time.Sleep(time.Millisecond)
	}
	if r.joinErr != nil {
		r.close()
		return nil, r.joinErr
	}
	if err := r.applied(); err != nil {
		r.close()
		return nil, err
	}
	for _, cl := range r.clients {
		cl.last = cl.stats.segments.Load()
	}
	return r, nil
}

func firstErr(first, err error) error {
	if first != nil {
		return first
	}
	return err
}

func (r *interestRun) close() { r.gate.open(); r.cancel() }

// applied waits until every client has applied the server's last tick.
func (r *interestRun) applied() error { return r.appliedBut(nil) }

// appliedBut waits until every client but those away has applied the
// server's last tick.
func (r *interestRun) appliedBut(away []bool) error {
	n := r.srv.TickNumber()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for i, cl := range r.clients {
		if i < len(away) && away[i] {
			continue
		}
		for cl.conn.LastTick() < n {
			if _, err := cl.conn.Wait(ctx); err != nil {
				return fmt.Errorf("bench: client %d waiting for tick %d: %w", i, n, err)
			}
		}
	}
	return nil
}

// hold closes the gate and waits until every client's reading goroutine
// is parked at it.
func (r *interestRun) hold() error {
	r.gate.close()
	deadline := time.Now().Add(30 * time.Second)
	for i := 0; r.gate.parked.Load() < int64(len(r.clients)); i++ {
		if i%1024 == 0 {
			for j, cl := range r.clients {
				select {
				case <-cl.conn.Done():
					code, reason, _ := cl.conn.CloseInfo()
					return fmt.Errorf("bench: client %d closed: %v %s", j, code, reason)
				default:
				}
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("bench: only %d of %d clients stopped reading", r.gate.parked.Load(), len(r.clients))
			}
		}
		runtime.Gosched()
	}
	return nil
}

// verify checks every client against the workload.
func (r *interestRun) verify() error {
	for i, cl := range r.clients {
		if err := r.world.verify(i, cl.conn.Replica()); err != nil {
			return fmt.Errorf("after tick %d, client %d: %w", r.srv.TickNumber(), i, err)
		}
	}
	return nil
}

// run drives warmup and measured workload ticks and fills res with what
// it measured.
func (r *interestRun) run(cfg InterestConfig, res *InterestResult) error {
	res.Machine = startMachine()
	defer func() { res.Machine.After = measureMachine() }()
	var (
		serverUS, tickUS, applyUS []float64
		bytes                     []float64
		series                    []tickSample
		tickAllocs, stepAllocs    uint64
		headers0                  int64
		visible                   int
	)
	var m0, m1, m2 runtime.MemStats
	if cfg.MemProfile != nil {
		// Record nothing but the measured ticks' allocations, every one.
		defer func(rate int) { runtime.MemProfileRate = rate }(runtime.MemProfileRate)
		runtime.MemProfileRate = 0
	}
	label := pprof.WithLabels(context.Background(), pprof.Labels("section", "server"))
	total := cfg.Warmup + cfg.Measured
	for t := 1; t <= total; t++ {
		measured := t > cfg.Warmup
		if t == cfg.Warmup+1 {
			for _, cl := range r.clients {
				headers0 += cl.stats.headers.Load()
			}
			if cfg.CPUProfile != nil {
				if err := pprof.StartCPUProfile(cfg.CPUProfile); err != nil {
					return err
				}
				defer pprof.StopCPUProfile()
			}
		}
		if err := r.hold(); err != nil {
			return err
		}
		if measured {
			runtime.ReadMemStats(&m0)
		}
		// The label marks the timed section's samples, not those of
		// ReadMemStats between its two parts.
		labeled := func(f func()) {
			if cfg.CPUProfile != nil {
				pprof.SetGoroutineLabels(label)
				defer pprof.SetGoroutineLabels(context.Background())
			}
			f()
		}
		var start, stepped, tickStart, end time.Time
		labeled(func() {
			start = time.Now()
			r.world.step()
			stepped = time.Now()
		})
		if measured {
			runtime.ReadMemStats(&m1)
		}
		profiled := measured && cfg.MemProfile != nil
		if profiled {
			runtime.MemProfileRate = 1
		}
		labeled(func() {
			tickStart = time.Now()
			r.srv.Tick()
			end = time.Now()
		})
		if profiled {
			runtime.MemProfileRate = 0
		}
		if measured {
			runtime.ReadMemStats(&m2)
			stepAllocs += m1.Mallocs - m0.Mallocs
			if t == cfg.Warmup+1 {
				res.GCCycles = m0.NumGC
			}
			if t == total {
				res.GCCycles = m2.NumGC - res.GCCycles
			}
			tickAllocs += m2.Mallocs - m1.Mallocs
			serverUS = append(serverUS, us(stepped.Sub(start)+end.Sub(tickStart)))
			tickUS = append(tickUS, us(end.Sub(tickStart)))
			if cfg.Series != nil {
				series = append(series, tickSample{tick: t, stepUS: us(stepped.Sub(start)), tickUS: us(end.Sub(tickStart)), gc: m2.NumGC - m0.NumGC})
			}
		}
		r.gate.open()
		if err := r.applied(); err != nil {
			return err
		}
		if measured {
			applyUS = append(applyUS, us(time.Since(end)))
			if cfg.Series != nil {
				series[len(series)-1].applyUS = applyUS[len(applyUS)-1]
			}
		}
		for _, cl := range r.clients {
			seg := cl.stats.segments.Load()
			if measured {
				bytes = append(bytes, float64(seg-cl.last))
				if cfg.Series != nil {
					series[len(series)-1].bytes += seg - cl.last
				}
				visible += cl.conn.Replica().Len()
			}
			cl.last = seg
		}
		if cfg.VerifyEveryTick || t == total {
			if err := r.verify(); err != nil && res.VerifyError == "" {
				res.VerifyError = err.Error()
			}
		}
	}
	var headers int64
	for _, cl := range r.clients {
		headers += cl.stats.headers.Load()
	}
	n, m := float64(len(r.clients)), float64(cfg.Measured)
	sum := 0.0
	for _, b := range bytes {
		sum += b
	}
	res.BytesPerClientTick = round2(sum / (n * m))
	res.BytesPerClientTickP99 = percentiles(bytes).P99
	res.TickHeaderBytesPerClientTick = round2(float64(headers-headers0) / (n * m))
	res.ServerUSPerTick = percentiles(serverUS)
	res.TickUSPerTick = percentiles(tickUS)
	res.ClientsApplyUSPerTick = percentiles(applyUS)
	res.AllocsPerTick = round2(float64(tickAllocs) / m)
	res.tickAllocs = tickAllocs
	res.StepAllocsPerTick = round2(float64(stepAllocs) / m)
	res.VisiblePerClient = round2(float64(visible) / (n * m))
	var join int64
	for _, cl := range r.clients {
		join += cl.stats.join.Load()
	}
	res.JoinBytes = round2(float64(join) / n)
	st := r.srv.InterestStats()
	res.InterestBytesPerClient = round2(float64(st.Bytes) / n)
	res.InterestPairsPerClient = round2(float64(st.Pairs) / n)
	res.Verified = res.VerifyError == ""
	if cfg.Series != nil {
		if err := writeSeries(cfg.Series, series); err != nil {
			return err
		}
	}
	if cfg.MemProfile != nil {
		runtime.GC() // the profile holds what the last collection saw
		if err := pprof.Lookup("allocs").WriteTo(cfg.MemProfile, 0); err != nil {
			return err
		}
	}
	return nil
}

// A tickSample is one measured tick of InterestConfig.Series.
type tickSample struct {
	tick                    int
	stepUS, tickUS, applyUS float64
	bytes                   int64
	gc                      uint32
}

func writeSeries(w io.Writer, series []tickSample) error {
	b := []byte("tick,step_us,tick_us,apply_us,bytes,gc\n")
	for _, t := range series {
		b = fmt.Appendf(b, "%d,%.1f,%.1f,%.1f,%d,%d\n", t.tick, t.stepUS, t.tickUS, t.applyUS, t.bytes, t.gc)
	}
	_, err := w.Write(b)
	return err
}

func us(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e3 }

func round2(v float64) float64 {
	if v < 0 {
		return -round2(-v)
	}
	return float64(int64(v*100+0.5)) / 100
}

// A gate holds the clients' reading goroutines while the server ticks.
// Open, a gatedConn receives from its connection as usual; closing the
// gate cancels the receives in progress, and the goroutines wait at the
// gate (they are "parked") until it opens again. Messages sent meanwhile
// queue in the connections.
type gate struct {
	mu     sync.Mutex
	opened chan struct{}   // closed while the gate is open
	ctx    context.Context // the receives of the current opening; canceled when the gate closes
	cancel context.CancelFunc
	parked atomic.Int64
}

func newGate() *gate {
	g := &gate{opened: make(chan struct{})}
	g.open()
	return g
}

// open opens the gate, if closed.
func (g *gate) open() {
	g.mu.Lock()
	defer g.mu.Unlock()
	select {
	case <-g.opened:
	default:
		g.ctx, g.cancel = context.WithCancel(context.Background())
		close(g.opened)
	}
}

// close closes the gate: the receives in progress return and their
// goroutines park.
func (g *gate) close() {
	g.mu.Lock()
	defer g.mu.Unlock()
	select {
	case <-g.opened:
		g.opened = make(chan struct{})
		g.cancel()
	default:
	}
}

func (g *gate) state() (opened <-chan struct{}, ctx context.Context) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.opened, g.ctx
}

// tickCounts counts what one client's connection received.
type tickCounts struct {
	segments atomic.Int64 // bytes of TICK segments
	headers  atomic.Int64 // bytes of TICK messages
	join     atomic.Int64 // segment bytes of the first TICK
	ticks    int          // TICKs received; the reading goroutine's
	pending  int          // segments of the current TICK still to come
}

// count counts a message received.
func (tc *tickCounts) count(msg []byte) {
	if tc.pending > 0 {
		tc.pending--
		tc.segments.Add(int64(len(msg)))
		if tc.ticks == 1 {
			tc.join.Add(int64(len(msg)))
		}
		return
	}
	if len(msg) == 0 || session.Type(msg[0]) != session.TypeTick {
		return
	}
	if k, err := session.ParseTick(msg); err == nil {
		tc.pending = k.Segments
		tc.ticks++
		tc.headers.Add(int64(len(msg)))
	}
}

// gatedDialer dials connections that receive through a gate and count
// what they receive.
type gatedDialer struct {
	transport.Dialer
	gate  *gate
	stats *tickCounts
}

func (d *gatedDialer) Dial(ctx context.Context, addr string) (transport.Conn, error) {
	c, err := d.Dialer.Dial(ctx, addr)
	if err != nil {
		return nil, err
	}
	return &gatedConn{Conn: c, gate: d.gate, stats: d.stats}, nil
}

type gatedConn struct {
	transport.Conn
	gate  *gate
	stats *tickCounts
}

// Receive receives while the gate is open. The connection's own receive
// runs under the gate's context (the caller's deadline, the client's idle
// timeout, is not applied: the scenario sets it to an hour).
func (c *gatedConn) Receive(ctx context.Context) ([]byte, error) {
	for {
		opened, gctx := c.gate.state()
		select {
		case <-opened:
		default:
			c.gate.parked.Add(1)
			select {
			case <-opened:
				c.gate.parked.Add(-1)
				continue
			case <-ctx.Done():
				c.gate.parked.Add(-1)
				return nil, ctx.Err()
			case <-c.Conn.Done():
				c.gate.parked.Add(-1)
				return c.Conn.Receive(ctx) // what was queued before the close, then the close
			}
		}
		msg, err := c.Conn.Receive(gctx)
		if err != nil && errors.Is(err, context.Canceled) && gctx.Err() != nil {
			select {
			case <-c.Conn.Done():
				return c.Conn.Receive(ctx)
			default:
				continue // the gate closed
			}
		}
		if err == nil {
			c.stats.count(msg)
		}
		return msg, err
	}
}
