package replica

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// TestSlab checks lists kept through a slab against plain slices: their
// contents survive growing and shrinking, capacities are powers of two
// that shrink once a quarter full, and an array is never in two lists.
func TestSlab(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	var p slab[int]
	lists := make([][]int, 50)
	ref := make([][]int, len(lists))
	next := 0
	for range 20000 {
		i := r.IntN(len(lists))
		// Mostly around a list's current size, sometimes a burst.
		if r.IntN(2) == 0 || len(lists[i]) == 0 {
			for range 1 + r.IntN(3)*r.IntN(40) {
				lists[i] = append(p.grow(lists[i]), next)
				ref[i] = append(ref[i], next)
				next++
			}
		} else {
			for range 1 + r.IntN(3)*r.IntN(40) {
				if len(lists[i]) == 0 {
					break
				}
				j := r.IntN(len(lists[i]))
				last := len(lists[i]) - 1
				lists[i][j] = lists[i][last]
				lists[i] = p.shrink(lists[i][:last])
				ref[i][j] = ref[i][last]
				ref[i] = ref[i][:last]
			}
		}
		if c := cap(lists[i]); len(lists[i]) > 0 && (c < slabMin || c&(c-1) != 0 || c > slabMin && len(lists[i]) <= c/4 && c <= slabMax) {
			t.Fatalf("list of %d in capacity %d", len(lists[i]), c)
		}
	}
	arrays := map[*int]int{}
	for i := range lists {
		if !slices.Equal(lists[i], ref[i]) {
			t.Fatalf("list %d = %v, want %v", i, lists[i], ref[i])
		}
		if cap(lists[i]) > 0 {
			a := &lists[i][:1][0]
			if j, ok := arrays[a]; ok {
				t.Fatalf("lists %d and %d share an array", j, i)
			}
			arrays[a] = i
		}
	}
	for k, free := range p.free {
		for _, s := range free {
			if cap(s) != slabMin<<k || len(s) != 0 {
				t.Fatalf("class %d holds a slice of len %d cap %d", k, len(s), cap(s))
			}
			if _, ok := arrays[&s[:1][0]]; ok {
				t.Fatalf("a free array is in use")
			}
		}
	}
}

// TestSlabSteady checks that lists moving between sizes make no arrays
// (the slab's only allocations) once the slab holds what they use at their
// busiest.
func TestSlabSteady(t *testing.T) {
	var p slab[int32]
	lists := make([][]int32, 100)
	r := rand.New(rand.NewPCG(5, 6))
	step := func() {
		for i := range lists {
			// Each list swings between 0 and 60 entries.
			want := r.IntN(61)
			for len(lists[i]) < want {
				lists[i] = append(p.grow(lists[i]), 1)
			}
			for len(lists[i]) > want {
				lists[i] = p.shrink(lists[i][:len(lists[i])-1])
			}
		}
	}
	for range 200 {
		step()
	}
	made := p.made
	for range 100 {
		step()
	}
	if p.made != made {
		t.Fatalf("arrays made per class went from %v to %v in steady state", made, p.made)
	}
	if l := p.push(nil, 1); cap(l) != slabMin || len(l) != 1 {
		t.Fatalf("push(nil, 1): length %d, capacity %d, want 1 and %d", len(l), cap(l), slabMin)
	}
	if l := p.empty(make([]int32, 0, 64)); l != nil {
		t.Fatalf("empty of an empty list: %d elements of %d, want no array", len(l), cap(l))
	}
}
