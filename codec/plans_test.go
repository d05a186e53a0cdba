package codec

import (
	"math/rand/v2"
	"testing"

	"github.com/replicago/replica/schema"
)

// TestPlanChains keeps many more plans than a decoder holds, of trees of
// random lengths and kinds, and checks after each that every kept plan is
// on the one chain of its tree and kind, and that reusePlan finds a plan
// exactly when a search of every kept plan does.
func TestPlanChains(t *testing.T) {
	rcs := []*schema.Struct{{Name: "a"}, {Name: "b"}}
	rng := rand.New(rand.NewPCG(1, 2))
	d := &Decoder{}
	buf := make([]byte, 64)
	for step := range 2000 {
		n := 1 + rng.IntN(maxTreeBits+4) // some too long to keep
		next := rng.Uint64() & (1<<maxTreeBits - 1)
		if step%3 == 0 {
			next &= 0xff // trees sharing their last bits
		}
		rc, kind := rcs[rng.IntN(len(rcs))], uint8(rng.IntN(3))
		d.r.Reset(buf)
		d.r.Bits(uint(n))
		d.keepPlan(rc, kind, 0, next)

		on := 0
		for c := range len(d.head) {
			for i := int(d.head[c]) - 1; i >= 0; i = int(d.link[i]) - 1 {
				on++
				tr, p := d.trees[i], d.plans[i]
				want := planChains
				if bitsOf(tr.mask) >= chainBits {
					want = planChain(tr.tree, p.kind)
				}
				if c != want || int(d.chain[i]) != c+1 || p.rc == nil {
					t.Fatalf("step %d: plan %d on chain %d (noted %d), want %d", step, i, c, int(d.chain[i])-1, want)
				}
			}
		}
		kept := 0
		for i := range d.plans {
			if d.plans[i].rc != nil {
				kept++
			}
		}
		if on != kept {
			t.Fatalf("step %d: %d plans on chains, %d kept", step, on, kept)
		}

		// Look for a tree that is kept, or a random one.
		look := rng.Uint64()
		if i := rng.IntN(planCache); rng.IntN(2) == 0 && d.plans[i].rc != nil {
			look = d.trees[i].tree | look<<bitsOf(d.trees[i].mask)
			rc, kind = d.plans[i].rc, d.plans[i].kind
		}
		found := false
		for i, tr := range d.trees {
			p := d.plans[i]
			found = found || look&tr.mask == tr.tree && p.rc == rc && p.kind == kind
		}
		in := make([]byte, 64)
		for i := range 8 {
			in[i] = byte(look >> (8 * i))
		}
		d.r.Reset(in)
		if got := d.reusePlan(rc, kind); got != found {
			t.Fatalf("step %d: reusePlan found %v, a search of every plan %v", step, got, found)
		}
	}
}

func bitsOf(mask uint64) int {
	n := 0
	for ; mask != 0; mask >>= 1 {
		n++
	}
	return n
}
