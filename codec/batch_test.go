package codec_test

// Batches and assemblers: a segment assembled from every piece of a Batch
// is the encoder's segment byte for byte; a client assembled from the
// pieces of the entities it sees ends as one sent Delta and Full with
// include restricted to those entities; limits split segments without
// changing what they decode to.

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"pgregory.net/rapid"

	"github.com/replicago/replica/codec"
	"github.com/replicago/replica/internal/arena"
	v1 "github.com/replicago/replica/internal/testschema/v1"
	v2 "github.com/replicago/replica/internal/testschema/v2"
	"github.com/replicago/replica/schema"
	"github.com/replicago/replica/state"
)

var parts = [...]codec.Part{codec.PartAll, codec.PartOthers, codec.PartOwner}

// newBatchWorld returns a world for the batch tests: a tracker and the
// property test's random writers, without the property test's clients.
func newBatchWorld(t *rapid.T) *world {
	srv, alt, typed := v2.Schema(), v1.Schema(), typedV2
	if rapid.Bool().Draw(t, "v1Server") {
		srv, alt, typed = v1.Schema(), v2.Schema(), typedV1
	}
	return &world{srv: srv, alt: alt, tr: state.NewTracker(srv), ownedA: map[state.ID]bool{}, typed: typed}
}

// runTicks runs the world's random writers, with tick ending each tick.
func (w *world) runTicks(t *rapid.T, tick func(*rapid.T)) {
	actions := map[string]func(*rapid.T){
		"spawn":     w.spawn,
		"spawnMany": w.spawnMany,
		"touchAll":  w.touchAll,
		"destroy":   w.destroy,
		"write":     w.write,
		"container": w.container,
		"nested":    w.nested,
		"typed":     w.typedOp,
		"burst":     w.burst,
		"tick":      tick,
		"tick2":     tick,
	}
	for range 4 {
		t.Repeat(actions)
	}
	tick(t)
}

// addAll adds every piece of b to a, in an order drawn at random, some
// twice.
func addAll(t *rapid.T, a *codec.Assembler, b *codec.Batch) {
	ps := make([]int32, b.Len())
	for i := range ps {
		ps[i] = int32(i)
	}
	for _, p := range rapid.Permutation(ps).Draw(t, "order") {
		a.Add(b, p)
	}
	if b.Len() > 0 {
		for range rapid.IntRange(0, 2).Draw(t, "repeats") {
			a.Add(b, rapid.Int32Range(0, int32(b.Len()-1)).Draw(t, "repeat"))
		}
	}
}

// checkIndex checks that b's pieces are those of n changes or entities,
// one each at most.
func checkIndex(b *codec.Batch, n int) error {
	seen := make([]bool, b.Len())
	for i := range n {
		p := b.Piece(i)
		if p < -1 || p >= int32(b.Len()) {
			return fmt.Errorf("Piece(%d) = %d of %d pieces", i, p, b.Len())
		}
		if p >= 0 {
			if seen[p] {
				return fmt.Errorf("piece %d twice", p)
			}
			seen[p] = true
		}
	}
	if i := slices.Index(seen, false); i >= 0 {
		return fmt.Errorf("piece %d of no change", i)
	}
	return nil
}

// sameSegment checks that segs, assembled with no limits, is the
// encoder's segment want: that one segment, or none for an empty one.
func sameSegment(segs [][]byte, want []byte) error {
	if bytes.Equal(want, []byte{0}) {
		if len(segs) != 0 {
			return fmt.Errorf("%d segments (%x), want none", len(segs), segs)
		}
		return nil
	}
	if len(segs) != 1 || !bytes.Equal(segs[0], want) {
		return fmt.Errorf("assembled %x, encoder %x", segs, want)
	}
	return nil
}

// TestBatchMatchesEncoder checks that every piece of a DeltaBatch
// assembled gives exactly the bytes of Delta with a nil include, and every
// piece of a FullBatch those of Full, in every partition; and that the
// pieces count the encoder's values. The batches are built first and the
// encoder then writes the segments, so the batches must not depend on its
// buffers.
func TestBatchMatchesEncoder(t *testing.T) {
	codec.CheckPlans(true)
	defer codec.CheckPlans(false)
	rapid.Check(t, func(t *rapid.T) {
		w := newBatchWorld(t)
		var (
			enc           codec.Encoder
			a             codec.Assembler
			deltas, fulls [3]codec.Batch
		)
		ticks := 0
		tick := func(t *rapid.T) {
			cs := w.tr.Commit()
			ticks++
			ents := w.tr.AppendEntities(nil)
			for i, part := range parts {
				enc.DeltaBatch(&deltas[i], cs, part)
				enc.FullBatch(&fulls[i], ents, part)
			}
			for i, part := range parts {
				want := enc.Delta(nil, cs, part, nil)
				if got := codec.BatchValues(&deltas[i]); got != enc.Values() {
					t.Fatalf("tick %d, part %d: delta pieces count %d values, the encoder %d", ticks, part, got, enc.Values())
				}
				if err := checkIndex(&deltas[i], len(cs.Changes)); err != nil {
					t.Fatalf("tick %d, part %d: delta batch: %v", ticks, part, err)
				}
				addAll(t, &a, &deltas[i])
				if err := sameSegment(a.Segments(nil, 0, 0, 0), want); err != nil {
					t.Fatalf("tick %d, part %d: delta: %v", ticks, part, err)
				}
				want = enc.Full(nil, ents, part)
				if got := codec.BatchValues(&fulls[i]); got != enc.Values() {
					t.Fatalf("tick %d, part %d: full pieces count %d values, the encoder %d", ticks, part, got, enc.Values())
				}
				if err := checkIndex(&fulls[i], len(ents)); err != nil {
					t.Fatalf("tick %d, part %d: full batch: %v", ticks, part, err)
				}
				addAll(t, &a, &fulls[i])
				if err := sameSegment(a.Segments(nil, 0, 0, 0), want); err != nil {
					t.Fatalf("tick %d, part %d: full: %v", ticks, part, err)
				}
			}
			if n := codec.Mispredicted(&a); n != 0 {
				t.Fatalf("tick %d: %d segments sized wrongly", ticks, n)
			}
		}
		w.runTicks(t, tick)
	})
}

// A viewer is a client that sees a subset of the entities: one replica
// assembled from batches, and a reference replica sent Delta and Full
// with include restricted to the same entities.
type viewer struct {
	idx       int
	view      map[state.ID]bool // the entities it saw after the last tick
	tab, ref  *state.Table
	dec, rdec *codec.Decoder
	held      *codec.Held // what it holds, for ranked updates; nil for none
}

// limits are the segment limits of one Segments call; 0 is none.
type limits struct{ ents, bytes, values int }

func drawLimits(t *rapid.T) limits {
	if rapid.Bool().Draw(t, "generous") {
		return limits{}
	}
	return limits{
		ents:   rapid.IntRange(1, 6).Draw(t, "maxEntities"),
		bytes:  rapid.IntRange(1, 300).Draw(t, "maxBytes"),
		values: rapid.IntRange(1, 30).Draw(t, "maxValues"),
	}
}

// applySplit applies segs to tab in one transaction, checking that each
// segment is within lim unless it holds a single entity, and, if
// assembled, that none is empty.
func applySplit(tab *state.Table, dec *codec.Decoder, segs [][]byte, lim limits, assembled bool) error {
	txn := tab.Begin()
	for i, seg := range segs {
		if err := dec.Apply(txn, seg); err != nil {
			txn.Rollback()
			return fmt.Errorf("segment %d: %v", i, err)
		}
		n, v := codec.DecodedEntities(dec), codec.DecodedValues(dec)
		switch {
		case n == 0 && assembled:
			txn.Rollback()
			return fmt.Errorf("segment %d (%x) is empty", i, seg)
		case lim.ents > 0 && n > lim.ents,
			n > 1 && lim.bytes > 0 && len(seg) > lim.bytes,
			n > 1 && lim.values > 0 && v > lim.values:
			txn.Rollback()
			return fmt.Errorf("segment %d: %d entities, %d bytes, %d values; limits %+v", i, n, len(seg), v, lim)
		}
	}
	txn.Commit()
	return nil
}

// sameTables reports how b's entities differ from a's.
func sameTables(a, b *state.Table) error {
	ae, be := a.AppendEntities(nil), b.AppendEntities(nil)
	if len(ae) != len(be) {
		return fmt.Errorf("%d entities, want %d", len(be), len(ae))
	}
	for i, e := range ae {
		if be[i].ID() != e.ID() || be[i].Class() != e.Class() || !be[i].Equal(&e.Record) {
			return fmt.Errorf("entity %d differs from %d", be[i].ID(), e.ID())
		}
	}
	return nil
}

// TestAssembleViews gives each of several clients a random subset of the
// entities, changing every tick: entities stay in its view, leave it (a
// Destroy) or enter it (the create and fill pieces of FullBatches, mixed in
// one segment with the DeltaBatch's pieces). Each client's replica,
// assembled with random limits, must end equal to a reference replica sent
// Delta and Full restricted to the same entities, and to the server's
// entities in its view as it sees them.
func TestAssembleViews(t *testing.T) {
	codec.CheckPlans(true)
	defer codec.CheckPlans(false)
	rapid.Check(t, func(t *rapid.T) {
		w := newBatchWorld(t)
		const nviewers = 3
		var viewers []*viewer
		for i := range nviewers {
			dec, _ := codec.NewDecoder(w.srv, nil, codec.Limits{})
			rdec, _ := codec.NewDecoder(w.srv, nil, codec.Limits{})
			v := &viewer{idx: i, view: map[state.ID]bool{}, tab: state.NewTable(), ref: state.NewTable(), dec: dec, rdec: rdec}
			if i > 0 {
				// Viewers but the first are sent ranked updates.
				v.held = new(codec.Held)
				v.held.Reset(nil, 0)
			}
			for _, c := range w.srv.Classes {
				v.tab.WatchAll(c)
				v.ref.WatchAll(c)
			}
			viewers = append(viewers, v)
		}
		// An entity the world gives A belongs to one of the viewers.
		owner := func(id state.ID) int {
			if w.ownedA[id] {
				return int(id.Slot()) % nviewers
			}
			return -1
		}
		var (
			enc           codec.Encoder
			a             codec.Assembler
			deltas, fulls [3]codec.Batch
		)
		ticks := 0
		tick := func(t *rapid.T) {
			cs := w.tr.Commit()
			ticks++
			ents := w.tr.AppendEntities(nil)
			for i, part := range parts {
				enc.DeltaBatch(&deltas[i], cs, part)
				enc.FullBatch(&fulls[i], ents, part)
			}
			created := map[state.ID]bool{}
			for _, ch := range cs.Changes {
				if ch.Created {
					created[ch.Entity.ID()] = true
				}
			}
			for _, v := range viewers {
				next := map[state.ID]bool{}
				for _, e := range ents {
					if v.view[e.ID()] && rapid.IntRange(0, 3).Draw(t, "stays") > 0 ||
						!v.view[e.ID()] && rapid.IntRange(0, 2).Draw(t, "enters") == 0 {
						next[e.ID()] = true
					}
				}
				mine := func(id state.ID) bool { return owner(id) == v.idx }
				// Changes it receives: creates of entities in its new
				// view, destroys of entities in its old one, updates of
				// entities in both.
				sent := func(ch *state.Change) bool {
					id := ch.Entity.ID()
					switch {
					case ch.Destroyed:
						return v.view[id]
					case ch.Created:
						return next[id]
					}
					return v.view[id] && next[id]
				}
				var entering, leaving []*state.Entity
				for _, e := range ents {
					if next[e.ID()] && !v.view[e.ID()] && !created[e.ID()] {
						entering = append(entering, e)
					}
					if v.view[e.ID()] && !next[e.ID()] {
						leaving = append(leaving, e)
					}
				}

				// Assembled from the batches.
				lim := drawLimits(t)
				var segs [][]byte
				a.Held = v.held
				for p, part := range parts {
					for i, ch := range cs.Changes {
						if sent(ch) && (part == codec.PartAll || !ch.Destroyed && mine(ch.Entity.ID()) == (part == codec.PartOwner)) {
							a.Add(&deltas[p], deltas[p].Piece(i))
						}
					}
					for i, e := range ents {
						if next[e.ID()] && !v.view[e.ID()] && !created[e.ID()] &&
							(part == codec.PartAll || mine(e.ID()) == (part == codec.PartOwner)) {
							a.Add(&fulls[p], fulls[p].Piece(i))
						}
					}
					if part == codec.PartAll {
						for _, e := range leaving {
							a.Destroy(e.ID())
							if rapid.IntRange(0, 4).Draw(t, "destroyTwice") == 0 {
								a.Destroy(e.ID())
							}
						}
					}
					segs = a.Segments(segs, lim.ents, lim.bytes, lim.values)
				}
				a.Held = nil
				if err := applySplit(v.tab, v.dec, segs, lim, true); err != nil {
					t.Fatalf("tick %d, viewer %d: %v", ticks, v.idx, err)
				}
				if v.held != nil {
					v.held.Commit()
					held := v.tab.AppendEntities(nil)
					if v.held.Len() != len(held) {
						t.Fatalf("tick %d, viewer %d: Held has %d entities, the client %d", ticks, v.idx, v.held.Len(), len(held))
					}
					for r, e := range held {
						if got, ok := v.held.Rank(e.ID().Slot()); !ok || got != r {
							t.Fatalf("tick %d, viewer %d: Held ranks slot %d %d (%v), want %d", ticks, v.idx, e.ID().Slot(), got, ok, r)
						}
					}
				}

				// The reference, encoded for it alone.
				incl := func(p codec.Part) func(*state.Entity) bool {
					ok := map[*state.Entity]bool{}
					for _, ch := range cs.Changes {
						if sent(ch) && (p == codec.PartAll || mine(ch.Entity.ID()) == (p == codec.PartOwner)) {
							ok[ch.Entity] = true
						}
					}
					return func(e *state.Entity) bool { return ok[e] }
				}
				var others, own []*state.Entity
				for _, e := range entering {
					if mine(e.ID()) {
						own = append(own, e)
					} else {
						others = append(others, e)
					}
				}
				txn := v.ref.Begin()
				for i, seg := range [][]byte{
					enc.Delta(nil, cs, codec.PartAll, incl(codec.PartAll)),
					enc.Full(nil, entering, codec.PartAll),
					nil, // the leaving entities go here
					enc.Delta(nil, cs, codec.PartOthers, incl(codec.PartOthers)),
					enc.Full(nil, others, codec.PartOthers),
					enc.Delta(nil, cs, codec.PartOwner, incl(codec.PartOwner)),
					enc.Full(nil, own, codec.PartOwner),
				} {
					if seg == nil {
						for _, e := range leaving {
							if err := txn.DestroySlot(e.ID().Slot()); err != nil {
								t.Fatalf("tick %d, reference %d: destroy %d: %v", ticks, v.idx, e.ID(), err)
							}
						}
						continue
					}
					if err := v.rdec.Apply(txn, seg); err != nil {
						t.Fatalf("tick %d, reference %d, segment %d: %v", ticks, v.idx, i, err)
					}
				}
				txn.Commit()
				v.view = next

				if err := sameTables(v.ref, v.tab); err != nil {
					t.Fatalf("tick %d, viewer %d, against the reference: %v", ticks, v.idx, err)
				}
				var want []*state.Entity
				for _, e := range ents {
					if next[e.ID()] {
						want = append(want, e)
					}
				}
				got := v.tab.AppendEntities(nil)
				if len(got) != len(want) {
					t.Fatalf("tick %d, viewer %d: %d entities, sees %d", ticks, v.idx, len(got), len(want))
				}
				for i, se := range want {
					vis := schema.VisOthers
					if mine(se.ID()) {
						vis = schema.VisOwner
					}
					if got[i].ID() != se.ID() {
						t.Fatalf("tick %d, viewer %d: entity %d, want %d", ticks, v.idx, got[i].ID(), se.ID())
					}
					if err := w.proj.entity(se, got[i], vis); err != nil {
						t.Fatalf("tick %d, viewer %d: entity %d (%s): %v", ticks, v.idx, se.ID(), se.Class().Name, err)
					}
				}
			}
			if n := codec.Mispredicted(&a); n != 0 {
				t.Fatalf("tick %d: %d segments sized wrongly", ticks, n)
			}
		}
		w.runTicks(t, tick)
	})
}

// TestAssembleSplit assembles every piece of each tick's batches with
// small limits, and every entity's full state for a client joining at
// that tick: the segments must stay within the limits (but for a single
// entity over them) and decode to what the encoder's unsplit segments
// give.
func TestAssembleSplit(t *testing.T) {
	codec.CheckPlans(true)
	defer codec.CheckPlans(false)
	rapid.Check(t, func(t *rapid.T) {
		w := newBatchWorld(t)
		newTable := func() (*state.Table, *codec.Decoder) {
			dec, _ := codec.NewDecoder(w.srv, nil, codec.Limits{})
			tab := state.NewTable()
			for _, c := range w.srv.Classes {
				tab.WatchAll(c)
			}
			return tab, dec
		}
		// Both see every entity through PartOthers.
		split, sdec := newTable()
		whole, wdec := newTable()
		var (
			enc   codec.Encoder
			a     codec.Assembler
			batch codec.Batch
		)
		ticks := 0
		tick := func(t *rapid.T) {
			cs := w.tr.Commit()
			ticks++
			lim := limits{
				ents:   rapid.IntRange(1, 8).Draw(t, "maxEntities"),
				bytes:  rapid.IntRange(1, 200).Draw(t, "maxBytes"),
				values: rapid.IntRange(1, 20).Draw(t, "maxValues"),
			}
			var segs, wsegs [][]byte
			for _, part := range parts[:2] {
				enc.DeltaBatch(&batch, cs, part)
				addAll(t, &a, &batch)
				segs = a.Segments(segs, lim.ents, lim.bytes, lim.values)
				wsegs = append(wsegs, enc.Delta(nil, cs, part, nil))
			}
			if err := applySplit(split, sdec, segs, lim, true); err != nil {
				t.Fatalf("tick %d: split: %v", ticks, err)
			}
			if err := applySplit(whole, wdec, wsegs, limits{}, false); err != nil {
				t.Fatalf("tick %d: whole: %v", ticks, err)
			}
			if err := sameTables(whole, split); err != nil {
				t.Fatalf("tick %d: split against whole: %v", ticks, err)
			}
			// A client joining now.
			late, ldec := newTable()
			ents := w.tr.AppendEntities(nil)
			segs = segs[:0]
			for _, part := range parts[:2] {
				enc.FullBatch(&batch, ents, part)
				addAll(t, &a, &batch)
				segs = a.Segments(segs, lim.ents, lim.bytes, lim.values)
			}
			if err := applySplit(late, ldec, segs, lim, true); err != nil {
				t.Fatalf("tick %d: full state: %v", ticks, err)
			}
			if err := sameTables(whole, late); err != nil {
				t.Fatalf("tick %d: full state against whole: %v", ticks, err)
			}
			if n := codec.Mispredicted(&a); n != 0 {
				t.Fatalf("tick %d: %d segments sized wrongly", ticks, n)
			}
		}
		w.runTicks(t, tick)
	})
}

// TestAssembleFreshSegments checks that each segment is a slice of its
// own, which later calls leave alone.
func TestAssembleFreshSegments(t *testing.T) {
	x := newW1Tick(t, 2, 8)
	var (
		enc codec.Encoder
		b   codec.Batch
		a   codec.Assembler
	)
	enc.DeltaBatch(&b, x.cs, codec.PartAll)
	for i := range x.cs.Changes {
		a.Add(&b, b.Piece(i))
	}
	first := a.Segments(nil, 10, 0, 0)
	if len(first) != 10 {
		t.Fatalf("%d segments of 100 entities at most 10 each, want 10", len(first))
	}
	keep := make([][]byte, len(first))
	for i, seg := range first {
		keep[i] = slices.Clone(seg)
	}
	for _, v := range x.views {
		for _, i := range v {
			a.Add(&b, b.Piece(i))
		}
		a.Segments(nil, 0, 0, 0)
	}
	enc.DeltaBatch(&b, x.cs, codec.PartAll)
	for i := range x.cs.Changes {
		a.Add(&b, b.Piece(i))
	}
	a.Segments(nil, 0, 0, 0)
	for i := range first {
		if !bytes.Equal(first[i], keep[i]) {
			t.Fatalf("segment %d changed after later calls", i)
		}
	}
	if got := a.Segments(nil, 0, 0, 0); len(got) != 0 {
		t.Fatalf("nothing added: %d segments", len(got))
	}
}

// A w1Tick is one tick of a W1-like world: 1000 arena units, 100 of them
// moving (10 also losing hp), and clients that each see some of the
// changed ones.
type w1Tick struct {
	cs      *state.Changeset
	views   [][]int                    // per client: indices in cs.Changes
	include []func(*state.Entity) bool // per client: its view as an include filter
}

func newW1Tick(tb testing.TB, clients, perClient int) *w1Tick {
	tb.Helper()
	r := rand.New(rand.NewPCG(1, 2))
	tr := state.NewTracker(arena.Schema())
	units := make([]arena.Unit, 1000)
	for i := range units {
		u, err := arena.SpawnUnit(tr)
		if err != nil {
			tb.Fatal(err)
		}
		u.SetX(float32(r.Float64() * 1000))
		u.SetY(float32(r.Float64() * 1000))
		u.SetAngle(float32(r.Float64() * 6.28))
		u.SetHp(100)
		u.SetName(fmt.Sprintf("unit-%d", i))
		units[i] = u
	}
	tr.Commit()
	moving := r.Perm(len(units))[:100]
	for j, i := range moving {
		u := units[i]
		u.SetX(u.X() + float32(r.Float64()*10-5))
		u.SetY(u.Y() + float32(r.Float64()*10-5))
		u.SetAngle(u.Angle() + float32(r.Float64()*0.4-0.2))
		if j%10 == 0 {
			u.SetHp(u.Hp() - int16(r.IntN(20)))
		}
	}
	x := &w1Tick{cs: tr.Commit()}
	for range clients {
		view := r.Perm(len(x.cs.Changes))[:perClient]
		slices.Sort(view)
		in := make([]bool, len(units)) // by slot
		for _, i := range view {
			in[x.cs.Changes[i].Entity.ID().Slot()] = true
		}
		x.views = append(x.views, view)
		x.include = append(x.include, func(e *state.Entity) bool { return in[e.ID().Slot()] })
	}
	return x
}

// TestAssembleAllocs checks that building a tick's batch and assembling
// every client's segment allocates the segments and nothing else.
func TestAssembleAllocs(t *testing.T) {
	x := newW1Tick(t, 100, 8)
	var (
		enc codec.Encoder
		b   codec.Batch
		a   codec.Assembler
	)
	segs := make([][]byte, 0, 4)
	run := func() {
		enc.DeltaBatch(&b, x.cs, codec.PartAll)
		for _, v := range x.views {
			for _, i := range v {
				a.Add(&b, b.Piece(i))
			}
			segs = a.Segments(segs[:0], 16384, 1<<18, 1<<16)
		}
	}
	run()
	if allocs := testing.AllocsPerRun(50, run); allocs != float64(len(x.views)) {
		t.Fatalf("%v allocations per tick, want %d: one segment per client", allocs, len(x.views))
	}
}

// BenchmarkAssemble builds a W1-like tick's PartAll batch once and
// assembles the segment of each of 100 clients that see 8 of the 100
// changed entities.
func BenchmarkAssemble(b *testing.B) {
	x := newW1Tick(b, 100, 8)
	var (
		enc   codec.Encoder
		batch codec.Batch
		a     codec.Assembler
	)
	segs := make([][]byte, 0, 4)
	size := 0
	b.ReportAllocs()
	for b.Loop() {
		enc.DeltaBatch(&batch, x.cs, codec.PartAll)
		size = 0
		for _, v := range x.views {
			for _, i := range v {
				a.Add(&batch, batch.Piece(i))
			}
			segs = a.Segments(segs[:0], 16384, 1<<18, 1<<16)
			size += len(segs[0])
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(x.views)), "ns/client")
	b.ReportMetric(float64(size)/float64(len(x.views)), "bytes/client")
}

// BenchmarkAssembleRanked is BenchmarkAssemble with each client's
// updates ranked (docs/protocol.md §5.4) among the 76 entities it holds,
// as a W1 AOI client does: what ranking costs against ns/client of
// BenchmarkAssemble.
func BenchmarkAssembleRanked(b *testing.B) {
	x := newW1Tick(b, 100, 8)
	var (
		enc   codec.Encoder
		batch codec.Batch
		a     codec.Assembler
	)
	helds := make([]codec.Held, len(x.views))
	for c, v := range x.views {
		var slots []uint32
		for _, i := range v {
			slots = append(slots, x.cs.Changes[i].Entity.ID().Slot())
		}
		for s := uint32(c); len(slots) < 76; s += 13 {
			if !slices.Contains(slots, s%1000+1) {
				slots = append(slots, s%1000+1)
			}
		}
		helds[c].Reset(slots, 1000)
	}
	segs := make([][]byte, 0, 4)
	size := 0
	b.ReportAllocs()
	for b.Loop() {
		enc.DeltaBatch(&batch, x.cs, codec.PartAll)
		size = 0
		for c, v := range x.views {
			a.Held = &helds[c]
			for _, i := range v {
				a.Add(&batch, batch.Piece(i))
			}
			segs = a.Segments(segs[:0], 16384, 1<<18, 1<<16)
			size += len(segs[0])
			helds[c].Commit()
		}
	}
	if segs[0][0]&7 != 6 {
		b.Fatalf("section tag %d, want a ranked update", segs[0][0]&7)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(x.views)), "ns/client")
	b.ReportMetric(float64(size)/float64(len(x.views)), "bytes/client")
}

// BenchmarkAssembleDeltaInclude is BenchmarkAssemble's tick encoded for
// each client on its own, with Delta and an include filter: the work the
// batch saves.
func BenchmarkAssembleDeltaInclude(b *testing.B) {
	x := newW1Tick(b, 100, 8)
	var enc codec.Encoder
	size := 0
	b.ReportAllocs()
	for b.Loop() {
		size = 0
		for _, inc := range x.include {
			seg := enc.Delta(nil, x.cs, codec.PartAll, inc)
			size += len(seg)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(x.include)), "ns/client")
	b.ReportMetric(float64(size)/float64(len(x.include)), "bytes/client")
}

// TestAssembleRankedFallback checks that an Assembler with a Held writes
// update sections ranked (tag 6) when Held has every updated entity, and
// by slot, exactly as without a Held, when it lacks one.
func TestAssembleRankedFallback(t *testing.T) {
	x := newW1Tick(t, 1, 20)
	var enc codec.Encoder
	var b codec.Batch
	enc.DeltaBatch(&b, x.cs, codec.PartAll)
	var a codec.Assembler
	assemble := func(h *codec.Held) []byte {
		a.Held = h
		for _, i := range x.views[0] {
			a.Add(&b, b.Piece(i))
		}
		segs := a.Segments(nil, 0, 0, 0)
		if len(segs) != 1 {
			t.Fatalf("%d segments", len(segs))
		}
		return segs[0]
	}
	bySlot := assemble(nil)
	var slots []uint32
	for _, i := range x.views[0] {
		slots = append(slots, x.cs.Changes[i].Entity.ID().Slot())
	}
	var h codec.Held
	h.Reset(slots, 0)
	ranked := assemble(&h)
	if ranked[0]&7 != 6 || bySlot[0]&7 != 2 {
		t.Fatalf("section tags %d and %d, want 6 ranked and 2 by slot", ranked[0]&7, bySlot[0]&7)
	}
	if len(ranked) >= len(bySlot) {
		t.Errorf("ranked segment of %d bytes, by slot %d", len(ranked), len(bySlot))
	}
	h.Reset(slots[1:], 0) // the first updated entity is not held
	if got := assemble(&h); !bytes.Equal(got, bySlot) {
		t.Fatalf("with an entity not held:\n%x\nwant the segment by slot\n%x", got, bySlot)
	}
	h.Commit()
	if h.Len() != len(slots)-1 {
		t.Fatalf("Held has %d entities after a tick of updates, want %d", h.Len(), len(slots)-1)
	}
}

// TestPartsOfEveryBand encodes a class with the most bands, a field of
// each partition in each: every partition narrowed to every band is a
// valid Part (NumParts bounds them all).
func TestPartsOfEveryBand(t *testing.T) {
	var fields []*schema.Field
	id := uint32(1)
	for b := range schema.MaxBands + 1 {
		for _, vis := range []schema.Visibility{schema.VisAll, schema.VisOthers, schema.VisOwner} {
			f := &schema.Field{ID: id, Name: fmt.Sprint("f", id), Type: schema.Type{Kind: schema.Int32}, Vis: vis}
			if b > 0 {
				f.LOD = float64(100 - 10*b)
			}
			fields = append(fields, f)
			id++
		}
	}
	c := &schema.Struct{Name: "Banded", Class: true, ID: 1, Fields: fields}
	s, err := schema.New(c)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(s.Classes[0].Bands()); n != schema.MaxBands {
		t.Fatalf("%d bands, want %d", n, schema.MaxBands)
	}
	tr := state.NewTracker(s)
	e, err := tr.Spawn(s.Classes[0])
	if err != nil {
		t.Fatal(err)
	}
	for l := range s.Classes[0].Leaves {
		e.SetNum(l, uint64(l+1))
	}
	var enc codec.Encoder
	for b := range schema.MaxBands + 1 {
		for _, p := range []codec.Part{codec.PartAll, codec.PartOthers, codec.PartOwner} {
			if int(p.Band(b)) >= codec.NumParts {
				t.Fatalf("%v band %d is Part %d, over NumParts %d", p, b, p.Band(b), codec.NumParts)
			}
			if m := codec.PartLeaves(s.Classes[0], p.Band(b)); m[0] != 1<<(3*b+int(p)) {
				t.Errorf("part %d band %d: leaves %b", p, b, m[0])
			}
			if seg := enc.Full(nil, []*state.Entity{e}, p.Band(b)); len(seg) < 2 {
				t.Errorf("part %d band %d: segment % x", p, b, seg)
			}
		}
	}
}
