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
// The set is a bitmap over slots with, per 64-slot word, the number of
// slots held below it, so that a rank is a load and a population count
// whatever the client holds. It costs 1.5 bits per slot of its range for
// each client; Reset sizes it to twice the server's slots (4096 slots at
// least), and a create above that grows it.
//
// A Held is valid from [Held.Reset] on, and until [Held.Invalidate]: a
// client that receives creates or destroys the Assembler does not write
// (such as shared segments) must not be sent ranks. The zero value is
// invalid. Keeping a Held allocates nothing in steady state.
type Held struct {
	words []uint64 // bit s%64 of word s/64: slot s was held when the tick began
	used  int      // the words that may have bits set: those after are 0
	ranks []uint32 // ranks[i]: the slots held in words[:i], for i < used
	n     int      // the slots held
	moved []uint32 // slot<<1 | 1 for a create, slot<<1 for a destroy, as written
	valid bool
}

// minHeldWords is the least size of a Held's bitmap, in words: 4096
// slots, room for a small world's every entity.
const minHeldWords = 4096 / 64

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
	h.fit(max(2*((span+63)/64), minHeldWords))
	clear(h.words[:h.used])
	h.used = 0
	for _, s := range slots {
		h.words[s/64] |= 1 << (s % 64)
		h.used = max(h.used, int(s/64)+1)
	}
	h.count(0, h.used)
	if cap(h.moved) < 16 {
		h.moved = make([]uint32, 0, 16)
	}
	h.moved = h.moved[:0]
	h.valid = true
}

// fit makes the bitmap at least n words long, the words added clear and
// their ranks to be counted.
func (h *Held) fit(n int) {
	if n <= len(h.words) {
		return
	}
	words, ranks := make([]uint64, n), make([]uint32, n)
	copy(words, h.words)
	copy(ranks, h.ranks)
	h.words, h.ranks = words, ranks
}

// count recounts the ranks of the words in use from the i-th on, given
// that the words after the hi-th have not changed: their ranks only
// shift by what the words before them gained or lost.
func (h *Held) count(i, hi int) {
	r := uint32(0)
	if i > 0 {
		r = h.ranks[i-1] + uint32(bits.OnesCount64(h.words[i-1]))
	}
	ranks := h.ranks[:h.used]
	j := i
	for ; j <= hi && j < len(ranks); j++ {
		ranks[j] = r
		r += uint32(bits.OnesCount64(h.words[j]))
	}
	if j == len(ranks) {
		h.n = int(r)
		return
	}
	// Unsigned, wrapping: the shift may be negative.
	if d := r - ranks[j]; d != 0 {
		for ; j < len(ranks); j++ {
			ranks[j] += d
		}
		h.n += int(int32(d))
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
	if int(slot/64) >= h.used {
		return h.n, false
	}
	r, ok := h.rank(slot)
	return int(r), ok
}

// rank is Rank for a valid h and a slot in a word in use.
func (h *Held) rank(slot uint32) (uint32, bool) {
	w, bit := h.words[slot/64], uint64(1)<<(slot%64)
	return h.ranks[slot/64] + uint32(bits.OnesCount64(w&(bit-1))), w&bit != 0
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
	// Ranks are recounted over the words changed, from the lowest to the
	// highest, which includes any that come in use (they have none yet),
	// and shifted after them.
	low, hi := h.used, -1
	for _, m := range h.moved {
		if s := m >> 1; m&1 == 0 && int(s/64) < h.used {
			h.words[s/64] &^= 1 << (s % 64)
			low, hi = min(low, int(s/64)), max(hi, int(s/64))
		}
	}
	for _, m := range h.moved {
		if s := m >> 1; m&1 != 0 {
			h.fit(2 * (int(s)/64 + 1))
			h.words[s/64] |= 1 << (s % 64)
			low, hi = min(low, int(s/64)), max(hi, int(s/64))
			h.used = max(h.used, int(s/64)+1)
		}
	}
	h.count(low, hi)
	h.moved = h.moved[:0]
}
