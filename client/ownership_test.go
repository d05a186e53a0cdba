package client_test

import (
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"slices"
	"testing"

	"github.com/replicago/replica/client"
	"github.com/replicago/replica/codec"
	"github.com/replicago/replica/state"
)

// ownedSet returns the IDs of the entities r says it owns.
func ownedSet(r *client.Replica) map[state.ID]bool {
	m := map[state.ID]bool{}
	for _, e := range r.Owned(nil) {
		m[e.ID()] = true
	}
	return m
}

// TestOwnershipChanges: gaining an entity forgets its others fields,
// losing it its owner fields, in the tick's transaction; OnOwnership
// reports each change once, after the tick.
func TestOwnershipChanges(t *testing.T) {
	f := newFixture(t)
	p := f.spawn(f.player)
	p.SetNum(f.gold, 50)
	p.SetNum(f.hp, 7)
	f.tick()
	var log []string
	f.r.OnOwnership(f.player, func(e *state.Entity, owned bool) {
		if owned {
			log = append(log, "gained")
		} else {
			log = append(log, "lost")
		}
	})
	// The fixture's client sees every field; gaining p changes nothing
	// but the flag, losing it zeroes the owner-only gold.
	if err := f.r.ApplyTick([]state.ID{p.ID()}, nil); err != nil {
		t.Fatal(err)
	}
	if e := f.r.Entity(p.ID()); !e.Owned() || e.Num(f.player.Leaf(f.gold).Num) != 50 {
		t.Fatalf("after the gain: owned %v, gold %d", e.Owned(), e.Num(f.player.Leaf(f.gold).Num))
	}
	if err := f.r.ApplyTick(nil, []state.ID{p.ID()}); err != nil {
		t.Fatal(err)
	}
	e := f.r.Entity(p.ID())
	if e.Owned() || e.Num(f.player.Leaf(f.gold).Num) != 0 || e.Num(f.player.Leaf(f.hp).Num) != 7 {
		t.Fatalf("after the loss: owned %v, gold %d, hp %d", e.Owned(), e.Num(f.player.Leaf(f.gold).Num), e.Num(f.player.Leaf(f.hp).Num))
	}
	if len(log) != 2 || log[0] != "gained" || log[1] != "lost" {
		t.Fatalf("OnOwnership said %v", log)
	}
}

// TestOwnershipContradictions: ownership changes that contradict the
// replica reject the whole tick, segments included, with ErrOwnership.
func TestOwnershipContradictions(t *testing.T) {
	f := newFixture(t)
	a, b := f.spawn(f.player), f.spawn(f.tower)
	f.tick()
	if err := f.r.ApplyTick([]state.ID{a.ID()}, nil); err != nil {
		t.Fatal(err)
	}
	stale := state.MakeID(a.ID().Slot(), a.ID().Gen()+1)
	for name, c := range map[string]struct{ gained, lost []state.ID }{
		"gain an owned entity":    {gained: []state.ID{a.ID()}},
		"gain twice":              {gained: []state.ID{b.ID(), b.ID()}},
		"gain a missing entity":   {gained: []state.ID{state.MakeID(99, 0)}},
		"gain by a stale ID":      {gained: []state.ID{stale}},
		"lose an unowned entity":  {lost: []state.ID{b.ID()}},
		"lose a missing entity":   {lost: []state.ID{state.MakeID(99, 0)}},
		"lose and gain then fail": {lost: []state.ID{a.ID()}, gained: []state.ID{b.ID(), state.MakeID(98, 0)}},
	} {
		b.SetNum(f.towerHP, uint64(len(name))) // a change the rejected tick would carry
		segs := f.segments()
		before, owned := snap(f.r), ownedSet(f.r)
		err := f.r.ApplyTick(c.gained, c.lost, segs...)
		var te *client.TickError
		if !errors.Is(err, client.ErrOwnership) || !errors.As(err, &te) || te.Segment != -1 {
			t.Errorf("%s: %v, want a TickError at segment -1 wrapping ErrOwnership", name, err)
		}
		if d := before.diff(f.r); d != "" {
			t.Errorf("%s: the rejected tick changed the replica: %s", name, d)
		}
		if now := ownedSet(f.r); len(now) != len(owned) || !now[a.ID()] {
			t.Errorf("%s: owned %v, want %v", name, now, owned)
		}
		if err := f.r.Apply(segs...); err != nil { // the server's tick itself is fine
			t.Fatal(err)
		}
	}
}

// FuzzApplyTick feeds ownership lists and segments from the fuzzer to a
// replica with a few entities: nothing panics, and a rejected tick leaves
// the replica and what it owns as they were.
func FuzzApplyTick(f *testing.F) {
	f.Add([]byte{1, 0, 0, 0}, []byte{}, []byte{0}, []byte{})
	f.Add([]byte{}, []byte{2, 0, 0, 0}, []byte{0x21, 0x20}, []byte{1, 0, 0, 0, 1})
	f.Add([]byte{1, 0, 0, 0, 1, 0, 0, 0}, []byte{3, 0, 0, 1}, []byte{0x42, 0x10, 0x01}, []byte{3, 0, 0, 0, 0, 1, 0, 0, 0, 2})
	f.Fuzz(func(t *testing.T, gained, lost, seg, levels []byte) {
		fx := newFixture(t)
		p := fx.spawn(fx.player)
		p.SetNum(fx.gold, 9)
		fx.spawn(fx.tower)
		fx.spawn(fx.player)
		fx.tick()
		if err := fx.r.ApplyTick([]state.ID{p.ID()}, nil); err != nil {
			t.Fatal(err)
		}
		ids := func(b []byte) []state.ID {
			var out []state.ID
			for ; len(b) >= 4; b = b[4:] {
				out = append(out, state.ID(binary.LittleEndian.Uint32(b)))
			}
			return out
		}
		var lv []client.Level
		for ; len(levels) >= 5; levels = levels[5:] {
			lv = append(lv, client.Level{ID: state.ID(binary.LittleEndian.Uint32(levels)), Level: levels[4]})
		}
		before, owned, lods := snap(fx.r), ownedSet(fx.r), levelsOf(fx.r)
		if err := fx.r.ApplyTickInfo(client.TickInfo{Gained: ids(gained), Lost: ids(lost), Levels: lv}, seg); err != nil {
			if d := before.diff(fx.r); d != "" {
				t.Fatalf("rejected tick %v changed the replica: %s", err, d)
			}
			if now := ownedSet(fx.r); len(now) != len(owned) {
				t.Fatalf("rejected tick %v changed what the replica owns", err)
			}
			if now := levelsOf(fx.r); !maps.Equal(now, lods) {
				t.Fatalf("rejected tick %v changed levels of detail: %v, were %v", err, now, lods)
			}
		}
	})
}

// levelsOf returns each entity's level of detail, −1 for every band.
func levelsOf(r *client.Replica) map[state.ID]int {
	out := map[state.ID]int{}
	for _, e := range r.Entities(nil) {
		l, all := e.Level()
		if all {
			l = -1
		}
		out[e.ID()] = l
	}
	return out
}

// TestLevels: a lower level forgets the fields of the bands above it (zero,
// unknown, callbacks told), a higher one takes the tick's fills of the
// bands it enters, and contradictory levels reject the tick whole.
func TestLevels(t *testing.T) {
	fx := newFixture(t)
	p := fx.spawn(fx.player)
	p.Handle().SetStr(fx.name, "ann")
	fx.tick()
	e := fx.r.Entity(p.ID())
	var got []string
	fx.r.OnLevel(fx.player, func(e *state.Entity, old, new int) { got = append(got, fmt.Sprint(old, "->", new)) })
	names := 0
	fx.r.OnField(fx.player, fx.name, func(*state.Entity, state.Value, state.Value) { names++ })
	// Level 0: name (band 1, within 50) and scores (band 2) are forgotten.
	if err := fx.r.ApplyTickInfo(client.TickInfo{Levels: []client.Level{{ID: p.ID(), Level: 0}}}); err != nil {
		t.Fatal(err)
	}
	if l, all := e.Level(); all || l != 0 || e.Str(fx.player.Leaf(fx.name).Obj) != "" || fx.r.Knows(e, fx.name) || !fx.r.Knows(e, 0) {
		t.Fatalf("after level 0: level %d all %v, name %q, knows name %v", l, all, e.Str(fx.player.Leaf(fx.name).Obj), fx.r.Knows(e, fx.name))
	}
	knowsField := func(path string) bool {
		t.Helper()
		ok, err := fx.r.KnowsField(e, path)
		if err != nil {
			t.Fatalf("KnowsField(%q): %v", path, err)
		}
		return ok
	}
	if knowsField("name") || knowsField("scores") || !knowsField("hp") || !knowsField("pos") || !knowsField("pos.y") {
		t.Fatalf("after level 0: KnowsField name %v, scores %v, hp %v, pos %v, pos.y %v",
			knowsField("name"), knowsField("scores"), knowsField("hp"), knowsField("pos"), knowsField("pos.y"))
	}
	for _, bad := range []string{"", "mana", "pos.z", "hp.x", "pos."} {
		if _, err := fx.r.KnowsField(e, bad); !errors.Is(err, client.ErrNoField) {
			t.Errorf("KnowsField(%q): %v, want ErrNoField", bad, err)
		}
	}
	// Level 2 (every band) with a fill of the name, as the server sends it.
	var enc codec.Encoder
	fx.tr.Commit()
	seg := enc.Full(nil, []*state.Entity{p}, codec.PartAll.Band(1))
	if err := fx.r.ApplyTickInfo(client.TickInfo{Levels: []client.Level{{ID: p.ID(), Level: 2}}}, seg); err != nil {
		t.Fatal(err)
	}
	if _, all := e.Level(); !all || e.Str(fx.player.Leaf(fx.name).Obj) != "ann" || !fx.r.Knows(e, fx.name) || !knowsField("name") || !knowsField("scores") {
		t.Fatalf("after level 2: all %v, name %q", all, e.Str(fx.player.Leaf(fx.name).Obj))
	}
	if want := []string{"-1->0", "0->-1"}; !slices.Equal(got, want) || names != 2 {
		t.Fatalf("OnLevel %v, want %v; %d name callbacks, want 2", got, want, names)
	}
	for _, bad := range [][]client.Level{
		{{ID: p.ID(), Level: 3}},                         // above the class's 2 bands
		{{ID: p.ID(), Level: 0}, {ID: p.ID(), Level: 1}}, // listed twice
		{{ID: p.ID() + 1<<24, Level: 0}},                 // another generation: neither held nor created
	} {
		if err := fx.r.ApplyTickInfo(client.TickInfo{Levels: bad}); !errors.Is(err, client.ErrLevel) {
			t.Fatalf("levels %v: %v, want ErrLevel", bad, err)
		}
		if _, all := e.Level(); !all {
			t.Fatalf("levels %v: a rejected tick changed the level", bad)
		}
	}
}
