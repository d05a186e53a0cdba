package codec

import (
	"slices"

	"github.com/replicago/replica/state"
)

// A Held is a server's record of the entities one client holds, by slot,
// from the segments an [Assembler] writes for it: what it held when the
// tick began, which an Assembler whose Held is set uses to name the
// entities of update sections by rank among them (docs/protocol.md §5.4),
// and the creates and destroys written since, which [Held.Commit] applies
// at the tick's end.
//
// A Held is valid from [Held.Reset] on, and until [Held.Invalidate]: a
// client that receives creates or destroys the Assembler does not write
// (such as shared segments) must not be sent ranks. The zero value is
// invalid. Keeping a Held allocates nothing in steady state.
type Held struct {
	slots, spare []uint32 // ascending: the client's entities when the tick began
	moved        []uint32 // slot<<1 | 1 for a create, slot<<1 for a destroy, as written
	valid        bool
}

// Reset makes h valid and the set of slots the client holds, as of the
// start of the next tick: those of a full state it was just sent. slots
// need not be sorted; Reset keeps no reference to it.
func (h *Held) Reset(slots []uint32) {
	// Room to grow to twice as many entities, in both buffers, before a
	// tick must allocate.
	if n := 2*len(slots) + 16; cap(h.slots) < n {
		h.slots, h.spare = make([]uint32, 0, n), make([]uint32, 0, n)
	}
	if cap(h.moved) < 16 {
		h.moved = make([]uint32, 0, 16)
	}
	h.slots = append(h.slots[:0], slots...)
	slices.Sort(h.slots)
	h.slots = slices.Compact(h.slots)
	h.moved = h.moved[:0]
	h.valid = true
}

// Invalidate makes h invalid until the next Reset.
func (h *Held) Invalidate() {
	h.valid = false
	h.slots, h.moved = h.slots[:0], h.moved[:0]
}

// Valid reports whether h knows what the client holds.
func (h *Held) Valid() bool { return h.valid }

// Len returns the number of entities the client held when the tick began.
func (h *Held) Len() int { return len(h.slots) }

// Rank returns slot's rank among the entities the client held when the
// tick began, and false if it held no entity in slot.
func (h *Held) Rank(slot uint32) (int, bool) {
	return slices.BinarySearch(h.slots, slot)
}

// note records a create (created) or destroy of slot written to the
// client in this tick.
func (h *Held) note(slot uint32, created bool) {
	if h.valid {
		c := uint32(0)
		if created {
			c = 1
		}
		h.moved = append(h.moved, slot<<1|c)
	}
}

// Commit applies the creates and destroys written to the client since the
// tick began: call it once the tick's segments are written, so that the
// next tick's ranks are against what the client holds then.
func (h *Held) Commit() {
	if !h.valid || len(h.moved) == 0 {
		h.moved = h.moved[:0]
		return
	}
	// Sorted by slot, a destroy before a create of the same slot (a slot
	// reused in the tick, which servers avoid): the last word decides.
	slices.Sort(h.moved)
	last := h.moved[:0]
	for j, m := range h.moved {
		if j+1 == len(h.moved) || h.moved[j+1]>>1 != m>>1 {
			last = append(last, m)
		}
	}
	out := state.MergeSlots(h.spare, h.slots, len(last),
		func(i int) uint32 { return last[i] >> 1 },
		func(i int) bool { return last[i]&1 != 0 })
	h.slots, h.spare = out, h.slots[:0]
	h.moved = h.moved[:0]
}
