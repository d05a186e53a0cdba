package replica_test

import (
	"context"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/replicago/replica"
	"github.com/replicago/replica/state"
)

// BenchmarkDormancy measures a tick of an AOI zone where 500 distinct
// entities move each tick, among 50,000 (1 % active) and among 500 (all
// active), and one where 50,000 entities stand still, seen by 100 clients
// from fixed points: idle entities must cost no work, so the idle zone's
// tick is almost free and the first two do the same work. The 1 % zone
// runs twice: with the movers drawn anew each tick ("entities=50k/
// moving=500", every move touching records the last ticks did not: the
// worst case for the CPU caches), and with the same 500 moving every tick
// ("…/same", as a game's active set of players and fighting NPCs: the
// case the small zone's, where all move, compares with for the caches).
// Only Server.Tick is timed: the moves and the clients applying each tick
// are not. Besides the mean (ns/op), it reports the median tick and the
// 99th percentile (p50-ns, p99-ns), as the W1 and W2 benchmarks do: the
// clients run in the same process, on the same cores, and a tick they
// preempt counts in the mean.
func BenchmarkDormancy(b *testing.B) {
	for _, c := range []struct {
		n, movers int
		same      bool
	}{{50_000, 500, false}, {50_000, 500, true}, {500, 500, false}, {50_000, 0, false}} {
		name := "entities=" + itoa(c.n) + "/moving=" + itoa(c.movers)
		if c.same {
			name += "/same"
		}
		b.Run(name, func(b *testing.B) { benchDormancy(b, c.n, c.movers, c.same) })
	}
}

// measuredTick is the timed tick, a function of its own so that a
// profiler can count it alone (valgrind --tool=callgrind
// --toggle-collect='*measuredTick'): setup and warm-up ticks call
// Server.Tick directly.
//
//go:noinline
func measuredTick(s *replica.Server) { s.Tick() }

func itoa(n int) string {
	if n >= 1000 {
		return itoa(n/1000) + "k"
	}
	const digits = "0123456789"
	if n < 10 && n >= 0 {
		return digits[n : n+1]
	}
	return itoa(n/10) + digits[n%10:n%10+1]
}

func benchDormancy(b *testing.B, n, movers int, same bool) {
	const size, clients = 2000, 100
	sc := aoiSchema(b)
	w := newWorld(b, clients, replica.Config{Schema: sc, LagMessages: 1 << 20, LagBytes: 1 << 30})
	defer w.close()
	zone, err := w.srv.NewSpace(replica.SpaceConfig{Name: "zone", Radius: 50})
	if err != nil {
		b.Fatal(err)
	}
	r := rand.New(rand.NewPCG(1, 2))
	ents := make([]*state.Entity, n)
	for i := range ents {
		e, err := w.srv.Tracker().Spawn(sc.Classes[0])
		if err != nil {
			b.Fatal(err)
		}
		setPos(e, r.Float32()*size, r.Float32()*size)
		w.srv.SetSpace(e, zone)
		ents[i] = e
	}
	for _, c := range w.conns {
		w.srv.View(c, zone)
		w.srv.SetViewpoint(c, r.Float64()*size, r.Float64()*size)
	}
	// Each tick moves movers distinct entities, drawn by a partial
	// Fisher–Yates shuffle of perm (all of them when movers = n), or the
	// first movers of perm, drawn once, when same.
	perm := make([]int, n)
	for i := range perm {
		perm[i] = i
	}
	drawn := false
	move := func() {
		for j := range movers {
			if !same || !drawn {
				k := j + r.IntN(n-j)
				perm[j], perm[k] = perm[k], perm[j]
			}
			e := ents[perm[j]]
			x, y := posOf(e)
			setPos(e, float32(min(size, max(0, x+r.Float64()*8-4))), float32(min(size, max(0, y+r.Float64()*8-4))))
		}
		drawn = true
	}
	apply := func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		for _, c := range w.clients {
			for c.LastTick() < w.srv.TickNumber() {
				if _, err := c.Wait(ctx); err != nil {
					b.Fatal(err)
				}
			}
		}
	}
	for range 5 { // the first states out of the way
		move()
		w.srv.Tick()
		apply()
	}
	var durs []time.Duration
	b.ResetTimer()
	for range b.N {
		b.StopTimer()
		move()
		b.StartTimer()
		t0 := time.Now()
		measuredTick(w.srv)
		durs = append(durs, time.Since(t0))
		b.StopTimer()
		apply()
		b.StartTimer()
	}
	b.StopTimer()
	slices.Sort(durs)
	b.ReportMetric(float64(durs[len(durs)/2].Nanoseconds()), "p50-ns")
	b.ReportMetric(float64(durs[len(durs)*99/100].Nanoseconds()), "p99-ns")
	st := w.srv.InterestStats()
	b.ReportMetric(float64(st.Pairs)/clients, "visible/client")
}
