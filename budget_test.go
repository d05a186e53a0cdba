package replica_test

import (
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/replicago/replica"
	"github.com/replicago/replica/state"
)

// zoneWorld is a world of one client viewing an AOI zone of the given
// radius.
func zoneWorld(t *testing.T, cfg replica.Config, radius float64) (*ownWorld, *replica.Space) {
	t.Helper()
	w := newWorld(t, 1, cfg)
	zone, err := w.srv.NewSpace(replica.SpaceConfig{Name: "zone", Radius: radius})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.srv.View(w.conns[0], zone); err != nil {
		t.Fatal(err)
	}
	return w, zone
}

// spawnAt spawns a unit at (x, 0) in zone.
func spawnAt(t *testing.T, w *ownWorld, zone *replica.Space, x float32) *state.Entity {
	t.Helper()
	e, err := w.srv.Tracker().Spawn(w.srv.Tracker().Schema().Classes[0])
	if err != nil {
		t.Fatal(err)
	}
	setPos(e, x, 0)
	if err := w.srv.SetSpace(e, zone); err != nil {
		t.Fatal(err)
	}
	return e
}

// budgetWorld is one client viewing a crowd of units around it in an AOI
// zone, on a budget of perTick bytes a tick, and a unit of its own.
func budgetWorld(t *testing.T, units int, perTick int) (*ownWorld, []*state.Entity, *state.Entity) {
	t.Helper()
	w, zone := zoneWorld(t, replica.Config{Schema: aoiSchema(t), TickRate: 20, Budget: 20 * perTick}, 100)
	w.aoi = true
	mine := spawnAt(t, w, zone, 0)
	w.srv.SetOwner(mine, w.conns[0])
	var crowd []*state.Entity
	for i := range units {
		crowd = append(crowd, spawnAt(t, w, zone, float32(1+i%50)))
	}
	return w, crowd, mine
}

// hp reads a unit's hp (leaf 2), which the tests use as a counter.
func hp(e *state.Entity) int16 { return int16(e.Num(e.Class().Leaf(2).Num)) }

// TestBudgetConverges: a client on a tiny budget in a busy crowd gets only
// some of each tick's changes, but never an older value after a newer
// one, always its own unit's, and, once the crowd is still, exactly the
// server's state.
func TestBudgetConverges(t *testing.T) {
	w, crowd, mine := budgetWorld(t, 40, 40) // 40 bytes a tick: a few units' changes
	defer w.close()
	w.lagging = true
	r := w.clients[0].Replica()
	last := map[state.ID]int16{}
	for tick := 1; tick <= 30; tick++ {
		for _, e := range append(crowd, mine) {
			e.SetNum(2, uint64(tick)) // hp counts ticks
		}
		w.tick(t)
		if got := hp(r.Entity(mine.ID())); got != int16(tick) {
			t.Fatalf("tick %d: its own unit's hp is %d: an owned entity was held back", tick, got)
		}
		for _, e := range crowd {
			ce := r.Entity(e.ID())
			if ce == nil {
				continue // its creation is held back
			}
			v := hp(ce)
			if v < last[e.ID()] || v > int16(tick) {
				t.Fatalf("tick %d: unit %#x went from hp %d to %d", tick, uint32(e.ID()), last[e.ID()], v)
			}
			last[e.ID()] = v
		}
	}
	if w.srv.Stats().Deferred == 0 {
		t.Fatal("nothing was held back: the budget is not tight enough for the test")
	}
	// Still: within a bounded number of ticks the replica is the server's.
	w.lagging = false
	for i := 0; ; i++ {
		w.srv.Tick()
		waitTick(t, w.clients[0], w.srv.TickNumber())
		if w.check(0) == nil {
			break
		}
		if i == 200 {
			t.Fatalf("no convergence 200 ticks after the crowd stopped: %v", w.check(0))
		}
	}
}

// TestBudgetStarvation: with every unit of a crowd changing every tick
// and room for a few of them a tick, each unit's latest value still
// reaches the client within a bounded number of ticks: priorities grow
// with the time held back.
func TestBudgetStarvation(t *testing.T) {
	const units = 30
	w, crowd, _ := budgetWorld(t, units, 15)
	defer w.close()
	w.lagging = true
	r := w.clients[0].Replica()
	// Let the creations through first.
	for range 100 {
		w.tick(t)
	}
	if r.Len() != units+1 {
		t.Fatalf("after 100 quiet ticks the client has %d of %d units", r.Len(), units+1)
	}
	seen := map[state.ID]int{} // the last tick each unit's value reached the client
	worst, got := 0, 0
	for tick := 1; tick <= 120; tick++ {
		for _, e := range crowd {
			e.SetNum(2, uint64(tick))
		}
		w.tick(t)
		for _, e := range crowd {
			if hp(r.Entity(e.ID())) == int16(tick) {
				seen[e.ID()] = tick
				got++
			}
			if lag := tick - seen[e.ID()]; tick > units && lag > worst {
				worst = lag
			}
		}
	}
	// k units get through a tick: in turn, a unit would wait units/k
	// ticks. Priorities favour the nearer units by at most a factor 2
	// (all are within half the radius), so none waits more than twice
	// that, and a tick for rounding.
	k := float64(got) / 120
	if k >= units/2 {
		t.Fatalf("%.1f of %d units a tick get through: the budget is not tight enough for the test", k, units)
	}
	if bound := int(2*units/k) + 1; worst > bound {
		t.Fatalf("a unit's changes waited %d ticks, over the bound of %d (%.2f units a tick)", worst, bound, k)
	}
	t.Logf("longest wait %d ticks for %d units, %.2f a tick", worst, units, k)
}

// TestExplainLODAndBudget: Explain names the band a field is sent within
// against the level the client holds the entity at, and a creation or
// changes its budget holds back.
func TestExplainLODAndBudget(t *testing.T) {
	w, zone := zoneWorld(t, replica.Config{Schema: aoiSchema(t, true), Budget: -1}, 100)
	defer w.close()
	c := w.conns[0]
	if err := w.srv.SetViewpoint(c, 0, 0); err != nil {
		t.Fatal(err)
	}
	u := spawnAt(t, w, zone, 20) // within gear's 25, beyond emote's 12
	w.lagging = true
	w.tick(t)
	x, err := w.srv.Explain(c, u, "emote")
	if err != nil {
		t.Fatal(err)
	}
	if x.Sees || x.Level != 1 || x.Band != 2 || x.BandDistance != 12 || !strings.Contains(x.Reason, "level-of-detail band 2") {
		t.Fatalf("Explain(emote) = %+v", x)
	}
	if x, _ := w.srv.Explain(c, u, "gear"); !x.Sees || x.Band != 1 {
		t.Fatalf("Explain(gear) = %+v", x)
	}
	// A budget of one byte a second holds the next entry back.
	if err := w.srv.SetBudget(c, 1); err != nil {
		t.Fatal(err)
	}
	var crowd []*state.Entity
	for i := range 5 {
		crowd = append(crowd, spawnAt(t, w, zone, float32(30+i)))
	}
	w.tick(t)
	w.tick(t)
	held := 0
	for _, e := range crowd {
		x, _ := w.srv.Explain(c, e)
		if x.Held {
			held++
			if x.Sees || !strings.Contains(x.Reason, "bandwidth budget holds it back: its creation waits") || w.srv.Sees(c, e) {
				t.Fatalf("Explain(held) = %+v, Sees %v", x, w.srv.Sees(c, e))
			}
		}
	}
	if held == 0 || w.srv.Stats().Deferred == 0 {
		t.Fatalf("%d held, Stats.Deferred %d: the budget held nothing back", held, w.srv.Stats().Deferred)
	}
	if err := w.srv.SetPriority(u, 0); !errors.Is(err, replica.ErrBadPriority) {
		t.Fatalf("SetPriority(0): %v", err)
	}
	if err := w.srv.SetPriority(u, math.Inf(1)); !errors.Is(err, replica.ErrBadPriority) {
		t.Fatalf("SetPriority(+Inf): %v", err)
	}
}
