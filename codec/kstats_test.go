package codec

import (
	"math/bits"
	"math/rand/v2"
	"testing"
)

// TestKStatsBestIsArgmin checks kStats.best, with its shortcuts, against
// the plain definition: the smallest k in [0, 63] of least total U(k)
// size; and that kStats.bestCost reports that size.
func TestKStatsBestIsArgmin(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for iter := 0; iter < 5000; iter++ {
		vals := make([]uint64, 1+r.IntN(50))
		base := r.UintN(65)
		for i := range vals {
			vals[i] = r.Uint64() >> min(63, base+r.UintN(1+r.UintN(20))) // spread around a bit length
			if r.IntN(20) == 0 {
				vals[i] = r.Uint64() >> r.UintN(64)
			}
		}
		var s kStats
		s.reset()
		for _, v := range vals {
			s.add(v)
		}
		want, wantCost := uint(0), ^uint64(0)
		for k := uint(0); k <= 63; k++ {
			var cost uint64
			for _, v := range vals {
				b := uint(bits.Len64(v))
				switch {
				case b <= k:
					cost += uint64(k) + 1
				case b == 64:
					cost += uint64(2*b-k) - 1
				default:
					cost += uint64(2*b - k)
				}
			}
			if cost < wantCost {
				want, wantCost = k, cost
			}
		}
		if got := s.best(len(vals)); got != want {
			t.Fatalf("iteration %d: best = %d, want %d (values %x)", iter, got, want, vals)
		}
		if got, cost := s.bestCost(len(vals)); got != want || cost != wantCost {
			t.Fatalf("iteration %d: bestCost = %d, %d bits; want %d, %d bits (values %x)", iter, got, cost, want, wantCost, vals)
		}
	}
}

// TestShortKIsBest checks shortK, the Assembler's k for a short run's ID
// gaps, against kStats.best over the same gaps.
func TestShortKIsBest(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	for iter := 0; iter < 20000; iter++ {
		ents := make([]asmEntry, 1+r.IntN(shortRun))
		var s kStats
		s.reset()
		slot := int64(-1)
		width := 1 + r.UintN(32)
		for i := range ents {
			gap := r.Uint64() >> (64 - r.UintN(width+1))
			if slot+1+int64(gap) > 1<<32-1 {
				gap = 0
			}
			slot += 1 + int64(gap)
			ents[i].ord = uint64(r.UintN(8))<<32 | uint64(slot)
			s.add(gap)
		}
		if got, want := shortK(ents), s.best(len(ents)); got != want {
			t.Fatalf("iteration %d: shortK = %d, kStats.best %d (entries %v)", iter, got, want, ents)
		}
	}
}
