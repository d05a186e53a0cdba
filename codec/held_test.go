package codec_test

import (
	"maps"
	"slices"
	"testing"

	"pgregory.net/rapid"

	"github.com/replicago/replica/codec"
)

// TestHeldRank checks a Held against a naive model, a set of slots: after
// a Reset and after each Commit of random creates and destroys (slots
// reused within a tick among them, and creates far above what Reset
// sized), and after a second Reset, every slot's rank is the number of
// slots held below it, found only if held, and Len is the set's size.
func TestHeldRank(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		// Mostly a small range, so that slots collide; sometimes far
		// above the bitmap Reset sized.
		small := rapid.Uint32Range(0, 300)
		slot := rapid.Custom(func(t *rapid.T) uint32 {
			if rapid.IntRange(0, 9).Draw(t, "far") == 0 {
				return rapid.Uint32Range(4096, 20000).Draw(t, "slot")
			}
			return small.Draw(t, "slot")
		})
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
			// Every slot up to past the highest held, and the last.
			top := uint32(64)
			if len(held) > 0 {
				top += held[len(held)-1]
			}
			for s := range top + 1 {
				want, found := slices.BinarySearch(held, s)
				if got, ok := h.Rank(s); got != want || ok != found {
					t.Fatalf("%s: Rank(%d) = %d, %v; want %d, %v", when, s, got, ok, want, found)
				}
			}
			for _, s := range []uint32{1<<24 - 1} {
				want, found := slices.BinarySearch(held, s)
				if got, ok := h.Rank(s); got != want || ok != found {
					t.Fatalf("%s: Rank(%d) = %d, %v; want %d, %v", when, s, got, ok, want, found)
				}
			}
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
