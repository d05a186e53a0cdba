package crosslang_test

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"

	"pgregory.net/rapid"

	"github.com/replicago/replica/client"
	"github.com/replicago/replica/codec"
	"github.com/replicago/replica/internal/mutate"
	v1 "github.com/replicago/replica/internal/testschema/v1"
	v2 "github.com/replicago/replica/internal/testschema/v2"
	"github.com/replicago/replica/internal/tsnode"
	"github.com/replicago/replica/schema"
	"github.com/replicago/replica/state"
)

// startNode starts n Node processes running the TypeScript runtime. Without
// Node the test skips, or fails when REPLICA_REQUIRE_NODE=1 (CI).
func startNode(t *testing.T, n int) []*tsnode.Proc {
	t.Helper()
	var procs []*tsnode.Proc
	for range n {
		p, err := tsnode.Start()
		if errors.Is(err, tsnode.ErrNoNode) {
			if os.Getenv("REPLICA_REQUIRE_NODE") == "1" {
				t.Fatalf("REPLICA_REQUIRE_NODE=1 but %v: install Node 20", err)
			}
			t.Skipf("%v; set REPLICA_REQUIRE_NODE=1 to make this a failure", err)
		}
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { p.Close() })
		procs = append(procs, p)
	}
	return procs
}

// TestCrossLanguage runs random histories on the test schemas (every value
// kind, containers and their operations, bags, references, nested structs,
// owner and others visibility) with the server on one version and a client
// pair on each: one on the server's version that owns some entities, one
// on the other version that sees them as others; and a pair that joins
// late, from a full state, and owns the same entities. Ownership also
// changes mid-life: the owner pairs gain and lose existing entities as a
// server tells them (TICK's gained and lost, and the entity's fields of
// the partition it now sees, whole).
func TestCrossLanguage(t *testing.T) {
	mutate.ValidUTF8Keys = true
	procs := startNode(t, 3)
	t.Run("v2 server", func(t *testing.T) {
		rapid.Check(t, func(rt *rapid.T) { run(rt, v2.Schema(), v1.Schema(), procs) })
	})
	t.Run("v1 server", func(t *testing.T) {
		rapid.Check(t, func(rt *rapid.T) { run(rt, v1.Schema(), v2.Schema(), procs) })
	})
}

// A pair is a Go client and a TypeScript client fed the same bytes.
type pair struct {
	name  string
	owner bool // owns the entities in world.owned
	goc   *client.Replica
	ts    *tsnode.Proc
}

type world struct {
	srv, alt *schema.Schema
	tr       *state.Tracker
	enc      codec.Encoder
	owned    map[state.ID]bool // the server's: what the owner pairs own from the next tick
	told     map[state.ID]bool // what the owner pairs were told they own
	pairs    []*pair
	ticks    int
	late     *tsnode.Proc // the late joiner's Node process, until it joins
	join     bool         // the late joiner joins at the next tick

	// The other version's pair gets its segments assembled for it, with
	// ranked update sections (docs/protocol.md §5.4): held is what it
	// holds.
	asm     codec.Assembler
	held    codec.Held
	batches [2]codec.Batch
}

func run(t *rapid.T, srv, alt *schema.Schema, procs []*tsnode.Proc) {
	w := &world{srv: srv, alt: alt, tr: state.NewTracker(srv), owned: map[state.ID]bool{}, told: map[state.ID]bool{}, late: procs[2]}
	w.held.Reset(nil, 0)
	desc := srv.AppendDescriptor(nil)
	remote, err := schema.DecodeDescriptor(desc)
	if err != nil {
		t.Fatal(err)
	}
	for i, local := range []*schema.Schema{srv, alt} {
		p := &pair{name: "same version, owner", owner: true, ts: procs[i]}
		var tsRemote []byte
		if local != srv {
			p.name, p.owner, tsRemote = "other version", false, desc
		}
		if p.goc, err = client.New(local, client.Config{Remote: remote}); err != nil {
			t.Fatal(err)
		}
		if err := p.ts.Init(local.AppendDescriptor(nil), tsRemote); err != nil {
			t.Fatal(err)
		}
		w.pairs = append(w.pairs, p)
	}
	actions := map[string]func(*rapid.T){
		"spawn":     w.spawn,
		"destroy":   w.destroy,
		"write":     w.write,
		"container": w.container,
		"nested":    w.nested,
		"burst":     w.burst,
		"transfer":  w.transfer,
		"join":      func(*rapid.T) { w.join = true },
		"tick":      w.tick,
		"tick2":     w.tick,
	}
	t.Repeat(actions)
	w.tick(t)
}

func (w *world) pick(t *rapid.T) *state.Entity {
	ents := w.tr.AppendEntities(nil)
	if len(ents) == 0 {
		return nil
	}
	return ents[rapid.IntRange(0, len(ents)-1).Draw(t, "entity")]
}

func (w *world) spawn(t *rapid.T) {
	c := w.srv.Classes[rapid.IntRange(0, len(w.srv.Classes)-1).Draw(t, "class")]
	e, err := w.tr.Spawn(c)
	if err != nil {
		t.Fatal(err)
	}
	if rapid.Bool().Draw(t, "owned") {
		w.owned[e.ID()] = true
	}
	for range rapid.IntRange(0, 4).Draw(t, "initialWrites") {
		mutate.Struct(t, e.Handle(), c, 0)
	}
}

func (w *world) destroy(t *rapid.T) {
	if e := w.pick(t); e != nil {
		w.tr.Destroy(e)
	}
}

func (w *world) write(t *rapid.T) {
	e := w.pick(t)
	if e == nil {
		return
	}
	c := e.Class()
	i := rapid.SampledFrom(mutate.ScalarLeaves(c)).Draw(t, "leaf")
	h, f := mutate.Reach(e.Handle(), c, c.Leaf(i).Path)
	for range rapid.IntRange(1, 3).Draw(t, "writes") {
		mutate.SetScalar(t, h, f.Leaf, f.Num, f.Obj, &f.Type)
	}
}

func (w *world) container(t *rapid.T) {
	e := w.pick(t)
	if e == nil {
		return
	}
	c := e.Class()
	conts := mutate.ContainerLeaves(c)
	if len(conts) == 0 {
		return
	}
	i := rapid.SampledFrom(conts).Draw(t, "leaf")
	h, f := mutate.Reach(e.Handle(), c, c.Leaf(i).Path)
	for range rapid.IntRange(1, 4).Draw(t, "ops") {
		mutate.Container(t, h, f.Leaf, &f.Type, 0)
	}
}

func (w *world) nested(t *rapid.T) {
	e := w.pick(t)
	if e == nil {
		return
	}
	c := e.Class()
	paths := mutate.NestedPaths(c)
	if len(paths) == 0 {
		return
	}
	path := rapid.SampledFrom(paths).Draw(t, "nested")
	h, f := mutate.Reach(e.Handle(), c, path)
	mutate.SetNested(t, h, f, mutate.Record(t, f.Type.Struct, 1))
}

// transfer gives an entity to the owner pairs' user, or takes it away.
func (w *world) transfer(t *rapid.T) {
	if e := w.pick(t); e != nil {
		w.owned[e.ID()] = !w.owned[e.ID()]
	}
}

func (w *world) burst(t *rapid.T) {
	e := w.pick(t)
	if e == nil {
		return
	}
	for range rapid.IntRange(1, 10).Draw(t, "changes") {
		mutate.Struct(t, e.Handle(), e.Class(), 0)
	}
}

// tick commits the tick, encodes it for each pair's view, applies it to
// both replicas of the pair and compares their canonical dumps.
func (w *world) tick(t *rapid.T) {
	cs := w.tr.Commit()
	w.ticks++
	created := map[state.ID]bool{}
	var gained, lost []state.ID
	for _, c := range cs.Changes {
		if c.Created && !c.Destroyed {
			created[c.Entity.ID()] = true
			if w.owned[c.Entity.ID()] {
				gained = append(gained, c.Entity.ID())
			}
		}
	}
	// Ownership changes of entities the owner pairs hold: they get the
	// fields of the partition they now see whole, and no delta of it.
	var gainFull, loseFull []*state.Entity
	for _, e := range w.tr.AppendEntities(nil) {
		id := e.ID()
		if created[id] || w.owned[id] == w.told[id] {
			continue
		}
		if w.owned[id] {
			gained, gainFull = append(gained, id), append(gainFull, e)
		} else {
			lost, loseFull = append(lost, id), append(loseFull, e)
		}
	}
	clear(w.told)
	for _, e := range w.tr.AppendEntities(nil) {
		w.told[e.ID()] = w.owned[e.ID()]
	}
	all := w.enc.Delta(nil, cs, codec.PartAll, nil)
	others := w.enc.Delta(nil, cs, codec.PartOthers, nil)
	othersOwner := w.enc.Delta(nil, cs, codec.PartOthers, func(e *state.Entity) bool {
		return !w.owned[e.ID()] && !slices.Contains(loseFull, e)
	})
	owner := w.enc.Delta(nil, cs, codec.PartOwner, func(e *state.Entity) bool {
		return w.owned[e.ID()] && !slices.Contains(gainFull, e)
	})
	ownerSegs := [][]byte{all, othersOwner, owner}
	if len(gainFull) > 0 {
		ownerSegs = append(ownerSegs, w.enc.Full(nil, gainFull, codec.PartOwner))
	}
	if len(loseFull) > 0 {
		ownerSegs = append(ownerSegs, w.enc.Full(nil, loseFull, codec.PartOthers))
	}
	var ranked [][]byte
	w.asm.Held = &w.held
	for i, part := range []codec.Part{codec.PartAll, codec.PartOthers} {
		b := &w.batches[i]
		w.enc.DeltaBatch(b, cs, part)
		for j := range cs.Changes {
			w.asm.Add(b, b.Piece(j))
		}
		ranked = w.asm.Segments(ranked, 0, 0, 0)
	}
	w.asm.Held = nil
	w.held.Commit()
	for _, p := range w.pairs {
		segs := [][]byte{all, others}
		var g, l []state.ID
		if p.owner {
			segs, g, l = ownerSegs, gained, lost
		} else {
			segs = ranked
		}
		if err := p.goc.ApplyTick(g, l, segs...); err != nil {
			t.Fatalf("tick %d, %s: Go client: %v", w.ticks, p.name, err)
		}
		if _, err := p.ts.Tick(u32s(g), u32s(l), nil, segs...); err != nil {
			t.Fatalf("tick %d, %s: TypeScript client: %v", w.ticks, p.name, err)
		}
		want := tsnode.Canonical(p.goc.Entities(nil), (*state.Entity).Owned)
		got, err := p.ts.Dump()
		if err != nil {
			t.Fatal(err)
		}
		if got != want {
			t.Fatalf("tick %d, %s: the TypeScript replica differs from the Go one:\n%s", w.ticks, p.name, diff(got, want))
		}
		if n := len(w.tr.AppendEntities(nil)); strings.Count(got, "\n") != n {
			t.Fatalf("tick %d, %s: %d entities, the server has %d", w.ticks, p.name, strings.Count(got, "\n"), n)
		}
	}
	if w.join && w.late != nil {
		w.joinLate(t)
	}
}

// joinLate adds the late pair: a full state of every entity, the owned
// ones with their owner fields, and the owned IDs as gained.
func (w *world) joinLate(t *rapid.T) {
	p := &pair{name: "late joiner, owner", owner: true, ts: w.late}
	w.late = nil
	var err error
	if p.goc, err = client.New(w.srv, client.Config{}); err != nil {
		t.Fatal(err)
	}
	if err := p.ts.Init(w.srv.AppendDescriptor(nil), nil); err != nil {
		t.Fatal(err)
	}
	ents := w.tr.AppendEntities(nil)
	var own, oth []*state.Entity
	var gained []state.ID
	var ids []uint32
	for _, e := range ents {
		if w.owned[e.ID()] {
			own = append(own, e)
			gained = append(gained, e.ID())
			ids = append(ids, uint32(e.ID()))
		} else {
			oth = append(oth, e)
		}
	}
	segs := [][]byte{w.enc.Full(nil, ents, codec.PartAll), w.enc.Full(nil, oth, codec.PartOthers), w.enc.Full(nil, own, codec.PartOwner)}
	if err := p.goc.ApplyTick(gained, nil, segs...); err != nil {
		t.Fatalf("tick %d, %s: Go client: %v", w.ticks, p.name, err)
	}
	if _, err := p.ts.Tick(ids, nil, nil, segs...); err != nil {
		t.Fatalf("tick %d, %s: TypeScript client: %v", w.ticks, p.name, err)
	}
	want := tsnode.Canonical(p.goc.Entities(nil), (*state.Entity).Owned)
	got, err := p.ts.Dump()
	if err != nil {
		t.Fatal(err)
	}
	if got != want {
		t.Fatalf("tick %d, %s: the TypeScript replica differs from the Go one:\n%s", w.ticks, p.name, diff(got, want))
	}
	w.pairs = append(w.pairs, p)
}

func u32s(ids []state.ID) []uint32 {
	out := make([]uint32, len(ids))
	for i, id := range ids {
		out[i] = uint32(id)
	}
	return out
}

func diff(got, want string) string {
	g, w := strings.Split(got, "\n"), strings.Split(want, "\n")
	var b strings.Builder
	for i := range max(len(g), len(w)) {
		var a, c string
		if i < len(g) {
			a = g[i]
		}
		if i < len(w) {
			c = w[i]
		}
		if a != c {
			fmt.Fprintf(&b, "line %d:\n  ts: %s\n  go: %s\n", i+1, a, c)
		}
	}
	return b.String()
}
