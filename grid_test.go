package replica

import (
	"math"
	"math/rand/v2"
	"testing"
	"unsafe"

	"github.com/replicago/replica/state"
)

// TestGrid checks the grid against a map, over keys near the origin
// (dense), far apart (sparse, the dense box would pass maxDense) and the
// dense box growing over sparse cells.
func TestGrid(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	var g grid
	// A cell is known by the ID of its first entry: a dense cell moves
	// when the dense box grows.
	ref := map[cellKey]state.ID{}
	next := state.ID(0)
	key := func() cellKey {
		switch r.IntN(3) {
		case 0:
			return cellKey{int32(r.IntN(20) - 10), int32(r.IntN(20) - 10)}
		case 1:
			return cellKey{int32(r.IntN(400) - 200), int32(r.IntN(400) - 200)}
		}
		return cellKey{r.Int32() - 1<<30, r.Int32() - 1<<30}
	}
	for range 5000 {
		k := key()
		switch r.IntN(3) {
		case 0, 1:
			ce := g.at(k)
			if id, ok := ref[k]; ok && (len(ce.ents) == 0 || ce.ents[0].id != id) {
				t.Fatalf("at(%v) made a second cell", k)
			} else if !ok {
				if len(ce.ents) != 0 {
					t.Fatalf("at(%v) gave a cell in use", k)
				}
				next++
				ref[k] = next
			}
			ce.ents = append(ce.ents, cellEnt{id: ref[k]})
		case 2:
			ce := g.get(k)
			id, ok := ref[k]
			if ce == nil && ok || ce != nil && (!ok || ce.ents[0].id != id) {
				t.Fatalf("get(%v) = %v, want the cell of %d (%v)", k, ce, id, ok)
			}
			if ce != nil {
				ce.ents = nil
				g.drop(k, ce)
				delete(ref, k)
			}
		}
		if g.n != len(ref) {
			t.Fatalf("n = %d, want %d", g.n, len(ref))
		}
		lo := key()
		hi := cellKey{lo.x + int32(r.IntN(30)), lo.y + int32(r.IntN(30))}
		got := map[state.ID]bool{}
		g.near(lo, hi, func(ce *cell) {
			if got[ce.ents[0].id] {
				t.Fatalf("near visited a cell twice")
			}
			got[ce.ents[0].id] = true
		})
		want := 0
		for k, id := range ref {
			if k.x >= lo.x && k.x <= hi.x && k.y >= lo.y && k.y <= hi.y {
				want++
				if !got[id] {
					t.Fatalf("near(%v, %v) missed %v", lo, hi, k)
				}
			}
		}
		if len(got) != want {
			t.Fatalf("near(%v, %v) visited %d cells, want %d", lo, hi, len(got), want)
		}
	}
	if len(g.dense) > maxDense || len(g.sparse) == 0 {
		t.Fatalf("dense %d cells, sparse %d: the test did not reach both", len(g.dense), len(g.sparse))
	}
}

// TestGridEntries adds, moves and removes entities in a few cells, in and
// out of bursts that make the cells' lists grow and shrink, keeping each
// entity's index as the server does, and checks every entry.
func TestGridEntries(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 10))
	var g grid
	type rec struct {
		k  cellKey
		at int32
		x  float64
	}
	recs := map[state.ID]*rec{}
	remove := func(id state.ID) {
		rc := recs[id]
		if moved, ok := g.removeEnt(rc.k, rc.at); ok {
			recs[moved].at = rc.at
		}
		delete(recs, id)
	}
	next := state.ID(1)
	for round := range 4000 {
		burst := round%500 < 250 // a crowd gathers, then leaves
		switch n := r.IntN(3); {
		case n == 0 && (burst || len(recs) < 5):
			k := cellKey{int32(r.IntN(3)), 0}
			x := r.Float64()
			recs[next] = &rec{k: k, at: g.addEnt(k, cellEnt{id: next, x: x}), x: x}
			next++
		case n == 1 && len(recs) > 0:
			for id := range recs {
				remove(id)
				break
			}
		case len(recs) > 0:
			for id, rc := range recs { // to another cell
				x := rc.x
				remove(id)
				k := cellKey{int32(r.IntN(3)), 0}
				recs[id] = &rec{k: k, at: g.addEnt(k, cellEnt{id: id, x: x}), x: x}
				break
			}
		}
		n := 0
		g.each(func(k cellKey, ce *cell) {
			for i, e := range ce.ents {
				rc := recs[e.id]
				if rc == nil || rc.k != k || rc.at != int32(i) || rc.x != e.x {
					t.Fatalf("round %d: cell %v entry %d holds %+v, the record says %+v", round, k, i, e, rc)
				}
				n++
			}
		})
		if n != len(recs) {
			t.Fatalf("round %d: %d entries for %d entities", round, n, len(recs))
		}
	}
}

// TestCellOf checks cellOf, a floor and a clamp by hand, against
// math.Floor.
func TestCellOf(t *testing.T) {
	for _, q := range []float64{0, math.Copysign(0, -1), 0.5, -0.5, 1, -1, 1.999, -1.999, 2, -2, 1e9, -1e9, 1 << 30, -(1 << 30),
		1<<30 + 0.5, -(1 << 30) - 0.5, math.Inf(1), math.Inf(-1), 123456.75, -123456.75, math.Nextafter(3, 0), math.Nextafter(-3, 0)} {
		want := int32(max(-1<<30, min(1<<30, math.Floor(q))))
		if got := cellOf(q); got != want {
			t.Errorf("cellOf(%v) = %d, want %d", q, got, want)
		}
	}
}

// TestConnLayout checks what Conn's layout promises (see Conn): the
// fields every tick reads of every client are in its first 64 bytes, so
// that they take at most two cache lines wherever the allocator puts the
// record (it starts records of this size at no fixed place in a line:
// after a header), and the view, whose first fields evaluating a pair
// reads, follows them.
func TestConnLayout(t *testing.T) {
	var c Conn
	for name, off := range map[string]uintptr{
		"tc": unsafe.Offsetof(c.tc), "backlog": unsafe.Offsetof(c.backlog), "rpcWait": unsafe.Offsetof(c.rpcWait),
		"budget": unsafe.Offsetof(c.budget), "tokens": unsafe.Offsetof(c.tokens),
		"left": unsafe.Offsetof(c.left), "paused": unsafe.Offsetof(c.paused), "admitted": unsafe.Offsetof(c.admitted),
	} {
		if off >= 64 {
			t.Errorf("Conn.%s at offset %d: not in the first 64 bytes", name, off)
		}
	}
	if v := unsafe.Offsetof(c.view); v != 64 {
		t.Errorf("Conn.view at offset %d, want 64: just after the fields every tick reads", v)
	}
}
