package codec

import (
	"math/bits"
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
// The set is a sparse bitmap over slots in blocks of 384 slots, of which
// it keeps only those that hold a slot, in order: each a 64-byte block
// with the number of slots held in the blocks before it and, within it,
// before each of its 64-slot words. A directory of 2 bytes per block of
// the server's slot range gives each block's place among those kept, so
// that a rank is a load from the directory, and a load and a population
// count in one 64-byte block whatever the client holds: in a large world,
// whose clients' sets do not stay in the CPU's caches, a cache line per
// rank and the directory's. It costs, for each client, 64 bytes per block
// the client holds a slot in (at most one per slot held), with room for
// half as many again, and 2 bytes per 384 slots of the server's range: a
// client that holds 50 entities spread over a million slots costs about
// 10 KB (a dense bitmap, 333 KB). Reset sizes the directory to the
// server's slots, and a create above that grows it; a block that empties
// is dropped at the Commit that empties it, and the room kept for blocks
// is reused. In a small world, whose range has at most 64 blocks (24,576
// slots), Reset keeps every block of it, empty or not (4 KB at most), and
// a rank reads no directory, until a create above the range.
//
// A Held is valid from [Held.Reset] on, and until [Held.Invalidate]: a
// client that receives creates or destroys the Assembler does not write
// (such as shared segments) must not be sent ranks. The zero value is
// invalid. Keeping a Held allocates nothing in steady state.
type Held struct {
	// The fields a tick reads of every client first: a rank reads valid,
	// all and blocks (and dir unless all), Commit moved.
	valid bool
	// all says h keeps every block of its directory's range, block b at
	// index b+1, empty or not: in a small world (up to allBlocks blocks)
	// a rank then reads no directory, one cache line less per client and
	// tick where the clients' records do not stay in the CPU's caches.
	all bool
	// blocks are an empty block, which stands for those not kept, and
	// then the blocks kept, by ascending number.
	blocks []heldBlock
	moved  []uint32 // slot<<1 | 1 for a create, slot<<1 for a destroy, as written
	// dir is, by block number, the block's index in blocks, or 0 if h
	// does not keep it.
	dir   []uint16
	n     int      // the slots held
	fresh []uint32 // scratch for Commit: the numbers of blocks it adds
}

// A heldBlock is 384 slots of a Held, a cache line: bit s%64 of word s/64
// says whether slot s of the block was held when the tick began.
type heldBlock struct {
	rank  uint32 // the slots held in the blocks before
	num   uint32 // the block's number: its slots are from num*heldSlots
	cum   uint64 // 9 bits per word i from bit 9i: the slots held in words[:i]
	words [heldWords]uint64
}

// allBlocks is the most blocks of a server's slot range (24,576 slots)
// for which a Held keeps them all (4 KB), empty or not: see Held.all. A
// variable for the tests, which set it to 0 to test the sparse form in
// small worlds.
var allBlocks = 64

const (
	heldWords = 6
	heldSlots = 64 * heldWords
	// heldMaxBlocks is the most blocks a Held's directory needs, for
	// every slot.
	heldMaxBlocks = (1<<state.SlotBits-1)/heldSlots + 1
)

// Reset makes h valid and the set of slots the client holds, as of the
// start of the next tick: those of a full state it was just sent. slots
// need not be sorted nor distinct, and are below 1<<[state.SlotBits];
// Reset keeps no reference to it. span is the number of slots the server
// uses (one past the highest): the directory gets room for that, or the
// highest of slots if higher, so that the entities the client is sent
// next seldom make a tick grow it.
func (h *Held) Reset(slots []uint32, span int) {
	for _, s := range slots {
		span = max(span, int(s)+1)
	}
	nb := max((span+heldSlots-1)/heldSlots, 1)
	if cap(h.dir) < nb || cap(h.dir) > 2*nb+64 {
		h.dir = make([]uint16, nb)
	} else {
		h.dir = h.dir[:nb]
		clear(h.dir)
	}
	// Mark the blocks kept (every one in a small world), then number
	// them.
	k := nb
	h.all = nb <= allBlocks
	if h.all {
		for b := range h.dir {
			h.dir[b] = 1
		}
	} else {
		k = 0
		for _, s := range slots {
			if b := s / heldSlots; h.dir[b] == 0 {
				h.dir[b] = 1
				k++
			}
		}
	}
	// Room for half as many blocks again, or 16, but no more than the
	// server's slots need, so that the entities the client is sent next
	// seldom make a tick grow it.
	room := 1 + max(k, min(max(k+k/2, 16), nb))
	if cap(h.blocks) < k+1 || cap(h.blocks) > 2*room {
		h.blocks = make([]heldBlock, k+1, room)
	} else {
		h.blocks = h.blocks[:k+1]
		clear(h.blocks)
	}
	i := 1
	for b, x := range h.dir {
		if x != 0 {
			h.dir[b] = uint16(i)
			h.blocks[i].num = uint32(b)
			i++
		}
	}
	for _, s := range slots {
		h.blocks[h.dir[s/heldSlots]].words[s%heldSlots/64] |= 1 << (s % 64)
	}
	r := uint64(0)
	for i := 1; i < len(h.blocks); i++ {
		h.blocks[i].rank = uint32(r)
		r += h.blocks[i].tally()
	}
	h.n = int(r)
	if cap(h.moved) < 16 {
		h.moved = make([]uint32, 0, 16)
	}
	if cap(h.fresh) < 4 {
		h.fresh = make([]uint32, 0, 4)
	}
	h.moved = h.moved[:0]
	h.valid = true
}

// find returns the index in h.blocks of slot's block, and whether h keeps
// it.
func (h *Held) find(slot uint32) (int, bool) {
	if b := slot / heldSlots; int(b) < len(h.dir) {
		i := int(h.dir[b])
		return i, i != 0
	}
	return 0, false
}

// block returns slot's block, for a valid h, or the empty block if h keeps
// none.
func (h *Held) block(slot uint32) *heldBlock {
	if b := slot / heldSlots; h.all {
		if int(b)+1 < len(h.blocks) { // the directory's length, not read
			return &h.blocks[b+1]
		}
	} else if int(b) < len(h.dir) {
		return &h.blocks[h.dir[b]]
	}
	return &h.blocks[0]
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

// end returns the rank of the slot after b's last: the slots held in b and
// the blocks before it.
func (b *heldBlock) end() uint64 {
	return uint64(b.rank) + b.cum>>(9*(heldWords-1))&511 + uint64(bits.OnesCount64(b.words[heldWords-1]))
}

// rankOf is Rank for a slot of block b.
func (b *heldBlock) rankOf(slot uint32) (uint32, bool) {
	i, bit := slot%heldSlots/64, uint64(1)<<(slot%64)
	w := b.words[i]
	r := uint64(b.rank) + b.cum>>(9*i&63)&511
	return uint32(r) + uint32(bits.OnesCount64(w&(bit-1))), w&bit != 0
}

// Bytes returns the memory h holds: its directory, its blocks and the
// room kept for more, and its lists of the tick's creates and destroys.
func (h *Held) Bytes() int {
	return 2*cap(h.dir) + heldBlockBytes*cap(h.blocks) + 4*(cap(h.moved)+cap(h.fresh))
}

// heldBlockBytes is the size of a heldBlock (rank and num, cum, the
// words): a cache line.
const heldBlockBytes = 4 + 4 + 8 + 8*heldWords

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
	if i, ok := h.find(slot); ok {
		r, ok := h.blocks[i].rankOf(slot)
		return int(r), ok
	}
	// The rank of the first block kept after slot's, found by a binary
	// search.
	b := slot / heldSlots
	lo, hi := 1, len(h.blocks)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if h.blocks[m].num < b {
			lo = m + 1
		} else {
			hi = m
		}
	}
	if lo == len(h.blocks) {
		return h.n, false
	}
	return int(h.blocks[lo].rank), false
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
	// Creates in blocks not kept add them, in order. Ranks are then
	// recounted over the blocks changed, from the lowest to the
	// highest, which drops those left empty, and shifted after them.
	lo, top := len(h.blocks), 0 // the blocks changed
	for _, m := range h.moved {
		if s := m >> 1; m&1 == 0 {
			if i, ok := h.find(s); ok {
				h.blocks[i].words[s%heldSlots/64] &^= 1 << (s % 64)
				lo, top = min(lo, i), max(top, i)
			}
		}
	}
	h.fresh = h.fresh[:0]
	for _, m := range h.moved {
		if s := m >> 1; m&1 != 0 {
			if i, ok := h.find(s); ok {
				h.blocks[i].words[s%heldSlots/64] |= 1 << (s % 64)
				lo, top = min(lo, i), max(top, i)
			} else {
				h.fresh = append(h.fresh, s/heldSlots)
			}
		}
	}
	if len(h.fresh) > 0 {
		low, hi := uint32(1<<32-1), uint32(0)
		if lo <= top {
			low, hi = h.blocks[lo].num, h.blocks[top].num
		}
		h.add()
		low, hi = min(low, h.fresh[0]), max(hi, h.fresh[len(h.fresh)-1])
		lo, top = int(h.dir[low]), int(h.dir[hi])
	}
	h.moved = h.moved[:0]
	if lo <= top {
		h.count(lo, top)
	}
}

// add adds the blocks of h.fresh to h.blocks, where they go in order
// (leaving h.fresh sorted, without repeats), and sets the bits of the
// creates of h.moved in them (and again in the others, which changes
// nothing).
func (h *Held) add() {
	h.all = false // blocks above the range: kept as they come
	slices.Sort(h.fresh)
	h.fresh = slices.Compact(h.fresh)
	fresh := h.fresh
	if nb := int(fresh[len(fresh)-1]) + 1; nb > len(h.dir) {
		n, m := len(h.dir), min(2*nb, heldMaxBlocks)
		h.dir = slices.Grow(h.dir, m-n)[:m]
		clear(h.dir[n:])
	}
	// Merged from the end, into room for them all.
	j := len(h.blocks) - 1
	h.blocks = slices.Grow(h.blocks, len(fresh))[:len(h.blocks)+len(fresh)]
	for w, f := len(h.blocks)-1, len(fresh)-1; f >= 0; w-- {
		if j > 0 && h.blocks[j].num > fresh[f] {
			h.blocks[w] = h.blocks[j]
			j--
		} else {
			h.blocks[w] = heldBlock{num: fresh[f]}
			f--
		}
		h.dir[h.blocks[w].num] = uint16(w)
	}
	for _, m := range h.moved {
		if s := m >> 1; m&1 != 0 {
			h.blocks[h.dir[s/heldSlots]].words[s%heldSlots/64] |= 1 << (s % 64)
		}
	}
}

// count recounts the ranks of the blocks from the i-th to the hi-th (from
// the first kept on), and drops those left empty, given that the blocks
// after the hi-th have not changed: their ranks only shift by what the
// blocks before them gained or lost, and they move down over those
// dropped.
func (h *Held) count(i, hi int) {
	blocks := h.blocks
	r := blocks[i-1].end() // 0 after the empty block
	w := i
	for j := i; j <= hi; j++ {
		b := &blocks[j]
		n := b.tally()
		if n == 0 && !h.all {
			h.dir[b.num] = 0
			continue
		}
		b.rank = uint32(r)
		r += n
		if w != j {
			blocks[w] = *b
			h.dir[b.num] = uint16(w)
		}
		w++
	}
	j := hi + 1
	if j == len(blocks) {
		h.n = int(r)
		h.blocks = blocks[:w]
		return
	}
	// Unsigned, wrapping: the shift may be negative.
	d := uint32(r) - blocks[j].rank
	h.n += int(int32(d))
	if w == j {
		if d != 0 {
			for ; j < len(blocks); j++ {
				blocks[j].rank += d
			}
		}
		return
	}
	for ; j < len(blocks); j++ {
		blocks[w] = blocks[j]
		blocks[w].rank += d
		h.dir[blocks[w].num] = uint16(w)
		w++
	}
	h.blocks = blocks[:w]
}
