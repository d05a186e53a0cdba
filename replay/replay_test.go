package replay_test

import (
	"bytes"
	"cmp"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash"
	"hash/fnv"
	"io"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/replicago/replica"
	"github.com/replicago/replica/auth"
	"github.com/replicago/replica/client"
	"github.com/replicago/replica/internal/arena"
	"github.com/replicago/replica/internal/mutate"
	v1 "github.com/replicago/replica/internal/testschema/v1"
	v2 "github.com/replicago/replica/internal/testschema/v2"
	"github.com/replicago/replica/internal/workload/w1"
	"github.com/replicago/replica/replay"
	"github.com/replicago/replica/schema"
	"github.com/replicago/replica/state"
	"github.com/replicago/replica/transport"

	"pgregory.net/rapid"
)

// digest hashes a replica canonically: every entity in ID order with its
// class, level of detail, ownership and every leaf's value.
func digest(r *client.Replica) uint64 {
	ents := r.Entities(nil)
	slices.SortFunc(ents, func(a, b *state.Entity) int { return cmp.Compare(a.ID(), b.ID()) })
	h := fnv.New64a()
	for _, e := range ents {
		lvl, _ := e.Level()
		u64(h, uint64(e.ID()), uint64(e.Class().ID), uint64(lvl), b2u(e.Owned()))
		record(h, &e.Record)
	}
	u64(h, uint64(len(ents)))
	return h.Sum64()
}

func b2u(b bool) uint64 {
	if b {
		return 1
	}
	return 0
}

func u64(h hash.Hash64, vs ...uint64) {
	for _, v := range vs {
		h.Write(binary.LittleEndian.AppendUint64(nil, v))
	}
}

func str(h hash.Hash64, s string) {
	u64(h, uint64(len(s)))
	h.Write([]byte(s))
}

func record(h hash.Hash64, r *state.Record) {
	t := r.Type()
	for i := range t.Leaves {
		l := t.Leaf(i)
		switch k := l.Field.Type.Kind; {
		case k.Numeric():
			u64(h, r.Num(l.Num))
		case k == schema.List:
			li := r.List(l.Obj)
			u64(h, uint64(li.Len()))
			for j := range li.Len() {
				value(h, li.At(j))
			}
		case k == schema.Map:
			m := r.Map(l.Obj)
			keys := m.Keys(nil)
			u64(h, uint64(len(keys)))
			for _, k := range keys {
				v, _ := m.Get(k)
				value(h, k)
				value(h, v)
			}
		case k == schema.Bag:
			b := r.Bag(l.Obj)
			keys := b.Keys(nil)
			u64(h, uint64(len(keys)))
			for _, k := range keys {
				u64(h, k)
				record(h, b.Get(k))
			}
		default:
			str(h, r.Str(l.Obj))
		}
	}
}

func value(h hash.Hash64, v state.Value) {
	if v.R != nil {
		u64(h, 1)
		record(h, v.R)
		return
	}
	u64(h, 0, v.N)
	str(h, v.S)
}

// follower applies a client's ticks one at a time.
type follower struct {
	t       testing.TB
	c       *client.Conn
	applied int
}

// until applies ticks until the client has applied n ticks in all.
func (f *follower) until(n int) {
	f.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for f.applied < n {
		k, err := f.c.Wait(ctx)
		if err != nil {
			f.t.Fatalf("after %d of %d ticks: %v", f.applied, n, err)
		}
		f.applied += k
	}
	if f.applied != n {
		f.t.Fatalf("applied %d ticks, want %d", f.applied, n)
	}
}

// live is a recorded run: the recording and each live spectator's
// replica digest after each tick.
type live struct {
	file   []byte
	digest []map[uint64]uint64 // per spectator, by tick
	first  uint64              // the recording's first tick
	last   uint64
	k      int
}

// runConfig describes a recorded run.
type runConfig struct {
	schema     *schema.Schema   // the server's
	spectators []*schema.Schema // a live spectator of each schema; the first also records
	ticks, k   int
	// step changes the world before tick i; ownerJoined says whether a
	// client that owns entities is connected.
	step func(srv *replica.Server, i int)
	// owner, if set, runs on the tick goroutine when the client "owner"
	// joins (a player besides the spectators, which own nothing).
	owner func(srv *replica.Server, c *replica.Conn)
	// join, if set, runs on the tick goroutine when a spectator or the
	// recorder joins.
	join func(srv *replica.Server, c *replica.Conn)
}

// recordRun runs a live server with live spectators and a recorder,
// calling cfg.step before each tick.
func recordRun(t testing.TB, cfg runConfig) *live {
	t.Helper()
	var srv *replica.Server
	scfg := replica.Config{Schema: cfg.schema, Auth: auth.Anonymous{}, TickRate: 30}
	scfg.OnJoin = func(c *replica.Conn) {
		switch {
		case c.UserID() == "owner":
			cfg.owner(srv, c)
		case cfg.join != nil:
			cfg.join(srv, c)
		}
	}
	srv, err := replica.NewServer(scfg)
	if err != nil {
		t.Fatal(err)
	}
	nw := transport.NewMemNetwork()
	ln, err := nw.Listen("", transport.Config{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go srv.Serve(ctx, ln)
	defer srv.Close()
	d := nw.Dialer(transport.Config{})
	l := &live{k: cfg.k}
	var fs []*follower
	// tick ends a tick and keeps the spectators' digests of it.
	tick := func() {
		srv.Tick()
		for i, f := range fs {
			f.until(f.applied + 1)
			if f.c.LastTick() != srv.TickNumber() {
				t.Fatalf("spectator at tick %d, server %d", f.c.LastTick(), srv.TickNumber())
			}
			l.digest[i][f.c.LastTick()] = digest(f.c.Replica())
		}
	}
	joined := func(n int) {
		for deadline := time.Now().Add(10 * time.Second); len(srv.Conns()) < n; time.Sleep(time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatal("clients did not join")
			}
			tick()
		}
	}
	// The spectators join first, one at a time, so that each has every
	// tick the recording has.
	for i, sc := range cfg.spectators {
		c, err := client.Dial(ctx, d, ln.Addr().String(), sc, client.DialConfig{Token: []byte(fmt.Sprint("spectator", i))})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		joined(len(fs) + 1)
		f := &follower{t: t, c: c}
		f.until(1)
		for c.LastTick() < srv.TickNumber() {
			f.until(f.applied + 1)
		}
		l.digest = append(l.digest, map[uint64]uint64{c.LastTick(): digest(c.Replica())})
		fs = append(fs, f)
	}
	if cfg.owner != nil {
		c, err := client.Dial(ctx, d, ln.Addr().String(), cfg.schema, client.DialConfig{Token: []byte("owner")})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		joined(len(fs) + 1)
	}
	var out bytes.Buffer
	rec, err := replay.Record(ctx, d, ln.Addr().String(), cfg.spectators[0], &out, replay.RecordConfig{Token: []byte("recorder"), Keyframe: cfg.k})
	if err != nil {
		t.Fatal(err)
	}
	joined(len(srv.Conns()) + 1)
	waitRec := func() {
		for deadline := time.Now().Add(20 * time.Second); rec.LastTick() != srv.TickNumber(); time.Sleep(100 * time.Microsecond) {
			if time.Now().After(deadline) || rec.Err() != nil {
				t.Fatalf("recorder at tick %d, server %d: %v", rec.LastTick(), srv.TickNumber(), rec.Err())
			}
		}
	}
	waitRec()
	for i := range cfg.ticks {
		cfg.step(srv, i)
		tick()
	}
	waitRec()
	l.last = srv.TickNumber()
	if err := rec.Close(); err != nil {
		t.Fatal(err)
	}
	l.file = out.Bytes()
	rd, err := replay.Open(bytes.NewReader(l.file), int64(len(l.file)))
	if err != nil {
		t.Fatal(err)
	}
	l.first = rd.FirstTick()
	if rd.LastTick() != l.last {
		t.Fatalf("recording ends at tick %d, the run at %d", rd.LastTick(), l.last)
	}
	return l
}

// recordW1 runs the W1 arena workload (n entities, plus a spawn and a
// destroy now and then) on a live server for ticks ticks, with a live
// spectator and a recorder of keyframe interval k.
func recordW1(t testing.TB, n, ticks, k int) *live {
	t.Helper()
	wcfg := w1.DefaultConfig()
	wcfg.N = n
	world := w1.New(wcfg)
	var units []arena.Unit
	rng := rand.New(rand.NewPCG(1, 2))
	step := func(srv *replica.Server, i int) {
		spawn := func() arena.Unit {
			u, err := arena.SpawnUnit(srv.Tracker())
			if err != nil {
				t.Fatal(err)
			}
			return u
		}
		if units == nil {
			for j := range n {
				u := spawn()
				u.SetX(world.X[j])
				u.SetY(world.Y[j])
				u.SetAngle(world.Angle[j])
				u.SetHp(world.HP[j])
				u.SetName(world.Name[j])
				units = append(units, u)
			}
			return
		}
		moved, hp := world.Step()
		for _, id := range moved {
			units[id].SetX(world.X[id])
			units[id].SetY(world.Y[id])
			units[id].SetAngle(world.Angle[id])
		}
		for _, id := range hp {
			units[id].SetHp(world.HP[id])
		}
		if i%7 == 3 {
			u := spawn()
			u.SetName(fmt.Sprint("extra", i))
			u.SetHp(int16(i))
			units = append(units, u)
		}
		if i%11 == 5 {
			j := rng.IntN(len(units))
			srv.Tracker().Destroy(units[j].Entity())
			units = slices.Delete(units, j, j+1)
			if j < n {
				// The world keeps moving it: give it a fresh entity.
				u := spawn()
				u.SetName(world.Name[j])
				units = slices.Insert(units, j, u)
			}
		}
	}
	return recordRun(t, runConfig{schema: arena.Schema(), spectators: []*schema.Schema{arena.Schema()},
		ticks: ticks + 1, k: k, step: step})
}

// playback starts a player of l's recording and a client of it.
func playback(t testing.TB, l *live, local *schema.Schema) (*replay.Player, *follower) {
	t.Helper()
	p, fs := playbackAll(t, l, local)
	return p, fs[0]
}

// playbackAll starts a player of l's recording and a client of it for
// each schema.
func playbackAll(t testing.TB, l *live, locals ...*schema.Schema) (*replay.Player, []*follower) {
	t.Helper()
	rd, err := replay.Open(bytes.NewReader(l.file), int64(len(l.file)))
	if err != nil {
		t.Fatal(err)
	}
	p, err := replay.NewPlayer(rd, replay.PlayerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	nw := transport.NewMemNetwork()
	ln, err := nw.Listen("", transport.Config{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	go p.Serve(ctx, ln)
	t.Cleanup(func() { cancel(); p.Close() })
	var fs []*follower
	for _, local := range locals {
		c, err := client.Dial(ctx, nw.Dialer(transport.Config{}), ln.Addr().String(), local, client.DialConfig{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		f := &follower{t: t, c: c}
		f.until(1)
		fs = append(fs, f)
	}
	return p, fs
}

func (l *live) check(t testing.TB, f *follower, what string) {
	t.Helper()
	l.checkAs(t, f, 0, what)
}

// checkAs checks f's replica against live spectator i's.
func (l *live) checkAs(t testing.TB, f *follower, i int, what string) {
	t.Helper()
	n := f.c.LastTick()
	want, ok := l.digest[i][n]
	if !ok {
		t.Fatalf("%s: client at tick %d, which the live spectator never had", what, n)
	}
	if got := digest(f.c.Replica()); got != want {
		t.Fatalf("%s: tick %d: replica %#x, live %#x", what, n, got, want)
	}
}

// TestPlaybackEqualsLive plays a recorded W1 run back to a fresh client:
// after every tick its replica equals the live spectator's at that tick.
func TestPlaybackEqualsLive(t *testing.T) {
	l := recordW1(t, 1000, 120, 25)
	p, f := playback(t, l, arena.Schema())
	if f.c.LastTick() != l.first {
		t.Fatalf("playback starts at tick %d, recording at %d", f.c.LastTick(), l.first)
	}
	l.check(t, f, "join")
	ticks := 1
	for {
		err := p.Step()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		ticks++
		f.until(f.applied + 1)
		l.check(t, f, "step")
	}
	if f.c.LastTick() != l.last {
		t.Fatalf("playback ended at tick %d, recording at %d", f.c.LastTick(), l.last)
	}
	if want := int(l.last - l.first + 1); ticks != want {
		t.Fatalf("played %d ticks, want %d", ticks, want)
	}
}

// TestSeek seeks to every kind of tick, and to random ones, and checks
// the client's replica there and for a few ticks after.
func TestSeek(t *testing.T) {
	l := recordW1(t, 300, 150, 20)
	p, f := playback(t, l, arena.Schema())
	rd, _ := replay.Open(bytes.NewReader(l.file), int64(len(l.file)))
	keys := rd.Keyframes()
	if len(keys) < 5 {
		t.Fatalf("keyframes %v: want one every %d ticks", keys, l.k)
	}
	targets := []uint64{l.first, l.last, l.last - 1, l.first + 1}
	for _, k := range keys {
		targets = append(targets, k, k-1, k+1)
	}
	rng := rand.New(rand.NewPCG(3, 4))
	for range 40 {
		targets = append(targets, l.first+rng.Uint64N(l.last-l.first+1))
	}
	for _, tick := range targets {
		if tick < l.first || tick > l.last {
			continue
		}
		if err := p.Seek(tick); err != nil {
			t.Fatalf("Seek(%d): %v", tick, err)
		}
		f.until(f.applied + 1)
		if f.c.LastTick() != tick {
			t.Fatalf("Seek(%d): client at tick %d", tick, f.c.LastTick())
		}
		l.check(t, f, fmt.Sprint("seek ", tick))
		for range 3 {
			if err := p.Step(); err == io.EOF {
				break
			} else if err != nil {
				t.Fatal(err)
			}
			f.until(f.applied + 1)
			l.check(t, f, fmt.Sprint("after seek ", tick))
		}
	}
	for _, tick := range []uint64{0, l.first - 1, l.last + 1} {
		if err := p.Seek(tick); !errors.Is(err, replay.ErrNoTick) {
			t.Errorf("Seek(%d): %v, want ErrNoTick", tick, err)
		}
	}
}

// TestRun plays a recording at 50 times its rate, with a late joiner.
func TestRun(t *testing.T) {
	l := recordW1(t, 200, 60, 10)
	p, f := playback(t, l, arena.Schema())
	if err := p.SetSpeed(50); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- p.Run(context.Background()) }()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for f.c.LastTick() < l.last {
		if _, err := f.c.Wait(ctx); err != nil {
			t.Fatal(err)
		}
		l.check(t, f, "run")
	}
	if err := <-done; err != io.EOF {
		t.Fatalf("Run: %v, want io.EOF at the end", err)
	}
}

// TestSetSpeedBounds: a speed so small that a tick's interval would
// overflow time.Duration (and wrap to a negative one, playing at full
// speed) is refused, as are zero, negative, NaN and infinite speeds.
func TestSetSpeedBounds(t *testing.T) {
	l := recordW1(t, 20, 5, 10)
	rd, err := replay.Open(bytes.NewReader(l.file), int64(len(l.file)))
	if err != nil {
		t.Fatal(err)
	}
	p, err := replay.NewPlayer(rd, replay.PlayerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	for _, bad := range []float64{0, -1, math.NaN(), math.Inf(1), 1e-12, 1e-300} {
		if err := p.SetSpeed(bad); err == nil {
			t.Errorf("SetSpeed(%v) succeeded", bad)
		}
	}
	for _, good := range []float64{1e-6, 0.5, 1, 1e6} {
		if err := p.SetSpeed(good); err != nil {
			t.Errorf("SetSpeed(%v): %v", good, err)
		}
	}
}

// TestHandshakeCap: connections that never send their HELLO hold at most
// PlayerConfig.MaxHandshakes handshakes; the next is refused at once with
// CloseServerBusy, and a freed slot lets a spectator in.
func TestHandshakeCap(t *testing.T) {
	l := recordW1(t, 20, 5, 10)
	synctest.Test(t, func(t *testing.T) {
		r, ln := newPlayerRig(t, l.file, replay.PlayerConfig{MaxHandshakes: 3, HandshakeTimeout: time.Minute}, nil)
		dial := func() transport.Conn { return r.dial(t, ln) }
		var silent []transport.Conn
		for range 3 {
			silent = append(silent, dial())
		}
		synctest.Wait()
		start := time.Now()
		wantRefusal(t, first(t, dial()), transport.CloseServerBusy, "too many handshakes in progress")
		if d := time.Since(start); d != 0 {
			t.Fatalf("refused after %v, want at once", d)
		}
		for _, tc := range silent {
			select {
			case <-tc.Done():
				t.Fatal("a silent connection was closed before its handshake timeout")
			default:
			}
		}
		silent[0].Close(transport.CloseNormal, "")
		synctest.Wait()
		tc := dial()
		r.hello(tc, nil)
		if m := first(t, tc); !isWelcome(m) {
			t.Fatalf("after a slot freed: %T %v, want a WELCOME", m, m)
		}
	})
}

// TestPlaybackEvolution records random changes to every field kind,
// container and visibility (the testschema classes, with an owner among
// the live clients) and plays them back to a client of the server's
// schema and to one of an older version: each equals the live spectator
// of its version at every tick and after seeks.
func TestPlaybackEvolution(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		sc := v2.Schema()
		var ents []*state.Entity
		spawn := func(srv *replica.Server) *state.Entity {
			c := sc.Classes[rapid.IntRange(0, len(sc.Classes)-1).Draw(rt, "class")]
			e, err := srv.Tracker().Spawn(c)
			if err != nil {
				rt.Fatal(err)
			}
			mutate.Struct(rt, e.Handle(), c, 0)
			ents = append(ents, e)
			return e
		}
		step := func(srv *replica.Server, i int) {
			if i == 0 {
				for range rapid.IntRange(1, 6).Draw(rt, "initial") {
					spawn(srv)
				}
			}
			for range rapid.IntRange(0, 4).Draw(rt, "changes") {
				switch op := rapid.IntRange(0, 9).Draw(rt, "op"); {
				case op == 0:
					spawn(srv)
				case op == 1 && len(ents) > 0:
					j := rapid.IntRange(0, len(ents)-1).Draw(rt, "destroy")
					srv.Tracker().Destroy(ents[j])
					ents = slices.Delete(ents, j, j+1)
				case len(ents) > 0:
					e := ents[rapid.IntRange(0, len(ents)-1).Draw(rt, "entity")]
					mutate.Struct(rt, e.Handle(), e.Class(), 0)
				}
			}
		}
		owner := func(srv *replica.Server, c *replica.Conn) {
			e := spawn(srv)
			srv.SetOwner(e, c)
		}
		k := rapid.IntRange(1, 6).Draw(rt, "k")
		l := recordRun(t, runConfig{schema: sc, spectators: []*schema.Schema{sc, v1.Schema()},
			ticks: rapid.IntRange(1, 25).Draw(rt, "ticks"), k: k, step: step, owner: owner})
		p, fs := playbackAll(t, l, sc, v1.Schema())
		check := func(what string) {
			for i, f := range fs {
				l.checkAs(t, f, i, what)
			}
		}
		check("join")
		for {
			err := p.Step()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			for _, f := range fs {
				f.until(f.applied + 1)
			}
			check("step")
		}
		for range 5 {
			tick := rapid.Uint64Range(l.first, l.last).Draw(rt, "seek")
			if err := p.Seek(tick); err != nil {
				t.Fatal(err)
			}
			for _, f := range fs {
				f.until(f.applied + 1)
			}
			check(fmt.Sprint("seek ", tick))
		}
	})
}

// BenchmarkSeek seeks a recorded W1 run (1000 entities, a keyframe every
// 100 ticks) to random ticks, on the player alone, and reports the
// recording's size per tick and per keyframe.
func BenchmarkSeek(b *testing.B) {
	l := recordW1(b, 1000, 300, 100)
	rd, err := replay.Open(bytes.NewReader(l.file), int64(len(l.file)))
	if err != nil {
		b.Fatal(err)
	}
	p, err := replay.NewPlayer(rd, replay.PlayerConfig{})
	if err != nil {
		b.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(5, 6))
	b.ResetTimer()
	for range b.N {
		if err := p.Seek(l.first + rng.Uint64N(l.last-l.first+1)); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(len(l.file))/float64(l.last-l.first+1), "file-bytes/tick")
}

// BenchmarkStep plays a recorded W1 run tick by tick on the player alone.
func BenchmarkStep(b *testing.B) {
	l := recordW1(b, 1000, 300, 100)
	rd, err := replay.Open(bytes.NewReader(l.file), int64(len(l.file)))
	if err != nil {
		b.Fatal(err)
	}
	p, err := replay.NewPlayer(rd, replay.PlayerConfig{})
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for range b.N {
		if err := p.Step(); err == io.EOF {
			b.StopTimer()
			p.Seek(l.first)
			b.StartTimer()
		} else if err != nil {
			b.Fatal(err)
		}
	}
}

// lodSchema has a positioned class with level-of-detail bands: gear (all)
// within 25 and emote (others) within 12.
func lodSchema(t testing.TB) *schema.Schema {
	f := func(id uint32, name string, k schema.Kind, vis schema.Visibility, pos schema.Axis) *schema.Field {
		return &schema.Field{ID: id, Name: name, Type: schema.Type{Kind: k}, Vis: vis, Pos: pos}
	}
	gear, emote := f(5, "gear", schema.Int32, schema.VisAll, 0), f(6, "emote", schema.Uint8, schema.VisOthers, 0)
	gear.LOD, emote.LOD = 25, 12
	unit := &schema.Struct{Name: "Unit", Class: true, ID: 1, Fields: []*schema.Field{
		f(1, "x", schema.Float32, schema.VisAll, schema.AxisX),
		f(2, "y", schema.Float32, schema.VisAll, schema.AxisY),
		f(3, "hp", schema.Int16, schema.VisAll, 0),
		f(4, "mood", schema.Uint8, schema.VisOthers, 0),
		gear, emote,
	}}
	s, err := schema.New(unit)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestPlaybackAOI records what a camera in an AOI space sees, entities
// entering and leaving its view and changing level of detail, and checks
// playback and seeks against a live spectator at the same viewpoint.
func TestPlaybackAOI(t *testing.T) {
	sc := lodSchema(t)
	var sp *replica.Space
	var ents []*state.Entity
	rng := rand.New(rand.NewPCG(7, 8))
	set := func(e *state.Entity, leaf int, v uint64) {
		e.SetNum(leaf, v)
	}
	f32 := func(v float32) uint64 { return uint64(math.Float32bits(v)) }
	pos := make(map[*state.Entity][2]float32)
	step := func(srv *replica.Server, i int) {
		if sp == nil {
			var err error
			if sp, err = srv.NewSpace(replica.SpaceConfig{Name: "field", Radius: 40, Hysteresis: 4}); err != nil {
				t.Fatal(err)
			}
			for _, c := range srv.Conns() {
				srv.View(c, sp)
				srv.SetViewpoint(c, 50, 50)
			}
			for range 60 {
				e, err := srv.Tracker().Spawn(sc.Classes[0])
				if err != nil {
					t.Fatal(err)
				}
				p := [2]float32{rng.Float32() * 100, rng.Float32() * 100}
				set(e, 0, f32(p[0]))
				set(e, 1, f32(p[1]))
				set(e, 4, uint64(rng.IntN(1000)))
				pos[e] = p
				if err := srv.SetSpace(e, sp); err != nil {
					t.Fatal(err)
				}
				ents = append(ents, e)
			}
			return
		}
		for _, e := range ents {
			if rng.IntN(3) == 0 {
				p := pos[e]
				p[0] = min(100, max(0, p[0]+rng.Float32()*12-6))
				p[1] = min(100, max(0, p[1]+rng.Float32()*12-6))
				pos[e] = p
				set(e, 0, f32(p[0]))
				set(e, 1, f32(p[1]))
			}
			switch rng.IntN(8) {
			case 0:
				set(e, 2, uint64(rng.IntN(100)))
			case 1:
				set(e, 3, uint64(rng.IntN(256)))
			case 2:
				set(e, 4, uint64(rng.IntN(1000)))
			case 3:
				set(e, 5, uint64(rng.IntN(256)))
			}
		}
	}
	l := recordRun(t, runConfig{schema: sc, spectators: []*schema.Schema{sc}, ticks: 150, k: 16, step: step})
	rd, err := replay.Open(bytes.NewReader(l.file), int64(len(l.file)))
	if err != nil {
		t.Fatal(err)
	}
	p, f := playback(t, l, sc)
	l.check(t, f, "join")
	levels, fewest, most := 0, math.MaxInt, 0
	for {
		err := p.Step()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		f.until(f.applied + 1)
		l.check(t, f, "step")
		for _, e := range f.c.Replica().Entities(nil) {
			if _, all := e.Level(); !all {
				levels++
			}
		}
		fewest, most = min(fewest, f.c.Replica().Len()), max(most, f.c.Replica().Len())
	}
	if levels == 0 || fewest == most || fewest == 0 {
		t.Fatalf("%d entities held below every band, %d to %d seen: the test shows nothing of interest or levels of detail", levels, fewest, most)
	}
	for _, k := range rd.Keyframes() {
		for _, tick := range []uint64{k, k + 1, k - 1} {
			if tick < l.first || tick > l.last {
				continue
			}
			if err := p.Seek(tick); err != nil {
				t.Fatal(err)
			}
			f.until(f.applied + 1)
			l.check(t, f, fmt.Sprint("seek ", tick))
		}
	}
}
