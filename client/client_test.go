package client_test

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/replicago/replica"
	"github.com/replicago/replica/client"
	"github.com/replicago/replica/codec"
	"github.com/replicago/replica/schema"
	"github.com/replicago/replica/state"
	"github.com/replicago/replica/wire"
)

// fixture is a server (tracker and encoder) replicating to one client
// replica that owns every entity.
type fixture struct {
	t      *testing.T
	s      *schema.Schema
	player *schema.Struct
	tower  *schema.Struct
	item   *schema.Struct
	tr     *state.Tracker
	enc    codec.Encoder
	r      *client.Replica

	// Leaves of player.
	hp, posX, posY, name, scores, stats, inv, target, gold int
	// Leaves of item.
	count, itemName, itemTags int
	// Leaf of tower.
	towerHP int
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	vec := &schema.Struct{Name: "Vec", Fields: []*schema.Field{
		{ID: 1, Name: "x", Type: schema.Type{Kind: schema.Float32}, Vis: schema.VisAll},
		{ID: 2, Name: "y", Type: schema.Type{Kind: schema.Float32, Quant: schema.Quant{Step: 1.0 / 64}}, Vis: schema.VisAll},
	}}
	item := &schema.Struct{Name: "Item", Fields: []*schema.Field{
		{ID: 1, Name: "count", Type: schema.Type{Kind: schema.Int32}, Vis: schema.VisAll},
		{ID: 2, Name: "name", Type: schema.Type{Kind: schema.String}, Vis: schema.VisAll},
		{ID: 3, Name: "tags", Type: schema.Type{Kind: schema.List, Elem: &schema.Type{Kind: schema.String}}, Vis: schema.VisAll},
	}}
	player := &schema.Struct{Name: "Player", Class: true, ID: 1, Fields: []*schema.Field{
		{ID: 1, Name: "hp", Type: schema.Type{Kind: schema.Int16}, Vis: schema.VisAll},
		{ID: 2, Name: "pos", Type: schema.Type{Kind: schema.Nested, Struct: vec}, Vis: schema.VisAll},
		{ID: 3, Name: "name", Type: schema.Type{Kind: schema.String}, Vis: schema.VisAll, LOD: 50},
		{ID: 4, Name: "scores", Type: schema.Type{Kind: schema.List, Elem: &schema.Type{Kind: schema.Int32}}, Vis: schema.VisAll, LOD: 20},
		{ID: 5, Name: "stats", Type: schema.Type{Kind: schema.Map, Key: schema.String, Elem: &schema.Type{Kind: schema.Float64}}, Vis: schema.VisAll},
		{ID: 6, Name: "inv", Type: schema.Type{Kind: schema.Bag, Key: schema.Uint32, Struct: item}, Vis: schema.VisOwner},
		{ID: 7, Name: "target", Type: schema.Type{Kind: schema.Ref}, Vis: schema.VisAll},
		{ID: 8, Name: "gold", Type: schema.Type{Kind: schema.Uint32}, Vis: schema.VisOwner},
	}}
	tower := &schema.Struct{Name: "Tower", Class: true, ID: 2, Fields: []*schema.Field{
		{ID: 1, Name: "hp", Type: schema.Type{Kind: schema.Int16}, Vis: schema.VisAll},
	}}
	s, err := schema.New(player, tower)
	if err != nil {
		t.Fatal(err)
	}
	r, err := client.New(s, client.Config{})
	if err != nil {
		t.Fatal(err)
	}
	pos := player.Field(2)
	return &fixture{t: t, s: s, player: player, tower: tower, item: item, tr: state.NewTracker(s), r: r,
		hp: player.Field(1).Leaf, posX: pos.Leaf + vec.Field(1).Leaf, posY: pos.Leaf + vec.Field(2).Leaf,
		name: player.Field(3).Leaf, scores: player.Field(4).Leaf, stats: player.Field(5).Leaf,
		inv: player.Field(6).Leaf, target: player.Field(7).Leaf, gold: player.Field(8).Leaf,
		count: item.Field(1).Leaf, itemName: item.Field(2).Leaf, itemTags: item.Field(3).Leaf,
		towerHP: tower.Field(1).Leaf}
}

// segments commits the server's tick and encodes it for the owner.
func (f *fixture) segments() [][]byte {
	cs := f.tr.Commit()
	return [][]byte{f.enc.Delta(nil, cs, codec.PartAll, nil), f.enc.Delta(nil, cs, codec.PartOwner, nil)}
}

// tick commits, encodes and applies the server's tick.
func (f *fixture) tick() {
	f.t.Helper()
	if err := f.r.Apply(f.segments()...); err != nil {
		f.t.Fatalf("Apply: %v", err)
	}
}

func (f *fixture) spawn(c *schema.Struct) *state.Entity {
	f.t.Helper()
	e, err := f.tr.Spawn(c)
	if err != nil {
		f.t.Fatal(err)
	}
	return e
}

func f32(v float32) uint64 { return uint64(math.Float32bits(v)) }
func f64(v float64) uint64 { return math.Float64bits(v) }

// newItem returns a detached item with the given count and name.
func (f *fixture) newItem(count int32, name string) state.Handle {
	it := state.NewValue(f.item)
	it.SetNum(f.count, uint64(int64(count)))
	it.SetStr(f.itemName, name)
	return it
}

// checkSynced fails unless every server entity has an equal client copy
// and the client has no other entity.
func (f *fixture) checkSynced() {
	f.t.Helper()
	server := f.tr.AppendEntities(nil)
	if f.r.Len() != len(server) {
		f.t.Fatalf("client has %d entities, server %d", f.r.Len(), len(server))
	}
	for _, se := range server {
		ce := f.r.Entity(se.ID())
		if ce == nil || !ce.Record.Equal(&se.Record) {
			f.t.Fatalf("entity %d differs between server and client", se.ID())
		}
	}
}

// snapshot is a deep copy of a replica's entities.
type snapshot struct {
	ents []*state.Entity
	recs []*state.Record
}

func snap(r *client.Replica) snapshot {
	var s snapshot
	s.ents = r.Entities(nil)
	for _, e := range s.ents {
		s.recs = append(s.recs, e.Record.Clone())
	}
	return s
}

// same reports how r differs from s, or "" if it does not.
func (s snapshot) diff(r *client.Replica) string {
	now := r.Entities(nil)
	if !slices.Equal(now, s.ents) {
		return fmt.Sprintf("entities changed: %d before, %d after", len(s.ents), len(now))
	}
	for i, e := range now {
		if !e.Record.Equal(s.recs[i]) {
			return fmt.Sprintf("entity %d changed", e.ID())
		}
	}
	return ""
}

func TestNew(t *testing.T) {
	f := newFixture(t)
	if f.r.Schema() != f.s || f.r.Len() != 0 {
		t.Errorf("new replica: Schema %p (want %p), Len %d", f.r.Schema(), f.s, f.r.Len())
	}
	if _, err := client.New(nil, client.Config{}); err == nil {
		t.Errorf("New(nil): no error")
	}
	// A remote schema that disagrees on a field's type.
	other := &schema.Struct{Name: "Player", Class: true, ID: 1, Fields: []*schema.Field{
		{ID: 1, Name: "hp", Type: schema.Type{Kind: schema.String}, Vis: schema.VisAll},
	}}
	remote, err := schema.New(other)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := client.New(f.s, client.Config{Remote: remote}); !errors.Is(err, codec.ErrIncompatible) {
		t.Errorf("incompatible remote: got %v, want ErrIncompatible", err)
	}
	// An empty tick is fine.
	if err := f.r.Apply(); err != nil {
		t.Errorf("Apply(): %v", err)
	}
}

// recorder logs callbacks as strings.
type recorder struct{ log []string }

func (rc *recorder) add(format string, args ...any) {
	rc.log = append(rc.log, fmt.Sprintf(format, args...))
}

func (rc *recorder) take() []string {
	l := rc.log
	rc.log = nil
	return l
}

// watchAll registers a callback for every event kind of the fixture's
// classes; values are logged in a readable form.
func (f *fixture) watchAll(rc *recorder) {
	r := f.r
	r.OnCreate(f.player, func(e *state.Entity) { rc.add("create player %d", e.ID()) })
	r.OnDestroy(f.player, func(e *state.Entity) { rc.add("destroy player %d", e.ID()) })
	r.OnCreate(f.tower, func(e *state.Entity) { rc.add("create tower %d", e.ID()) })
	r.OnDestroy(f.tower, func(e *state.Entity) { rc.add("destroy tower %d", e.ID()) })
	r.OnField(f.player, f.hp, func(e *state.Entity, old, new state.Value) {
		rc.add("hp %d: %d -> %d", e.ID(), int16(old.N), int16(new.N))
	})
	r.OnField(f.player, f.posX, func(e *state.Entity, old, new state.Value) {
		rc.add("pos.x %d: %v -> %v", e.ID(), math.Float32frombits(uint32(old.N)), math.Float32frombits(uint32(new.N)))
	})
	yt := &f.player.Leaf(f.posY).Field.Type
	r.OnField(f.player, f.posY, func(e *state.Entity, old, new state.Value) {
		rc.add("pos.y %d: %v -> %v", e.ID(), state.Float32(yt, old.N), state.Float32(yt, new.N))
	})
	r.OnField(f.player, f.name, func(e *state.Entity, old, new state.Value) {
		rc.add("name %d: %q -> %q", e.ID(), old.S, new.S)
	})
	r.OnField(f.player, f.target, func(e *state.Entity, old, new state.Value) {
		rc.add("target %d: %d -> %d", e.ID(), old.N, new.N)
	})
	r.OnField(f.player, f.gold, func(e *state.Entity, old, new state.Value) {
		rc.add("gold %d: %d -> %d", e.ID(), old.N, new.N)
	})
	r.OnList(f.player, f.scores, func(e *state.Entity, ev client.ListEvent) {
		rc.add("scores %d: %v [%d] %d -> %d", e.ID(), ev.Kind, ev.Index, int32(ev.Old.N), int32(ev.New.N))
	})
	r.OnMap(f.player, f.stats, func(e *state.Entity, ev client.MapEvent) {
		rc.add("stats %d: %v [%s] %v -> %v", e.ID(), ev.Kind, ev.Key.S, math.Float64frombits(ev.Old.N), math.Float64frombits(ev.New.N))
	})
	r.OnBag(f.player, f.inv, func(e *state.Entity, ev client.BagEvent) {
		rc.add("inv %d: %v [%d] %s", e.ID(), ev.Kind, ev.Key, f.bagDetail(ev))
	})
	r.OnField(f.tower, f.towerHP, func(e *state.Entity, old, new state.Value) {
		rc.add("tower hp %d: %d -> %d", e.ID(), int16(old.N), int16(new.N))
	})
}

func (f *fixture) itemString(r *state.Record) string {
	if r == nil {
		return "nil"
	}
	l := r.List(f.item.Leaf(f.itemTags).Obj)
	var tags []string
	for i := range l.Len() {
		tags = append(tags, l.At(i).S)
	}
	return fmt.Sprintf("{%d %s %v}", int32(r.Num(f.item.Leaf(f.count).Num)), r.Str(f.item.Leaf(f.itemName).Obj), tags)
}

func (f *fixture) bagDetail(ev client.BagEvent) string {
	switch {
	case ev.Kind == client.Changed && ev.ItemLeaf == f.count:
		return fmt.Sprintf("count %d -> %d, item %s", int32(ev.Old.N), int32(ev.New.N), f.itemString(ev.Item))
	case ev.Kind == client.Changed && ev.ItemLeaf == f.itemName:
		return fmt.Sprintf("name %q -> %q, item %s", ev.Old.S, ev.New.S, f.itemString(ev.Item))
	case ev.Kind == client.Changed && ev.ItemLeaf >= 0:
		return fmt.Sprintf("leaf %d, item %s", ev.ItemLeaf, f.itemString(ev.Item))
	}
	return fmt.Sprintf("%s -> %s, item %s", f.itemString(ev.Old.R), f.itemString(ev.New.R), f.itemString(ev.Item))
}

func checkLog(t *testing.T, what string, got, want []string) {
	t.Helper()
	if !slices.Equal(got, want) {
		t.Errorf("%s:\n got %s\nwant %s", what, strings.Join(got, "\n     "), strings.Join(want, "\n     "))
	}
}

// TestCreateReportsInitialState checks that a new entity reports OnCreate
// first, with the whole tick applied, then its non-zero initial values as
// changes from zero and its container items as added.
func TestCreateReportsInitialState(t *testing.T) {
	f := newFixture(t)
	var rc recorder
	f.watchAll(&rc)
	var sawGold uint64
	f.r.OnCreate(f.player, func(e *state.Entity) {
		sawGold = e.Num(f.player.Leaf(f.gold).Num) // from the second segment
	})

	e := f.spawn(f.player)
	h := e.Handle()
	minus5 := int64(-5)
	h.SetNum(f.hp, uint64(minus5))
	h.SetNum(f.posX, f32(1.5))
	h.SetNum(f.posY, f32(2.25))
	h.SetStr(f.name, "bob")
	h.List(f.scores).Push(state.Value{N: 10})
	h.List(f.scores).Push(state.Value{N: 20})
	h.Map(f.stats).Put(state.Value{S: "str"}, state.Value{N: f64(0.5)})
	h.Bag(f.inv).Add(7, f.newItem(3, "potion"))
	h.SetNum(f.gold, 99)
	f.tick()
	f.checkSynced()

	got := rc.take()
	if len(got) == 0 || got[0] != "create player 1" {
		t.Fatalf("first event = %q, want the creation", got)
	}
	// The order of the value events follows the wire (owner fields come in
	// the second segment); compare them as a set.
	want := []string{
		"hp 1: 0 -> -5",
		"pos.x 1: 0 -> 1.5",
		"pos.y 1: 0 -> 2.25",
		`name 1: "" -> "bob"`,
		"scores 1: added [0] 0 -> 10",
		"scores 1: added [1] 0 -> 20",
		"stats 1: added [str] 0 -> 0.5",
		"inv 1: added [7] nil -> {3 potion []}, item {3 potion []}",
		"gold 1: 0 -> 99",
	}
	rest := slices.Clone(got[1:])
	slices.Sort(rest)
	slices.Sort(want)
	checkLog(t, "initial values", rest, want)
	if sawGold != 99 {
		t.Errorf("OnCreate saw gold %d, want 99: the whole tick applies before callbacks", sawGold)
	}
	if i := slices.Index(got, "scores 1: added [0] 0 -> 10"); i < 0 || got[i+1] != "scores 1: added [1] 0 -> 20" {
		t.Errorf("list items out of order: %q", got)
	}
	// Fields left at zero (target) report nothing.
	for _, l := range got {
		if strings.HasPrefix(l, "target") {
			t.Errorf("zero field reported: %s", l)
		}
	}
}

func TestFieldChanges(t *testing.T) {
	f := newFixture(t)
	e := f.spawn(f.player)
	h := e.Handle()
	h.SetNum(f.hp, 100)
	h.SetStr(f.name, "bob")
	f.tick()
	var rc recorder
	f.watchAll(&rc)

	h.SetNum(f.hp, 90)
	h.SetNum(f.posX, f32(-3))
	h.SetNum(f.posY, f32(0.5))
	h.SetStr(f.name, "robert")
	h.SetNum(f.gold, 5)
	f.tick()
	f.checkSynced()
	got := rc.take()
	slices.Sort(got)
	checkLog(t, "updates", got, []string{
		"gold 1: 0 -> 5",
		"hp 1: 100 -> 90",
		`name 1: "bob" -> "robert"`,
		"pos.x 1: 0 -> -3",
		"pos.y 1: 0 -> 0.5",
	})

	// A tick that changes nothing watched reports nothing.
	f.tick()
	if got := rc.take(); len(got) != 0 {
		t.Errorf("empty tick reported %q", got)
	}
}

func TestListEvents(t *testing.T) {
	f := newFixture(t)
	e := f.spawn(f.player)
	l := e.Handle().List(f.scores)
	for v := range 20 {
		l.Push(state.Value{N: uint64(v)})
	}
	f.tick()

	var events []client.ListEvent
	f.r.OnList(f.player, f.scores, func(_ *state.Entity, ev client.ListEvent) { events = append(events, ev) })
	list := func() []uint64 { return listOf(f.r.Entity(e.ID()).List(f.player.Leaf(f.scores).Obj)) }

	// A few operations on a long list travel as operations and report
	// one event each.
	before := list()
	l.Push(state.Value{N: 100})              // [0 … 19 100]
	l.Insert(0, state.Value{N: 50})          // [50 0 1 2 3 …]
	l.Set(2, state.Value{N: 22})             // [50 0 22 2 3 …]
	l.Remove(3)                              // [50 0 22 3 …]
	l.Set(0, state.Value{N: math.MaxUint64}) // -1 as int32
	f.tick()
	f.checkSynced()
	want := []client.ListEvent{
		{Kind: client.Added, Index: 20, New: state.Value{N: 100}},
		{Kind: client.Added, Index: 0, New: state.Value{N: 50}},
		{Kind: client.Changed, Index: 2, Old: state.Value{N: 1}, New: state.Value{N: 22}},
		{Kind: client.Removed, Index: 3, Old: state.Value{N: 2}},
		{Kind: client.Changed, Index: 0, Old: state.Value{N: 50}, New: state.Value{N: math.MaxUint64}},
	}
	if !slices.Equal(events, want) {
		t.Errorf("events:\n got %+v\nwant %+v", events, want)
	}
	// Replaying the events on the old list gives the new one.
	if got, after := replay(before, events), list(); !slices.Equal(got, after) {
		t.Errorf("replay = %v, want %v", got, after)
	}

	// Many changes send the list whole; the events still replay.
	events = nil
	before = list()
	for i := 0; i < 15; i++ {
		l.Set(i, state.Value{N: uint64(1000 + i)})
	}
	for range 5 {
		l.Remove(l.Len() - 1)
	}
	f.tick()
	f.checkSynced()
	if got, after := replay(before, events), list(); !slices.Equal(got, after) || len(events) != 20 {
		t.Errorf("whole list: %d events, replay = %v, want %v", len(events), got, after)
	}

	events = nil
	before = list()
	l.Clear()
	f.tick()
	if len(events) != len(before) || events[0].Kind != client.Removed || events[0].Index != len(before)-1 {
		t.Errorf("clear events: %+v", events)
	}
	if got := replay(before, events); len(got) != 0 {
		t.Errorf("replay of clear = %v", got)
	}
}

func listOf(l *state.List) []uint64 {
	var out []uint64
	for i := range l.Len() {
		out = append(out, l.At(i).N)
	}
	return out
}

func replay(l []uint64, events []client.ListEvent) []uint64 {
	l = slices.Clone(l)
	for _, ev := range events {
		switch ev.Kind {
		case client.Added:
			l = slices.Insert(l, ev.Index, ev.New.N)
		case client.Removed:
			l = slices.Delete(l, ev.Index, ev.Index+1)
		case client.Changed:
			l[ev.Index] = ev.New.N
		}
	}
	return l
}

func TestMapEvents(t *testing.T) {
	f := newFixture(t)
	e := f.spawn(f.player)
	m := e.Handle().Map(f.stats)
	m.Put(state.Value{S: "a"}, state.Value{N: f64(1)})
	m.Put(state.Value{S: "b"}, state.Value{N: f64(2)})
	f.tick()
	var rc recorder
	f.watchAll(&rc)

	m.Put(state.Value{S: "a"}, state.Value{N: f64(1.5)})
	m.Delete(state.Value{S: "b"})
	m.Put(state.Value{S: "c"}, state.Value{N: f64(3)})
	f.tick()
	f.checkSynced()
	got := rc.take()
	slices.Sort(got)
	checkLog(t, "map", got, []string{
		"stats 1: added [c] 0 -> 3",
		"stats 1: changed [a] 1 -> 1.5",
		"stats 1: removed [b] 2 -> 0",
	})
}

func TestBagEvents(t *testing.T) {
	f := newFixture(t)
	e := f.spawn(f.player)
	b := e.Handle().Bag(f.inv)
	b.Add(1, f.newItem(1, "sword"))
	b.Add(2, f.newItem(5, "arrow"))
	f.tick()
	var rc recorder
	f.watchAll(&rc)

	b.Get(2).SetNum(f.count, 4)
	b.Get(2).SetStr(f.itemName, "arrows")
	f.tick()
	checkLog(t, "item fields", rc.take(), []string{
		"inv 1: changed [2] count 5 -> 4, item {4 arrows []}",
		`inv 1: changed [2] name "arrow" -> "arrows", item {4 arrows []}`,
	})

	b.Get(2).List(f.itemTags).Push(state.Value{S: "sharp"})
	f.tick()
	checkLog(t, "item container", rc.take(), []string{
		fmt.Sprintf("inv 1: changed [2] leaf %d, item {4 arrows [sharp]}", f.itemTags),
	})

	b.Add(1, f.newItem(1, "axe")) // replaces the sword
	b.Remove(2)
	b.Add(3, f.newItem(2, "shield"))
	f.tick()
	f.checkSynced()
	got := rc.take()
	slices.Sort(got)
	checkLog(t, "items", got, []string{
		"inv 1: added [3] nil -> {2 shield []}, item {2 shield []}",
		"inv 1: changed [1] {1 sword []} -> {1 axe []}, item {1 axe []}",
		"inv 1: removed [2] {4 arrows [sharp]} -> nil, item nil",
	})
}

func TestDestroy(t *testing.T) {
	f := newFixture(t)
	e := f.spawn(f.player)
	e.Handle().SetNum(f.hp, 7)
	tw := f.spawn(f.tower)
	f.tick()
	var rc recorder
	f.watchAll(&rc)
	var hp int16
	var inReplica bool
	f.r.OnDestroy(f.player, func(d *state.Entity) {
		hp = int16(d.Num(f.player.Leaf(f.hp).Num))
		inReplica = f.r.Entity(d.ID()) != nil
	})
	f.tr.Destroy(e)
	f.tick()
	f.checkSynced()
	checkLog(t, "destroy", rc.take(), []string{"destroy player 1"})
	if hp != 7 || inReplica {
		t.Errorf("OnDestroy saw hp %d (want 7), entity still in replica: %v", hp, inReplica)
	}
	if f.r.Len() != 1 || f.r.Entity(tw.ID()) == nil {
		t.Errorf("the tower should remain")
	}
}

// TestRefResolvesInCallback checks that a reference to an entity created
// later in the same tick resolves in callbacks.
func TestRefResolvesInCallback(t *testing.T) {
	f := newFixture(t)
	p := f.spawn(f.player) // player 1 is created before tower 2
	tw := f.spawn(f.tower)
	tw.Handle().SetNum(f.towerHP, 50)
	p.Handle().SetNum(f.target, uint64(tw.ID()))

	var resolved []string
	towerCreated := false
	f.r.OnCreate(f.tower, func(*state.Entity) { towerCreated = true })
	check := func(where string, ref replica.Ref) {
		target := f.r.Resolve(ref)
		if target == nil {
			resolved = append(resolved, where+": unresolved")
			return
		}
		resolved = append(resolved, fmt.Sprintf("%s: %s %d hp %d (tower callbacks ran: %v)", where,
			target.Class().Name, target.ID(), int16(target.Num(f.tower.Leaf(f.towerHP).Num)), towerCreated))
	}
	f.r.OnCreate(f.player, func(e *state.Entity) {
		check("create", replica.Ref(e.Num(f.player.Leaf(f.target).Num)))
	})
	f.r.OnField(f.player, f.target, func(_ *state.Entity, _, new state.Value) {
		check("field", replica.Ref(new.N))
	})
	f.tick()
	checkLog(t, "resolved", resolved, []string{
		"create: Tower 2 hp 50 (tower callbacks ran: false)",
		"field: Tower 2 hp 50 (tower callbacks ran: false)",
	})
	if f.r.Resolve(0) != nil || f.r.Resolve(99) != nil {
		t.Errorf("Resolve of zero or unknown ref should be nil")
	}
}

// TestAtomicity applies ticks whose second segment is bad and checks that
// each leaves the replica as it was, runs no callback and returns a typed
// error; then the good tick applies.
func TestAtomicity(t *testing.T) {
	f := newFixture(t)
	p := f.spawn(f.player)
	h := p.Handle()
	h.SetNum(f.hp, 10)
	h.List(f.scores).Push(state.Value{N: 1})
	h.Map(f.stats).Put(state.Value{S: "a"}, state.Value{N: f64(1)})
	h.Bag(f.inv).Add(1, f.newItem(1, "sword"))
	gone := f.spawn(f.tower)
	f.tick()

	// The next tick changes every kind of thing in the first segment and
	// some in the second.
	h.SetNum(f.hp, 20)
	h.SetNum(f.posX, f32(4))
	h.SetStr(f.name, "x")
	h.List(f.scores).Push(state.Value{N: 2})
	h.List(f.scores).Set(0, state.Value{N: 9})
	h.Map(f.stats).Put(state.Value{S: "b"}, state.Value{N: f64(2)})
	h.Map(f.stats).Delete(state.Value{S: "a"})
	h.Bag(f.inv).Get(1).SetNum(f.count, 2)
	h.Bag(f.inv).Add(2, f.newItem(3, "bow"))
	h.SetNum(f.gold, 100)
	f.tr.Destroy(gone)
	fresh := f.spawn(f.player)
	fresh.Handle().SetNum(f.gold, 1)
	segs := f.segments()

	calls := 0
	f.watchAll(&recorder{})
	f.r.OnCreate(f.player, func(*state.Entity) { calls++ })
	f.r.OnDestroy(f.tower, func(*state.Entity) { calls++ })
	f.r.OnField(f.player, f.hp, func(*state.Entity, state.Value, state.Value) { calls++ })
	f.r.OnField(f.player, f.gold, func(*state.Entity, state.Value, state.Value) { calls++ })
	f.r.OnList(f.player, f.scores, func(*state.Entity, client.ListEvent) { calls++ })
	f.r.OnMap(f.player, f.stats, func(*state.Entity, client.MapEvent) { calls++ })
	f.r.OnBag(f.player, f.inv, func(*state.Entity, client.BagEvent) { calls++ })

	bad := map[string][]byte{
		"garbage":        {0xff, 0xff, 0xff, 0xff},
		"truncated":      segs[1][:len(segs[1])/2],
		"duplicate tick": segs[0], // creates an existing entity
		"trailing data":  append(slices.Clone(segs[1]), 0xff),
	}
	before := snap(f.r)
	for name, seg := range bad {
		err := f.r.Apply(segs[0], seg)
		var te *client.TickError
		var de *codec.DecodeError
		if !errors.As(err, &te) || te.Segment != 1 || !errors.As(err, &de) {
			t.Errorf("%s: got %v, want a TickError at segment 1 wrapping a DecodeError", name, err)
		}
		if d := before.diff(f.r); d != "" {
			t.Errorf("%s: replica changed: %s", name, d)
		}
		if calls != 0 {
			t.Errorf("%s: %d callbacks ran", name, calls)
		}
	}
	if err := f.r.Apply(segs[0], bad["duplicate tick"]); !errors.Is(err, state.ErrExists) {
		t.Errorf("duplicate creation: got %v, want ErrExists", err)
	}
	if err := f.r.Apply(segs[0], bad["garbage"]); !errors.Is(err, wire.ErrMalformed) && !errors.Is(err, wire.ErrTruncated) {
		t.Errorf("garbage: got %v, want a wire error", err)
	}

	// Random corruption of either segment: an error leaves no trace.
	rng := rand.New(rand.NewPCG(1, 2))
	rejected := 0
	for i := 0; i < 300; i++ {
		s0, s1 := slices.Clone(segs[0]), slices.Clone(segs[1])
		target := s0
		if i%2 == 1 {
			target = s1
		}
		for range 1 + rng.IntN(3) {
			target[rng.IntN(len(target))] ^= byte(1 << rng.IntN(8))
		}
		if i%7 == 0 {
			target = target[:rng.IntN(len(target))]
			if i%2 == 1 {
				s1 = target
			} else {
				s0 = target
			}
		}
		g := newFixture(t)
		replayTo(t, g, f)
		callsBefore := calls
		before := snap(g.r)
		g.r.OnField(g.player, g.hp, func(*state.Entity, state.Value, state.Value) { calls++ })
		g.r.OnList(g.player, g.scores, func(*state.Entity, client.ListEvent) { calls++ })
		g.r.OnBag(g.player, g.inv, func(*state.Entity, client.BagEvent) { calls++ })
		g.r.OnCreate(g.player, func(*state.Entity) { calls++ })
		err := g.r.Apply(s0, s1)
		if err == nil {
			continue // the flip happened to leave valid data
		}
		rejected++
		var te *client.TickError
		var de *codec.DecodeError
		if !errors.As(err, &te) || !errors.As(err, &de) {
			t.Fatalf("corruption %d: error %v is not a TickError wrapping a DecodeError", i, err)
		}
		if d := before.diff(g.r); d != "" {
			t.Fatalf("corruption %d (%v): %s", i, err, d)
		}
		if calls != callsBefore {
			t.Fatalf("corruption %d: callbacks ran", i)
		}
	}
	t.Logf("%d of 300 corruptions rejected", rejected)
	if rejected < 100 {
		t.Errorf("only %d of 300 corruptions were rejected", rejected)
	}

	// The good tick still applies, with its callbacks.
	if err := f.r.Apply(segs...); err != nil {
		t.Fatal(err)
	}
	f.checkSynced()
	if calls == 0 {
		t.Errorf("no callbacks for the good tick")
	}
}

// replayTo brings g's replica to the state of f's, through a full-state
// tick.
func replayTo(t *testing.T, g, f *fixture) {
	t.Helper()
	ents := f.r.Entities(nil)
	var enc codec.Encoder
	// Encode the client's entities as if they were a server's: full state
	// of every partition.
	if err := g.r.Apply(enc.Full(nil, ents, codec.PartAll), enc.Full(nil, ents, codec.PartOwner)); err != nil {
		t.Fatal(err)
	}
}

func TestUnregister(t *testing.T) {
	f := newFixture(t)
	e := f.spawn(f.player)
	f.tick()
	h := e.Handle()

	var a, b int
	cancelA := f.r.OnField(f.player, f.hp, func(*state.Entity, state.Value, state.Value) { a++ })
	var cancelB func()
	// A unregisters B while the tick's callbacks run: B must not run again,
	// not even for the rest of this event.
	f.r.OnField(f.player, f.hp, func(*state.Entity, state.Value, state.Value) {
		if cancelB != nil {
			cancelB()
		}
	})
	cancelB = f.r.OnField(f.player, f.hp, func(*state.Entity, state.Value, state.Value) { b++ })

	h.SetNum(f.hp, 1)
	f.tick()
	if a != 1 || b != 0 {
		t.Errorf("a = %d (want 1), b = %d (want 0)", a, b)
	}
	cancelA()
	cancelA() // harmless
	h.SetNum(f.hp, 2)
	f.tick()
	if a != 1 || b != 0 {
		t.Errorf("after cancel: a = %d, b = %d", a, b)
	}

	// Cancelled create callbacks stop too.
	n := 0
	cancel := f.r.OnCreate(f.tower, func(*state.Entity) { n++ })
	f.spawn(f.tower)
	f.tick()
	cancel()
	f.spawn(f.tower)
	f.tick()
	if n != 1 {
		t.Errorf("OnCreate ran %d times, want 1", n)
	}
}

func TestRegisterDuringCallbacks(t *testing.T) {
	f := newFixture(t)
	var log []string
	f.r.OnCreate(f.player, func(e *state.Entity) {
		log = append(log, fmt.Sprintf("create %d", e.ID()))
		f.r.OnCreate(f.player, func(e *state.Entity) { log = append(log, fmt.Sprintf("late create %d", e.ID())) })
		f.r.OnField(f.player, f.hp, func(e *state.Entity, _, new state.Value) {
			log = append(log, fmt.Sprintf("late hp %d: %d", e.ID(), new.N))
		})
	})
	e := f.spawn(f.player)
	e.Handle().SetNum(f.hp, 1)
	f.spawn(f.player)
	f.tick()
	checkLog(t, "first tick", log, []string{"create 1", "create 2"})
	log = nil
	e.Handle().SetNum(f.hp, 2)
	f.tick()
	checkLog(t, "second tick", log, []string{"late hp 1: 2", "late hp 1: 2"})
}

func TestWatchedLeavesOnly(t *testing.T) {
	f := newFixture(t)
	e := f.spawn(f.player)
	h := e.Handle()
	f.tick()
	if n := client.LastEvents(f.r); n != 1 {
		t.Errorf("creation with nothing watched: %d events, want 1", n)
	}
	h.SetNum(f.hp, 5)
	h.List(f.scores).Push(state.Value{N: 1})
	f.tick()
	if n := client.LastEvents(f.r); n != 0 {
		t.Errorf("unwatched changes: %d events, want 0", n)
	}
	f.r.OnField(f.player, f.name, func(*state.Entity, state.Value, state.Value) {})
	h.SetNum(f.hp, 6)
	f.tick()
	if n := client.LastEvents(f.r); n != 0 {
		t.Errorf("change of an unwatched leaf of a watched class: %d events, want 0", n)
	}
	hp := 0
	f.r.OnField(f.player, f.hp, func(*state.Entity, state.Value, state.Value) { hp++ })
	h.SetNum(f.hp, 7)
	f.tick()
	if n := client.LastEvents(f.r); n != 1 || hp != 1 {
		t.Errorf("watched change: %d events, %d calls; want 1, 1", n, hp)
	}
}

func TestPanickingCallback(t *testing.T) {
	f := newFixture(t)
	var after []string
	f.r.OnCreate(f.player, func(e *state.Entity) {
		if e.ID() == 1 {
			panic("boom")
		}
		after = append(after, fmt.Sprint("create ", e.ID()))
	})
	f.spawn(f.player)
	f.spawn(f.player)
	segs := f.segments()
	func() {
		defer func() {
			if v := recover(); v != "boom" {
				t.Errorf("recovered %v, want the callback's panic", v)
			}
		}()
		f.r.Apply(segs...)
	}()
	// The tick is committed; the rest of its callbacks did not run.
	f.checkSynced()
	if len(after) != 0 {
		t.Errorf("callbacks after the panic ran: %q", after)
	}
	// The replica keeps working.
	f.spawn(f.player)
	f.tick()
	f.checkSynced()
	checkLog(t, "next tick", after, []string{"create 3"})
}

func TestReentrantApply(t *testing.T) {
	f := newFixture(t)
	var err error
	f.r.OnCreate(f.player, func(*state.Entity) { err = f.r.Apply() })
	f.spawn(f.player)
	f.tick()
	if !errors.Is(err, client.ErrReentrant) {
		t.Errorf("Apply from a callback: got %v, want ErrReentrant", err)
	}
}

func TestRegistrationMisuse(t *testing.T) {
	f := newFixture(t)
	other := newFixture(t)
	for name, fn := range map[string]func(){
		"container as field": func() { f.r.OnField(f.player, f.scores, nil) },
		"field as list":      func() { f.r.OnList(f.player, f.hp, nil) },
		"list as map":        func() { f.r.OnMap(f.player, f.scores, nil) },
		"map as bag":         func() { f.r.OnBag(f.player, f.stats, nil) },
		"leaf out of range":  func() { f.r.OnField(f.player, f.player.Leaves, nil) },
		"negative leaf":      func() { f.r.OnField(f.player, -1, nil) },
		"foreign class":      func() { f.r.OnCreate(other.player, nil) },
		"nil class":          func() { f.r.OnDestroy(nil, nil) },
		"nested struct":      func() { f.r.OnCreate(f.item, nil) },
	} {
		func() {
			defer func() {
				v := recover()
				if s, ok := v.(string); !ok || !strings.HasPrefix(s, "client: ") {
					t.Errorf("%s: recovered %v, want a client panic", name, v)
				}
			}()
			fn()
		}()
	}
}

func TestLookup(t *testing.T) {
	f := newFixture(t)
	for range 3 {
		f.spawn(f.tower)
	}
	f.spawn(f.player)
	f.tick()
	ents := f.r.Entities(make([]*state.Entity, 0, 4))
	var ids []state.ID
	for _, e := range ents {
		ids = append(ids, e.ID())
	}
	if !slices.Equal(ids, []state.ID{1, 2, 3, 4}) || f.r.Len() != 4 {
		t.Errorf("Entities = %v, Len = %d", ids, f.r.Len())
	}
	if e := f.r.Entity(4); e == nil || e.Class() != f.player {
		t.Errorf("Entity(4) = %v", e)
	}
	if f.r.Entity(5) != nil {
		t.Errorf("Entity(5) should be nil")
	}
}

// TestRemoteSchema decodes data from an older server schema that lacks a
// field: the field keeps its zero value and the rest reports as usual.
func TestRemoteSchema(t *testing.T) {
	local := newFixture(t)
	old := &schema.Struct{Name: "Tower", Class: true, ID: 2, Fields: []*schema.Field{
		{ID: 1, Name: "hp", Type: schema.Type{Kind: schema.Int16}, Vis: schema.VisAll},
	}}
	oldPlayer := &schema.Struct{Name: "Player", Class: true, ID: 1, Fields: []*schema.Field{
		{ID: 1, Name: "hp", Type: schema.Type{Kind: schema.Int16}, Vis: schema.VisAll},
	}}
	remote, err := schema.New(oldPlayer, old)
	if err != nil {
		t.Fatal(err)
	}
	r, err := client.New(local.s, client.Config{Remote: remote, Limits: codec.Limits{MaxEntities: 10}})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	r.OnField(local.player, local.hp, func(e *state.Entity, _, new state.Value) {
		got = append(got, fmt.Sprintf("hp %d = %d", e.ID(), int16(new.N)))
	})
	tr := state.NewTracker(remote)
	e, _ := tr.Spawn(oldPlayer)
	e.Handle().SetNum(0, 42)
	var enc codec.Encoder
	if err := r.Apply(enc.Delta(nil, tr.Commit(), codec.PartAll, nil)); err != nil {
		t.Fatal(err)
	}
	checkLog(t, "remote", got, []string{"hp 1 = 42"})
	if ce := r.Entity(1); ce == nil || ce.Class() != local.player {
		t.Errorf("entity stored as %v, want the local class", ce)
	}
}
