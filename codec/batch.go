package codec

import (
	"cmp"
	"math/bits"
	"slices"

	"github.com/replicago/replica/state"
	"github.com/replicago/replica/wire"
)

// A Batch holds one tick's changes (or full states) for one partition,
// encoded once, as pieces from which an [Assembler] builds each client's
// segments. It serves servers whose clients each see a different subset
// of the entities: encoding the tick once per client would cost O(clients
// × changes), while assembling from a Batch costs each client O(the
// entities it sees).
//
// A segment is made of sections of groups; a group is a field tree, which
// gives a code parameter k for each U(k)-coded leaf, then an ID block, then
// (in creates) a generation block, then each entity's values (see
// docs/protocol.md §5). A Batch fixes each group's k's for the whole tick,
// choosing them as [Encoder.Delta] and [Encoder.Full] do, over all of the
// tick's entities of the group (same section, class and leaf set). With
// the k's fixed, an entity's value bits are the same in every segment that
// carries it, so the Batch writes them once, and the tree once per group.
// Only the ID and generation blocks and the counts depend on which
// entities a client gets, and the Assembler writes those per client. A
// client's segment costs a few bits more than one encoded for it alone,
// whose k's would fit its own entities; a segment assembled from every
// piece of a Batch is byte for byte the one Delta or Full writes.
//
// A piece is one entity's entry in the segment: a create, update, fill or
// destroy. [Batch.Piece] finds the piece of a change or entity.
//
// A Batch is built by [Encoder.DeltaBatch] or [Encoder.FullBatch] and
// owns its buffers: its pieces stay valid until it is built again, whatever
// the Encoder does meanwhile. Building reuses the buffers, so a Batch
// rebuilt every tick allocates nothing in steady state. The zero value is
// an empty Batch. A Batch may be read by several Assemblers at once, but
// not while it is being built.
type Batch struct {
	part   Part
	groups []batchGroup // in the order the encoder writes them
	pieces []piece      // in the order of the changes or entities they came from
	of     []int32      // per change or entity of the build: its piece, or −1
	bits   []byte       // every tree and every piece's values, each from a byte boundary
	w      wire.Writer
	marks  []int // build's: where each piece of a group starts and ends, in bits
	peak   int   // decaying high-water mark of pieces per build (see settle)
	maxN   int   // the most bits of a piece of this build
}

// A batchGroup is a group of a Batch: a section, a class and a leaf set,
// with the tree that names the leaf set and gives each leaf's k.
type batchGroup struct {
	class uint32
	sec   uint8
	tree  int // byte offset of the tree in bits
	treeN int // bit length of the tree
	// An update group's tree as a ranked update section writes it,
	// with U(0) field-ID gaps: its byte offset in bits and bit length.
	rtree, rtreeN int
}

// A piece is one entity of a Batch: its group, its ID, and its values,
// the bits [off*8, off*8+n) of the Batch's bits.
type piece struct {
	off    int
	n      int
	values int32 // what the values add to a decoder's Limits.MaxValues count
	group  int32
	id     state.ID
}

// Part returns the partition b was built for.
func (b *Batch) Part() Part { return b.part }

// Len returns the number of pieces in b; pieces are numbered from 0.
func (b *Batch) Len() int { return len(b.pieces) }

// Piece returns the piece of the i-th change of the changeset b was built
// from ([Encoder.DeltaBatch]), or of the i-th entity ([Encoder.FullBatch]),
// or −1 if the partition carries nothing of it. It panics if i is out of
// range.
func (b *Batch) Piece(i int) int32 { return b.of[i] }

// MaxBits returns the most bits a piece of b holds (see Bits): a bound on
// what any of its entities costs.
func (b *Batch) MaxBits() int { return b.maxN }

// Bits returns the number of bits piece i adds to a segment beyond its
// group's tree and ID block: its values. A piece of −1 has none. A
// bandwidth budget weighs entities by it.
func (b *Batch) Bits(i int32) int {
	if i < 0 {
		return 0
	}
	return b.pieces[i].n
}

// DeltaBatch builds b from the changes of cs that partition part carries:
// one piece for each change [Encoder.Delta] would encode with a nil
// include. In PartAll a created entity's piece creates it with its full
// state and a destroyed entity's piece destroys it; in the other
// partitions a created entity's piece fills in its partition fields. An
// update's piece carries the leaves of the partition that changed. A
// change with nothing in the partition has no piece.
func (enc *Encoder) DeltaBatch(b *Batch, cs *state.Changeset, part Part) {
	enc.queueDelta(cs, part, nil)
	b.settle(len(enc.items))
	b.of = fit(b.of[:0], len(cs.Changes))
	// Items are queued in the order of the changes, at most one each, and
	// every item names its change's entity.
	j := 0
	for i, c := range cs.Changes {
		b.of[i] = -1
		if j < len(enc.items) && enc.items[j].e == c.Entity {
			b.of[i] = int32(j)
			j++
		}
	}
	enc.build(b, part)
}

// FullBatch builds b from the full states of ents as partition part sees
// them: one piece for each entity, as [Encoder.Full] encodes it. In
// PartAll a piece creates its entity; in the other partitions it fills in
// the entity's partition fields, and an entity with none that differ from
// their zero value has no piece. A nil entity has no piece.
func (enc *Encoder) FullBatch(b *Batch, ents []*state.Entity, part Part) {
	enc.queueFull(ents, part)
	enc.buildEnts(b, ents, part)
}

// buildEnts builds b from the items queued for ents, at most one each, in
// their order.
func (enc *Encoder) buildEnts(b *Batch, ents []*state.Entity, part Part) {
	b.settle(len(enc.items))
	b.of = fit(b.of[:0], len(ents))
	j := 0
	for i, e := range ents {
		b.of[i] = -1
		if j < len(enc.items) && enc.items[j].e == e {
			b.of[i] = int32(j)
			j++
		}
	}
	enc.build(b, part)
}

// SetBatch builds b from set sections for ents (see [Encoder.Set]): one
// piece for each entity whose class has a leaf in partition part, with
// every such leaf, zero or not.
func (enc *Encoder) SetBatch(b *Batch, ents []*state.Entity, part Part) {
	enc.queueSet(ents, part)
	enc.buildEnts(b, ents, part)
}

// build encodes the queued items into b: each group's tree, with the k's
// chosen over all of the group's items, and each item's values as its
// piece. Piece i is item i.
func (enc *Encoder) build(b *Batch, part Part) {
	items := enc.items
	b.part, b.maxN = part, 0
	b.pieces = fit(b.pieces[:0], len(items))
	w := &b.w
	w.Reset(b.bits[:0])
	groups := enc.arrange()
	b.groups = fit(b.groups[:0], len(groups))[:0]
	for gi := range groups {
		order := enc.order[groups[gi].start : groups[gi].start+groups[gi].n]
		sec := groups[gi].sec
		g := batchGroup{class: groups[gi].class, sec: sec}
		if sec == secDestroy {
			for _, o := range order {
				b.pieces[uint32(o)] = piece{group: int32(gi), id: items[uint32(o)].id}
			}
			b.groups = append(b.groups, g)
			continue
		}
		delta := sec == secUpdate
		c, set, plans, allU := enc.prepareGroup(order, delta)
		alignByte(w)
		g.tree = w.BitLen() / 8
		writeTree(w, c, 0, set, enc.ks, delta, 2)
		g.treeN = w.BitLen() - 8*g.tree
		g.rtree, g.rtreeN = g.tree, g.treeN
		if sec == secUpdate {
			alignByte(w)
			g.rtree = w.BitLen() / 8
			writeTree(w, c, 0, set, enc.ks, delta, 0)
			g.rtreeN = w.BitLen() - 8*g.rtree
		}
		b.groups = append(b.groups, g)
		np := len(plans)
		if allU && np > 0 {
			// The common case: every entity's values are exactly codes,
			// written in one call, each entity from a byte boundary.
			marks := fit(b.marks[:0], 2*len(order))[:0] // room for every mark
			b.marks = w.UEachRuns(enc.codes[:np*len(order)], enc.codeKs[:np*len(order)], np, marks)
			for e, o := range order {
				start, n := b.marks[2*e], b.marks[2*e+1]-b.marks[2*e]
				b.maxN = max(b.maxN, n)
				b.pieces[uint32(o)] = piece{off: start / 8, n: n, group: int32(gi), id: items[uint32(o)].id}
			}
			continue
		}
		for e, o := range order {
			it := &items[uint32(o)]
			alignByte(w)
			start, values := w.BitLen(), enc.values
			if allU {
				w.UEach(enc.codes[e*np:(e+1)*np], enc.codeKs[e*np:(e+1)*np])
			} else {
				enc.writeValues(w, e, it, plans, delta)
			}
			n := w.BitLen() - start
			b.maxN = max(b.maxN, n)
			b.pieces[uint32(o)] = piece{off: start / 8, n: n,
				values: int32(enc.values - values), group: int32(gi), id: it.id}
		}
	}
	// Eight zero bytes past the last piece: the Assembler loads a
	// piece's last bits 8 bytes at a time, which is faster with 8 bytes
	// to load.
	b.bits = append(w.Finish(), 0, 0, 0, 0, 0, 0, 0, 0)
	enc.settle(len(items))
}

// alignByte pads w with zero bits to a byte boundary.
func alignByte(w *wire.Writer) {
	if r := w.BitLen() & 7; r != 0 {
		w.Bits(0, uint(8-r))
	}
}

// settle lets b's buffers shrink again after a build much larger than the
// usual, such as the full state of a mass join, as Encoder.settle does for
// the encoder's. It runs before a build of n pieces reuses them: the
// buffers go when they are far above the decaying high-water mark of
// pieces per build.
func (b *Batch) settle(n int) {
	b.peak = max(n, b.peak-b.peak/8)
	if cap(b.pieces) > 4*b.peak+256 {
		b.pieces, b.of, b.groups, b.bits, b.marks = nil, nil, nil, nil, nil
		b.w = wire.Writer{}
	}
}

// An Assembler builds one client's segments from pieces of batches: the
// pieces of the entities the client sees ([Assembler.Add]) and destroys of
// entities that left its view ([Assembler.Destroy]). [Assembler.Segments]
// writes what was added since its last call and starts over for the next
// client, so one Assembler serves every client in turn.
//
// A segment holds one partition: add pieces of one partition's batches
// between calls to Segments, and call it once per partition, PartAll
// first, as the encoder's segments are sent. (Pieces of two partitions in
// one segment would put an entity in two groups, which encoders avoid,
// docs/protocol.md §11 OQ 7.) Pieces of one partition may come from
// several batches, such as a tick's [Encoder.DeltaBatch] and, for entities
// that entered the client's view, an [Encoder.FullBatch] of the same tick;
// the batches must not be rebuilt before Segments returns. Each entity may
// be added once: an entity in two pieces of one segment is a caller bug,
// except that adding the very same piece twice, or destroying the same
// slot twice, is harmless, since Segments writes it once.
//
// The zero value is ready to use. An Assembler is not safe for concurrent
// use; Assemblers on several goroutines may share batches.
type Assembler struct {
	// Arena, if set, is where the segments are carved from, instead of
	// an allocation each.
	Arena *Arena
	// Held, if set and valid, is what the client held when the tick
	// began: Segments then writes update sections ranked, naming each
	// entity by its rank among those (docs/protocol.md §5.4), which
	// costs a client that holds few of the server's entities fewer bits,
	// and notes in Held the creates and destroys it writes. The caller
	// sets it per client and calls [Held.Commit] after the client's last
	// Segments of the tick.
	Held *Held

	ranked bool // this call's update sections are ranked

	ents     []asmEntry
	groups   []asmGroup
	batches  []asmBatch // the first nbatches are those of this assembly
	nbatches int
	lastB    int       // index in batches of the batch added last, or −1
	last     *asmBatch // that batch, or nil
	destroys int32     // the group of the destroys + 1, or 0
	byRank   []int32   // groups by rank
	rank     []uint64  // per group: its rank << 32
	plan     segPlan
	w        wire.Writer
	wbuf     []byte  // w's buffer, for the next segment
	runs     []int32 // write's: where each group's entries end
	gaps     kStats
	gapv     []uint64
	gapk     []uint8
	peak     int // decaying high-water mark of entries per call (see settle)
	// bound bounds the bits of a segment of everything added, whatever
	// the k's, and values counts its values: when both are within the
	// limits, Segments writes one segment without planning.
	bound, values int
	// mispredicted counts segments whose size differed from the planned
	// one, when checkPlans is set: plans are exact.
	mispredicted int
}

// checkPlans makes Assemblers check each segment's size against its plan
// (and against the bound of what was added), which costs a little, and
// plan every call; the tests set it.
var checkPlans = false

// Bounds on what an entry and a group add to a segment, whatever the k's:
// an entry's ID gap and generation of at most 32 bits, each at k = 0,
// which the k chosen for its group does no worse than in all; a group's
// section header, tree (apart), count and code parameters.
var (
	entryBound = 2 * wire.ULen(1<<32-1, 0)
	groupBound = 3 + wire.ULen(1<<32-1, 4) + wire.ULen(1<<32-1, 0) + 12 + wire.ULen(1<<32-1, 3)
)

// An asmEntry is one entity of the segments being assembled: its slot,
// and once its group is ranked, the group's rank above it, so that
// entries sort by group then slot.
type asmEntry struct {
	ord   uint64 // rank << 32 | slot
	piece int32  // in the group's batch; −1 for a destroy
	group int32  // in Assembler.groups
}

// An asmGroup is a group of the segments being assembled: a group of one
// batch, or the destroys, which share one ID block.
type asmGroup struct {
	key   uint64 // section tag << 32 | class ID
	grp   uint64 // the batch's index in this assembly << 32 | the batch's group
	b     *Batch // nil for the destroys
	group int32  // in b.groups
}

// An asmBatch is a batch of this assembly, with the Assembler group of
// each of its groups used so far.
type asmBatch struct {
	b  *Batch
	of []int32 // per group of b: its Assembler group + 1, or 0
}

// Add adds piece of b (see [Batch.Piece]) to the client's next segments.
// A piece of −1, which Batch.Piece returns for a change with nothing in
// the partition, adds nothing.
func (a *Assembler) Add(b *Batch, piece int32) {
	if piece < 0 {
		return
	}
	// The common case inline: a piece of the batch and of a group added
	// before. The others, and destroys, in calls.
	p := &b.pieces[piece]
	ab := a.last
	if ab == nil || ab.b != b {
		ab = a.batch(b)
	}
	ag := ab.of[p.group] - 1
	if ag < 0 {
		if ag = a.group(ab, p); ag < 0 {
			return
		}
	}
	a.ents = append(a.ents, asmEntry{ord: uint64(p.id.Slot()), piece: piece, group: ag})
	a.bound += entryBound + p.n
	a.values += int(p.values)
}

// group adds the group of piece p of the batch ab, a.last, to the
// assembly, and returns its Assembler group; or, for a destroy, adds it
// to the Assembler's own and returns −1.
func (a *Assembler) group(ab *asmBatch, p *piece) int32 {
	i := p.group
	g := &ab.b.groups[i]
	if g.sec == secDestroy {
		a.Destroy(p.id)
		return -1
	}
	ag := int32(len(a.groups))
	a.groups = append(a.groups, asmGroup{key: uint64(g.sec)<<32 | uint64(g.class),
		grp: uint64(a.lastB)<<32 | uint64(i), b: ab.b, group: i})
	ab.of[i] = ag + 1
	a.bound += groupBound + max(g.treeN, g.rtreeN)
	return ag
}

// batch returns the asmBatch of b, adding it to the assembly if new, and
// leaves it in a.last and its index in a.lastB. (Add calls it when b is
// not the batch added last.)
func (a *Assembler) batch(b *Batch) *asmBatch {
	for i := range a.nbatches {
		if a.batches[i].b == b {
			a.lastB, a.last = i, &a.batches[i]
			return a.last
		}
	}
	if a.nbatches == len(a.batches) {
		// Several at once, each ready for a batch's groups: an
		// assembly of more batches than ever before then seldom
		// allocates.
		for n := max(8, 2*len(a.batches)); len(a.batches) < n; {
			a.batches = append(a.batches, asmBatch{of: make([]int32, 0, 64)})
		}
	}
	ab := &a.batches[a.nbatches]
	ab.b = b
	// Entries of of are 0 but those set in this assembly, which Reset
	// clears.
	n := len(ab.of)
	if n < len(b.groups) {
		ab.of = fit(ab.of, len(b.groups))
		clear(ab.of[n:])
	}
	a.lastB, a.last = a.nbatches, ab
	a.nbatches++
	return ab
}

// Destroy adds the destruction of entity id to the client's next
// segments: for an entity that left the client's view (an entity the
// tick destroyed has a destroy piece in the tick's PartAll DeltaBatch).
// Destroys belong in PartAll segments.
func (a *Assembler) Destroy(id state.ID) {
	if a.destroys == 0 {
		a.groups = append(a.groups, asmGroup{key: secDestroy << 32})
		a.destroys = int32(len(a.groups))
		a.bound += groupBound
	}
	a.ents = append(a.ents, asmEntry{ord: uint64(id.Slot()), piece: -1, group: a.destroys - 1})
	a.bound += entryBound
}

// Reset discards what was added since the last call to Segments.
func (a *Assembler) Reset() {
	for _, g := range a.groups {
		if g.b != nil {
			a.batches[g.grp>>32].of[g.group] = 0
		}
	}
	for i := range a.nbatches {
		a.batches[i].b = nil
	}
	a.ents, a.groups, a.nbatches, a.lastB, a.last, a.destroys = a.ents[:0], a.groups[:0], 0, -1, nil, 0
	a.bound, a.values = 0, 0
	// Room for a client's usual tick from the start: its largest then
	// seldom makes them grow.
	if cap(a.ents) < 256 {
		a.ents = make([]asmEntry, 0, 256)
	}
	if cap(a.groups) < 32 {
		a.groups = make([]asmGroup, 0, 32)
	}
}

// Segments appends to segs the segments that hold everything added since
// the last call, and resets the Assembler for the next client. The
// segments are written as the encoder writes them: sections by ascending
// tag (create, update, destroy, fill) then class, entities by ascending
// slot within each group, each group's ID and generation blocks coded
// with the k that suits the client's own entities. A group of pieces of
// one batch shares its tree; pieces of the same section, class and leaf
// set from two batches form two groups, as their k's may differ.
//
// A new segment starts whenever the next entity would take the current one
// past maxEntities entities, maxBytes bytes or maxValues values (as a
// decoder counts them against [Limits]); a limit ≤ 0 is no limit. A
// single entity over a limit gets a segment of its own. Each segment is a
// fresh slice, which the caller may keep. Nothing added, nothing appended:
// there are no empty segments.
func (a *Assembler) Segments(segs [][]byte, maxEntities, maxBytes, maxValues int) [][]byte {
	if len(a.ents) == 0 {
		a.Reset()
		return segs
	}
	ents := a.rankAndSort()
	const unlimited = int(^uint(0) >> 1)
	if maxEntities <= 0 {
		maxEntities = unlimited
	}
	maxBits := unlimited
	if maxBytes > 0 && maxBytes < unlimited/8 {
		maxBits = 8 * maxBytes
	}
	if maxValues <= 0 {
		maxValues = unlimited
	}
	if !checkPlans && len(ents) <= maxEntities && a.values <= maxValues && a.bound+3 <= maxBits {
		// One segment holds it all, whatever the k's: no plan.
		segs = a.write(segs, ents, nil)
		a.settle(len(ents))
		a.Reset()
		return segs
	}
	p := &a.plan
	p.reset()
	p.ranked = a.ranked
	start := 0
	for i := range ents {
		x := &ents[i]
		g := &a.groups[x.group]
		var vbits, values int
		if x.piece >= 0 {
			pc := &g.b.pieces[x.piece]
			vbits, values = pc.n, int(pc.values)
		}
		if i > start && (p.ents+1 > maxEntities || p.values+values > maxValues || !p.fits(g, x, vbits, maxBits)) {
			segs = a.write(segs, ents[start:i], p)
			start = i
			p.reset()
		}
		p.add(g, x, vbits, values)
	}
	segs = a.write(segs, ents[start:], p)
	a.settle(len(ents))
	a.Reset()
	return segs
}

// rankAndSort sorts the entries by group, in segment order, then by slot,
// and returns them without repeats.
func (a *Assembler) rankAndSort() []asmEntry {
	a.byRank = fit(a.byRank[:0], len(a.groups))
	for i := range a.byRank {
		a.byRank[i] = int32(i)
	}
	less := func(x, y int32) bool {
		gx, gy := &a.groups[x], &a.groups[y]
		return gx.key < gy.key || gx.key == gy.key && gx.grp < gy.grp
	}
	if len(a.byRank) <= 8 {
		// A client's few groups: an insertion sort.
		for i := 1; i < len(a.byRank); i++ {
			x, j := a.byRank[i], i
			for ; j > 0 && less(x, a.byRank[j-1]); j-- {
				a.byRank[j] = a.byRank[j-1]
			}
			a.byRank[j] = x
		}
	} else {
		slices.SortFunc(a.byRank, func(x, y int32) int {
			if less(x, y) {
				return -1
			}
			if less(y, x) {
				return 1
			}
			return 0
		})
	}
	a.rank = fit(a.rank[:0], len(a.groups))
	for r, g := range a.byRank {
		a.rank[g] = uint64(r) << 32
	}
	ents := a.ents
	if !a.rankUpdates(ents) {
		for i := range ents {
			ents[i].ord |= a.rank[ents[i].group]
		}
	}
	// Repeats are the same piece added twice, or a slot destroyed twice.
	repeats := true
	if len(ents) <= 16 {
		// A client's few entities: an insertion sort, without the
		// indirect calls of SortFunc, which notes repeats.
		repeats = false
		for i := 1; i < len(ents); i++ {
			x, j := ents[i], i
			for ; j > 0 && ents[j-1].ord > x.ord; j-- {
				ents[j] = ents[j-1]
			}
			ents[j] = x
			repeats = repeats || j > 0 && ents[j-1].ord == x.ord
		}
	} else {
		slices.SortFunc(ents, func(x, y asmEntry) int { return cmp.Compare(x.ord, y.ord) })
	}
	if !repeats {
		return ents
	}
	n := 1
	for i := 1; i < len(ents); i++ {
		if ents[i].ord != ents[n-1].ord {
			ents[n] = ents[i]
			n++
		}
	}
	return ents[:n]
}

// rankUpdates decides whether this call's update sections are ranked, and
// if so puts each update entry's rank where its slot was, and each
// entry's group rank above, as rankAndSort does: ranks ascend with slots,
// so the entries sort as they would by slot, and the ID blocks, planned
// and written from what the entries hold, carry ranks. It reports whether
// it did. Sections stay by slot if some update names an entity Held does
// not have, which would be a caller bug.
func (a *Assembler) rankUpdates(ents []asmEntry) bool {
	a.ranked = false
	h := a.Held
	if h == nil || !h.valid {
		return false
	}
	// Update groups are marked in their rank's low half, which holds
	// nothing else.
	const upd = 1 << 31
	for g := range a.groups {
		if a.groups[g].key>>32 == secUpdate {
			a.rank[g] |= upd
		}
	}
	for i := range ents {
		x := &ents[i]
		r := a.rank[x.group]
		if r&upd != 0 {
			slot := uint32(x.ord)
			rank, ok := h.block(slot).rankOf(slot)
			if !ok {
				a.unrank(ents[:i])
				for g := range a.rank {
					a.rank[g] &^= upd
				}
				return false
			}
			x.ord = uint64(rank)
		}
		x.ord |= r &^ upd
	}
	a.ranked = true
	return true
}

// unrank puts back the slots of entries of ents that rankUpdates ranked,
// without group ranks.
func (a *Assembler) unrank(ents []asmEntry) {
	for i := range ents {
		x := &ents[i]
		if g := &a.groups[x.group]; g.key>>32 == secUpdate {
			x.ord = uint64(g.b.pieces[x.piece].id.Slot())
		} else {
			x.ord = uint64(uint32(x.ord))
		}
	}
}

// A segPlan follows the size of the segment being planned as entities are
// added to it in order. Sizes are exact but for the open group's ID and
// generation blocks, whose best k is only worked out when the group
// closes or the segment nears its byte limit: until then the sizes at
// k = 0, an upper bound, stand in for them.
type segPlan struct {
	fixed     int // bits of the headers and of the closed groups, with the end tag
	ents      int
	values    int
	group     int32  // the open group, in Assembler.groups
	key       uint64 // its section
	create    bool   // whether it is in a create section
	n         int    // its entities
	prev      int64  // its last slot
	vbits     int    // its values' bits
	bound     int    // its count, ID and generation blocks at k = 0, and values
	secGroups int    // groups in the open section
	ranked    bool   // update sections are ranked
	gaps      kStats // of the open group's ID gaps
	gens      kStats // of the open group's generations, in a create section
}

func (p *segPlan) reset() {
	p.fixed, p.ents, p.values, p.n = 3, 0, 0, 0 // the end tag
}

// open returns the exact size of the open group's count, ID and
// generation blocks and values, with m more entities whose ID gap and
// generation the caller has added to the statistics.
func (p *segPlan) open(m int) int {
	n := p.n + m
	if n == 0 {
		return 0
	}
	_, bits := p.gaps.bestCost(n)
	if p.create {
		_, g := p.gens.bestCost(n)
		bits += g
	}
	return wire.ULen(uint64(n), 3) + int(bits) + p.vbits
}

// exact returns the exact size of the segment planned.
func (p *segPlan) exact() int { return p.fixed + p.open(0) }

// header returns the bits that opening group g for entry x adds before
// the group's count: a section header, or the section's group count
// growing, then the tree and the code parameters of the ID and generation
// blocks.
func (p *segPlan) header(g *asmGroup) int {
	bits := 0
	sec := uint8(g.key >> 32)
	if p.ents == 0 || g.key != p.key {
		bits += 3
		if sec != secDestroy {
			bits += wire.ULen(uint64(uint32(g.key)), 4) + wire.ULen(1, 0)
		}
	} else {
		bits += wire.ULen(uint64(p.secGroups+1), 0) - wire.ULen(uint64(p.secGroups), 0)
	}
	if sec != secDestroy {
		bg := &g.b.groups[g.group]
		if sec == secUpdate && p.ranked {
			bits += bg.rtreeN
		} else {
			bits += bg.treeN
		}
	}
	bits += 6 // the ID block's k
	if sec == secCreate {
		bits += 6 // the generations' k
	}
	return bits
}

// fits reports whether entry x of group g, with vbits bits of values, fits
// in maxBits with the entities planned.
func (p *segPlan) fits(g *asmGroup, x *asmEntry, vbits, maxBits int) bool {
	slot, gen := uint64(uint32(x.ord)), uint64(0)
	if g.b != nil && g.key>>32 == secCreate {
		gen = uint64(g.b.pieces[x.piece].id.Gen())
	}
	if x.group == p.group && p.n > 0 {
		gap := slot - uint64(p.prev) - 1
		bound := p.fixed + p.bound + wire.ULen(uint64(p.n+1), 3) - wire.ULen(uint64(p.n), 3) +
			wire.ULen(gap, 0) + vbits
		if p.create {
			bound += wire.ULen(gen, 0)
		}
		if bound <= maxBits {
			return true
		}
		// Near the limit: the exact size, with x in the statistics for
		// the moment.
		p.gaps.add(gap)
		if p.create {
			p.gens.add(gen)
		}
		exact := p.fixed + p.open(1) + vbits
		p.gaps.hist[bitLen(gap)]--
		if p.create {
			p.gens.hist[bitLen(gen)]--
		}
		return exact <= maxBits
	}
	// A new group: x alone costs its bit length + 1 in each block.
	rest := p.header(g) + wire.ULen(1, 3) + bitLen(slot) + 1 + vbits
	if g.key>>32 == secCreate {
		rest += bitLen(gen) + 1
	}
	if p.fixed+p.bound+rest <= maxBits {
		return true
	}
	return p.exact()+rest <= maxBits
}

// add adds entry x of group g, with vbits bits and values values, to the
// plan.
func (p *segPlan) add(g *asmGroup, x *asmEntry, vbits, values int) {
	slot := int64(uint32(x.ord))
	if p.n == 0 || x.group != p.group {
		// Close the open group, and open x's.
		p.fixed = p.exact() + p.header(g)
		if p.ents == 0 || g.key != p.key {
			p.secGroups = 1
		} else {
			p.secGroups++
		}
		p.group, p.key, p.create = x.group, g.key, g.key>>32 == secCreate
		p.n, p.prev, p.vbits, p.bound = 0, -1, 0, 0
		p.gaps.reset()
		p.gens.reset()
	}
	gap := uint64(slot - p.prev - 1)
	p.gaps.add(gap)
	p.bound += wire.ULen(uint64(p.n+1), 3) - wire.ULen(uint64(p.n), 3) + wire.ULen(gap, 0) + vbits
	if p.n == 0 {
		p.bound += wire.ULen(0, 3)
	}
	if p.create {
		gen := uint64(g.b.pieces[x.piece].id.Gen())
		p.gens.add(gen)
		p.bound += wire.ULen(gen, 0)
	}
	p.n++
	p.prev = slot
	p.vbits += vbits
	p.ents++
	p.values += values
}

// write appends the segment of ents, planned by p, to segs, in a fresh
// slice.
func (a *Assembler) write(segs [][]byte, ents []asmEntry, p *segPlan) [][]byte {
	w := &a.w
	w.Reset(a.wbuf)
	// The runs of entries of one group, then the sections: the runs of
	// groups with the same key.
	runs := fit(a.runs[:0], len(a.groups))[:0] // a run per group at most
	for i := 0; i < len(ents); {
		j := i + 1
		for j < len(ents) && ents[j].group == ents[i].group {
			j++
		}
		runs = append(runs, int32(j))
		i = j
	}
	a.runs = runs
	start := 0 // of the section's first run
	for r := 0; r < len(runs); {
		key := a.groups[ents[start].group].key
		s, end := r+1, int(runs[r])
		for s < len(runs) && a.groups[ents[end].group].key == key {
			end = int(runs[s])
			s++
		}
		sec := uint8(key >> 32)
		if sec == secUpdate && a.ranked {
			w.Bits(secRanked, 3)
		} else {
			w.Bits(uint64(sec), 3)
		}
		if sec != secDestroy {
			w.U(uint64(uint32(key)), 4)
			w.U(uint64(s-r), 0)
		}
		for ; r < s; r++ {
			a.writeGroup(w, ents[start:runs[r]], &a.groups[ents[start].group])
			start = int(runs[r])
		}
	}
	w.Bits(secEnd, 3)
	if checkPlans && (w.BitLen() != p.exact() || w.BitLen() > a.bound+3) {
		a.mispredicted++
	}
	out := w.Finish()
	a.wbuf = out
	if a.Arena != nil {
		return append(segs, a.Arena.Copy(out))
	}
	return append(segs, append(make([]byte, 0, len(out)), out...))
}

// shortRun is the most entries of a group whose IDs writeGroup writes
// with a U call each rather than with UEach.
const shortRun = 8

// writeGroup writes the entries of group g as Encoder.writeGroup (or, for
// the destroys, Encoder.writeIDs) does.
func (a *Assembler) writeGroup(w *wire.Writer, ents []asmEntry, g *asmGroup) {
	b := g.b
	if b != nil {
		bg := &b.groups[g.group]
		if g.key>>32 == secUpdate && a.ranked {
			w.Append(b.bits[bg.rtree:], bg.rtreeN)
		} else {
			w.Append(b.bits[bg.tree:], bg.treeN)
		}
	}
	// The ID block, as Encoder.writeIDs writes it.
	var k uint
	prev := int64(-1)
	if len(ents) <= shortRun {
		k = shortK(ents)
	} else {
		a.gaps.reset()
		for i := range ents {
			slot := int64(uint32(ents[i].ord))
			a.gaps.add(uint64(slot - prev - 1))
			prev = slot
		}
		k = a.gaps.best(len(ents))
	}
	w.U(uint64(len(ents)), 3)
	w.Bits(uint64(k), 6)
	if len(ents) <= shortRun {
		// A client's few entities of a group: a U call each costs less
		// than filling UEach's arrays.
		prev = -1
		for i := range ents {
			slot := int64(uint32(ents[i].ord))
			w.U(uint64(slot-prev-1), k)
			prev = slot
		}
	} else {
		a.gapv = fit(a.gapv[:0], len(ents))
		prev = -1
		for i := range ents {
			slot := int64(uint32(ents[i].ord))
			a.gapv[i] = uint64(slot - prev - 1)
			prev = slot
		}
		a.gapk = fill(a.gapk, len(ents), uint8(k))
		w.UEach(a.gapv, a.gapk)
	}
	if h := a.Held; h != nil && (b == nil || g.key>>32 == secCreate) {
		for i := range ents {
			h.note(uint32(ents[i].ord), b != nil)
		}
	}
	if b == nil {
		return
	}
	if g.key>>32 == secCreate {
		// The generations, as Encoder.writeGens writes them.
		a.gaps.reset()
		for i := range ents {
			a.gaps.add(uint64(b.pieces[ents[i].piece].id.Gen()))
		}
		k := a.gaps.best(len(ents))
		w.Bits(uint64(k), 6)
		for i := range ents {
			w.U(uint64(b.pieces[ents[i].piece].id.Gen()), k)
		}
	}
	for i := range ents {
		p := &b.pieces[ents[i].piece]
		w.Append(b.bits[p.off:], p.n)
	}
}

// shortK returns the k kStats.best chooses for the ID gaps of a short run
// of entries, with less work: the gaps of 32-bit slots or ranks have at
// most 32 bits, so a histogram of bytes with a mask of the bit lengths
// present stands in for kStats' 65 counters, which best scans.
func shortK(ents []asmEntry) uint {
	var hist [64]uint8
	var mask, sum uint64
	prev := int64(-1)
	for i := range ents {
		slot := int64(uint32(ents[i].ord))
		b := uint(bits.Len64(uint64(slot-prev-1))) & 63 // ≤ 32
		hist[b]++
		mask |= 1 << b
		sum += uint64(b)
		prev = slot
	}
	// As kStats.bestCost: the total is (k+1)·N≤k + 2·S>k − k·N>k, which
	// is convex in k, over k from one below the shortest bit length.
	n := uint64(len(ents))
	lo, hi := uint(bits.TrailingZeros64(mask)), uint(bits.Len64(mask))-1
	nGT, sGT := n, sum
	best, bestCost := uint(0), ^uint64(0)
	for k := max(lo, 1) - 1; k <= hi; k++ {
		c := uint64(hist[k&63])
		nGT -= c
		sGT -= c * uint64(k)
		cost := (uint64(k)+1)*(n-nGT) + 2*sGT - uint64(k)*nGT
		if cost < bestCost {
			best, bestCost = k, cost
		} else if cost > bestCost {
			break
		}
	}
	return best
}

// settle lets the Assembler's buffers shrink again after a call much
// larger than the usual (a full state), as Encoder.settle does. n is the
// number of entries of the last call.
func (a *Assembler) settle(n int) {
	a.peak = max(n, a.peak-a.peak/8)
	if cap(a.ents) <= 4*a.peak+256 {
		return
	}
	a.ents, a.byRank, a.rank, a.gapv, a.gapk, a.runs = nil, nil, nil, nil, nil, nil
	a.w, a.wbuf = wire.Writer{}, nil
}

// bitLen returns the bit length of u.
func bitLen(u uint64) int { return bits.Len64(u) }

// fit returns s resized to length n, its elements kept, growing it when it
// must to twice that, and to 64 elements at least: buffers sized by the
// largest tick so far then seldom grow again. (settle lets them shrink
// after a burst.)
func fit[T any](s []T, n int) []T {
	if cap(s) < n {
		t := make([]T, len(s), max(2*n, 64))
		copy(t, s)
		s = t
	}
	return s[:n]
}
