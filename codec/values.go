package codec

import (
	"math/bits"

	"github.com/replicago/replica/schema"
)

// Numeric values are coded in one of two modes. In full mode a value stands
// alone; in delta mode it is coded against the value the client already
// has. Each kind either writes a fixed number of raw bits or a U(k) code
// whose k the encoder picks per group (see docs/protocol.md, "Numbers").

// rawBits returns the fixed bit width a numeric value of type t is written
// with in the given mode, or 0 if it is written as a U(k) code.
func rawBits(t *schema.Type, delta bool) uint {
	switch t.Kind {
	case schema.Bool:
		return 1
	case schema.Float32, schema.Float64:
		if delta {
			return 0
		}
		if !t.Quant.Enabled() {
			return t.Kind.Width()
		}
		if t.Quant.Bounded {
			return uint(t.Quant.Bits)
		}
	}
	return 0
}

// deltaWidth returns the modulus, in bits, of delta arithmetic on t.
func deltaWidth(t *schema.Type) uint {
	switch {
	case t.Quant.Enabled() && t.Quant.Bounded:
		return uint(t.Quant.Bits)
	case t.Quant.Enabled():
		return 64
	}
	return t.Kind.Width()
}

// signExtend interprets the low w bits of v as a two's complement number.
func signExtend(v uint64, w uint) int64 {
	s := 64 - w
	return int64(v<<s) >> s
}

// codeFull returns the unsigned code of a stored numeric value in full mode
// (for kinds that use U(k); see rawBits).
func codeFull(t *schema.Type, v uint64) uint64 {
	switch {
	case t.Kind.Signed():
		return zigzag(int64(v))
	case t.Kind == schema.Float32 || t.Kind == schema.Float64:
		return zigzag(int64(v)) // unbounded quantization code
	}
	return v
}

// decodeFull maps a full-mode code back to a stored value, reporting false
// if the value does not fit the kind.
func decodeFull(t *schema.Type, u uint64) (uint64, bool) {
	switch k := t.Kind; {
	case k.Signed():
		v := unzigzag(u)
		w := k.Width()
		return uint64(v), w == 64 || v == signExtend(uint64(v), w)
	case k == schema.Float32 || k == schema.Float64:
		return uint64(unzigzag(u)), true
	case k == schema.Bool:
		return u, u <= 1
	default:
		w := k.Width()
		return u, w == 64 || u>>w == 0
	}
}

// decodeDelta applies a delta-mode code to old.
func decodeDelta(t *schema.Type, old, u uint64) (uint64, bool) {
	switch t.Kind {
	case schema.Ref:
		return u, u>>32 == 0
	case schema.Bool:
		return u, u <= 1
	}
	w := deltaWidth(t)
	d := unzigzag(u)
	if w < 64 && d != signExtend(uint64(d), w) {
		return 0, false // not the canonical delta: |d| must fit w bits
	}
	v := old + uint64(d)
	if w < 64 {
		v &= 1<<w - 1
	}
	// Re-extend to the stored representation.
	if t.Kind.Signed() {
		v = uint64(signExtend(v, w))
	}
	return v, true
}

func zigzag(v int64) uint64   { return uint64(v<<1) ^ uint64(v>>63) }
func unzigzag(u uint64) int64 { return int64(u>>1) ^ -int64(u&1) }

// kStats accumulates the bit lengths of the codes written with one k.
// Adding a value only counts it; best finds the occupied range of bit
// lengths itself, which keeps add to an increment in the encoder's
// per-value loops.
type kStats struct {
	hist [65]uint32
}

func (s *kStats) reset() { clear(s.hist[:]) }

func (s *kStats) add(u uint64) { s.hist[bits.Len64(u)]++ }

// best returns the k that minimises the total U(k) size of the n values
// added. With c(b) values of bit length b, U(k) costs k+1 bits for b ≤ k
// and 2b−k for b > k, so the total is (k+1)·N≤k + 2·S>k − k·N>k, where N
// and S count and sum the bit lengths on each side; one pass over k
// updates them.
func (s *kStats) best(n int) uint {
	k, _ := s.bestCost(n)
	return k
}

// bestCost returns best(n) and the total U(k) size, in bits, of the n
// values added with that k.
func (s *kStats) bestCost(n int) (uint, uint64) {
	if n == 0 {
		return 0, 0
	}
	lo := uint(0)
	for s.hist[lo] == 0 {
		lo++
	}
	// Sum upwards until all n values are counted, which finds hi without
	// scanning the empty top of the histogram.
	var nGT, sGT uint64
	hi := lo
	for ; ; hi++ {
		c := uint64(s.hist[hi])
		nGT += c
		sGT += c * uint64(hi)
		if nGT == uint64(n) {
			break
		}
	}
	best, bestCost := uint(0), uint64(1<<63)
	start := uint(0)
	if lo > 0 {
		start = lo - 1
		// Bit lengths below lo are empty: nothing moves to the ≤ side yet.
	}
	for k := start; k <= hi && k <= 63; k++ {
		if k >= lo {
			c := uint64(s.hist[k])
			nGT -= c
			sGT -= c * uint64(k)
		}
		nLE := uint64(n) - nGT
		cost := uint64(k+1)*nLE + 2*sGT - uint64(k)*nGT
		if s.hist[64] > 0 && k < 64 {
			// A 64-bit value has no terminator: one bit less than 2b−k.
			cost -= uint64(s.hist[64])
		}
		if cost < bestCost {
			best, bestCost = k, cost
		} else if cost > bestCost {
			// The cost is convex in k (from k to k+1 it changes by
			// N≤k − N>k+1, which only grows), so it only rises from
			// here.
			break
		}
	}
	return best, bestCost
}
