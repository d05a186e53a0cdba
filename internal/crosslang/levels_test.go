package crosslang_test

import (
	"slices"
	"testing"

	"pgregory.net/rapid"

	"github.com/replicago/replica/client"
	"github.com/replicago/replica/codec"
	"github.com/replicago/replica/internal/mutate"
	"github.com/replicago/replica/internal/tsnode"
	"github.com/replicago/replica/schema"
	"github.com/replicago/replica/state"
)

// levelSchema has a class with two level-of-detail bands (docs/protocol.md
// §5.8): a scalar, a nested struct and a bag in band 1 (within 50), a
// string and a list in band 2 (within 20), and fields in no band; and a
// class without bands.
func levelSchema(t *testing.T) *schema.Schema {
	vec := &schema.Struct{Name: "Vec", Fields: []*schema.Field{
		{ID: 1, Name: "x", Type: schema.Type{Kind: schema.Float32}, Vis: schema.VisAll},
		{ID: 2, Name: "y", Type: schema.Type{Kind: schema.Float32, Quant: schema.Quant{Step: 1.0 / 64}}, Vis: schema.VisAll},
	}}
	item := &schema.Struct{Name: "Item", Fields: []*schema.Field{
		{ID: 1, Name: "count", Type: schema.Type{Kind: schema.Int32}, Vis: schema.VisAll},
		{ID: 2, Name: "name", Type: schema.Type{Kind: schema.String}, Vis: schema.VisAll},
	}}
	hero := &schema.Struct{Name: "Hero", Class: true, ID: 1, Fields: []*schema.Field{
		{ID: 1, Name: "hp", Type: schema.Type{Kind: schema.Int16}, Vis: schema.VisAll},
		{ID: 2, Name: "pos", Type: schema.Type{Kind: schema.Nested, Struct: vec}, Vis: schema.VisAll},
		{ID: 3, Name: "gear", Type: schema.Type{Kind: schema.Nested, Struct: vec}, Vis: schema.VisAll, LOD: 50},
		{ID: 4, Name: "mana", Type: schema.Type{Kind: schema.Uint32}, Vis: schema.VisAll, LOD: 50},
		{ID: 5, Name: "inv", Type: schema.Type{Kind: schema.Bag, Key: schema.Uint32, Struct: item}, Vis: schema.VisAll, LOD: 50},
		{ID: 6, Name: "title", Type: schema.Type{Kind: schema.String}, Vis: schema.VisAll, LOD: 20},
		{ID: 7, Name: "scores", Type: schema.Type{Kind: schema.List, Elem: &schema.Type{Kind: schema.Int32}}, Vis: schema.VisAll, LOD: 20},
		{ID: 8, Name: "target", Type: schema.Type{Kind: schema.Ref}, Vis: schema.VisAll},
	}}
	tower := &schema.Struct{Name: "Tower", Class: true, ID: 2, Fields: []*schema.Field{
		{ID: 1, Name: "hp", Type: schema.Type{Kind: schema.Int16}, Vis: schema.VisAll},
	}}
	s, err := schema.New(hero, tower)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestCrossLanguageLevels runs random histories in which the level of
// detail a client holds entities at changes, up and down, as a server
// sends them: a lower level forgets the bands above it; a higher one gets
// the fields of the bands it enters whole (band-b segments, docs/protocol.md
// §5.8); an entity may be created at any level. The Go and the TypeScript
// replica must agree after every tick, levels included.
func TestCrossLanguageLevels(t *testing.T) {
	mutate.ValidUTF8Keys = true
	s := levelSchema(t)
	procs := startNode(t, 1)
	rapid.Check(t, func(rt *rapid.T) { runLevels(rt, s, procs[0]) })
}

type levelWorld struct {
	s     *schema.Schema
	tr    *state.Tracker
	enc   codec.Encoder
	level map[state.ID]int // the server's: each entity's level from the next tick
	told  map[state.ID]int // the level the client was told
	p     pair
	ticks int
}

// bands is the number of level-of-detail bands of e's class.
func bands(e *state.Entity) int { return len(e.Class().Bands()) }

func runLevels(t *rapid.T, s *schema.Schema, proc *tsnode.Proc) {
	w := &levelWorld{s: s, tr: state.NewTracker(s), level: map[state.ID]int{}, told: map[state.ID]int{},
		p: pair{name: "levels", ts: proc}}
	var err error
	if w.p.goc, err = client.New(s, client.Config{}); err != nil {
		t.Fatal(err)
	}
	if err := proc.Init(s.AppendDescriptor(nil), nil); err != nil {
		t.Fatal(err)
	}
	pick := func(t *rapid.T) *state.Entity {
		ents := w.tr.AppendEntities(nil)
		if len(ents) == 0 {
			return nil
		}
		return ents[rapid.IntRange(0, len(ents)-1).Draw(t, "entity")]
	}
	t.Repeat(map[string]func(*rapid.T){
		"spawn": func(t *rapid.T) {
			c := s.Classes[rapid.IntRange(0, len(s.Classes)-1).Draw(t, "class")]
			e, err := w.tr.Spawn(c)
			if err != nil {
				t.Fatal(err)
			}
			w.level[e.ID()] = rapid.IntRange(0, len(c.Bands())).Draw(t, "level")
			for range rapid.IntRange(0, 4).Draw(t, "initialWrites") {
				mutate.Struct(t, e.Handle(), c, 0)
			}
		},
		"destroy": func(t *rapid.T) {
			if e := pick(t); e != nil {
				w.tr.Destroy(e)
			}
		},
		"burst": func(t *rapid.T) {
			if e := pick(t); e != nil {
				for range rapid.IntRange(1, 6).Draw(t, "changes") {
					mutate.Struct(t, e.Handle(), e.Class(), 0)
				}
			}
		},
		"level": func(t *rapid.T) {
			if e := pick(t); e != nil {
				w.level[e.ID()] = rapid.IntRange(0, bands(e)).Draw(t, "newLevel")
			}
		},
		"tick":  w.tick,
		"tick2": w.tick,
	})
	w.tick(t)
}

// tick commits the tick and encodes it as a server does for a client
// holding entities at levels: per band b, the deltas of the entities held
// at b or above that were there before, and the whole band of those that
// enter it.
func (w *levelWorld) tick(t *rapid.T) {
	cs := w.tr.Commit()
	w.ticks++
	created := map[state.ID]bool{}
	for _, c := range cs.Changes {
		if c.Created && !c.Destroyed {
			created[c.Entity.ID()] = true
		}
	}
	ents := w.tr.AppendEntities(nil)
	var levels []client.Level
	var tsLevels []tsnode.Level
	for _, e := range ents {
		id, l := e.ID(), w.level[e.ID()]
		if l == w.told[id] && !created[id] {
			continue
		}
		// A new entity at every band needs no level; say it at times anyway.
		if created[id] && l == bands(e) && id%2 == 0 {
			continue
		}
		levels = append(levels, client.Level{ID: id, Level: uint8(l)})
		tsLevels = append(tsLevels, tsnode.Level{ID: uint32(id), Level: uint8(l)})
	}
	var segs [][]byte
	for b := 0; b <= 2; b++ {
		part := codec.PartAll.Band(b)
		var enter []*state.Entity
		for _, e := range ents {
			if !created[e.ID()] && w.told[e.ID()] < b && w.level[e.ID()] >= b {
				enter = append(enter, e)
			}
		}
		segs = append(segs, w.enc.Delta(nil, cs, part, func(e *state.Entity) bool {
			return w.level[e.ID()] >= b && !slices.Contains(enter, e)
		}))
		if len(enter) > 0 {
			segs = append(segs, w.enc.Full(nil, enter, part))
		}
	}
	clear(w.told)
	for _, e := range ents {
		w.told[e.ID()] = w.level[e.ID()]
	}
	if err := w.p.goc.ApplyTickInfo(client.TickInfo{Levels: levels}, segs...); err != nil {
		t.Fatalf("tick %d: Go client: %v", w.ticks, err)
	}
	if _, err := w.p.ts.Tick(nil, nil, tsLevels, segs...); err != nil {
		t.Fatalf("tick %d: TypeScript client: %v", w.ticks, err)
	}
	want := tsnode.Canonical(w.p.goc.Entities(nil), (*state.Entity).Owned)
	got, err := w.p.ts.Dump()
	if err != nil {
		t.Fatal(err)
	}
	if got != want {
		t.Fatalf("tick %d: the TypeScript replica differs from the Go one:\n%s", w.ticks, diff(got, want))
	}
}
