package session

import (
	"bytes"
	"math/rand/v2"
	"testing"
)

// TestAppendTickFastPath checks that the TICKs AppendTick packs in one
// word encode exactly as the general encoder writes them: tick numbers and
// segment counts at every bit length the fast path takes, and just beyond.
func TestAppendTickFastPath(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	var ticks, segs []uint64
	for b := range 18 {
		ticks = append(ticks, 1<<b-1, 1<<b, 1<<b+r.Uint64N(1<<b+1))
	}
	for b := range 10 {
		segs = append(segs, 1<<b-1, 1<<b, 1<<b+r.Uint64N(1<<b+1))
	}
	for _, tk := range ticks {
		for _, sg := range segs {
			m := &Tick{Tick: tk, Segments: int(sg)}
			got, want := AppendTick([]byte{0xAA}, m), appendTick([]byte{0xAA}, m)
			if !bytes.Equal(got, want) {
				t.Fatalf("tick %d, %d segments: %x, want %x", tk, sg, got, want)
			}
			if sg > MaxSegments {
				continue // beyond what a TICK may announce: not parsed
			}
			back, err := Parse(got[1:])
			if err != nil {
				t.Fatalf("tick %d, %d segments: %v", tk, sg, err)
			}
			if tm, ok := back.(*Tick); !ok || tm.Tick != tk || tm.Segments != int(sg) {
				t.Fatalf("tick %d, %d segments: parsed %+v", tk, sg, back)
			}
		}
	}
}
