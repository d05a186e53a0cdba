package state_test

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"testing"

	"github.com/replicago/replica/schema"
	"github.com/replicago/replica/state"
)

// Leaves of the Player class of testSchema.
const (
	lHP     = iota // int16
	lPosX          // Pos.X float32
	lPosY          // Pos.Y float32 q(1/64)
	lName          // string
	lScores        // list<int32>
	lStats         // map<string,float64>
	lInv           // bag<uint32,Item>
	lAlive         // bool
	lSlots         // map<int16,Item>
	lGold          // uint32
	nLeaves
)

// Leaves of Item.
const (
	iCount = iota // int32
	iName         // string
	iTags         // list<string>
)

type testSchema struct {
	s      *schema.Schema
	player *schema.Struct
	item   *schema.Struct
	pos    *schema.Struct
	other  *schema.Struct
}

func newTestSchema(t testing.TB) *testSchema {
	t.Helper()
	pos := &schema.Struct{Name: "Pos", Fields: []*schema.Field{
		{ID: 1, Name: "X", Type: schema.Type{Kind: schema.Float32}, Vis: schema.VisAll},
		{ID: 2, Name: "Y", Type: schema.Type{Kind: schema.Float32, Quant: schema.Quant{Step: 1.0 / 64}}, Vis: schema.VisAll},
	}}
	item := &schema.Struct{Name: "Item", Fields: []*schema.Field{
		{ID: 1, Name: "Count", Type: schema.Type{Kind: schema.Int32}, Vis: schema.VisAll},
		{ID: 2, Name: "Name", Type: schema.Type{Kind: schema.String}, Vis: schema.VisAll},
		{ID: 3, Name: "Tags", Type: schema.Type{Kind: schema.List, Elem: &schema.Type{Kind: schema.String}}, Vis: schema.VisAll},
	}}
	player := &schema.Struct{Name: "Player", Class: true, ID: 1, Fields: []*schema.Field{
		{ID: 1, Name: "HP", Type: schema.Type{Kind: schema.Int16}, Vis: schema.VisAll},
		{ID: 2, Name: "Pos", Type: schema.Type{Kind: schema.Nested, Struct: pos}, Vis: schema.VisAll},
		{ID: 3, Name: "Name", Type: schema.Type{Kind: schema.String}, Vis: schema.VisAll},
		{ID: 4, Name: "Scores", Type: schema.Type{Kind: schema.List, Elem: &schema.Type{Kind: schema.Int32}}, Vis: schema.VisAll},
		{ID: 5, Name: "Stats", Type: schema.Type{Kind: schema.Map, Key: schema.String, Elem: &schema.Type{Kind: schema.Float64}}, Vis: schema.VisAll},
		{ID: 6, Name: "Inv", Type: schema.Type{Kind: schema.Bag, Key: schema.Uint32, Struct: item}, Vis: schema.VisAll},
		{ID: 7, Name: "Alive", Type: schema.Type{Kind: schema.Bool}, Vis: schema.VisAll},
		{ID: 8, Name: "Slots", Type: schema.Type{Kind: schema.Map, Key: schema.Int16, Elem: &schema.Type{Kind: schema.Nested, Struct: item}}, Vis: schema.VisAll},
		{ID: 9, Name: "Gold", Type: schema.Type{Kind: schema.Uint32}, Vis: schema.VisOwner},
	}}
	other := &schema.Struct{Name: "Other", Class: true, ID: 2, Fields: []*schema.Field{
		{ID: 1, Name: "N", Type: schema.Type{Kind: schema.Int64}, Vis: schema.VisAll},
	}}
	s, err := schema.New(player, other)
	if err != nil {
		t.Fatal(err)
	}
	if player.Leaves != nLeaves {
		t.Fatalf("Player has %d leaves", player.Leaves)
	}
	return &testSchema{s: s, player: player, item: item, pos: pos, other: other}
}

// slot returns the numeric or object slot of leaf.
func num(c *schema.Struct, leaf int) int { return c.Leaf(leaf).Num }
func obj(c *schema.Struct, leaf int) int { return c.Leaf(leaf).Obj }

func spawn(t *testing.T, tr *state.Tracker, c *schema.Struct) *state.Entity {
	t.Helper()
	e, err := tr.Spawn(c)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// only returns the single change of cs, failing otherwise.
func only(t *testing.T, cs *state.Changeset) *state.Change {
	t.Helper()
	if len(cs.Changes) != 1 {
		t.Fatalf("%d changes, want 1", len(cs.Changes))
	}
	return cs.Changes[0]
}

func dirtyLeaves(c *state.Change) []int {
	var out []int
	for l := state.NextDirty(c.DirtySet(), 0); l >= 0; l = state.NextDirty(c.DirtySet(), l+1) {
		out = append(out, l)
	}
	return out
}

func TestSpawnAndCommit(t *testing.T) {
	ts := newTestSchema(t)
	tr := state.NewTracker(ts.s)
	if tr.Schema() != ts.s {
		t.Fatal("Schema")
	}
	a := spawn(t, tr, ts.player)
	b := spawn(t, tr, ts.other)
	if a.ID() == 0 || b.ID() == a.ID() || a.Class() != ts.player || tr.Len() != 2 || tr.Entity(a.ID()) != a {
		t.Fatalf("spawn: ids %d %d, len %d", a.ID(), b.ID(), tr.Len())
	}
	// Writes to a new entity are not tracked in detail: it is sent whole.
	a.Handle().SetNum(lHP, 50)
	a.Handle().List(lScores).Push(state.Value{N: 1})
	cs := tr.Commit()
	if cs.Tick != 1 || len(cs.Changes) != 2 {
		t.Fatalf("tick %d, %d changes", cs.Tick, len(cs.Changes))
	}
	for i, want := range []*state.Entity{a, b} {
		c := cs.Changes[i]
		if c.Entity != want || !c.Created || c.Destroyed {
			t.Errorf("change %d: %+v", i, c)
		}
		if len(dirtyLeaves(c)) != 0 || c.Cont(lScores) != nil {
			t.Errorf("change %d of a created entity has dirty leaves %v", i, dirtyLeaves(c))
		}
	}
	if a.Num(num(ts.player, lHP)) != 50 {
		t.Error("value lost")
	}
	// A tick without writes has no changes.
	if cs := tr.Commit(); cs.Tick != 2 || len(cs.Changes) != 0 {
		t.Fatalf("idle tick %d: %d changes", cs.Tick, len(cs.Changes))
	}
	// Unknown classes are refused.
	stranger := &schema.Struct{Name: "Stranger", Class: true, ID: 1}
	if _, err := tr.Spawn(stranger); !errors.Is(err, state.ErrUnknownClass) {
		t.Fatalf("spawn of a foreign class with a known ID: %v", err)
	}
	if got := tr.AppendEntities(nil); len(got) != 2 || got[0] != a || got[1] != b {
		t.Fatalf("AppendEntities = %v", got)
	}
}

func TestCoalescing(t *testing.T) {
	ts := newTestSchema(t)
	tr := state.NewTracker(ts.s)
	e := spawn(t, tr, ts.player)
	h := e.Handle()
	h.SetNum(lHP, 10)
	h.SetStr(lName, "a")
	tr.Commit()

	// Repeated writes in one tick: one dirty leaf, base = tick-start value.
	for _, v := range []int64{20, -30, 40} {
		h.SetNum(lHP, uint64(v))
	}
	h.SetStr(lName, "b")
	h.SetStr(lName, "c")
	c := only(t, tr.Commit())
	if c.Created || c.Destroyed || c.Entity != e {
		t.Fatalf("change %+v", c)
	}
	if got := dirtyLeaves(c); len(got) != 2 || got[0] != lHP || got[1] != lName {
		t.Fatalf("dirty leaves %v", got)
	}
	if c.Base(num(ts.player, lHP)) != 10 || e.Num(num(ts.player, lHP)) != 40 {
		t.Fatalf("base %d, value %d", c.Base(num(ts.player, lHP)), e.Num(num(ts.player, lHP)))
	}
	if e.Str(obj(ts.player, lName)) != "c" {
		t.Fatal("string value")
	}

	// Writing the current value records nothing.
	h.SetNum(lHP, 40)
	h.SetStr(lName, "c")
	if cs := tr.Commit(); len(cs.Changes) != 0 {
		t.Fatalf("no-op writes recorded %d changes", len(cs.Changes))
	}

	// A value set and set back is dirty with base = current value: the
	// encoder sends a zero delta.
	h.SetNum(lHP, 1)
	h.SetNum(lHP, 40)
	c = only(t, tr.Commit())
	if !c.Dirty(lHP) || c.Base(num(ts.player, lHP)) != 40 {
		t.Fatalf("set and reset: dirty %v base %d", c.Dirty(lHP), c.Base(num(ts.player, lHP)))
	}

	// Nested fields mark their own leaf; the base of a signed field is
	// stored sign-extended, of a quantized one as its code.
	pos := h.Nested(ts.player.Field(2).Leaf, ts.player.Field(2).Num, ts.player.Field(2).Obj)
	pos.SetNum(1, uint64(math.Float32bits(2.5)))
	pos.SetNum(1, uint64(math.Float32bits(3.0)))
	h.SetNum(lHP, uint64(0xFFFF)) // int16: normalized to −1
	c = only(t, tr.Commit())
	if got := dirtyLeaves(c); len(got) != 2 || got[0] != lHP || got[1] != lPosY {
		t.Fatalf("dirty leaves %v", got)
	}
	if c.Base(num(ts.player, lPosY)) != 0 || e.Num(num(ts.player, lPosY)) != 192 {
		t.Fatalf("quantized: base %d, code %d", c.Base(num(ts.player, lPosY)), e.Num(num(ts.player, lPosY)))
	}
	if int64(e.Num(num(ts.player, lHP))) != -1 {
		t.Fatalf("int16 0xFFFF stored as %#x", e.Num(num(ts.player, lHP)))
	}
}

func TestDestroy(t *testing.T) {
	ts := newTestSchema(t)
	tr := state.NewTracker(ts.s)
	keep := spawn(t, tr, ts.player)
	tr.Commit()

	// Created and destroyed in one tick: no trace.
	ghost := spawn(t, tr, ts.player)
	ghost.Handle().SetNum(lHP, 5)
	tr.Destroy(ghost)
	if tr.Entity(ghost.ID()) != nil || tr.Len() != 1 {
		t.Fatal("destroyed entity still live")
	}
	if cs := tr.Commit(); len(cs.Changes) != 0 {
		t.Fatalf("create+destroy left %d changes", len(cs.Changes))
	}

	// A destroyed entity: one change; it is no longer valid, and later
	// writes panic, in the tick of the destroy and after it.
	keep.Handle().SetNum(lHP, 10)
	tr.Destroy(keep)
	if keep.Valid() || keep.Handle().Valid() {
		t.Fatal("a destroyed entity is still valid")
	}
	mustPanicInvalid(t, func() { keep.Handle().SetNum(lHP, 11) })
	mustPanicInvalid(t, func() { keep.SetNum(lHP, 11) })
	mustPanicInvalid(t, func() { keep.Handle().SetStr(lName, "zombie") })
	tr.Destroy(keep) // twice is harmless
	c := only(t, tr.Commit())
	if c.Entity != keep || !c.Destroyed || c.Created {
		t.Fatalf("change %+v", c)
	}
	if keep.Num(num(ts.player, lHP)) != 10 {
		t.Fatal("a destroyed entity's record stays readable")
	}
	if keep.Valid() {
		t.Fatal("a destroyed entity is valid after the commit")
	}
	mustPanicInvalid(t, func() { keep.Handle().SetNum(lHP, 11) })
	if cs := tr.Commit(); len(cs.Changes) != 0 {
		t.Fatalf("writes after destroy recorded %d changes", len(cs.Changes))
	}
	if ghost.Valid() {
		t.Fatal("an entity created and destroyed in one tick is valid")
	}
	// Destroying an entity of another tracker does nothing.
	tr2 := state.NewTracker(ts.s)
	foreign := spawn(t, tr2, ts.player)
	tr.Destroy(foreign)
	if tr2.Entity(foreign.ID()) != foreign {
		t.Fatal("foreign destroy")
	}
	// IDs are not reused.
	if e := spawn(t, tr, ts.player); e.ID() <= ghost.ID() {
		t.Fatalf("new ID %d after %d", e.ID(), ghost.ID())
	}
}

func TestCommitRecycles(t *testing.T) {
	ts := newTestSchema(t)
	tr := state.NewTracker(ts.s)
	ents := []*state.Entity{spawn(t, tr, ts.player), spawn(t, tr, ts.player)}
	tr.Commit()
	write := func(i int) {
		for _, e := range ents {
			h := e.Handle()
			h.SetNum(lHP, uint64(i))
			h.Map(lStats).Put(state.Value{S: "k"}, state.Value{N: uint64(i)})
		}
	}
	// Change records are pooled: ticks after the first two allocate
	// none, so only a few distinct ones are ever seen.
	seen := make(map[*state.Change]bool)
	var cs *state.Changeset
	for i := range 6 {
		write(i + 1)
		next := tr.Commit()
		if cs != nil && next != cs {
			t.Fatal("Commit returned a new Changeset")
		}
		cs = next
		if len(cs.Changes) != len(ents) {
			t.Fatalf("tick %d: %d changes", i, len(cs.Changes))
		}
		for _, c := range cs.Changes {
			seen[c] = true
			if got := dirtyLeaves(c); len(got) != 2 || got[0] != lHP || got[1] != lStats {
				t.Fatalf("tick %d: recycled change has dirty leaves %v", i, got)
			}
			cc := c.Cont(lStats)
			if cc == nil || len(cc.SKeys) != 1 || cc.SKeys["k"] == nil || cc.SKeys["k"].Existed != (i > 0) {
				t.Fatalf("tick %d: recycled container change %+v", i, cc)
			}
		}
	}
	if len(seen) > 2*len(ents) {
		t.Fatalf("%d distinct change records for %d entities", len(seen), len(ents))
	}
	// Steady state allocates nothing.
	i := 3
	allocs := testing.AllocsPerRun(100, func() {
		for _, e := range ents {
			e.Handle().SetNum(lHP, uint64(i))
		}
		i++
		tr.Commit()
	})
	if allocs != 0 {
		t.Errorf("%v allocations per tick", allocs)
	}
}

func TestListOps(t *testing.T) {
	ts := newTestSchema(t)
	tr := state.NewTracker(ts.s)
	e := spawn(t, tr, ts.player)
	l := e.Handle().List(lScores)
	for i := range 5 {
		l.Push(state.Value{N: uint64(i)})
	}
	tr.Commit()
	l.Push(state.Value{N: 0x1_0000_0005}) // int32: truncated to 5
	l.Insert(0, state.Value{N: uint64(math.MaxUint64)})
	l.Remove(2)
	l.Set(1, state.Value{N: 7})
	c := only(t, tr.Commit())
	cc := c.Cont(lScores)
	if !c.Dirty(lScores) || cc == nil || cc.Whole {
		t.Fatalf("list change %+v", cc)
	}
	want := []state.ListOp{
		{Code: state.OpPush, V: state.Value{N: 5}},
		{Code: state.OpInsert, Index: 0, V: state.Value{N: math.MaxUint64}}, // −1 sign-extended
		{Code: state.OpRemove, Index: 2},
		{Code: state.OpSet, Index: 1, V: state.Value{N: 7}},
	}
	if len(cc.Ops) != len(want) {
		t.Fatalf("ops %+v", cc.Ops)
	}
	for i, op := range cc.Ops {
		if op != want[i] {
			t.Errorf("op %d = %+v, want %+v", i, op, want[i])
		}
	}
	got := l.List()
	wantVals := []uint64{math.MaxUint64, 7, 2, 3, 4, 5}
	if got.Len() != len(wantVals) {
		t.Fatalf("len %d", got.Len())
	}
	for i, v := range wantVals {
		if got.At(i).N != v {
			t.Errorf("element %d = %d, want %d", i, got.At(i).N, v)
		}
	}
	// Many ops on a short list switch to sending it whole.
	for i := range 20 {
		l.Set(0, state.Value{N: uint64(i)})
	}
	cc = only(t, tr.Commit()).Cont(lScores)
	if !cc.Whole || len(cc.Ops) != 0 {
		t.Fatalf("20 sets on a 6-element list: whole %v, %d ops", cc.Whole, len(cc.Ops))
	}
	l.Clear()
	cc = only(t, tr.Commit()).Cont(lScores)
	if l.Len() != 0 || len(cc.Ops) != 1 || cc.Ops[0].Code != state.OpClear {
		t.Fatalf("clear: len %d, ops %+v", l.Len(), cc.Ops)
	}
}

func TestMapKeysCoalesce(t *testing.T) {
	ts := newTestSchema(t)
	tr := state.NewTracker(ts.s)
	e := spawn(t, tr, ts.player)
	m := e.Handle().Map(lStats)
	m.Put(state.Value{S: "old"}, state.Value{N: 1})
	m.Put(state.Value{S: "gone"}, state.Value{N: 2})
	tr.Commit()

	m.Put(state.Value{S: "old"}, state.Value{N: 3})
	m.Put(state.Value{S: "old"}, state.Value{N: 4})
	m.Put(state.Value{S: "new"}, state.Value{N: 5})
	m.Put(state.Value{S: "temp"}, state.Value{N: 6})
	m.Delete(state.Value{S: "temp"})
	m.Delete(state.Value{S: "gone"})
	m.Delete(state.Value{S: "never"}) // absent: nothing
	cc := only(t, tr.Commit()).Cont(lStats)
	type kc struct{ existed, removed, added bool }
	want := map[string]kc{
		"old":  {true, false, true},
		"new":  {false, false, true},
		"temp": {false, true, false},
		"gone": {true, true, false},
	}
	if len(cc.SKeys) != len(want) || len(cc.Keys) != 0 {
		t.Fatalf("keys %v / %v", cc.SKeys, cc.Keys)
	}
	for k, w := range want {
		got := cc.SKeys[k]
		if got == nil || (kc{got.Existed, got.Removed, got.Added}) != w {
			t.Errorf("key %q: %+v, want %+v", k, got, w)
		}
	}
	if v, ok := m.Map().Get(state.Value{S: "old"}); !ok || v.N != 4 {
		t.Errorf("old = %v %v", v, ok)
	}
	var keys []state.Value
	keys = m.Map().Keys(keys)
	if len(keys) != 2 || keys[0].S != "new" || keys[1].S != "old" {
		t.Errorf("keys %v", keys)
	}

	// Integer keys: normalized and sorted as signed.
	slots := e.Handle().Map(lSlots)
	it := state.NewValue(ts.item)
	slots.Put(slots.Key(uint64(0xFFFF)), it.Value()) // int16 −1
	slots.Put(slots.Key(3), it.Value())
	keys = slots.Map().Keys(nil)
	if len(keys) != 2 || int64(keys[0].N) != -1 || keys[1].N != 3 {
		t.Fatalf("int16 keys %v", keys)
	}
	cc = only(t, tr.Commit()).Cont(lSlots)
	if len(cc.Keys) != 2 || cc.Keys[math.MaxUint64] == nil || cc.Keys[3] == nil {
		t.Fatalf("int keys %v", cc.Keys)
	}
	// Clear deletes every key.
	slots.Clear()
	cc = only(t, tr.Commit()).Cont(lSlots)
	if slots.Map().Len() != 0 || len(cc.Keys) != 2 || !cc.Keys[3].Removed {
		t.Fatalf("clear: %d left, keys %v", slots.Map().Len(), cc.Keys)
	}
}

func TestBagKeysCoalesce(t *testing.T) {
	ts := newTestSchema(t)
	tr := state.NewTracker(ts.s)
	e := spawn(t, tr, ts.player)
	bag := e.Handle().Bag(lInv)
	for k := uint64(1); k <= 3; k++ {
		it := state.NewValue(ts.item)
		it.SetNum(iCount, k)
		bag.Add(k, it)
	}
	tr.Commit()

	// Item 1: two fields changed several times → one key, two dirty leaves.
	h := bag.Get(1)
	for i := range 4 {
		h.SetNum(iCount, uint64(10+i))
		h.SetStr(iName, "n")
	}
	// Item 2: removed and added back → sent whole.
	bag.Remove(2)
	bag.Add(2, state.NewValue(ts.item))
	// Item 3: a field changed, then removed.
	bag.Get(3).SetNum(iCount, 99)
	bag.Remove(3)
	// Item 4: new, then its field changed → sent whole, no dirty bits.
	bag.Add(4, state.NewValue(ts.item)).SetNum(iCount, 4)
	// Item 5: added and removed.
	bag.Add(5, state.NewValue(ts.item))
	bag.Remove(5)
	// A list inside item 1: marks the item's list leaf.
	bag.Get(1).List(iTags).Push(state.Value{S: "t"})

	c := only(t, tr.Commit())
	cc := c.Cont(lInv)
	if !c.Dirty(lInv) || cc == nil || len(cc.Keys) != 5 {
		t.Fatalf("bag change %+v", cc)
	}
	type kc struct{ existed, removed, added bool }
	want := map[uint64]kc{
		1: {true, false, false},
		2: {true, false, true},
		3: {true, true, false},
		4: {false, false, true},
		5: {false, true, false},
	}
	for k, w := range want {
		got := cc.Keys[k]
		if got == nil || (kc{got.Existed, got.Removed, got.Added}) != w {
			t.Errorf("key %d: %+v, want %+v", k, got, w)
		}
	}
	d := cc.Keys[1].Dirty
	if len(d) != 1 || d[0] != 1<<iCount|1<<iName|1<<iTags {
		t.Errorf("item 1 dirty %b", d)
	}
	for _, k := range []uint64{2, 3, 4, 5} {
		if d := cc.Keys[k].Dirty; len(d) > 0 && d[0] != 0 {
			t.Errorf("key %d has dirty item leaves %b", k, cc.Keys[k].Dirty)
		}
	}
	if got := bag.Bag().Keys(nil); len(got) != 3 || got[0] != 1 || got[1] != 2 || got[2] != 4 {
		t.Errorf("keys %v", got)
	}
	if bag.Get(1).Num(iCount) != 13 || bag.Get(4).Num(iCount) != 4 || bag.Get(9).Valid() {
		t.Error("item values")
	}
	if bag.Bag().Get(1).List(ts.item.Leaf(iTags).Obj).Len() != 1 {
		t.Error("item list")
	}
	// Next tick: the key records are recycled and start clean.
	bag.Get(1).SetNum(iCount, 0)
	cc = only(t, tr.Commit()).Cont(lInv)
	if len(cc.Keys) != 1 || cc.Keys[1].Added || cc.Keys[1].Removed || cc.Keys[1].Dirty[0] != 1<<iCount {
		t.Fatalf("next tick: %+v", cc.Keys[1])
	}
}

func TestDetachedValues(t *testing.T) {
	ts := newTestSchema(t)
	v := state.NewValue(ts.item)
	v.SetNum(iCount, 5)
	v.List(iTags).Push(state.Value{S: "x"})
	if !v.Valid() || v.Record().Num(ts.item.Leaf(iCount).Num) != 5 || v.Record().List(obj(ts.item, iTags)).Len() != 1 {
		t.Fatal("detached value")
	}
	c := state.ValueOf(v.Record())
	c.SetNum(iCount, 6)
	if v.Record().Num(ts.item.Leaf(iCount).Num) != 5 {
		t.Fatal("ValueOf shares its record")
	}
	// Containers store copies of what they are given.
	tr := state.NewTracker(ts.s)
	e := spawn(t, tr, ts.player)
	e.Handle().Bag(lInv).Add(1, v)
	v.SetNum(iCount, 7)
	if e.Bag(obj(ts.player, lInv)).Get(1).Num(ts.item.Leaf(iCount).Num) != 5 {
		t.Fatal("bag shares the item")
	}
	defer func() {
		if recover() == nil {
			t.Error("a bag accepted an item of the wrong type")
		}
	}()
	e.Handle().Bag(lInv).Add(2, state.NewValue(ts.pos))
}

func TestRecordCloneEqual(t *testing.T) {
	ts := newTestSchema(t)
	tr := state.NewTracker(ts.s)
	e := spawn(t, tr, ts.player)
	h := e.Handle()
	h.SetNum(lHP, 3)
	h.SetStr(lName, "n")
	h.List(lScores).Push(state.Value{N: 1})
	h.Map(lStats).Put(state.Value{S: "a"}, state.Value{N: 2})
	it := state.NewValue(ts.item)
	it.List(iTags).Push(state.Value{S: "t"})
	h.Bag(lInv).Add(1, it)
	h.Map(lSlots).Put(state.Value{N: 1}, it.Value())
	c := e.Record.Clone()
	if !c.Equal(&e.Record) || !e.Record.Equal(c) {
		t.Fatal("clone differs")
	}
	// Every change to the original makes them differ, and no change to
	// the original reaches the clone.
	changes := []func(){
		func() { h.SetNum(lHP, 4) },
		func() { h.SetStr(lName, "m") },
		func() { h.List(lScores).Set(0, state.Value{N: 9}) },
		func() { h.Map(lStats).Put(state.Value{S: "a"}, state.Value{N: 3}) },
		func() { h.Map(lStats).Put(state.Value{S: "b"}, state.Value{N: 2}) },
		func() { h.Bag(lInv).Get(1).SetNum(iCount, 1) },
		func() { h.Bag(lInv).Get(1).List(iTags).Push(state.Value{S: "u"}) },
		func() { h.Bag(lInv).Remove(1) },
	}
	for i, change := range changes {
		before := e.Record.Clone()
		change()
		if before.Equal(&e.Record) {
			t.Errorf("change %d: still equal", i)
		}
		if !c.Equal(c.Clone()) {
			t.Errorf("change %d: clone broken", i)
		}
	}
	if c.Num(num(ts.player, lHP)) != 3 || c.List(obj(ts.player, lScores)).At(0).N != 1 ||
		c.Bag(obj(ts.player, lInv)).Get(1) == nil || c.Bag(obj(ts.player, lInv)).Get(1).List(obj(ts.item, iTags)).Len() != 1 {
		t.Fatal("changes reached the clone")
	}
	other := state.NewRecord(ts.other)
	if other.Equal(c) || c.Equal(nil) {
		t.Fatal("records of different types are equal")
	}
}

func TestNormalize(t *testing.T) {
	typ := func(k schema.Kind) *schema.Type { return &schema.Type{Kind: k} }
	neg1 := uint64(math.MaxUint64)
	cases := []struct {
		t    *schema.Type
		in   uint64
		want uint64
	}{
		{typ(schema.Bool), 5, 1},
		{typ(schema.Bool), 0, 0},
		{typ(schema.Int8), 0x180, neg1 << 7}, // low byte 0x80 = −128
		{typ(schema.Int16), 0x1FFFF, neg1},   // low 16 bits all ones = −1
		{typ(schema.Int32), 0x7FFFFFFF, 0x7FFFFFFF},
		{typ(schema.Int64), neg1, neg1},
		{typ(schema.Uint8), 0x1FF, 0xFF},
		{typ(schema.Uint16), neg1, 0xFFFF},
		{typ(schema.Uint32), neg1, 0xFFFFFFFF},
		{typ(schema.Ref), 1 << 32, 0},
		{typ(schema.Uint64), neg1, neg1},
		{typ(schema.Float32), 0xDEAD_3F80_0000, 0x3F80_0000},
		{typ(schema.Float64), math.Float64bits(1.5), math.Float64bits(1.5)},
		{&schema.Type{Kind: schema.Float32, Quant: schema.Quant{Step: 0.5}}, uint64(math.Float32bits(-1.5)), uint64(neg1 - 2)},
		{&schema.Type{Kind: schema.Float64, Quant: schema.Quant{Step: 0.5, Min: 10, Bits: 4, Bounded: true}}, math.Float64bits(11), 2},
		{&schema.Type{Kind: schema.Float64, Quant: schema.Quant{Step: 0.5, Min: 10, Bits: 4, Bounded: true}}, math.Float64bits(1e9), 15},
	}
	for i, c := range cases {
		if got := state.Normalize(c.t, c.in); got != c.want {
			t.Errorf("case %d (%s): Normalize(%#x) = %#x, want %#x", i, c.t, c.in, got, c.want)
		}
	}
	q := &schema.Type{Kind: schema.Float32, Quant: schema.Quant{Step: 0.25, Min: -1, Bits: 8, Bounded: true}}
	if got := state.Float(q, 6); got != 0.5 {
		t.Errorf("Float = %v", got)
	}
	if got := state.Float32(q, 6); got != 0.5 {
		t.Errorf("Float32 = %v", got)
	}
	if got := state.Float(typ(schema.Float32), uint64(math.Float32bits(2.5))); got != 2.5 {
		t.Errorf("Float of float32 = %v", got)
	}
	if got := state.Float(typ(schema.Float64), math.Float64bits(-3.25)); got != -3.25 {
		t.Errorf("Float of float64 = %v", got)
	}
}

func TestDirtySets(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	for iter := range 500 {
		words := 1 + rng.IntN(4)
		set := make([]uint64, words)
		for i := range set {
			if rng.IntN(3) > 0 {
				set[i] = rng.Uint64() & rng.Uint64() & rng.Uint64()
			}
		}
		bit := func(i int) bool { return set[i>>6]>>(i&63)&1 == 1 }
		n := words * 64
		for range 20 {
			lo := rng.IntN(n + 1)
			hi := lo + rng.IntN(n-lo+1)
			want := false
			for i := lo; i < hi; i++ {
				want = want || bit(i)
			}
			if got := state.AnyDirty(set, lo, hi); got != want {
				t.Fatalf("iter %d: AnyDirty(%x, %d, %d) = %v", iter, set, lo, hi, got)
			}
			i := rng.IntN(n + 10)
			next := -1
			for j := i; j < n; j++ {
				if bit(j) {
					next = j
					break
				}
			}
			if got := state.NextDirty(set, i); got != next {
				t.Fatalf("iter %d: NextDirty(%x, %d) = %d, want %d", iter, set, i, got, next)
			}
		}
	}
}

// TestCommitRecyclesContainers checks that pooled change records carry no
// container change of an earlier tick: which entity changes a container
// alternates, and every tick an entity spawned the tick before changes a
// container and is destroyed.
// TestCommitRecyclesByClass checks that change records are pooled by
// class: once each class has had its busiest tick, ticks that change any
// mix of entities of a small class and of a larger one with container
// changes allocate nothing. With one pool for every class, a record that
// had served the small class only, reused for the larger one, grew its
// buffers and made its container records.
func TestCommitRecyclesByClass(t *testing.T) {
	ts := newTestSchema(t)
	tr := state.NewTracker(ts.s)
	var players, others []*state.Entity
	for range 16 {
		players, others = append(players, spawn(t, tr, ts.player)), append(others, spawn(t, tr, ts.other))
	}
	tr.Commit()
	r := rand.New(rand.NewPCG(7, 8))
	tick := func(p float64) {
		for i := range players {
			if r.Float64() < p {
				h := players[i].Handle()
				h.SetNum(lHP, uint64(r.IntN(100)))
				h.Map(lStats).Put(state.Value{S: "k"}, state.Value{N: uint64(r.IntN(100))})
			}
			if r.Float64() < p {
				others[i].Handle().SetNum(0, uint64(r.IntN(100)))
			}
		}
		tr.Commit()
	}
	// The busiest ticks: every entity changes.
	tick(1)
	tick(1)
	// Counted, not testing.AllocsPerRun's average, which rounds down.
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	for range 100 {
		tick(0.5)
	}
	runtime.ReadMemStats(&m1)
	if n := m1.Mallocs - m0.Mallocs; n != 0 {
		t.Errorf("%d allocations in 100 ticks", n)
	}
}

func TestCommitRecyclesContainers(t *testing.T) {
	ts := newTestSchema(t)
	tr := state.NewTracker(ts.s)
	a, b := spawn(t, tr, ts.player), spawn(t, tr, ts.player)
	temp := spawn(t, tr, ts.player)
	tr.Commit()
	for i := range 12 {
		key := fmt.Sprint("k", i)
		withMap, plain := a, b
		if i%2 == 1 {
			withMap, plain = b, a
		}
		// Pooled records are reused last in, first out: the plain entity
		// gets a record that had container changes.
		plain.Handle().SetNum(lHP, uint64(i+1))
		withMap.Handle().Map(lStats).Put(state.Value{S: key}, state.Value{N: uint64(i)})
		old := temp
		old.Handle().Map(lStats).Put(state.Value{S: "temp"}, state.Value{N: 1})
		tr.Destroy(old)
		temp = spawn(t, tr, ts.player)
		cs := tr.Commit()
		if len(cs.Changes) != 4 {
			t.Fatalf("tick %d: %d changes, want 4", i, len(cs.Changes))
		}
		for _, c := range cs.Changes {
			cc := c.Cont(lStats)
			switch c.Entity {
			case withMap:
				if cc == nil || len(cc.SKeys) != 1 || cc.SKeys[key] == nil || len(dirtyLeaves(c)) != 1 {
					t.Fatalf("tick %d: map change %+v, dirty %v", i, cc, dirtyLeaves(c))
				}
			case plain:
				if cc != nil || c.Created || c.Destroyed {
					t.Fatalf("tick %d: plain change has container change %+v", i, cc)
				}
				if got := dirtyLeaves(c); len(got) != 1 || got[0] != lHP {
					t.Fatalf("tick %d: plain change dirty %v", i, got)
				}
			case old:
				if !c.Destroyed || cc == nil || len(cc.SKeys) != 1 || cc.SKeys["temp"] == nil {
					t.Fatalf("tick %d: destroyed entity's change %+v", i, cc)
				}
			case temp:
				if !c.Created || cc != nil {
					t.Fatalf("tick %d: created entity's change %+v", i, cc)
				}
			default:
				t.Fatalf("tick %d: change of entity %#x", i, uint32(c.Entity.ID()))
			}
		}
	}
}

// mustPanicInvalid checks that f panics with an error wrapping
// state.ErrInvalidHandle.
func mustPanicInvalid(t *testing.T, f func()) {
	t.Helper()
	defer func() {
		t.Helper()
		err, _ := recover().(error)
		if !errors.Is(err, state.ErrInvalidHandle) {
			t.Errorf("recovered %v, want an error wrapping ErrInvalidHandle", err)
		}
	}()
	f()
}

// TestChangeRecordSizes changes entities of classes of different sizes
// (one number; six and seven 8-byte numbers; 70 leaves, two dirty words),
// of class IDs that share one change pool, so that a record serves each
// in turn: every change reports its dirty leaves and its values at the
// tick's start.
func TestChangeRecordSizes(t *testing.T) {
	class := func(name string, id uint32, n int, k schema.Kind) *schema.Struct {
		c := &schema.Struct{Name: name, Class: true, ID: id}
		for i := range n {
			c.Fields = append(c.Fields, &schema.Field{ID: uint32(i + 1), Name: fmt.Sprint("F", i), Type: schema.Type{Kind: k}, Vis: schema.VisAll})
		}
		return c
	}
	small, edge, over, big := class("Small", 300, 1, schema.Int32), class("Edge", 301, 6, schema.Int64), class("Over", 302, 7, schema.Int64), class("Big", 303, 70, schema.Uint16)
	s, err := schema.New(small, edge, over, big)
	if err != nil {
		t.Fatal(err)
	}
	tr := state.NewTracker(s)
	var ents []*state.Entity
	for range 4 {
		for _, c := range []*schema.Struct{small, edge, over, big} {
			ents = append(ents, spawn(t, tr, c))
		}
	}
	tr.Commit()
	r := rand.New(rand.NewPCG(3, 4))
	for tick := range 40 {
		type set struct {
			leaf     int
			old, new uint64
		}
		want := map[*state.Entity][]set{}
		for _, i := range r.Perm(len(ents))[:1+r.IntN(len(ents))] {
			e := ents[i]
			for range 1 + r.IntN(3) {
				leaf := r.IntN(e.Class().Leaves)
				old := e.Num(num(e.Class(), leaf))
				v := old + 1 + uint64(r.IntN(100))
				e.SetNum(leaf, v)
				want[e] = append(want[e], set{leaf, old, e.Num(num(e.Class(), leaf))})
			}
		}
		cs := tr.Commit()
		if len(cs.Changes) != len(want) {
			t.Fatalf("tick %d: %d changes, want %d", tick, len(cs.Changes), len(want))
		}
		for _, c := range cs.Changes {
			sets := want[c.Entity]
			first := map[int]uint64{}
			for _, st := range sets {
				if _, ok := first[st.leaf]; !ok {
					first[st.leaf] = st.old
				}
			}
			dirty := dirtyLeaves(c)
			if len(dirty) != len(first) {
				t.Fatalf("tick %d, %s: dirty %v, want the leaves of %v", tick, c.Entity.Class().Name, dirty, sets)
			}
			for _, leaf := range dirty {
				old, ok := first[leaf]
				if !ok {
					t.Fatalf("tick %d, %s: leaf %d dirty, not set", tick, c.Entity.Class().Name, leaf)
				}
				if got := c.Base(num(c.Entity.Class(), leaf)); got != old {
					t.Fatalf("tick %d, %s: leaf %d base %d, want %d", tick, c.Entity.Class().Name, leaf, got, old)
				}
			}
		}
	}
}

// TestSetNumRefusesNaN checks that a NaN written to a quantized float of
// an entity is refused (the field keeps its value; TakeRefusals reports a
// NaNError wrapping ErrNaN), where stored it would read as the bottom of
// the field's range, and that an unquantized float stores NaN as it is.
func TestSetNumRefusesNaN(t *testing.T) {
	ts := newTestSchema(t)
	tr := state.NewTracker(ts.s)
	e, err := tr.Spawn(ts.player)
	if err != nil {
		t.Fatal(err)
	}
	const x, y = 1, 2 // Pos.X, unquantized; Pos.Y, quantized
	if !ts.player.Leaf(y).Field.Type.Quant.Enabled() || ts.player.Leaf(x).Field.Type.Quant.Enabled() {
		t.Fatal("the test schema's leaves moved")
	}
	val := func(leaf int) float64 {
		l := ts.player.Leaf(leaf)
		return state.Float(&l.Field.Type, e.Num(l.Num))
	}
	nan := uint64(math.Float32bits(float32(math.NaN())))
	e.SetNum(y, uint64(math.Float32bits(3.5)))
	before := val(y)
	tr.TakeRefusals()
	e.SetNum(y, nan)
	if got := val(y); got != before {
		t.Errorf("Pos.Y after a NaN: %v, want %v kept", got, before)
	}
	errs, n := tr.TakeRefusals()
	var ne *state.NaNError
	if n != 1 || len(errs) != 1 || !errors.Is(errs[0], state.ErrNaN) || !errors.As(errs[0], &ne) || ne.Field != "Pos.Y" {
		t.Errorf("refusals %v (%d), want one NaNError of Pos.Y", errs, n)
	}
	e.SetNum(x, nan)
	if got := val(x); !math.IsNaN(got) {
		t.Errorf("unquantized Pos.X after a NaN: %v, want NaN", got)
	}
	if _, n := tr.TakeRefusals(); n != 0 {
		t.Errorf("%d refusals for an unquantized NaN", n)
	}
}
