package replica

import (
	"math/rand/v2"
	"slices"
	"testing"
	"unsafe"

	"github.com/replicago/replica/schema"
	"github.com/replicago/replica/state"
)

// TestHistory checks the history against a plain model: per live entity,
// when it was created and the last tick that changed each leaf, through
// slots reused by classes of other sizes, whose records move and are
// reused.
func TestHistory(t *testing.T) {
	class := func(id uint32, n int) *schema.Struct {
		c := &schema.Struct{Name: "C" + string(rune('A'+id)), Class: true, ID: id}
		for i := range n {
			c.Fields = append(c.Fields, &schema.Field{ID: uint32(i + 1), Name: "f" + string(rune('a'+i%26)) + string(rune('a'+i/26)), Type: schema.Type{Kind: schema.Int32}})
		}
		return c
	}
	sc, err := schema.New(class(1, 1), class(2, 6), class(3, 7), class(4, 70))
	if err != nil {
		t.Fatal(err)
	}
	tr := state.NewTracker(sc)
	type model struct {
		born uint64
		at   []uint64
	}
	if n := unsafe.Sizeof(histLine{}); n != 64 {
		t.Errorf("a history line takes %d bytes, not a cache line's 64", n)
	}
	if n := unsafe.Sizeof(ient{}); n%64 != 0 {
		t.Errorf("an interest record takes %d bytes, not a multiple of a cache line's 64", n)
	}
	var h history
	var lines []histLine // by slot, as in the interest records
	line := func(e *state.Entity) *histLine {
		slot := int(e.ID().Slot())
		for len(lines) <= slot {
			lines = append(lines, histLine{})
		}
		return &lines[slot]
	}
	live := map[*state.Entity]*model{}
	r := rand.New(rand.NewPCG(5, 6))
	for tick := uint64(1); tick <= 300; tick++ {
		for range r.IntN(8) {
			e, err := tr.Spawn(sc.Classes[r.IntN(len(sc.Classes))])
			if err != nil {
				t.Fatal(err)
			}
			live[e] = &model{born: tick, at: make([]uint64, e.Class().Leaves)}
		}
		for e, m := range live {
			switch k := r.IntN(10); {
			case k == 0 && m.born != tick:
				tr.Destroy(e)
				delete(live, e)
			case k < 5:
				for range 1 + r.IntN(3) {
					i := r.IntN(e.Class().Leaves)
					e.SetNum(i, e.Num(e.Class().Leaf(i).Num)+1)
					if m.born != tick {
						m.at[i] = tick
					}
				}
			}
		}
		for _, ch := range tr.Commit().Changes {
			if !ch.Destroyed {
				h.note(line(ch.Entity), ch, tick)
			}
		}
		for e, m := range live {
			since := r.Uint64N(tick + 1)
			if got, want := bornAfter(line(e), e, since), m.born > since; got != want {
				t.Fatalf("tick %d: entity %v bornAfter(%d) = %v, want %v", tick, e.ID(), since, got, want)
			}
			if m.born > since {
				continue
			}
			got := h.changedSince(line(e), e, since)
			for i, at := range m.at {
				if want := at > since; got[i>>6]&(1<<(i&63)) != 0 != want {
					t.Fatalf("tick %d: entity %v leaf %d changed since %d: %v, want %v", tick, e.ID(), i, since, !want, want)
				}
			}
		}
	}
	// The records of leaves past the lines', in use or free, lie apart
	// within their array and make up all of it: none is lost.
	type span struct{ lo, hi int }
	var spans []span
	add := func(o int32) { spans = append(spans, span{int(o), int(o) + 1<<h.more[o]}) }
	for i := range lines {
		if o := lines[i].more; o != 0 {
			add(o)
		}
	}
	for _, f := range h.free {
		for _, o := range f {
			add(o)
		}
	}
	slices.SortFunc(spans, func(a, b span) int { return a.lo - b.lo })
	used := 1
	for i, sp := range spans {
		if i > 0 && sp.lo < spans[i-1].hi || sp.lo < 1 || sp.hi > len(h.more) {
			t.Fatalf("record [%d, %d) overlaps another or lies outside the %d words", sp.lo, sp.hi, len(h.more))
		}
		used += sp.hi - sp.lo
	}
	if used != len(h.more) {
		t.Errorf("%d words of %d in no record; %d records, %d slots", len(h.more)-used, len(h.more), len(spans), len(lines))
	}
	if len(spans) == 0 {
		t.Error("no record of leaves past the lines': the test tests less than it should")
	}
}
