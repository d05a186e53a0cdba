package state_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/replicago/replica/state"
)

// tableSnapshot is a deep copy of a table's contents plus the entity
// pointers, to check that Rollback restores the very same entities.
type tableSnapshot struct {
	ents map[state.ID]*state.Entity
	recs map[state.ID]*state.Record
}

func snapshotTable(tab *state.Table) tableSnapshot {
	s := tableSnapshot{ents: make(map[state.ID]*state.Entity), recs: make(map[state.ID]*state.Record)}
	for _, e := range tab.AppendEntities(nil) {
		s.ents[e.ID()] = e
		s.recs[e.ID()] = e.Record.Clone()
	}
	return s
}

// diff describes how tab differs from the snapshot, or returns "".
func (s tableSnapshot) diff(tab *state.Table) string {
	if tab.Len() != len(s.ents) {
		return fmt.Sprintf("%d entities, want %d", tab.Len(), len(s.ents))
	}
	for id, e := range s.ents {
		got := tab.Entity(id)
		if got != e {
			return fmt.Sprintf("entity %d is %p, want %p", id, got, e)
		}
		if !got.Record.Equal(s.recs[id]) {
			return fmt.Sprintf("entity %d differs", id)
		}
	}
	return ""
}

func buildItem(ts *testSchema, count int32, name string, tags ...string) *state.Record {
	b := state.Build(ts.item)
	b.SetNum(iCount, uint64(int64(count)))
	b.SetStr(iName, name)
	vals := make([]state.Value, len(tags))
	for i, tag := range tags {
		vals[i] = state.Value{S: tag}
	}
	b.SetContainer(iTags, state.NewList(&ts.item.Leaf(iTags).Field.Type, vals))
	return b.Record()
}

// populate fills a table with two players and an Other.
func populate(t *testing.T, ts *testSchema) *state.Table {
	t.Helper()
	tab := state.NewTable()
	x := tab.Begin()
	for _, id := range []state.ID{1, 2} {
		e, err := x.Create(ts.player, id)
		if err != nil {
			t.Fatal(err)
		}
		x.SetNum(e, lHP, uint64(100*id))
		x.SetStr(e, lName, fmt.Sprintf("p%d", id))
		for i := range 4 {
			if err := x.ListInsert(e, lScores, i, state.Value{N: uint64(i * 10)}); err != nil {
				t.Fatal(err)
			}
		}
		x.MapPut(e, lStats, state.Value{S: "str"}, state.Value{N: 5})
		x.MapPut(e, lStats, state.Value{S: "dex"}, state.Value{N: 6})
		x.BagPut(e, lInv, 1, buildItem(ts, 1, "sword", "sharp"))
		x.BagPut(e, lInv, 2, buildItem(ts, 2, "shield"))
		x.MapPut(e, lSlots, state.Value{N: 1}, state.Value{R: buildItem(ts, 3, "ring")})
	}
	o, err := x.Create(ts.other, 3)
	if err != nil {
		t.Fatal(err)
	}
	x.SetNum(o, 0, 42)
	x.Commit()
	return tab
}

func TestTxnRollbackEveryMethod(t *testing.T) {
	ts := newTestSchema(t)
	tab := populate(t, ts)
	before := snapshotTable(tab)
	x := tab.Begin()
	p1, p2 := x.AtSlot(1), x.AtSlot(2)
	if p1 == nil || x.AtSlot(99) != nil || x.Fillable(1) {
		t.Fatal("Get / Fillable")
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	// Scalars, including several writes to one slot.
	x.SetNum(p1, lHP, 1)
	x.SetNum(p1, lHP, 2)
	x.SetNumAt(p1, lGold, num(ts.player, lGold), 77)
	x.SetNum(p1, lPosY, 5)
	x.SetStr(p1, lName, "renamed")
	x.SetStr(p1, lName, "renamed again")
	// Lists.
	must(x.ListInsert(p1, lScores, 0, state.Value{N: 1}))
	must(x.ListInsert(p1, lScores, x.ListLen(p1, lScores), state.Value{N: 2}))
	must(x.ListRemove(p1, lScores, 2))
	must(x.ListSet(p1, lScores, 1, state.Value{N: 3}))
	x.ListClear(p1, lScores)
	must(x.ListInsert(p1, lScores, 0, state.Value{N: 4}))
	must(x.ListRemove(p1, lScores, 0))
	// Maps.
	x.MapPut(p1, lStats, state.Value{S: "str"}, state.Value{N: 50})
	x.MapPut(p1, lStats, state.Value{S: "new"}, state.Value{N: 1})
	must(x.MapDelete(p1, lStats, state.Value{S: "dex"}))
	must(x.MapDelete(p1, lStats, state.Value{S: "new"}))
	x.MapPut(p1, lStats, state.Value{S: "dex"}, state.Value{N: 60})
	x.MapPut(p1, lSlots, state.Value{N: 1}, state.Value{R: buildItem(ts, 9, "other ring")})
	// Bags: update, replace, remove, add, update the new item.
	item, err := x.BagItem(p1, lInv, 1)
	must(err)
	x.SetItemNum(p1, lInv, 1, item, iCount, 100)
	x.SetItemStr(p1, lInv, 1, item, iName, "blunt sword")
	x.SetItemContainer(p1, lInv, 1, item, iTags, state.NewList(&ts.item.Leaf(iTags).Field.Type, []state.Value{{S: "blunt"}}))
	x.BagPut(p1, lInv, 2, buildItem(ts, 20, "big shield"))
	must(x.BagRemove(p1, lInv, 1))
	x.BagPut(p1, lInv, 1, buildItem(ts, 5, "new sword"))
	x.BagPut(p1, lInv, 3, buildItem(ts, 6, "bow"))
	bow, err := x.BagItem(p1, lInv, 3)
	must(err)
	x.SetItemNum(p1, lInv, 3, bow, iCount, 7)
	// Whole containers.
	x.ReplaceContainer(p2, lScores, state.NewList(&ts.player.Leaf(lScores).Field.Type, []state.Value{{N: 9}}))
	x.ReplaceContainer(p2, lStats, state.NewMapOf(&ts.player.Leaf(lStats).Field.Type,
		[]state.Value{{S: "z"}}, []state.Value{{N: 1}}))
	x.ReplaceContainer(p2, lInv, state.NewBagOf(&ts.player.Leaf(lInv).Field.Type,
		[]uint64{7}, []*state.Record{buildItem(ts, 7, "seven")}))
	x.ListClear(p2, lScores)
	// Entities: destroy, create, destroy what was created, re-create an ID.
	must(x.DestroySlot(3))
	e, err := x.Create(ts.other, 3)
	must(err)
	x.SetNum(e, 0, 1)
	e4, err := x.Create(ts.player, 4)
	must(err)
	x.SetNum(e4, lHP, 4)
	x.BagPut(e4, lInv, 1, buildItem(ts, 1, "x"))
	if !x.Fillable(4) || !x.Fillable(3) {
		t.Fatal("Fillable")
	}
	must(x.DestroySlot(4))
	must(x.DestroySlot(2))
	// Errors leave nothing behind.
	if _, err := x.Create(ts.player, 1); !errors.Is(err, state.ErrExists) {
		t.Errorf("Create of an existing ID: %v", err)
	}
	if err := x.DestroySlot(2); !errors.Is(err, state.ErrNotFound) {
		t.Errorf("Destroy of a missing ID: %v", err)
	}
	for i, err := range []error{
		x.ListInsert(p1, lScores, 5, state.Value{}),
		x.ListInsert(p1, lScores, -1, state.Value{}),
		x.ListRemove(p1, lScores, 0),
		x.ListSet(p1, lScores, 0, state.Value{}),
	} {
		if !errors.Is(err, state.ErrIndex) {
			t.Errorf("list error %d: %v", i, err)
		}
	}
	if err := x.MapDelete(p1, lStats, state.Value{S: "absent"}); !errors.Is(err, state.ErrNoKey) {
		t.Errorf("MapDelete of an absent key: %v", err)
	}
	if err := x.BagRemove(p1, lInv, 99); !errors.Is(err, state.ErrNoKey) {
		t.Errorf("BagRemove of an absent key: %v", err)
	}
	if _, err := x.BagItem(p1, lInv, 99); !errors.Is(err, state.ErrNoKey) {
		t.Errorf("BagItem of an absent key: %v", err)
	}
	if d := before.diff(tab); d == "" {
		t.Fatal("the transaction changed nothing")
	}
	x.Rollback()
	if d := before.diff(tab); d != "" {
		t.Fatalf("after Rollback: %s", d)
	}
	if x.Fillable(4) || len(x.Events) != 0 {
		t.Fatal("Rollback kept created IDs or events")
	}
	// The table is usable afterwards, and a rolled back transaction
	// leaves nothing for the next one to undo.
	x = tab.Begin()
	x.SetNum(tab.Entity(1), lHP, 5)
	x.Commit()
	after := snapshotTable(tab)
	x = tab.Begin()
	x.Rollback()
	if d := after.diff(tab); d != "" {
		t.Fatalf("empty Rollback after Commit: %s", d)
	}
	if tab.Entity(1).Num(num(ts.player, lHP)) != 5 {
		t.Fatal("committed value lost")
	}
}

// TestTxnRollbackRandom applies random operation sequences, some of them
// failing, and checks that Rollback restores the table every time, and
// that Commit keeps exactly what was applied.
func TestTxnRollbackRandom(t *testing.T) {
	ts := newTestSchema(t)
	rng := rand.New(rand.NewPCG(13, 14))
	listType := &ts.player.Leaf(lScores).Field.Type
	for iter := range 300 {
		tab := populate(t, ts)
		before := snapshotTable(tab)
		x := tab.Begin()
		ids := []state.ID{1, 2, 3, 4, 5}
		for range 1 + rng.IntN(40) {
			id := ids[rng.IntN(len(ids))]
			e := x.AtSlot(id.Slot())
			if e == nil {
				if rng.IntN(2) == 0 {
					_, _ = x.Create(ts.player, id)
				}
				continue
			}
			if e.Class() != ts.player {
				if rng.IntN(4) == 0 {
					_ = x.DestroySlot(id.Slot())
				} else {
					x.SetNum(e, 0, rng.Uint64())
				}
				continue
			}
			n := x.ListLen(e, lScores)
			switch rng.IntN(16) {
			case 0:
				_ = x.DestroySlot(id.Slot())
			case 1:
				x.SetNum(e, rng.IntN(nLeaves-1)%3, rng.Uint64()) // HP, Pos.X, Pos.Y
			case 2:
				x.SetStr(e, lName, fmt.Sprint(rng.IntN(5)))
			case 3:
				_ = x.ListInsert(e, lScores, rng.IntN(n+2), state.Value{N: uint64(rng.IntN(100))})
			case 4:
				_ = x.ListRemove(e, lScores, rng.IntN(n+1))
			case 5:
				_ = x.ListSet(e, lScores, rng.IntN(n+1), state.Value{N: uint64(rng.IntN(100))})
			case 6:
				x.ListClear(e, lScores)
			case 7:
				x.MapPut(e, lStats, state.Value{S: fmt.Sprint(rng.IntN(4))}, state.Value{N: uint64(rng.IntN(100))})
			case 8:
				_ = x.MapDelete(e, lStats, state.Value{S: fmt.Sprint(rng.IntN(4))})
			case 9:
				x.BagPut(e, lInv, uint64(rng.IntN(4)), buildItem(ts, int32(rng.IntN(100)), "b"))
			case 10:
				_ = x.BagRemove(e, lInv, uint64(rng.IntN(4)))
			case 11, 12:
				k := uint64(rng.IntN(4))
				if item, err := x.BagItem(e, lInv, k); err == nil {
					switch rng.IntN(3) {
					case 0:
						x.SetItemNum(e, lInv, k, item, iCount, uint64(rng.IntN(100)))
					case 1:
						x.SetItemStr(e, lInv, k, item, iName, fmt.Sprint(rng.IntN(3)))
					case 2:
						x.SetItemContainer(e, lInv, k, item, iTags, state.NewList(&ts.item.Leaf(iTags).Field.Type, []state.Value{{S: "t"}}))
					}
				}
			case 13:
				vals := make([]state.Value, rng.IntN(4))
				for i := range vals {
					vals[i] = state.Value{N: uint64(rng.IntN(100))}
				}
				x.ReplaceContainer(e, lScores, state.NewList(listType, vals))
			case 14:
				x.MapPut(e, lSlots, state.Value{N: uint64(rng.IntN(3))}, state.Value{R: buildItem(ts, 1, "s")})
			case 15:
				_ = x.MapDelete(e, lSlots, state.Value{N: uint64(rng.IntN(3))})
			}
		}
		changed := snapshotTable(tab)
		if rng.IntN(4) == 0 {
			// Commit keeps the state; a later empty transaction's
			// Rollback must not undo it.
			x.Commit()
			x = tab.Begin()
			x.Rollback()
			if d := changed.diff(tab); d != "" {
				t.Fatalf("iter %d: Rollback after Commit undid committed changes: %s", iter, d)
			}
			continue
		}
		x.Rollback()
		if d := before.diff(tab); d != "" {
			t.Fatalf("iter %d: after Rollback: %s", iter, d)
		}
	}
}

func TestTxnEvents(t *testing.T) {
	ts := newTestSchema(t)
	tab := populate(t, ts)
	// Unwatched: only creation and destruction are reported.
	x := tab.Begin()
	p1 := x.AtSlot(1)
	x.SetNum(p1, lHP, 1)
	x.MapPut(p1, lStats, state.Value{S: "k"}, state.Value{N: 1})
	_ = x.DestroySlot(3)
	if _, err := x.Create(ts.other, 9); err != nil {
		t.Fatal(err)
	}
	evs := x.Commit()
	if len(evs) != 2 || evs[0].Kind != state.EvDestroy || evs[0].E.ID() != 3 || evs[1].Kind != state.EvCreate || evs[1].E.ID() != 9 {
		t.Fatalf("unwatched events %+v", evs)
	}
	// Watched: field and item events with old and new values, in order.
	tab.WatchAll(ts.player)
	x = tab.Begin()
	p1 = x.AtSlot(1)
	x.SetNum(p1, lHP, 2)
	x.SetNum(p1, lHP, 2) // no change: no event
	x.SetStr(p1, lName, "n")
	if err := x.ListRemove(p1, lScores, 0); err != nil {
		t.Fatal(err)
	}
	x.MapPut(p1, lStats, state.Value{S: "k"}, state.Value{N: 2})
	item, _ := x.BagItem(p1, lInv, 1)
	x.SetItemNum(p1, lInv, 1, item, iCount, 11)
	evs = x.Commit()
	want := []struct {
		kind     state.EventKind
		leaf     int
		old, new uint64
	}{
		{state.EvField, lHP, 1, 2},
		{state.EvField, lName, 0, 0},
		{state.EvListRemove, lScores, 0, 0},
		{state.EvMapSet, lStats, 1, 2},
		{state.EvBagItem, lInv, 1, 11},
	}
	if len(evs) != len(want) {
		t.Fatalf("%d events: %+v", len(evs), evs)
	}
	for i, w := range want {
		ev := evs[i]
		if ev.Kind != w.kind || ev.Leaf != w.leaf || ev.E != p1 || ev.Old.N != w.old || ev.New.N != w.new {
			t.Errorf("event %d = %+v, want %+v", i, ev, w)
		}
	}
	if evs[1].Old.S != "p1" || evs[1].New.S != "n" || evs[4].Key.N != 1 || evs[4].ItemLeaf != iCount {
		t.Errorf("event details: %+v / %+v", evs[1], evs[4])
	}
	// ReplaceContainer reports the difference.
	x = tab.Begin()
	p1 = x.AtSlot(1)
	x.ReplaceContainer(p1, lStats, state.NewMapOf(&ts.player.Leaf(lStats).Field.Type,
		[]state.Value{{S: "k"}, {S: "str"}, {S: "zz"}}, []state.Value{{N: 2}, {N: 6}, {N: 1}}))
	evs = x.Commit()
	// Before: dex 6, k 2, str 5. After: k 2, str 6, zz 1.
	kinds := []state.EventKind{state.EvMapRemove, state.EvMapSet, state.EvMapAdd}
	keys := []string{"dex", "str", "zz"}
	if len(evs) != 3 {
		t.Fatalf("diff events %+v", evs)
	}
	for i := range evs {
		if evs[i].Kind != kinds[i] || evs[i].Key.S != keys[i] {
			t.Errorf("diff event %d = %+v", i, evs[i])
		}
	}
	// Begin discards the previous events.
	x = tab.Begin()
	if len(x.Events) != 0 {
		t.Fatal("Begin kept events")
	}
	x.Rollback()
}

// heldSlots returns the slots a transaction's HeldSlot ranks name, in rank
// order.
func heldSlots(x *state.Txn) []uint32 {
	var out []uint32
	for r := range uint64(x.HeldLen()) {
		s, ok := x.HeldSlot(r)
		if !ok {
			panic("rank below HeldLen out of range")
		}
		out = append(out, s)
	}
	if _, ok := x.HeldSlot(uint64(x.HeldLen())); ok {
		panic("rank HeldLen in range")
	}
	return out
}

// TestTxnHeldRanks checks that the ranks a transaction resolves are those
// of the entities held when it began, ascending by slot, whatever it
// creates and destroys, and that Commit and Rollback keep them in step
// with the table.
func TestTxnHeldRanks(t *testing.T) {
	ts := newTestSchema(t)
	rng := rand.New(rand.NewPCG(21, 22))
	tab := state.NewTable()
	for iter := range 2000 {
		var want []uint32
		for _, e := range tab.AppendEntities(nil) {
			want = append(want, e.ID().Slot())
		}
		x := tab.Begin()
		for range rng.IntN(12) {
			slot := uint32(rng.IntN(40))
			if rng.IntN(8) == 0 {
				slot += uint32(rng.IntN(1 << state.SlotBits))
			}
			if x.AtSlot(slot) == nil {
				if _, err := x.Create(ts.other, state.MakeID(slot, 0)); err != nil {
					t.Fatal(err)
				}
			} else if err := x.DestroySlot(slot); err != nil {
				t.Fatal(err)
			}
			if got := heldSlots(x); fmt.Sprint(got) != fmt.Sprint(want) {
				t.Fatalf("iteration %d, within the transaction: held %v, want %v", iter, got, want)
			}
		}
		if rng.IntN(3) == 0 {
			x.Rollback()
		} else {
			x.Commit()
			want = want[:0]
			for _, e := range tab.AppendEntities(nil) {
				want = append(want, e.ID().Slot())
			}
		}
		if got := heldSlots(tab.Begin()); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("iteration %d, after the transaction: held %v, want %v", iter, got, want)
		}
	}
}

// TestSetNumRows sets a table of numeric rows with SetNumRows and the same
// values one by one with SetNumAt, watched and not: both must leave the
// same values and events, and a rollback must undo SetNumRows.
func TestSetNumRows(t *testing.T) {
	ts := newTestSchema(t)
	leaves := []int{lHP, lPosX, lPosY, lAlive, lGold}
	at := make([]state.NumLeaf, len(leaves))
	for i, l := range leaves {
		at[i] = state.NumLeaf{Leaf: int32(l), Slot: int32(num(ts.player, l))}
	}
	for _, watched := range []bool{false, true} {
		for round := range 20 {
			var got [2]string
			for k, rows := range []bool{true, false} {
				rng := rand.New(rand.NewPCG(uint64(round), 5))
				tab := populate(t, ts)
				if watched {
					tab.Watch(ts.player, lPosY)
				}
				x := tab.Begin()
				es := []*state.Entity{x.AtSlot(1), x.AtSlot(2)}
				v := make([]uint64, len(es)*len(at))
				for i := range v {
					v[i] = es[i/len(at)].Num(int(at[i%len(at)].Slot)) // unchanged
					if rng.IntN(3) > 0 {
						v[i] = rng.Uint64() & 0x7f
					}
				}
				if rows {
					x.SetNumRows(es, at, v)
				} else {
					for i, e := range es {
						for j, a := range at {
							x.SetNumAt(e, int(a.Leaf), int(a.Slot), v[i*len(at)+j])
						}
					}
				}
				for _, e := range es {
					for _, a := range at {
						got[k] += fmt.Sprintf("%d ", e.Num(int(a.Slot)))
					}
				}
				for _, ev := range x.Commit() {
					got[k] += fmt.Sprintf("\n%d %d %d %d %d", ev.Kind, ev.E.ID(), ev.Leaf, ev.Old.N, ev.New.N)
				}
				before := snapshotTable(tab)
				x = tab.Begin()
				x.SetNumRows(es, at, make([]uint64, len(v)))
				x.Rollback()
				if d := before.diff(tab); d != "" {
					t.Fatalf("watched %v round %d: after a rollback, %s", watched, round, d)
				}
			}
			if got[0] != got[1] {
				t.Fatalf("watched %v round %d: with SetNumRows\n%s\none by one\n%s", watched, round, got[0], got[1])
			}
		}
	}
}
