package codec_test

import (
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"testing"

	"pgregory.net/rapid"

	"github.com/replicago/replica/codec"
)

// TestHeldRank checks a Held against a naive model, a set of slots: after
// a Reset and after each Commit of random creates and destroys (slots
// reused within a tick among them, creates far above what Reset sized and
// in blocks below those held, blocks emptied and refilled, slots up to
// the highest, 1<<state.SlotBits - 1), and after a second Reset, every
// slot's rank is the number of slots held below it, found only if held,
// and Len is the set's size.
func TestHeldRank(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		// Mostly a small range, so that slots collide; or a few slots
		// in each of a few blocks, so that blocks empty and refill;
		// sometimes far above what Reset sized, up to the highest slot,
		// or at the edges of blocks and of the directory's entries.
		small := rapid.Uint32Range(0, 300)
		few := rapid.Custom(func(t *rapid.T) uint32 {
			b := rapid.Uint32Range(0, 40).Draw(t, "block")
			return b*384 + rapid.SampledFrom([]uint32{0, 1, 63, 64, 200, 383}).Draw(t, "offset")
		})
		edge := rapid.SampledFrom([]uint32{383, 384, 12287, 12288, 12289, 24575, 24576, 1<<24 - 385, 1<<24 - 384, 1<<24 - 2, 1<<24 - 1})
		slot := rapid.Custom(func(t *rapid.T) uint32 {
			switch rapid.IntRange(0, 9).Draw(t, "kind") {
			case 0, 1, 2:
				return small.Draw(t, "slot")
			case 3, 4, 5:
				return few.Draw(t, "slot")
			case 6:
				return rapid.Uint32Range(4096, 20000).Draw(t, "slot")
			case 7:
				return rapid.Uint32Range(0, 1<<24-1).Draw(t, "slot")
			default:
				return edge.Draw(t, "slot")
			}
		})
		// A small range keeps every block unless the sparse form is
		// drawn.
		if rapid.Bool().Draw(t, "sparse") {
			defer codec.SetHeldAllBlocks(codec.SetHeldAllBlocks(0))
		}
		var h codec.Held
		model := map[uint32]bool{}
		for _, s := range rapid.SliceOf(slot).Draw(t, "reset") {
			model[s] = true
		}
		h.Reset(slices.Collect(maps.Keys(model)), rapid.IntRange(0, 10000).Draw(t, "span"))
		check := func(when string) {
			held := slices.Sorted(maps.Keys(model))
			if h.Len() != len(held) {
				t.Fatalf("%s: Len %d, want %d", when, h.Len(), len(held))
			}
			// Every slot up to past the highest held or 20,000, and
			// about each slot held and its block's edges.
			top := uint32(64)
			if len(held) > 0 {
				top += held[len(held)-1]
			}
			probe := func(s uint32) {
				want, found := slices.BinarySearch(held, s)
				if got, ok := h.Rank(s); got != want || ok != found {
					t.Fatalf("%s: Rank(%d) = %d, %v; want %d, %v", when, s, got, ok, want, found)
				}
				// The Assembler's path: the same for a slot held,
				// not found for another.
				if got, ok := codec.HeldRankOf(&h, s); ok != found || found && got != want {
					t.Fatalf("%s: the Assembler's rank of %d = %d, %v; want %d, %v", when, s, got, ok, want, found)
				}
			}
			for s := range min(top, 20000) + 1 {
				probe(s)
			}
			for _, s := range held {
				b := s / 384 * 384
				for _, p := range []uint32{s - 1, s, s + 1, b - 1, b, b + 383, b + 384} {
					if p < 1<<24 {
						probe(p)
					}
				}
			}
			probe(1<<24 - 1)
		}
		check("reset")
		for tick := range rapid.IntRange(0, 6).Draw(t, "ticks") {
			// A tick's creates and destroys as written; of a slot both
			// destroyed and created, the create decides.
			created, destroyed := map[uint32]bool{}, map[uint32]bool{}
			for _, s := range rapid.SliceOf(slot).Draw(t, "moves") {
				c := rapid.Bool().Draw(t, "create")
				codec.NoteHeld(&h, s, c)
				if c {
					created[s] = true
				} else {
					destroyed[s] = true
				}
			}
			if h.Len() != len(model) {
				t.Fatalf("tick %d: Len %d before Commit, want %d", tick, h.Len(), len(model))
			}
			h.Commit()
			for s := range destroyed {
				delete(model, s)
			}
			for s := range created {
				model[s] = true
			}
			check("commit")
		}
		// A Reset forgets what was held.
		clear(model)
		for _, s := range rapid.SliceOf(slot).Draw(t, "reset again") {
			model[s] = true
		}
		h.Reset(slices.Collect(maps.Keys(model)), 0)
		check("reset again")
		h.Invalidate()
		if h.Valid() || h.Len() != 0 {
			t.Fatalf("invalidated: valid %v, Len %d", h.Valid(), h.Len())
		}
		if _, ok := h.Rank(0); ok {
			t.Fatal("invalidated: Rank found a slot")
		}
	})
}

// TestHeldManyBlocks checks a Held against a naive model over ticks of
// many creates and destroys spread over every slot, which add blocks
// below, between and above those kept and empty others, and then a tick
// that destroys every slot held, and one that creates them all again.
func TestHeldManyBlocks(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	const top = 1 << 24 // 1<<state.SlotBits
	model := map[uint32]bool{}
	for range 3000 {
		model[rng.Uint32N(top)] = true
	}
	var h codec.Held
	h.Reset(slices.Collect(maps.Keys(model)), 100000)
	check := func(when string) {
		t.Helper()
		held := slices.Sorted(maps.Keys(model))
		if h.Len() != len(held) {
			t.Fatalf("%s: Len %d, want %d", when, h.Len(), len(held))
		}
		for i, s := range held {
			if got, ok := h.Rank(s); got != i || !ok {
				t.Fatalf("%s: Rank(%d) = %d, %v; want %d, true", when, s, got, ok, i)
			}
		}
		for range 20000 {
			s := rng.Uint32N(top)
			want, found := slices.BinarySearch(held, s)
			if got, ok := h.Rank(s); got != want || ok != found {
				t.Fatalf("%s: Rank(%d) = %d, %v; want %d, %v", when, s, got, ok, want, found)
			}
		}
	}
	check("reset")
	for tick := range 30 {
		held := slices.Collect(maps.Keys(model))
		for range rng.IntN(400) {
			s := held[rng.IntN(len(held))]
			codec.NoteHeld(&h, s, false)
			delete(model, s)
		}
		for range rng.IntN(400) {
			// In a few blocks, or anywhere.
			s := rng.Uint32N(top)
			if rng.IntN(2) == 0 {
				s = rng.Uint32N(8)*384*100 + rng.Uint32N(384)
			}
			codec.NoteHeld(&h, s, true)
			model[s] = true
		}
		h.Commit()
		check(fmt.Sprintf("tick %d", tick))
	}
	all := slices.Sorted(maps.Keys(model))
	for _, s := range all {
		codec.NoteHeld(&h, s, false)
	}
	h.Commit()
	clear(model)
	check("every slot destroyed")
	for _, s := range all {
		codec.NoteHeld(&h, s, true)
		model[s] = true
	}
	h.Commit()
	check("every slot created again")
}

// heldBytes returns the heap bytes per Held of n Helds, each reset with
// held slots spread evenly over span.
func heldBytes(n, held, span int) float64 {
	hs := make([]codec.Held, n)
	slots := make([]uint32, held)
	for i := range slots {
		slots[i] = uint32(i * (span / held))
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for i := range hs {
		hs[i].Reset(slots, span)
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	runtime.KeepAlive(hs)
	return float64(after.HeapAlloc-before.HeapAlloc) / float64(n)
}

// TestHeldMemory checks that a Held costs memory by the blocks a client
// holds, not by the server's slot range: 50 slots of a million, each in
// its own block, take 50 blocks of 64 bytes, room for half as many again
// and a directory of 2 bytes per 384 slots (about 10 KB in all), where a
// bitmap of the range would take 333 KB.
// Held.Bytes, which the server's InterestStats counts, is within a fifth
// of the heap it takes (which rounds each array up to a size class).
func TestHeldMemory(t *testing.T) {
	if b := heldBytes(200, 50, 1_000_000); b > 12000 {
		t.Fatalf("a Held of 50 slots over 1,000,000 costs %.0f bytes, want at most 12,000", b)
	}
	for _, span := range []int{5000, 1_000_000} {
		var h codec.Held
		slots := []uint32{0, 1, uint32(span / 2), uint32(span - 1)}
		h.Reset(slots, span)
		heap := heldBytes(100, len(slots), span)
		if got := float64(h.Bytes()); math.Abs(got-heap) > heap/5 {
			t.Errorf("span %d: Bytes() = %.0f, the heap says %.0f", span, got, heap)
		}
	}
}

// BenchmarkHeldMemory reports the bytes a client's Held takes for 50 held
// slots spread over server slot ranges from W2's to a million.
func BenchmarkHeldMemory(b *testing.B) {
	for _, span := range []int{5000, 100_000, 1_000_000} {
		b.Run(fmt.Sprint(span), func(b *testing.B) {
			var per float64
			for b.Loop() {
				per = heldBytes(100, 50, span)
			}
			b.ReportMetric(per, "B/client")
		})
	}
}
