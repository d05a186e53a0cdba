package bench

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"os"
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
	"github.com/replicago/replica/internal/arena"
	"github.com/replicago/replica/internal/workload/w1"
	"github.com/replicago/replica/quictransport"
	"github.com/replicago/replica/transport"
	"github.com/replicago/replica/wstransport"
)

// ClientsConfig selects a run of the clients scenario.
type ClientsConfig struct {
	Transport string // "ws" or "quic"
	Clients   int    // connections; default 100
	Hz        int    // tick rate; default 20
	Warmup    int    // unmeasured ticks once every client has joined; default 20
	Measured  int    // measured ticks; default 200
	// SkipMemory skips the memory measurement, which profiles every
	// allocation while the clients connect.
	SkipMemory bool
}

// ClientsResult is the outcome of a clients run. Times are in
// microseconds, memory in bytes.
type ClientsResult struct {
	Scenario    string `json:"scenario"` // "clients"
	Mode        string `json:"mode"`     // "broadcast"
	Transport   string `json:"transport"`
	Clients     int    `json:"clients"`
	Entities    int    `json:"entities"`
	Hz          int    `json:"hz"`
	WarmupTicks int    `json:"warmup_ticks"`
	Ticks       int    `json:"ticks"` // measured
	// AchievedHz is the measured ticks per second of wall time: below Hz
	// when ticks took longer than their period.
	AchievedHz float64 `json:"achieved_hz"`
	// CPUUtilization is the CPU time the process used during the measured
	// ticks, clients included, over GOMAXPROCS × wall time (Linux only):
	// near 1, the machine is saturated and tick times include waiting for
	// a CPU.
	CPUUtilization float64 `json:"cpu_utilization"`
	// ServerUSPerTick times Server.Tick: commit, encode once, and Send
	// to every connection (queueing; the transports' writers send).
	ServerUSPerTick Percentiles `json:"server_us_per_tick"`
	// UpdateUSPerTick times the W1 step through the generated setters.
	UpdateUSPerTick Percentiles `json:"update_us_per_tick"`
	// BytesPerClientPerSecond and BytesPerClientTick are the message
	// payload bytes the clients received for the measured ticks (TICK
	// headers and segments, without transport framing), averaged over
	// clients, per second at Hz.
	BytesPerClientPerSecond float64 `json:"bytes_per_client_per_second"`
	BytesPerClientTick      float64 `json:"bytes_per_client_tick"`
	JoinSeconds             float64 `json:"join_seconds"` // dialing every client, handshakes included
	// MemoryPerConnection is the server's heap and goroutine stacks per
	// idle connection; see Memory for the method.
	MemoryPerConnection float64        `json:"memory_per_connection_bytes"`
	Memory              *ConnectionMem `json:"memory,omitempty"`
	Dropped             int            `json:"clients_dropped"` // connections that closed before the end
	// Verified reports that every client reached the last tick with a
	// replica equal to the server's entities.
	Verified bool `json:"verified"`
}

// ConnectionMem breaks down the memory per connection, in bytes per
// connection.
type ConnectionMem struct {
	Method      string  `json:"method"`
	Connections int     `json:"connections"` // connections measured
	ServerHeap  float64 `json:"server_heap"`
	ServerStack float64 `json:"server_stack"`
	ClientHeap  float64 `json:"client_heap"`
	ClientStack float64 `json:"client_stack"`
	// SharedHeap is heap allocated on goroutines both sides run (a
	// transport connection's reader, say), which its allocation stack
	// does not attribute; half of it counts as the server's.
	SharedHeap float64 `json:"shared_heap"`
	// OtherHeap is heap whose stack names neither side: mostly the
	// runtime's goroutine records. ServerOther is its part split by the
	// server's share of the new goroutines.
	OtherHeap        float64 `json:"other_heap"`
	ServerOther      float64 `json:"server_other"`
	ServerGoroutines float64 `json:"server_goroutines"`
	ClientGoroutines float64 `json:"client_goroutines"`
	// ProcessHeap and ProcessStack are the whole process's growth, both
	// sides and everything else.
	ProcessHeap  float64 `json:"process_heap"`
	ProcessStack float64 `json:"process_stack"`
}

// memoryMethod documents ConnectionMem.
const memoryMethod = "clients in this process, connected and idle after the session handshake, before the first tick; " +
	"growth from one connected client to all, after 3 GCs. Heap: exact in-use bytes per allocation stack " +
	"(MemProfileRate=1 while connecting), each stack attributed by its outermost function that names a side " +
	"(server: listener, HTTP server, QUIC server, replica.Server; client: dial, client.Conn, each client's own QUIC transport); " +
	"heap of code both sides run (shared) counts half, the runtime's goroutine records (other) by the server's share of goroutines. " +
	"Stacks: StackInuse growth split by goroutine count, goroutines attributed by a pprof label inherited from the listener or the dial. " +
	"Biases: a side's stacks are assumed to have the average size; kernel socket buffers are not counted"

// benchClient is one client connection of the scenario.
type benchClient struct {
	conn *rclient.Conn
	recv atomic.Int64 // message payload bytes received
	tick atomic.Uint64

	// Owned by the client's goroutine until it returns.
	baseTick, baseBytes uint64    // at the first tick applied after the warm-up
	dialed, applied     time.Time // the dial's start; the first tick applied, its full state
	err                 error
}

// RunClients runs the clients scenario: a replica.Server with the W1
// world in broadcast mode, mutated through the arena setters every tick,
// and cfg.Clients client.Conns over real loopback sockets in this process,
// each applying ticks on a goroutine of its own.
func RunClients(cfg ClientsConfig) (*ClientsResult, error) {
	if cfg.Transport != "ws" && cfg.Transport != "quic" {
		return nil, fmt.Errorf("bench: transport %q: want ws or quic", cfg.Transport)
	}
	if cfg.Clients <= 0 {
		cfg.Clients = 100
	}
	if cfg.Hz <= 0 {
		cfg.Hz = 20
	}
	if cfg.Warmup <= 0 {
		cfg.Warmup = 20
	}
	if cfg.Measured <= 0 {
		cfg.Measured = 200
	}
	res := &ClientsResult{Scenario: "clients", Mode: "broadcast", Transport: cfg.Transport, Clients: cfg.Clients,
		Hz: cfg.Hz, WarmupTicks: cfg.Warmup, Ticks: cfg.Measured}

	srv, s, err := newW1Served(cfg.Hz)
	if err != nil {
		return nil, err
	}
	res.Entities = len(s.units)

	sv, err := serve(srv, cfg.Transport)
	if err != nil {
		return nil, err
	}
	ln, dial := sv.ln, sv.dial
	clients := make([]*benchClient, cfg.Clients)
	defer func() {
		sv.stop()
		for _, c := range clients {
			if c != nil && c.conn != nil {
				c.conn.Close()
			}
		}
	}()

	// Connect: one client first, which allocates what the server and the
	// dialer allocate once, then the others, measured.
	start := time.Now()
	if err := connect(clients[:1], dial, ln.Addr().String()); err != nil {
		return nil, err
	}
	// Profiling every allocation makes the heap profile exact. The rate
	// is process-wide: it is restored as soon as the clients are in.
	var m0 *memSnapshot
	rate := runtime.MemProfileRate
	if !cfg.SkipMemory && cfg.Clients > 1 {
		runtime.MemProfileRate = 1
		defer func() { runtime.MemProfileRate = rate }()
		m0 = snapshotMemory()
	}
	if err := connect(clients[1:], dial, ln.Addr().String()); err != nil {
		return nil, err
	}
	res.JoinSeconds = time.Since(start).Seconds()
	if m0 != nil {
		m1 := snapshotMemory()
		runtime.MemProfileRate = rate
		res.Memory = m1.perConn(m0, cfg.Clients-1)
		res.MemoryPerConnection = res.Memory.ServerHeap + res.Memory.ServerStack + res.Memory.SharedHeap/2 + res.Memory.ServerOther
	}

	// Tick: the clients apply on goroutines of their own. The first ticks
	// admit the clients (a client's handshake may end just after a tick),
	// the warm-up follows, then the measured ticks.
	var warmEnd atomic.Uint64
	warmEnd.Store(1 << 62)
	ctx, abandon := context.WithCancel(context.Background())
	defer abandon()
	var playing sync.WaitGroup
	for _, c := range clients {
		playing.Add(1)
		go pprof.Do(ctx, pprof.Labels("side", "client"), func(ctx context.Context) {
			defer playing.Done()
			c.play(ctx, &warmEnd)
		})
	}
	// The tick goroutine is the server's too: what it starts (the
	// transports' writers) inherits the label.
	defer pprof.SetGoroutineLabels(context.Background())
	pprof.SetGoroutineLabels(pprof.WithLabels(context.Background(), pprof.Labels("side", "server")))
	t := time.NewTicker(time.Second / time.Duration(cfg.Hz))
	defer t.Stop()
	tick := func() (update, server time.Duration) {
		update, server, _ = s.tickServer(t, srv)
		return update, server
	}
	for joinDeadline := time.Now().Add(time.Minute); len(srv.Conns()) < cfg.Clients; {
		if time.Now().After(joinDeadline) {
			return nil, fmt.Errorf("bench: only %d of %d clients joined", len(srv.Conns()), cfg.Clients)
		}
		tick()
	}
	// Decoding the full state (every entity, in every client) is the
	// costliest part of joining: let the clients finish before warming up.
	if err := caughtUp(clients, srv.TickNumber(), time.Minute); err != nil {
		return nil, err
	}
	warmEnd.Store(srv.TickNumber() + uint64(cfg.Warmup))
	for range cfg.Warmup {
		tick()
	}
	serverUS, updateUS := make([]float64, 0, cfg.Measured), make([]float64, 0, cfg.Measured)
	cpu0, cpuOK := cpuSeconds()
	measureStart := time.Now()
	for range cfg.Measured {
		update, server := tick()
		updateUS = append(updateUS, float64(update.Nanoseconds())/1e3)
		serverUS = append(serverUS, float64(server.Nanoseconds())/1e3)
	}
	res.AchievedHz = float64(cfg.Measured) / time.Since(measureStart).Seconds()
	if cpu1, ok := cpuSeconds(); ok && cpuOK {
		res.CPUUtilization = (cpu1 - cpu0) / time.Since(measureStart).Seconds() / float64(runtime.GOMAXPROCS(0))
	}
	res.ServerUSPerTick = percentiles(serverUS)
	res.UpdateUSPerTick = percentiles(updateUS)
	if n := len(srv.Conns()); n != cfg.Clients {
		res.Dropped = cfg.Clients - n
	}

	verified := verify(srv, clients, &playing, abandon)
	res.Verified = verified && res.Dropped == 0
	var perTick, n float64
	for _, c := range clients {
		if ticks := c.conn.LastTick() - c.baseTick; c.baseTick != 0 && ticks > 0 {
			perTick += float64(uint64(c.recv.Load())-c.baseBytes) / float64(ticks)
			n++
		}
	}
	if n > 0 {
		res.BytesPerClientTick = perTick / n
		res.BytesPerClientPerSecond = res.BytesPerClientTick * float64(cfg.Hz)
	}
	return res, nil
}

// newW1Served returns a replica.Server ticking at hz with the W1 world
// spawned through the arena setters and committed, for the scenarios with
// real client connections. Idle timeouts are long: clients may connect
// for a while before the first tick, and nothing is sent before it (no
// pings either).
func newW1Served(hz int) (*replica.Server, *w1Server, error) {
	// Every client dials from loopback, one address, as behind a proxy:
	// the cap on handshakes per address is the server-wide one.
	srv, err := replica.NewServer(replica.Config{Schema: arena.Schema(), Auth: auth.Anonymous{}, TickRate: hz,
		HandshakeTimeout: time.Minute, IdleTimeout: 10 * time.Minute, MaxHandshakesPerAddr: 512})
	if err != nil {
		return nil, nil, err
	}
	world := w1.New(w1.DefaultConfig())
	s := &w1Server{world: world, tr: srv.Tracker(), units: make([]unit, len(world.X))}
	for id := range s.units {
		u, err := arena.SpawnUnit(s.tr)
		if err != nil {
			return nil, nil, err
		}
		u.SetX(world.X[id])
		u.SetY(world.Y[id])
		u.SetAngle(world.Angle[id])
		u.SetHp(world.HP[id])
		u.SetName(world.Name[id])
		s.units[id] = u
	}
	srv.Tick() // the creation, to nobody
	srv.Tick() // its change records go back to the pool
	return srv, s, nil
}

// tickServer waits for the ticker, runs a W1 step through the setters and
// srv's tick, and returns how long each took. serverCPU is the CPU time
// of the calling thread during the tick, which is the tick's own when
// the goroutine is locked to its thread, and 0 where it is not known.
func (s *w1Server) tickServer(t *time.Ticker, srv *replica.Server) (update, server, serverCPU time.Duration) {
	<-t.C
	t0 := time.Now()
	s.mutate()
	c1, _ := ThreadCPU()
	t1 := time.Now()
	srv.Tick()
	server = time.Since(t1)
	if c2, ok := ThreadCPU(); ok {
		serverCPU = c2 - c1
	}
	return t1.Sub(t0), server, serverCPU
}

// served is a server's loopback listener, serving.
type served struct {
	ln   transport.Listener
	dial transport.Dialer
	stop func() // closes the server and waits for Serve to return
}

// serve listens on loopback with the transport and serves srv there.
func serve(srv *replica.Server, transportName string) (*served, error) {
	var (
		sv  served
		err error
	)
	// The listener and everything it starts carry the label side=server,
	// the dials side=client: goroutines inherit their creator's labels.
	pprof.Do(context.Background(), pprof.Labels("side", "server"), func(context.Context) {
		sv.ln, sv.dial, err = listen(transportName)
	})
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	var serving sync.WaitGroup
	serving.Add(1)
	go pprof.Do(ctx, pprof.Labels("side", "server"), func(ctx context.Context) {
		defer serving.Done()
		srv.Serve(ctx, sv.ln)
	})
	sv.stop = func() {
		srv.Close()
		cancel()
		serving.Wait()
	}
	return &sv, nil
}

// verify stops ticking, lets every client apply the last tick, closes
// the server and, once the clients' goroutines (counted by playing) have
// returned, reports whether every client reached the last tick with a
// replica equal to the server's entities. abandon ends the goroutines of
// clients that do not return in time.
func verify(srv *replica.Server, clients []*benchClient, playing *sync.WaitGroup, abandon func()) bool {
	last := srv.TickNumber()
	caughtUp(clients, last, 30*time.Second) // the comparison reports those that did not
	srv.Close()
	waitPlaying(playing, abandon)
	ents := srv.Tracker().AppendEntities(nil)
	for _, c := range clients {
		if c.conn == nil {
			return false
		}
		r := c.conn.Replica()
		if c.conn.LastTick() != last || r.Len() != len(ents) {
			return false
		}
		for _, e := range ents {
			if got := r.Entity(e.ID()); got == nil || !got.Equal(&e.Record) {
				return false
			}
		}
	}
	return true
}

// waitPlaying waits for the clients' goroutines, counted by playing, to
// return once their connections ended, and ends them with abandon if they
// take over 30 seconds.
func waitPlaying(playing *sync.WaitGroup, abandon func()) {
	done := make(chan struct{})
	go func() { playing.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		abandon()
		<-done
	}
}

// cpuSeconds returns the CPU time the process has used, user and
// system, from /proc/self/stat (in clock ticks of 1/100 s, the value of
// USER_HZ on every Linux architecture Go supports), or false elsewhere.
func cpuSeconds() (float64, bool) {
	b, err := os.ReadFile("/proc/self/stat")
	if err != nil {
		return 0, false
	}
	// The fields after the command name, which is in parentheses: state
	// is the first, utime the 12th and stime the 13th.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, false
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return 0, false
	}
	utime, err1 := strconv.ParseUint(f[11], 10, 64)
	stime, err2 := strconv.ParseUint(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, false
	}
	return float64(utime+stime) / 100, true
}

// caughtUp waits until every client whose connection is open has applied
// tick.
func caughtUp(clients []*benchClient, tick uint64, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for _, c := range clients {
		for c.conn != nil && c.tick.Load() < tick && !closed(c.conn) {
			if time.Now().After(deadline) {
				return fmt.Errorf("bench: a client is at tick %d, not %d, after %v", c.tick.Load(), tick, timeout)
			}
			time.Sleep(time.Millisecond)
		}
	}
	return nil
}

func closed(c *rclient.Conn) bool {
	select {
	case <-c.Done():
		return true
	default:
		return false
	}
}

// settle waits, for up to two seconds, until the number of goroutines
// stops changing: handshakes and the HTTP server's connection goroutines
// have ended.
func settle() {
	prev := runtime.NumGoroutine()
	for stable, deadline := 0, time.Now().Add(2*time.Second); stable < 3 && time.Now().Before(deadline); {
		time.Sleep(20 * time.Millisecond)
		n := runtime.NumGoroutine()
		if n == prev {
			stable++
		} else {
			stable = 0
		}
		prev = n
	}
}

// listen opens a loopback listener of the transport and returns it with a
// dialer for it.
func listen(name string) (transport.Listener, transport.Dialer, error) {
	if name == "ws" {
		ln, err := wstransport.Listen("127.0.0.1:0", wstransport.Config{ErrorLog: log.New(io.Discard, "", 0)})
		return ln, wstransport.NewDialer(transport.Config{}), err
	}
	serverTLS, clientTLS, err := quictransport.DevTLS()
	if err != nil {
		return nil, nil, err
	}
	ln, err := quictransport.Listen("127.0.0.1:0", quictransport.Config{TLS: serverTLS})
	return ln, &quictransport.Dialer{Config: quictransport.Config{TLS: clientTLS}}, err
}

// connect dials a client into every entry of clients, a few at a time,
// and waits until every handshake is done.
func connect(clients []*benchClient, d transport.Dialer, addr string) error {
	const parallel = 16
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
		sem  = make(chan struct{}, parallel)
	)
	for i := range clients {
		c := &benchClient{}
		clients[i] = c
		sem <- struct{}{}
		wg.Add(1)
		go pprof.Do(context.Background(), pprof.Labels("side", "client"), func(ctx context.Context) {
			defer func() { <-sem; wg.Done() }()
			if err := c.dial(ctx, d, addr); err != nil {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if len(errs) > 0 {
		return fmt.Errorf("bench: %d of %d clients failed to connect; first: %w", len(errs), len(clients), errs[0])
	}
	return nil
}

// dial connects the client, counting the payload bytes it receives. A
// server at its cap of handshakes in progress refuses with
// CloseServerBusy: the client tries again shortly, as a game client would.
func (c *benchClient) dial(ctx context.Context, d transport.Dialer, addr string) error {
	c.dialed = time.Now()
	for {
		conn, err := rclient.Dial(ctx, transport.CountReceived(d, &c.recv), addr, arena.Schema(),
			rclient.DialConfig{HandshakeTimeout: time.Minute, IdleTimeout: 10 * time.Minute})
		var busy *rclient.RefusedError
		if errors.As(err, &busy) && busy.Code == transport.CloseServerBusy && ctx.Err() == nil {
			time.Sleep(50 * time.Millisecond)
			continue
		}
		c.conn = conn
		return err
	}
}

// play applies ticks until the connection ends. It notes its received
// bytes at the first tick it applies at or after the end of the warm-up.
func (c *benchClient) play(ctx context.Context, warmEnd *atomic.Uint64) {
	for {
		_, err := c.conn.Wait(ctx)
		t := c.conn.LastTick()
		if c.applied.IsZero() && t > 0 {
			c.applied = time.Now()
		}
		if c.baseTick == 0 && t >= warmEnd.Load() {
			c.baseTick, c.baseBytes = t, uint64(c.recv.Load())
		}
		c.tick.Store(t)
		if err != nil {
			c.err = err
			return
		}
	}
}

// memSnapshot is the process's memory at one moment, after GC.
type memSnapshot struct {
	heap, stack uint64
	byStack     map[string]heapRecord // in-use heap by allocation stack
	goroutines  map[string]int        // by side label
}

type heapRecord struct {
	bytes int64
	side  string // "server", "client", "shared" or "other"
}

func snapshotMemory() *memSnapshot {
	settle()
	for range 3 {
		runtime.GC()
	}
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	m := &memSnapshot{heap: ms.HeapAlloc, stack: ms.StackInuse, byStack: map[string]heapRecord{}, goroutines: map[string]int{}}
	var buf bytes.Buffer
	pprof.Lookup("heap").WriteTo(&buf, 1)
	parseHeap(&buf, m.byStack)
	buf.Reset()
	pprof.Lookup("goroutine").WriteTo(&buf, 1)
	parseGoroutines(&buf, m.goroutines)
	return m
}

// perConn returns the growth from m0 to m, per connection.
func (m *memSnapshot) perConn(m0 *memSnapshot, n int) *ConnectionMem {
	heap := map[string]int64{}
	for k, r := range m.byStack {
		heap[r.side] += r.bytes - m0.byStack[k].bytes
	}
	for k, r := range m0.byStack {
		if _, ok := m.byStack[k]; !ok {
			heap[r.side] -= r.bytes
		}
	}
	g := func(side string) float64 { return float64(m.goroutines[side] - m0.goroutines[side]) }
	gs, gc, gall := g("server"), g("client"), g("server")+g("client")+g("")
	stack := float64(int64(m.stack) - int64(m0.stack))
	f := float64(n)
	c := &ConnectionMem{
		Method:           memoryMethod,
		Connections:      n,
		ServerHeap:       float64(heap["server"]) / f,
		ClientHeap:       float64(heap["client"]) / f,
		SharedHeap:       float64(heap["shared"]) / f,
		OtherHeap:        float64(heap["other"]) / f,
		ServerGoroutines: gs / f,
		ClientGoroutines: gc / f,
		ProcessHeap:      float64(int64(m.heap)-int64(m0.heap)) / f,
		ProcessStack:     stack / f,
	}
	if gall > 0 {
		c.ServerStack = stack * gs / gall / f
		c.ClientStack = stack * gc / gall / f
		c.ServerOther = c.OtherHeap * gs / gall
	}
	return c
}

// Which side allocated a heap object is decided by the functions on its
// allocation stack, outermost first: the first one that names a side
// decides. Goroutines start in the function at the root of their stacks,
// so the outermost frames say whose goroutine allocated.
var sideMarkers = []struct{ prefix, side string }{
	// The server: its listener, HTTP server, QUIC server and session.
	{"github.com/replicago/replica.(*Server).", "server"},
	{"github.com/replicago/replica/wstransport.(*Handler).", "server"},
	{"github.com/replicago/replica/wstransport.NewListener", "server"},
	{"github.com/replicago/replica/quictransport.(*listener).", "server"},
	{"github.com/replicago/replica/quictransport.listen", "server"},
	{"net/http.(*conn).", "server"},
	{"net/http.(*Server).", "server"},
	{"github.com/quic-go/quic-go.(*baseServer).", "server"},
	{"github.com/quic-go/quic-go.(*Transport).Listen", "server"},
	{"crypto/tls.(*Conn).serverHandshake", "server"},
	{"crypto/tls.QUICServer", "server"},
	// The clients: the dials and client.Conn.
	{"github.com/replicago/replica/internal/bench.connect", "client"},
	{"github.com/replicago/replica/client.", "client"},
	{"github.com/replicago/replica/wstransport.(*Dialer).", "client"},
	{"github.com/replicago/replica/quictransport.(*Dialer).", "client"},
	{"net/http.(*Transport).", "client"},
	{"net/http.(*persistConn).", "client"},
	{"github.com/quic-go/quic-go.(*Transport).dial", "client"},
	{"github.com/quic-go/quic-go.(*Transport).doDial", "client"}, // a client connection's run loop
	{"github.com/quic-go/quic-go.(*Transport).Dial", "client"},
	{"crypto/tls.(*Conn).clientHandshake", "client"},
	{"crypto/tls.QUICClient", "client"},
	// Each client dials from a UDP socket and QUIC transport of its own;
	// the server has one. What a transport's reader holds grows with the
	// clients only.
	{"github.com/quic-go/quic-go.(*Transport).listen", "client"},
	{"github.com/quic-go/quic-go.(*Transport).init", "client"},
}

// side attributes an allocation stack, given innermost first: "server",
// "client", "shared" for code both sides run (a transport connection's
// reader, say), "other" for the rest (the runtime's goroutine records).
func side(funcs []string) string {
	// A server's QUIC connection runs in a goroutine that starts in
	// (*Conn).run; a client's in a closure of (*Transport).doDial.
	if n := len(funcs); n > 0 && funcs[n-1] == "github.com/quic-go/quic-go.(*Conn).run" {
		return "server"
	}
	for i := len(funcs) - 1; i >= 0; i-- {
		for _, m := range sideMarkers {
			if strings.HasPrefix(funcs[i], m.prefix) {
				return m.side
			}
		}
	}
	for _, f := range funcs {
		if strings.HasPrefix(f, "github.com/replicago/replica/") || strings.HasPrefix(f, "github.com/quic-go/") ||
			strings.HasPrefix(f, "github.com/coder/websocket") || strings.HasPrefix(f, "crypto/tls.") {
			return "shared"
		}
	}
	return "other"
}

// parseHeap reads a heap profile in the legacy text format (debug=1):
// records "inuse_objects: inuse_bytes [alloc_objects: alloc_bytes] @
// addresses" followed by "#\taddress\tfunction+offset\tfile:line" lines.
// With MemProfileRate=1 the counts are exact.
func parseHeap(r io.Reader, into map[string]heapRecord) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	var key string
	var rec heapRecord
	var funcs []string
	flush := func() {
		if key != "" {
			rec.side = side(funcs)
			into[key] = heapRecord{bytes: into[key].bytes + rec.bytes, side: rec.side}
		}
		key, funcs = "", funcs[:0]
	}
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "#\t"):
			if fields := strings.Split(line, "\t"); len(fields) >= 3 && key != "" {
				fn, _, _ := strings.Cut(fields[2], "+0x")
				funcs = append(funcs, fn)
			}
		case strings.Contains(line, " @ ") && !strings.HasPrefix(line, "heap profile:"):
			flush()
			counts, addrs, _ := strings.Cut(line, " @ ")
			_, inuse, _ := strings.Cut(counts, ": ")
			inuse, _, _ = strings.Cut(inuse, " ")
			n, err := strconv.ParseInt(inuse, 10, 64)
			if err != nil {
				continue
			}
			key, rec = addrs, heapRecord{bytes: n}
		case line == "":
			flush()
		}
	}
	flush()
}

// parseGoroutines reads a goroutine profile in the text format (debug=1),
// counting goroutines by their "side" label.
func parseGoroutines(r io.Reader, into map[string]int) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	count := 0
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.Contains(line, " @ ") && !strings.HasPrefix(line, "#"):
			into[""] += count // the previous record had no label
			n, err := strconv.Atoi(strings.TrimSpace(strings.SplitN(line, " @ ", 2)[0]))
			if err != nil {
				n = 0
			}
			count = n
		case strings.HasPrefix(line, "# labels: "):
			for _, s := range []string{"server", "client"} {
				if strings.Contains(line, `"side":"`+s+`"`) {
					into[s] += count
					count = 0
				}
			}
		}
	}
	into[""] += count
}
