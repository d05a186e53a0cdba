package wire_test

import (
	"bytes"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/replicago/replica/wire"
)

// TestUEachEqualsU checks that UEach writes exactly what the same sequence
// of U calls writes, from every starting bit offset, for values of every
// bit length and every k, including codes longer than 64 bits.
func TestUEachEqualsU(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for iter := 0; iter < 2000; iter++ {
		codes := make([]uint64, r.IntN(40))
		for i := range codes {
			codes[i] = r.Uint64() >> r.UintN(65)
		}
		ks := make([]uint8, len(codes))
		for i := range ks {
			ks[i] = uint8(r.UintN(wire.MaxK + 1))
		}
		lead, x := r.UintN(64), r.Uint64()
		var a, b wire.Writer
		a.Bits(x, lead)
		b.Bits(x, lead)
		for i, u := range codes {
			a.U(u, uint(ks[i]))
		}
		b.UEach(codes, ks)
		if a.BitLen() != b.BitLen() {
			t.Fatalf("iteration %d: UEach wrote %d bits, U %d", iter, b.BitLen(), a.BitLen())
		}
		if got, want := b.Finish(), a.Finish(); !bytes.Equal(got, want) {
			t.Fatalf("iteration %d: UEach wrote %x, U %x", iter, got, want)
		}
	}
}

// BenchmarkU and BenchmarkUEach write the same values one call at a time
// and in one call.
func BenchmarkU(b *testing.B) {
	codes, ks := benchCodes()
	var w wire.Writer
	buf := make([]byte, 0, 4096)
	for b.Loop() {
		w.Reset(buf)
		for i, u := range codes {
			w.U(u, uint(ks[i]))
		}
		buf = w.Finish()
	}
}

func BenchmarkUEach(b *testing.B) {
	codes, ks := benchCodes()
	var w wire.Writer
	buf := make([]byte, 0, 4096)
	for b.Loop() {
		w.Reset(buf)
		w.UEach(codes, ks)
		buf = w.Finish()
	}
}

// benchCodes returns 300 values of the sizes W1's float deltas have.
func benchCodes() ([]uint64, []uint8) {
	r := rand.New(rand.NewPCG(3, 4))
	codes := make([]uint64, 300)
	for i := range codes {
		codes[i] = r.Uint64() >> (36 + r.UintN(8))
	}
	ks := make([]uint8, len(codes))
	for i := range ks {
		ks[i] = []uint8{24, 24, 22}[i%3]
	}
	return codes, ks
}

// TestUEachRunsEqualsU checks that UEachRuns writes exactly what U calls
// write with the stream padded to a byte boundary before each run, and
// marks where each run starts and ends, from every starting bit offset,
// with codes longer than 56 bits among them (which the fast loop hands
// to U) or not.
func TestUEachRunsEqualsU(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for iter := 0; iter < 3000; iter++ {
		per := 1 + r.IntN(5)
		codes := make([]uint64, per*r.IntN(40)) // over 64 at times: several uRuns calls
		long := r.IntN(3) == 0
		ks := make([]uint8, len(codes))
		for i := range codes {
			if long {
				codes[i] = r.Uint64() >> r.UintN(65)
				ks[i] = uint8(r.UintN(wire.MaxK + 1))
			} else {
				codes[i] = r.Uint64() >> (40 + r.UintN(25))
				ks[i] = uint8(r.UintN(24))
			}
		}
		lead, x := r.UintN(64), r.Uint64()
		var a, b wire.Writer
		a.Bits(x, lead)
		b.Bits(x, lead)
		var want []int
		for i, u := range codes {
			if i%per == 0 {
				if m := a.BitLen() % 8; m != 0 {
					a.Bits(0, uint(8-m))
				}
				want = append(want, a.BitLen())
			}
			a.U(u, uint(ks[i]))
			if i%per == per-1 {
				want = append(want, a.BitLen())
			}
		}
		marks := b.UEachRuns(codes, ks, per, []int{-1})
		if !slices.Equal(marks[1:], want) || marks[0] != -1 {
			t.Fatalf("iteration %d: marks %v, want %v after -1", iter, marks, want)
		}
		if a.BitLen() != b.BitLen() {
			t.Fatalf("iteration %d: UEachRuns wrote %d bits, U %d", iter, b.BitLen(), a.BitLen())
		}
		if got, want := b.Finish(), a.Finish(); !bytes.Equal(got, want) {
			t.Fatalf("iteration %d: UEachRuns wrote %x, U %x", iter, got, want)
		}
	}
}
