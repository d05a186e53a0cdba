package codec

import (
	"math/bits"
)

// A Held is a server's record of the entities one client holds, by slot,
// from the segments an [Assembler] writes for it: what it held when the
// tick began, which an Assembler whose Held is set uses to name the
// entities of update sections by rank among them (docs/protocol.md §5.4),
// and the creates and destroys written since, which [Held.Commit] applies
// at the tick's end.
//
// The set is a bitmap over slots in blocks of 384 slots, each with the
// number of slots held in the blocks before it and, within it, before
// each of its 64-slot words, so that a rank is a load and a population
// count in one 64-byte block whatever the client holds: in a large world,
// whose clients' bitmaps do not stay in the CPU's caches, one cache line
// per rank. It costs 4/3 of a bit per slot of its range for each client;
// Reset sizes it to twice the server's slots (4224 slots at least), and a
// create above that grows it.
//
// A Held is valid from [Held.Reset] on, and until [Held.Invalidate]: a
// client that receives creates or destroys the Assembler does not write
// (such as shared segments) must not be sent ranks. The zero value is
// invalid. Keeping a Held allocates nothing in steady state.
type Held struct {
	blocks []heldBlock
	used   int      // the blocks that may have bits set: those after are 0
	n      int      // the slots held
	moved  []uint32 // slot<<1 | 1 for a create, slot<<1 for a destroy, as written
	valid  bool
}

// A heldBlock is 384 slots of a Held, a cache line: bit s%64 of word s/64
// says whether slot s of the block was held when the tick began.
type heldBlock struct {
	rank  uint64 // the slots held in the blocks before, for blocks in use
	cum   uint64 // 9 bits per word i from bit 9i: the slots held in words[:i]
	words [heldWords]uint64
}

const (
	heldWords = 6
	heldSlots = 64 * heldWords
)

// minHeldBlocks is the least size of a Held's bitmap, in blocks: 4224
// slots, room for a small world's every entity.
const minHeldBlocks = (4096 + heldSlots - 1) / heldSlots

// Reset makes h valid and the set of slots the client holds, as of the
// start of the next tick: those of a full state it was just sent. slots
// need not be sorted nor distinct, and are below 1<<[state.SlotBits];
// Reset keeps no reference to it. span is the number of slots the server
// uses (one past the highest): the bitmap gets room for twice that, or
// twice the highest of slots if higher, so that the entities the client
// is sent next seldom make a tick grow it.
func (h *Held) Reset(slots []uint32, span int) {
	for _, s := range slots {
		span = max(span, int(s)+1)
	}
	h.fit(max(2*((span+heldSlots-1)/heldSlots), minHeldBlocks))
	clear(h.blocks[:h.used])
	h.used = 0
	for _, s := range slots {
		h.set(s)
		h.used = max(h.used, int(s/heldSlots)+1)
	}
	h.count(0, h.used)
	if cap(h.moved) < 16 {
		h.moved = make([]uint32, 0, 16)
	}
	h.moved = h.moved[:0]
	h.valid = true
}

// set and unset set and clear slot's bit.
func (h *Held) set(s uint32) {
	h.blocks[s/heldSlots].words[s%heldSlots/64] |= 1 << (s % 64)
}

func (h *Held) unset(s uint32) {
	h.blocks[s/heldSlots].words[s%heldSlots/64] &^= 1 << (s % 64)
}

// fit makes the bitmap at least n blocks long, the blocks added clear and
// their ranks to be counted.
func (h *Held) fit(n int) {
	if n <= len(h.blocks) {
		return
	}
	blocks := make([]heldBlock, n)
	copy(blocks, h.blocks)
	h.blocks = blocks
}

// tally sets b's cum from its words and returns the slots it holds.
func (b *heldBlock) tally() uint64 {
	n, cum := uint64(0), uint64(0)
	for i, w := range b.words {
		cum |= n << (9 * i)
		n += uint64(bits.OnesCount64(w))
	}
	b.cum = cum
	return n
}

// count recounts the ranks of the blocks in use from the i-th on, given
// that the blocks after the hi-th have not changed: their ranks only
// shift by what the blocks before them gained or lost.
func (h *Held) count(i, hi int) {
	r := uint64(0)
	if i > 0 {
		b := &h.blocks[i-1]
		r = b.rank + b.cum>>(9*(heldWords-1))&511 + uint64(bits.OnesCount64(b.words[heldWords-1]))
	}
	blocks := h.blocks[:h.used]
	j := i
	for ; j <= hi && j < len(blocks); j++ {
		blocks[j].rank = r
		r += blocks[j].tally()
	}
	if j == len(blocks) {
		h.n = int(r)
		return
	}
	// Unsigned, wrapping: the shift may be negative.
	if d := r - blocks[j].rank; d != 0 {
		for ; j < len(blocks); j++ {
			blocks[j].rank += d
		}
		h.n += int(int64(d))
	}
}

// Invalidate makes h invalid until the next Reset.
func (h *Held) Invalidate() {
	h.valid = false
	h.moved = h.moved[:0]
}

// Valid reports whether h knows what the client holds.
func (h *Held) Valid() bool { return h.valid }

// Len returns the number of entities the client held when the tick began.
func (h *Held) Len() int {
	if !h.valid {
		return 0
	}
	return h.n
}

// Rank returns slot's rank among the entities the client held when the
// tick began (the number of them in lower slots), and false if it held no
// entity in slot.
func (h *Held) Rank(slot uint32) (int, bool) {
	if !h.valid {
		return 0, false
	}
	if !h.inUse(slot) {
		return h.n, false
	}
	r, ok := h.rank(slot)
	return int(r), ok
}

// inUse reports whether slot is in a block in use.
func (h *Held) inUse(slot uint32) bool { return int(slot/heldSlots) < h.used }

// rank is Rank for a valid h and a slot in a block in use.
func (h *Held) rank(slot uint32) (uint32, bool) {
	b := &h.blocks[slot/heldSlots]
	i, bit := slot%heldSlots/64, uint64(1)<<(slot%64)
	w := b.words[i]
	r := b.rank + b.cum>>(9*i&63)&511
	return uint32(r) + uint32(bits.OnesCount64(w&(bit-1))), w&bit != 0
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
	// Destroys before creates: of a slot both destroyed and created in
	// the tick (reused, which servers avoid), the create decides.
	// Ranks are recounted over the blocks changed, from the lowest to
	// the highest, which includes any that come in use (they have none
	// yet), and shifted after them.
	low, hi := h.used, -1
	for _, m := range h.moved {
		if s := m >> 1; m&1 == 0 && h.inUse(s) {
			h.unset(s)
			low, hi = min(low, int(s/heldSlots)), max(hi, int(s/heldSlots))
		}
	}
	for _, m := range h.moved {
		if s := m >> 1; m&1 != 0 {
			b := int(s / heldSlots)
			h.fit(2 * (b + 1))
			h.set(s)
			low, hi = min(low, b), max(hi, b)
			h.used = max(h.used, b+1)
		}
	}
	h.count(low, hi)
	h.moved = h.moved[:0]
}
