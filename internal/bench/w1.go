// Package bench runs replica's benchmark scenarios (see the W1 workload)
// and reports them as JSON-ready results.
package bench

import (
	"fmt"
	"math"
	"runtime"
	"runtime/metrics"
	"slices"
	"strconv"
	"time"

	"github.com/replicago/replica/codec"
	"github.com/replicago/replica/internal/arena"
	"github.com/replicago/replica/internal/workload/w1"
	"github.com/replicago/replica/state"
)

// W1Config selects a W1 run.
type W1Config struct {
	Clients   int  // clients in broadcast mode; default 1
	Quantized bool // positions at 1/64 unit and angle in 12 bits
	Warmup    int  // unmeasured ticks; default 100
	Measured  int  // measured ticks; default 500
	// Steady is, for the TypeScript client (RunW1TS), the ticks played
	// after the measured ones and timed apart: the decode of a client
	// whose JIT has had the whole run. Default 500; negative for none.
	Steady int
}

// Percentiles are microsecond percentiles.
type Percentiles struct {
	P50 float64 `json:"p50"`
	P99 float64 `json:"p99"`
}

// W1Result is the outcome of a W1 run.
type W1Result struct {
	Scenario           string    `json:"scenario"`
	Mode               string    `json:"mode"`
	Clients            int       `json:"clients"`
	Quantized          bool      `json:"quantized"`
	Ticks              int       `json:"ticks"`
	Verified           bool      `json:"verified"`
	ReferenceOK        bool      `json:"reference_ok"`
	Entity0            [4]string `json:"entity0"`
	BytesPerClientTick float64   `json:"bytes_per_client_tick"`
	// ServerUSPerTick is the whole server tick: the workload's own step
	// (its random numbers), the generated setters, commit and encode.
	ServerUSPerTick Percentiles `json:"server_us_per_tick"`
	// EncodeUSPerTick is the server's commit and encode of the tick, once
	// for every client.
	EncodeUSPerTick Percentiles `json:"encode_us_per_tick"`
	// ClientUSPerTick is one client's decode and apply of a tick.
	ClientUSPerTick     Percentiles `json:"client_us_per_tick"`
	AllocsPerTick       float64     `json:"allocs_per_tick"`
	ClientAllocsPerTick float64     `json:"client_allocs_per_tick"`
	BytesPerEntity      float64     `json:"bytes_per_entity_server"`
	MetadataPerEntity   float64     `json:"metadata_bytes_per_entity_server"`
	// SteadyBytesPerEntity is the server's memory per entity while
	// ticking, with this tick's change records and the encoder's buffers.
	SteadyBytesPerEntity float64 `json:"bytes_per_entity_server_ticking"`
	FullStateBytes       int     `json:"full_state_bytes"`
	// Machine is the machine's speed just before the first tick and just
	// after the last: see MachineSpeed.
	Machine machineRuns `json:"machine"`
}

// The W1 reference state of entity 0 after 600 ticks.
var w1Entity0 = [4]string{"640.8127", "12.208303", "3.2121308", "21"}

// unit is the part of the two generated arena classes the run uses.
type unit interface {
	SetX(float32)
	SetY(float32)
	SetAngle(float32)
	SetHp(int16)
	SetName(string)
	Entity() *state.Entity
}

type client struct {
	tab *state.Table
	dec *codec.Decoder
}

// RunW1 runs the W1 arena workload in broadcast mode with real generated
// entities, a real encoder and one real decoder per client.
func RunW1(cfg W1Config) (*W1Result, error) {
	if cfg.Clients <= 0 {
		cfg.Clients = 1
	}
	if cfg.Warmup <= 0 {
		cfg.Warmup = 100
	}
	if cfg.Measured <= 0 {
		cfg.Measured = 500
	}
	world := w1.New(w1.DefaultConfig())
	units := make([]unit, len(world.X)) // the game's own handles, not replica's
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	s, err := newW1Server(world, cfg.Quantized, units)
	if err != nil {
		return nil, err
	}
	// Two commits: the creation tick's change records go back to the pool,
	// which keeps only what steady ticks need.
	s.tr.Commit()
	s.tr.Commit()
	runtime.GC()
	runtime.ReadMemStats(&after)
	n := len(s.units)
	res := &W1Result{Scenario: "w1", Mode: "broadcast", Clients: cfg.Clients, Quantized: cfg.Quantized,
		Ticks: cfg.Warmup + cfg.Measured}
	// The names were allocated with the world and are shared, so the
	// values a plain Go struct of the same fields would hold are three
	// float32s, an int16 and a string header.
	res.BytesPerEntity = float64(after.HeapAlloc-before.HeapAlloc) / float64(n)
	res.MetadataPerEntity = res.BytesPerEntity - (12 + 2 + 16)

	clients := make([]client, cfg.Clients)
	for i := range clients {
		if clients[i], err = newClient(); err != nil {
			return nil, err
		}
	}
	// Everyone joins before the first tick and gets the full state.
	s.buf = s.enc.Full(s.buf[:0], s.tr.AppendEntities(nil), codec.PartAll)
	res.FullStateBytes = len(s.buf)
	for _, c := range clients {
		if err := c.apply(s.buf); err != nil {
			return nil, fmt.Errorf("initial state: %w", err)
		}
	}

	var (
		serverUS, encodeUS []float64
		clientUS           []float64
		bytes              int
		callocs            uint64
	)
	// runtime/metrics reads the allocation count without stopping the
	// world, so counting does not disturb the timings.
	sample := []metrics.Sample{{Name: "/gc/heap/allocs:objects"}}
	mallocs := func() uint64 {
		metrics.Read(sample)
		return sample[0].Value.Uint64()
	}
	inbox := make([][]byte, cfg.Clients)
	res.Machine = startMachine()
	for tick := 1; tick <= res.Ticks; tick++ {
		measured := tick > cfg.Warmup
		start := time.Now()
		s.mutate()
		mid := time.Now()
		s.encode()
		for i := range inbox {
			inbox[i] = s.buf // encoded once, shared by every client
		}
		end := time.Now()
		if measured {
			serverUS = append(serverUS, float64(end.Sub(start).Nanoseconds())/1e3)
			encodeUS = append(encodeUS, float64(end.Sub(mid).Nanoseconds())/1e3)
			bytes += len(s.buf)
			if !emptySegment(s.others) {
				bytes += len(s.others)
			}
		}
		for i, c := range clients {
			m0 := mallocs()
			start := time.Now()
			if err := c.apply(inbox[i]); err != nil {
				return nil, fmt.Errorf("tick %d client %d: %w", tick, i, err)
			}
			if !emptySegment(s.others) {
				if err := c.apply(s.others); err != nil {
					return nil, fmt.Errorf("tick %d client %d: %w", tick, i, err)
				}
			}
			if measured {
				clientUS = append(clientUS, float64(time.Since(start).Nanoseconds())/1e3)
				if i == 0 {
					callocs += mallocs() - m0
				}
			}
		}
	}
	res.Machine.After = measureMachine()
	res.BytesPerClientTick = float64(bytes) / float64(cfg.Measured)
	res.ServerUSPerTick = percentiles(serverUS)
	res.EncodeUSPerTick = percentiles(encodeUS)
	res.ClientUSPerTick = percentiles(clientUS)
	// Counting the server's allocations around each tick above would
	// blur (the counters are process-wide and flushed lazily): they are
	// measured apart, on a fresh server, warmed up, with nothing else
	// running.
	res.AllocsPerTick, res.SteadyBytesPerEntity = serverSteadyState(cfg.Quantized)
	res.ClientAllocsPerTick = float64(callocs) / float64(cfg.Measured)

	res.Verified = true
	for _, u := range s.units {
		e := u.Entity()
		for _, c := range clients {
			got := c.tab.Entity(e.ID())
			if got == nil || !got.Equal(&e.Record) {
				res.Verified = false
			}
		}
	}
	f := func(v float32) string { return strconv.FormatFloat(float64(v), 'g', -1, 32) }
	w := s.world
	res.Entity0 = [4]string{f(w.X[0]), f(w.Y[0]), f(w.Angle[0]), strconv.Itoa(int(w.HP[0]))}
	res.ReferenceOK = res.Ticks == 600 && res.Entity0 == w1Entity0
	if res.Ticks == 600 && !res.ReferenceOK {
		res.Verified = false
	}
	return res, nil
}

func newClient() (client, error) {
	dec, err := codec.NewDecoder(arena.Schema(), nil, codec.Limits{})
	return client{tab: state.NewTable(), dec: dec}, err
}

func (c client) apply(seg []byte) error {
	txn := c.tab.Begin()
	if err := c.dec.Apply(txn, seg); err != nil {
		txn.Rollback()
		return err
	}
	txn.Commit()
	return nil
}

// emptySegment reports whether seg carries nothing but its end tag.
func emptySegment(seg []byte) bool { return len(seg) == 1 && seg[0] == 0 }

func percentiles(v []float64) Percentiles {
	if len(v) == 0 {
		return Percentiles{}
	}
	slices.Sort(v)
	at := func(p float64) float64 {
		i := int(math.Ceil(p*float64(len(v)))) - 1
		return math.Round(v[max(i, 0)]*100) / 100
	}
	return Percentiles{P50: at(0.50), P99: at(0.99)}
}

// w1Server is the server side of W1: the workload, its entities and the
// encoder.
type w1Server struct {
	world  *w1.World
	tr     *state.Tracker
	units  []unit
	enc    codec.Encoder
	buf    []byte // this tick's PartAll segment
	others []byte // this tick's PartOthers segment (empty in W1)
}

// newW1Server spawns the W1 entities in their initial state; the creation
// is not yet committed.
func newW1Server(world *w1.World, quantized bool, units []unit) (*w1Server, error) {
	s := &w1Server{world: world, tr: state.NewTracker(arena.Schema()), units: units}
	for id := range s.units {
		var u unit
		var err error
		if quantized {
			u, err = arena.SpawnQunit(s.tr)
		} else {
			u, err = arena.SpawnUnit(s.tr)
		}
		if err != nil {
			return nil, err
		}
		u.SetX(s.world.X[id])
		u.SetY(s.world.Y[id])
		u.SetAngle(s.world.Angle[id])
		u.SetHp(s.world.HP[id])
		u.SetName(s.world.Name[id])
		s.units[id] = u
	}
	return s, nil
}

// mutate runs one workload step through the generated setters.
func (s *w1Server) mutate() { stepW1(s.world, s.units) }

// stepW1 runs one step of world and writes what it changed into units
// (by W1 id) through the generated setters.
func stepW1[U unit](world *w1.World, units []U) {
	moved, hpChanged := world.Step()
	for _, id := range moved {
		u := units[id]
		u.SetX(world.X[id])
		u.SetY(world.Y[id])
		u.SetAngle(world.Angle[id])
	}
	for _, id := range hpChanged {
		units[id].SetHp(world.HP[id])
	}
}

// encode commits the tick and encodes it for every partition a client in
// broadcast mode receives: all, and others (no client owns anything).
func (s *w1Server) encode() {
	cs := s.tr.Commit()
	s.buf = s.enc.Delta(s.buf[:0], cs, codec.PartAll, nil)
	s.others = s.enc.Delta(s.others[:0], cs, codec.PartOthers, nil)
}

// tick is mutate and encode.
func (s *w1Server) tick() {
	s.mutate()
	s.encode()
}

// serverSteadyState measures, on a fresh W1 world, the steady-state
// allocations of one server tick (mutation, commit and encode) and the
// server's memory per entity once ticking: entities, tracker, the pooled
// change records of a tick and the encoder's buffers.
func serverSteadyState(quantized bool) (allocs, bytesPerEntity float64) {
	w := w1.New(w1.DefaultConfig())
	units := make([]unit, len(w.X))
	var start runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&start)
	s, err := newW1Server(w, quantized, units)
	if err != nil {
		return -1, -1
	}
	for range 150 {
		s.tick()
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	const n = 100
	for range n {
		s.tick()
	}
	runtime.ReadMemStats(&after)
	runtime.GC()
	var held runtime.MemStats
	runtime.ReadMemStats(&held)
	runtime.KeepAlive(s)
	return float64(after.Mallocs-before.Mallocs) / n, float64(held.HeapAlloc-start.HeapAlloc) / float64(len(units))
}
