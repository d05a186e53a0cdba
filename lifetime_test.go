package replica_test

import (
	"math"
	"testing"
	"time"

	"github.com/replicago/replica"
	"github.com/replicago/replica/schema"
	"github.com/replicago/replica/state"
)

// lifeSchema's Hero has a field of every lifetime, nested structs, lists
// and bags among them.
func lifeSchema(t tb) *schema.Schema {
	num := func(id uint32, name string, k schema.Kind) *schema.Field {
		return &schema.Field{ID: id, Name: name, Type: schema.Type{Kind: k}, Vis: schema.VisAll}
	}
	mark := &schema.Struct{Name: "Mark", Fields: []*schema.Field{num(1, "kind", schema.Uint8), num(2, "at", schema.Int32)}}
	stats := &schema.Struct{Name: "Stats", Fields: []*schema.Field{num(1, "level", schema.Int16), num(2, "xp", schema.Int32)}}
	item := &schema.Struct{Name: "Item", Fields: []*schema.Field{num(1, "kind", schema.Uint8), num(2, "count", schema.Int16)}}
	life := func(f *schema.Field, l schema.Lifetime) *schema.Field { f.Life = l; return f }
	x, y := num(1, "x", schema.Float32), num(2, "y", schema.Float32)
	x.Pos, y.Pos = schema.AxisX, schema.AxisY
	hero := &schema.Struct{Name: "Hero", Class: true, ID: 1, Fields: []*schema.Field{
		x, y,
		life(num(3, "zone", schema.Int32), schema.LifeScene),
		life(&schema.Field{ID: 4, Name: "marks", Type: schema.Type{Kind: schema.List, Elem: &schema.Type{Kind: schema.Nested, Struct: mark}}, Vis: schema.VisAll}, schema.LifeScene),
		num(5, "chat", schema.String),
		{ID: 6, Name: "buffs", Type: schema.Type{Kind: schema.Bag, Key: schema.Uint32, Struct: item}, Vis: schema.VisAll},
		life(num(7, "pid", schema.Int64), schema.LifeProcess),
		life(num(8, "gold", schema.Int64), schema.LifePersist),
		life(&schema.Field{ID: 9, Name: "stats", Type: schema.Type{Kind: schema.Nested, Struct: stats}, Vis: schema.VisOwner}, schema.LifePersist),
		life(&schema.Field{ID: 10, Name: "inv", Type: schema.Type{Kind: schema.Bag, Key: schema.Uint32, Struct: item}, Vis: schema.VisOwner}, schema.LifePersist),
	}}
	s, err := schema.New(hero)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// heroLeaves names Hero's leaves by path.
func heroLeaves(c *schema.Struct) map[string]int {
	m := map[string]int{}
	for i := 0; i < c.Leaves; i++ {
		l := c.Leaf(i)
		name := ""
		st := c
		for _, id := range l.Path {
			f := st.Field(id)
			if name != "" {
				name += "."
			}
			name += f.Name
			st = f.Type.Struct
		}
		m[name] = i
	}
	return m
}

// fillHero gives every field of e a value that is not its zero.
func fillHero(e *state.Entity, x float32) {
	c := e.Class()
	lv := heroLeaves(c)
	h := e.Handle()
	h.SetNum(lv["x"], uint64(math.Float32bits(x)))
	h.SetNum(lv["y"], uint64(math.Float32bits(10)))
	h.SetNum(lv["zone"], 7)
	mark := c.Field(4).Type.Elem.Struct
	m := state.NewValue(mark)
	m.SetNum(0, 3)
	m.SetNum(1, 99)
	h.List(lv["marks"]).Push(m.Value())
	h.SetStr(lv["chat"], "guild")
	item := c.Field(6).Type.Struct
	it := state.NewValue(item)
	it.SetNum(0, 1)
	it.SetNum(1, 5)
	h.Bag(lv["buffs"]).Add(4, it)
	h.SetNum(lv["pid"], 1234)
	h.SetNum(lv["gold"], 500)
	h.SetNum(lv["stats.level"], 12)
	h.SetNum(lv["stats.xp"], 3400)
	h.Bag(lv["inv"]).Add(9, it)
}

// zeroed reports, for each leaf of e, whether it holds its zero value.
func zeroed(e *state.Entity) map[string]bool {
	z := map[string]bool{}
	for name, i := range heroLeaves(e.Class()) {
		z[name] = e.IsZero(e.Class().Leaf(i))
	}
	return z
}

// wantZero checks which of e's fields are zero: exactly those of the
// lifetimes in reset, every other field as fillHero left it.
func wantZero(t *testing.T, e *state.Entity, reset ...schema.Lifetime) {
	t.Helper()
	c := e.Class()
	for name, isZero := range zeroed(e) {
		l := c.Leaf(heroLeaves(c)[name])
		want := false
		for _, r := range reset {
			want = want || c.Field(l.Path[0]).Life == r
		}
		if isZero != want {
			t.Errorf("%s (life %v): zero %v, want %v", name, c.Field(l.Path[0]).Life, isZero, want)
		}
	}
}

func TestLifeSceneResetOnSpaceChange(t *testing.T) {
	sc := lifeSchema(t)
	w := newWorld(t, 1, replica.Config{Schema: sc, Budget: -1})
	defer w.close()
	w.aoi = true
	a, err := w.srv.NewSpace(replica.SpaceConfig{Name: "a", Radius: 100})
	if err != nil {
		t.Fatal(err)
	}
	b, err := w.srv.NewSpace(replica.SpaceConfig{Name: "b", Radius: 100})
	if err != nil {
		t.Fatal(err)
	}
	hero, err := w.srv.Tracker().Spawn(sc.Classes[0])
	if err != nil {
		t.Fatal(err)
	}
	// Filled, then placed in the tick it was spawned in: nothing resets.
	fillHero(hero, 5)
	if err := w.srv.SetSpace(hero, a); err != nil {
		t.Fatal(err)
	}
	w.srv.SetOwner(hero, w.conns[0])
	wantZero(t, hero)
	w.tick(t)
	// Into the space it is in already: nothing resets.
	if err := w.srv.SetSpace(hero, a); err != nil {
		t.Fatal(err)
	}
	wantZero(t, hero)
	// Into another space: the scene fields reset, on the server and, with
	// the tick, on the client that follows the hero there.
	if err := w.srv.SetSpace(hero, b); err != nil {
		t.Fatal(err)
	}
	wantZero(t, hero, schema.LifeScene)
	w.tick(t) // checks the client's replica against the server's state
	re := w.clients[0].Replica().Entity(hero.ID())
	if re == nil {
		t.Fatal("the owner's replica lost the hero on its move")
	}
	wantZero(t, re, schema.LifeScene)
	// Into no space and back: each move resets what was set since.
	fillHero(hero, 6)
	if err := w.srv.SetSpace(hero, nil); err != nil {
		t.Fatal(err)
	}
	wantZero(t, hero, schema.LifeScene)
	fillHero(hero, 6)
	w.tick(t)
	if err := w.srv.SetSpace(hero, a); err != nil {
		t.Fatal(err)
	}
	wantZero(t, hero, schema.LifeScene)
	w.tick(t)
}

func TestLifeSessionResetOnRelogin(t *testing.T) {
	sc := lifeSchema(t)
	// LoginGrace: 10 ticks at 20 Hz.
	const graceTicks = 10
	w := newWorld(t, 0, replica.Config{Schema: sc, Budget: -1, TickRate: 20, LoginGrace: 500 * time.Millisecond})
	defer w.close()
	tokens := []string{"ann", "bob", "ann", "ann", "ann"}
	w.token = func() string { t := tokens[0]; tokens = tokens[1:]; return t }
	w.join(t, sc) // ann
	w.join(t, sc) // bob
	hero, err := w.srv.Tracker().Spawn(sc.Classes[0])
	if err != nil {
		t.Fatal(err)
	}
	fillHero(hero, 5)
	w.srv.SetOwner(hero, w.conns[0])
	w.tick(t)

	// Handing the hero to another user and back to the same login
	// resets nothing.
	w.srv.SetOwner(hero, w.conns[1])
	w.tick(t)
	w.srv.SetOwner(hero, w.conns[0])
	w.tick(t)
	wantZero(t, hero)
	w.srv.SetOwner(hero, nil)
	w.tick(t)
	w.srv.SetOwner(hero, w.conns[0])
	w.tick(t)
	wantZero(t, hero)

	// Ann leaves: the hero stays as it was, unowned.
	w.clients[0].Close()
	waitConns(t, w.srv, 1)
	if w.srv.Owner(hero) != nil {
		t.Fatal("the hero is still owned after its owner left")
	}
	wantZero(t, hero)
	w.conns, w.clients, w.owned = w.conns[1:], w.clients[1:], w.owned[1:]
	w.tick(t)

	// Bob takes it: another user, nothing resets.
	w.srv.SetOwner(hero, w.conns[0])
	w.tick(t)
	wantZero(t, hero)
	w.srv.SetOwner(hero, nil)
	w.tick(t)

	// Ann logs in again: bob held it since, so hers is not the last
	// login; nothing resets.
	w.join(t, sc)
	w.srv.SetOwner(hero, w.conns[1])
	w.tick(t)
	wantZero(t, hero)

	// Ann reconnects within the grace: the same login goes on, nothing
	// resets.
	w.clients[1].Close()
	waitConns(t, w.srv, 1)
	w.conns, w.clients, w.owned = w.conns[:1], w.clients[:1], w.owned[:1]
	w.join(t, sc)
	w.srv.SetOwner(hero, w.conns[1])
	wantZero(t, hero)
	w.tick(t)

	// Ann comes back after the grace: a new login, whose taking the hero
	// resets its session fields, on the server and in her new replica.
	w.clients[1].Close()
	waitConns(t, w.srv, 1)
	w.conns, w.clients, w.owned = w.conns[:1], w.clients[:1], w.owned[:1]
	for range graceTicks + 1 {
		w.tick(t)
	}
	w.join(t, sc)
	w.srv.SetOwner(hero, w.conns[1])
	wantZero(t, hero, schema.LifeSession)
	w.tick(t)
	wantZero(t, w.clients[1].Replica().Entity(hero.ID()), schema.LifeSession)
}

// waitConns ticks srv until it has n connections.
func waitConns(t *testing.T, srv *replica.Server, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for len(srv.Conns()) != n {
		if time.Now().After(deadline) {
			t.Fatalf("%d connections, want %d", len(srv.Conns()), n)
		}
		srv.Tick()
		time.Sleep(time.Millisecond)
	}
}
