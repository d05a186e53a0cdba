package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"

	"github.com/replicago/replica/internal/bench"
	"github.com/replicago/replica/internal/persistschema"
	"github.com/replicago/replica/internal/workload/w2"
	"github.com/replicago/replica/state"
	"github.com/replicago/replica/store"
)

// PersistResult is the outcome of the persist scenario.
type PersistResult struct {
	Scenario        string  `json:"scenario"`
	Store           string  `json:"store"`
	Players         int     `json:"players"`
	Hz              int     `json:"hz"`
	Ticks           int     `json:"ticks"`
	FlushIntervalMS float64 `json:"flush_interval_ms"`
	// ChangedEntities is how many times the tick handed a player whose
	// persist fields changed to the Writer; SubmittedPerS that per second.
	ChangedEntities int     `json:"changed_entities"`
	SubmittedPerS   float64 `json:"submitted_entity_changes_per_s"`
	// The Writer's flushes: how many, the documents they wrote, and the
	// documents written per second of time spent in Store.Write (the
	// store's capacity for entity changes).
	Flushes                int         `json:"flushes"`
	EntitiesWritten        int         `json:"entities_written"`
	FlushEntityChangesPerS float64     `json:"flush_entity_changes_per_s"`
	FlushMS                Percentiles `json:"flush_ms"`
	FlushFailures          int         `json:"flush_failures"`
	// The tick goroutine's added cost: finding the changed players in the
	// tick's changeset, encoding them and handing them over, per changed
	// entity and per tick.
	TickUSPerChangedEntity float64 `json:"tick_us_per_changed_entity"`
	// The same per tick: its median over ticks, less sensitive to a tick
	// descheduled on a loaded machine.
	TickUSPerChangedEntityP50 float64 `json:"tick_us_per_changed_entity_p50"`
	// The same in CPU time of the tick's thread (Linux), which a thread
	// descheduled on a loaded machine does not inflate; 0 where unknown.
	TickCPUUSPerChangedEntity float64     `json:"tick_cpu_us_per_changed_entity"`
	TickUS                    Percentiles `json:"tick_us"`
	DocBytes                  float64     `json:"doc_bytes"`
	// LagMS is the write-behind lag: from the tick that changed a player
	// to the end of the flush that stored it.
	LagMS       Percentiles `json:"lag_ms"`
	Verified    bool        `json:"verified"`
	VerifyError string      `json:"verify_error,omitempty"`
}

// Percentiles of a distribution.
type Percentiles struct {
	P50 float64 `json:"p50"`
	P99 float64 `json:"p99"`
}

func percentilesOf(v []float64) Percentiles {
	if len(v) == 0 {
		return Percentiles{}
	}
	slices.Sort(v)
	at := func(p float64) float64 {
		i := int(math.Ceil(p*float64(len(v)))) - 1
		return math.Round(v[max(i, 0)]*1000) / 1000
	}
	return Percentiles{P50: at(0.50), P99: at(0.99)}
}

// runBench runs the persist benchmark: W2's 500 players saved behind the
// tick.
func runBench(args []string) error {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	kind := fs.String("store", "sqlite", "sqlite, postgres or redis")
	dsn := fs.String("dsn", "", "sqlite: a directory for the database file (default a temporary one); postgres: a connection string "+
		"(default the local test database); redis: host:port or a redis:// URL (default 127.0.0.1:6379)")
	duration := fs.Duration("duration", 60*time.Second, "simulated time, ticked in real time at 20 Hz")
	flush := fs.Duration("flush", time.Second, "the Writer's flush interval")
	asJSON := fs.Bool("json", false, "print one JSON object")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *duration < 50*time.Millisecond {
		return fmt.Errorf("bench: -duration must be at least one tick")
	}
	res, err := benchPersist(*kind, *dsn, *duration, *flush)
	if err != nil {
		return err
	}
	if *asJSON {
		if err := json.NewEncoder(os.Stdout).Encode(res); err != nil {
			return err
		}
	} else {
		fmt.Printf("persist %s players=%d ticks=%d at %d Hz, flush every %v, verified=%v\n",
			res.Store, res.Players, res.Ticks, res.Hz, *flush, res.Verified)
		fmt.Printf("  tick: %.2f µs per changed entity (median tick %.2f, CPU %.2f; %d changed, %.0f/s, %.0f B/doc), %.1f/%.1f µs per tick (p50/p99)\n",
			res.TickUSPerChangedEntity, res.TickUSPerChangedEntityP50, res.TickCPUUSPerChangedEntity, res.ChangedEntities, res.SubmittedPerS, res.DocBytes, res.TickUS.P50, res.TickUS.P99)
		fmt.Printf("  flushes: %d, %d documents, %.0f entity changes/s of store time, %.2f/%.2f ms per flush, lag %.0f/%.0f ms (p50/p99)\n",
			res.Flushes, res.EntitiesWritten, res.FlushEntityChangesPerS, res.FlushMS.P50, res.FlushMS.P99, res.LagMS.P50, res.LagMS.P99)
	}
	if !res.Verified {
		return fmt.Errorf("bench: persist run did not verify: %s", res.VerifyError)
	}
	return nil
}

// benchStore opens a store for the benchmark under a fresh table or key
// prefix, and returns a function that removes what it stored.
func benchStore(ctx context.Context, kind, dsn string) (store.Store, func(), error) {
	var b [4]byte
	rand.Read(b[:])
	prefix := "bench_" + hex.EncodeToString(b[:])
	switch kind {
	case "sqlite":
		dir := dsn
		temp := dir == ""
		if temp {
			var err error
			if dir, err = os.MkdirTemp("", "replica-bench-"); err != nil {
				return nil, nil, err
			}
		}
		path := filepath.Join(dir, prefix+".db")
		if err := os.WriteFile(path, nil, 0o644); err != nil {
			return nil, nil, err
		}
		st, err := openStore(ctx, kind, path, "")
		return st, func() {
			for _, suffix := range []string{"", "-wal", "-shm"} {
				os.Remove(path + suffix)
			}
			if temp {
				os.Remove(dir)
			}
		}, err
	case "postgres":
		if dsn == "" {
			dsn = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"
		}
		st, err := openStore(ctx, kind, dsn, prefix)
		return st, func() {
			if c, err := pgx.Connect(ctx, dsn); err == nil {
				c.Exec(ctx, `DROP TABLE IF EXISTS `+prefix+`_docs, `+prefix+`_schemas`)
				c.Close(ctx)
			}
		}, err
	case "redis":
		prefix += ":"
		st, err := openStore(ctx, kind, dsn, prefix)
		return st, func() {
			addr := dsn
			if addr == "" {
				addr = "127.0.0.1:6379"
			}
			opt := &redis.Options{Addr: addr}
			if o, err := redis.ParseURL(dsn); err == nil {
				opt = o
			}
			opt.MaintNotificationsConfig = &maintnotifications.Config{Mode: maintnotifications.ModeDisabled}
			c := redis.NewClient(opt)
			defer c.Close()
			if keys, err := c.Keys(ctx, prefix+"*").Result(); err == nil && len(keys) > 0 {
				c.Del(ctx, keys...)
			}
		}, err
	}
	return nil, nil, fmt.Errorf("bench: unknown store %q (known: sqlite, postgres, redis)", kind)
}

func benchPersist(kind, dsn string, duration, flushEvery time.Duration) (*PersistResult, error) {
	const hz = 20
	ctx := context.Background()
	st, cleanup, err := benchStore(ctx, kind, dsn)
	if err != nil {
		return nil, err
	}
	defer cleanup()
	defer st.Close()

	world := w2.NewWorld(w2.DefaultConfig())
	np := len(world.Gold)
	sch := persistschema.Schema()
	codec := store.NewCodec(sch)
	tr := state.NewTracker(sch)
	players := make([]persistschema.Player, np)
	keyOf := map[uint32]string{} // entity slot → game key
	for i := range players {
		p, err := persistschema.SpawnPlayer(tr)
		if err != nil {
			return nil, err
		}
		p.SetName(world.Name[i])
		p.SetX(world.X[i])
		p.SetY(world.Y[i])
		p.SetHp(world.HP[i])
		p.SetGold(world.Gold[i])
		p.SetLevel(world.Level[i])
		for k, it := range world.Inv[i] {
			v := persistschema.NewItem()
			v.SetKind(it.Kind)
			v.SetCount(it.Count)
			p.Inv().Add(uint8(k+1), v)
		}
		players[i] = p
		keyOf[p.ID().Slot()] = world.Name[i]
	}

	var (
		mu       sync.Mutex
		measure  bool
		lags     []float64
		flushMS  []float64
		written  int
		storeDur time.Duration
		flushes  int
		failures int
	)
	wr, err := store.NewWriter(store.WriterConfig{Store: st, Codec: codec, FlushInterval: flushEvery,
		OnFlush: func(fi store.FlushInfo) {
			mu.Lock()
			defer mu.Unlock()
			if !measure {
				return
			}
			if fi.Err != nil {
				failures++
				return
			}
			flushes++
			written += fi.Entities
			storeDur += fi.Duration
			flushMS = append(flushMS, float64(fi.Duration.Microseconds())/1000)
			for _, l := range fi.Lags {
				lags = append(lags, float64(l.Microseconds())/1000)
			}
		}})
	if err != nil {
		return nil, err
	}
	// The initial save: every player, created this tick.
	cs := tr.Commit()
	wr.Begin(cs.Tick)
	for _, c := range cs.Changes {
		if codec.Changed(c) {
			wr.PutChange(keyOf[c.Entity.ID().Slot()], c)
		}
	}
	wr.End()
	if err := wr.Flush(ctx); err != nil {
		return nil, fmt.Errorf("bench: initial save: %w", err)
	}
	mu.Lock()
	measure = true
	mu.Unlock()

	ticks := int(duration / (time.Second / hz))
	var (
		tickUS  = make([]float64, 0, ticks)
		perEnt  = make([]float64, 0, ticks)
		changed int
		busy    time.Duration
		cpu     time.Duration
		cpuOK   = true
	)
	runtime.LockOSThread() // for bench.ThreadCPU
	defer runtime.UnlockOSThread()
	start := time.Now()
	for t := 1; t <= ticks; t++ {
		ch := world.Step()
		for _, e := range ch.Moved {
			if e < np {
				players[e].SetX(world.X[e])
				players[e].SetY(world.Y[e])
			}
		}
		for _, e := range ch.HP {
			if e < np {
				players[e].SetHp(world.HP[e])
			}
		}
		for _, c := range ch.Inv {
			it, ok := players[c.Player].Inv().Get(uint8(c.Key))
			if !ok {
				return nil, fmt.Errorf("bench: player %d has no item %d", c.Player, c.Key)
			}
			it.SetCount(world.Inv[c.Player][c.Key-1].Count)
		}
		for _, p := range ch.Gold {
			players[p].SetGold(world.Gold[p])
		}
		cs := tr.Commit()

		// The tick's persistence hook, as a server runs it: the timed part.
		c0, ok0 := bench.ThreadCPU()
		t0 := time.Now()
		wr.Begin(cs.Tick)
		n := 0
		for _, c := range cs.Changes {
			if codec.Changed(c) {
				wr.PutChange(keyOf[c.Entity.ID().Slot()], c)
				n++
			}
		}
		err := wr.End()
		d := time.Since(t0)
		c1, ok1 := bench.ThreadCPU()
		cpu += c1 - c0
		cpuOK = cpuOK && ok0 && ok1
		if err != nil {
			return nil, fmt.Errorf("bench: tick %d: %w", t, err)
		}
		busy += d
		changed += n
		tickUS = append(tickUS, float64(d.Nanoseconds())/1000)
		if n > 0 {
			perEnt = append(perEnt, float64(d.Nanoseconds())/1000/float64(n))
		}
		if sleep := time.Until(start.Add(time.Duration(t) * time.Second / hz)); sleep > 0 {
			time.Sleep(sleep)
		}
	}
	elapsed := time.Since(start)
	closeCtx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if err := wr.Close(closeCtx); err != nil {
		return nil, err
	}

	res := &PersistResult{
		Scenario: "persist", Store: kind, Players: np, Hz: hz, Ticks: ticks,
		FlushIntervalMS: float64(flushEvery.Milliseconds()),
		ChangedEntities: changed, SubmittedPerS: float64(changed) / elapsed.Seconds(),
		TickUS:                    percentilesOf(tickUS),
		TickUSPerChangedEntityP50: percentilesOf(perEnt).P50,
		DocBytes:                  float64(len(codec.AppendEntity(nil, players[0].Entity()))),
	}
	if changed > 0 {
		res.TickUSPerChangedEntity = math.Round(float64(busy.Nanoseconds())/float64(changed)) / 1000
		if cpuOK {
			res.TickCPUUSPerChangedEntity = math.Round(float64(cpu.Nanoseconds())/float64(changed)) / 1000
		}
	}
	mu.Lock()
	res.Flushes, res.EntitiesWritten, res.FlushFailures = flushes, written, failures
	if storeDur > 0 {
		res.FlushEntityChangesPerS = math.Round(float64(written) / storeDur.Seconds())
	}
	res.FlushMS = percentilesOf(flushMS)
	res.LagMS = percentilesOf(lags)
	mu.Unlock()
	res.VerifyError = verifyPersist(ctx, st, codec, world)
	res.Verified = res.VerifyError == ""
	return res, nil
}

// verifyPersist checks that the store holds, for every player, W2's gold,
// level and inventory as the generator has them now, read back into a
// fresh entity.
func verifyPersist(ctx context.Context, st store.Store, codec *store.Codec, world *w2.World) string {
	tr := state.NewTracker(codec.Schema())
	for i := range world.Gold {
		key := world.Name[i]
		doc, err := st.Load(ctx, key)
		if err != nil {
			return err.Error()
		}
		p, err := persistschema.SpawnPlayer(tr)
		if err != nil {
			return err.Error()
		}
		if err := codec.Restore(p.Entity(), doc); err != nil {
			return err.Error()
		}
		if p.Gold() != world.Gold[i] || p.Level() != world.Level[i] || p.Inv().Len() != len(world.Inv[i]) {
			return fmt.Sprintf("%s: gold %d level %d items %d, want %d, %d, %d", key,
				p.Gold(), p.Level(), p.Inv().Len(), world.Gold[i], world.Level[i], len(world.Inv[i]))
		}
		for k, want := range world.Inv[i] {
			it, ok := p.Inv().Get(uint8(k + 1))
			if !ok || it.Kind() != want.Kind || it.Count() != want.Count {
				return fmt.Sprintf("%s: item %d differs", key, k+1)
			}
		}
		if p.X() != 0 || p.Name() != "" {
			return key + ": a field that is not persist was stored"
		}
	}
	n := 0
	if err := st.Scan(ctx, func(store.Document) error { n++; return nil }); err != nil {
		return err.Error()
	}
	if n != len(world.Gold) {
		return "the store holds " + strconv.Itoa(n) + " documents, want one per player"
	}
	return ""
}
