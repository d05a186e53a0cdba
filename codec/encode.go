package codec

import (
	"cmp"
	"math/bits"
	"slices"

	"github.com/replicago/replica/schema"
	"github.com/replicago/replica/state"
	"github.com/replicago/replica/wire"
)

// A Part is a visibility partition: the fields one kind of audience sees
// of an entity. A client receives, for each entity it sees, the PartAll
// segment, plus PartOwner if it owns the entity or PartOthers if it does
// not. Splitting by partition lets every segment be encoded once per tick
// and shared by all of its audience.
//
// A partition may be narrowed to one level-of-detail band of the class
// ([Part.Band], docs/protocol.md §5.8): its fields of that band only. The
// three partitions above hold every band; PartAll narrowed to band 0
// still creates and destroys entities, and the other bands of PartAll
// fill in the fields of entities it creates.
type Part uint8

// Partitions.
const (
	PartAll    Part = iota // fields visible to everyone; carries creates and destroys
	PartOthers             // fields visible only to clients that do not own the entity
	PartOwner              // fields visible only to the owner
)

// NumParts bounds the values of Part: the three partitions (two bits),
// each whole or narrowed to one band 0..schema.MaxBands.
const NumParts = 4 * (schema.MaxBands + 2)

// Band returns p narrowed to the fields of level-of-detail band b (0: the
// fields of no band) of p's visibility.
func (p Part) Band(b int) Part { return p.Vis() | Part(b+1)<<2 }

// Vis returns p's visibility partition, every band.
func (p Part) Vis() Part { return p & 3 }

// Banded returns the band p is narrowed to, and false if p holds every
// band.
func (p Part) Banded() (band int, ok bool) { return int(p>>2) - 1, p>>2 != 0 }

// creates reports whether p's segments create and destroy entities: PartAll
// whole or narrowed to band 0.
func (p Part) creates() bool { return p == PartAll || p == PartAll.Band(0) }

func (p Part) vis() schema.Visibility {
	switch p.Vis() {
	case PartOthers:
		return schema.VisOthers
	case PartOwner:
		return schema.VisOwner
	}
	return schema.VisAll
}

// Section tags (3 bits).
const (
	secEnd     = 0
	secCreate  = 1
	secUpdate  = 2
	secDestroy = 3
	secFill    = 4
	secSet     = 5
	// secRanked is an update section whose ID block gives ranks among the
	// entities the client held when the tick began instead of slots
	// (docs/protocol.md §5.4). Only per-client segments use it.
	secRanked = 6
)

// An Encoder encodes changesets and full states. It keeps scratch buffers
// between calls so that encoding allocates nothing in steady state. An
// Encoder is not safe for concurrent use.
type Encoder struct {
	w, ops, whole wire.Writer
	patch, elem   wire.Writer // a list element: its changed fields, and whole
	diff          []uint64    // the changed fields of a list element

	items     []item
	groups    []group
	order     []uint64 // per group: ID<<32 | item index, sorted by ID
	remap     []int32
	byHash    map[uint64]int32
	lastGroup int32    // the group findGroup found last
	bitmap    []uint64 // sortByID: a bit per ID of the span
	ranks     []int32  // sortByID: IDs before each bitmap word
	sorted    []uint64 // sortByID: the entries in order
	sets      []uint64 // leaf sets of items, ws words each
	masks     map[*schema.Struct]*[NumParts][]uint64
	lastC     *schema.Struct // one-entry cache in front of masks
	partsOf   *schema.Schema // the schema parts describes
	parts     [NumParts]bool // whether any class has a leaf in each partition
	lastM     *[NumParts][]uint64
	plans     []leafPlan
	pst       kStats // of the plan whose codes are being computed
	codes     []uint64
	codeKs    []uint8 // the k of each of codes
	gapv      []uint64
	gapk      []uint8 // the k of each of gapv, all the same
	ks        []uint8
	rks       []uint8 // ks of the record being written
	gaps      kStats

	nkeys []uint64
	skeys []string
	vals  []state.Value
	kst   kStats
	rsets [][]uint64 // per nesting depth, for element records
	depth int
	peak  int // decaying high-water mark of items per call (see settle)
	// values counts what a decoder counts against Limits.MaxValues in the
	// last segment or record: container lengths, operation and pass
	// counts, and one per record.
	values int
}

// Values returns how many values the segment or record last encoded holds,
// as a decoder counts them against Limits.MaxValues; after
// [Encoder.DeltaBatch] or [Encoder.FullBatch], how many the batch's pieces
// hold in all.
func (enc *Encoder) Values() int { return enc.values }

type item struct {
	e     *state.Entity
	ch    *state.Change
	hash  uint64
	class uint32
	id    state.ID
	set   int32 // offset in sets
	words int32
	group int32
	sec   uint8
	// hashed: hash was computed while the set was built
	hashed bool
}

// A group is a run of items written together: same section, class and
// leaf set.
type group struct {
	id       int32 // index at creation, before sorting
	sec      uint8
	class    uint32
	hash     uint64
	set      int32
	words    int32
	n, start int
	next     int32 // next group with the same hash key, or −1
}

// Delta encodes the changes of cs that partition part may see, for the
// entities include accepts (all when include is nil), and appends the
// segment to dst. In PartAll the segment creates and destroys entities; in
// the other partitions it fills in the new entities' partition fields.
func (enc *Encoder) Delta(dst []byte, cs *state.Changeset, part Part, include func(*state.Entity) bool) []byte {
	enc.queueDelta(cs, part, include)
	return enc.emit(dst)
}

// queueDelta queues the items Delta writes: one per change of cs that
// partition part carries and include accepts, in the order of cs.Changes.
func (enc *Encoder) queueDelta(cs *state.Changeset, part Part, include func(*state.Entity) bool) {
	// Room for an item, and two words of leaf set, per change: the
	// buffers then grow when a changeset is larger than any before, to
	// twice its size, not when its changes touch more fields.
	enc.items, enc.sets, enc.values = fit(enc.items[:0], len(cs.Changes))[:0], fit(enc.sets[:0], 2*len(cs.Changes))[:0], 0
	if !part.creates() && cs.Schema != nil && !enc.hasPart(cs.Schema, part) {
		return // no class has a field in this partition
	}
	for _, c := range cs.Changes {
		e := c.Entity
		if include != nil && !include(e) {
			continue
		}
		switch {
		case c.Destroyed:
			if part.creates() {
				enc.items = append(enc.items, item{sec: secDestroy, id: e.ID(), e: e})
			}
		case c.Created:
			enc.addFull(e, part)
		default:
			class := e.Class()
			m := enc.mask(class, part)
			if m[0] == 0 && len(m) == 1 {
				continue // the class has no leaf in this partition
			}
			dirty := c.DirtySet()
			off := len(enc.sets)
			var any uint64
			h := hashSeed
			for i, w := range dirty {
				x := w & m[i]
				enc.sets = append(enc.sets, x)
				any |= x
				h = hashWord(h, x)
			}
			if any == 0 {
				enc.sets = enc.sets[:off]
				continue
			}
			// Filled in place: building the item apart and copying it
			// in was a tenth of the time of encoding a tick.
			enc.items = append(enc.items, item{})
			it := &enc.items[len(enc.items)-1]
			it.sec, it.class, it.id, it.e, it.ch = secUpdate, class.ID, e.ID(), e, c
			it.set, it.words, it.hash, it.hashed = int32(off), int32(len(dirty)), h, true
		}
	}
}

// Full encodes the full state of ents as partition part sees it, for a
// client that has none of them yet, and appends the segment to dst.
func (enc *Encoder) Full(dst []byte, ents []*state.Entity, part Part) []byte {
	enc.queueFull(ents, part)
	return enc.emit(dst)
}

// queueFull queues the items Full writes, in the order of ents.
func (enc *Encoder) queueFull(ents []*state.Entity, part Part) {
	enc.items, enc.sets, enc.values = enc.items[:0], enc.sets[:0], 0
	for _, e := range ents {
		if e != nil {
			enc.addFull(e, part)
		}
	}
}

// Set encodes set sections for ents (docs/protocol.md §5.6): every leaf of
// partition part, zero or not, in full mode, for a client whose copies of
// them may be stale (changes a bandwidth budget deferred). It appends the
// segment to dst.
func (enc *Encoder) Set(dst []byte, ents []*state.Entity, part Part) []byte {
	enc.queueSet(ents, part)
	return enc.emit(dst)
}

// queueSet queues the items Set writes, in the order of ents.
func (enc *Encoder) queueSet(ents []*state.Entity, part Part) {
	enc.items, enc.sets, enc.values = enc.items[:0], enc.sets[:0], 0
	for _, e := range ents {
		enc.queueLeaves(e, secSet, enc.mask(e.Class(), part), false)
	}
}

// A PatchOp is the section a [Patch] goes in.
type PatchOp uint8

// Patch operations.
const (
	PatchCreate  PatchOp = secCreate  // create the entity: the leaves of Leaves not zero
	PatchFill    PatchOp = secFill    // fill a created or reset entity: the leaves of Leaves not zero
	PatchSet     PatchOp = secSet     // set every leaf of Leaves, zero or not
	PatchDestroy PatchOp = secDestroy // destroy the entity of ID
)

// A Patch is one entity's part of a segment [Encoder.Patch] writes.
type Patch struct {
	Op     PatchOp
	E      *state.Entity // nil for PatchDestroy
	ID     state.ID      // PatchDestroy's entity
	Leaves []uint64      // a bit per leaf of E's class, as state.Change.DirtySet
}

// Patch encodes a segment of the given sections, for a client whose
// replica the caller knows: a resumed session's catch-up
// (docs/protocol.md §10.5). The caller picks each entity's leaves,
// within the partitions and bands the client sees; a set or fill with no
// leaf to write is left out. Creates come before fills in the segment, so
// a list whose creates precede their fills may be split anywhere.
func (enc *Encoder) Patch(dst []byte, ps []Patch) []byte {
	enc.items, enc.sets, enc.values = enc.items[:0], enc.sets[:0], 0
	for i := range ps {
		if p := &ps[i]; p.Op == PatchDestroy {
			enc.items = append(enc.items, item{sec: secDestroy, id: p.ID})
		} else {
			enc.queueLeaves(p.E, uint8(p.Op), p.Leaves, p.Op != PatchSet)
		}
	}
	return enc.emit(dst)
}

// hasPart reports whether any class of s has a leaf in partition part.
func (enc *Encoder) hasPart(s *schema.Schema, part Part) bool {
	if enc.partsOf != s {
		enc.partsOf, enc.parts = s, [NumParts]bool{}
		for _, c := range s.Classes {
			for p := range enc.parts {
				for _, w := range enc.mask(c, Part(p)) {
					enc.parts[p] = enc.parts[p] || w != 0
				}
			}
		}
	}
	return enc.parts[part]
}

// addFull queues e's full state: every leaf of the partition that differs
// from its zero value.
func (enc *Encoder) addFull(e *state.Entity, part Part) {
	sec := uint8(secFill)
	if part.creates() {
		sec = secCreate
	}
	enc.queueLeaves(e, sec, enc.mask(e.Class(), part), true)
}

// queueLeaves queues e's section sec with the leaves of set m (those of
// them not zero if nonZero). A section with no leaf is left out, but for
// a create, which creates the entity.
func (enc *Encoder) queueLeaves(e *state.Entity, sec uint8, m []uint64, nonZero bool) {
	c := e.Class()
	off := len(enc.sets)
	enc.sets = append(enc.sets, m...)
	set := enc.sets[off:]
	var any uint64
	for i, w := range set {
		if nonZero {
			for x := w; x != 0; x &= x - 1 {
				if b := bits.TrailingZeros64(x); e.IsZero(c.Leaf(i<<6 | b)) {
					w &^= 1 << b
				}
			}
			set[i] = w
		}
		any |= w
	}
	if any == 0 && sec != secCreate {
		enc.sets = enc.sets[:off]
		return
	}
	enc.items = append(enc.items, item{sec: sec, class: c.ID, id: e.ID(), e: e, set: int32(off), words: int32(len(m))})
}

// Leaves returns the leaves of class c that partition part carries, a bit
// per leaf, as [PartLeaves] does, from the encoder's cache. The slice must
// not be modified.
func (enc *Encoder) Leaves(c *schema.Struct, part Part) []uint64 { return enc.mask(c, part) }

// mask returns the leaf set of class c that partition part carries.
func (enc *Encoder) mask(c *schema.Struct, part Part) []uint64 {
	if c == enc.lastC {
		return enc.lastM[part]
	}
	if enc.masks == nil {
		enc.masks = make(map[*schema.Struct]*[NumParts][]uint64)
	}
	ms := enc.masks[c]
	if ms == nil {
		ms = new([NumParts][]uint64)
		for p := range ms {
			ms[p] = PartLeaves(c, Part(p))
		}
		enc.masks[c] = ms
	}
	enc.lastC, enc.lastM = c, ms
	return ms[part]
}

// PartLeaves returns the leaves of c that partition part carries, a bit per
// leaf (as state.Change.DirtySet). A client that gains or loses ownership
// of an entity resets the leaves of the partition it no longer sees.
func PartLeaves(c *schema.Struct, part Part) []uint64 {
	m := make([]uint64, (c.Leaves+63)/64)
	want := part.vis()
	band, banded := part.Banded()
	for i := 0; i < c.Leaves; i++ {
		if l := c.Leaf(i); l.Vis == want && (!banded || int(l.Band) == band) {
			m[i>>6] |= 1 << (i & 63)
		}
	}
	return m
}

func (enc *Encoder) set(it *item) []uint64 { return enc.sets[it.set : it.set+it.words] }

// emit groups the queued items by section, class and leaf set, orders the
// groups and the IDs within each, and writes the segment.
func (enc *Encoder) emit(dst []byte) []byte {
	groups := enc.arrange()
	w := &enc.w
	w.Reset(dst[len(dst):])
	for i := 0; i < len(groups); {
		// A section is the run of groups with the same tag and class.
		j := i + 1
		for j < len(groups) && groups[j].sec == groups[i].sec && groups[j].class == groups[i].class {
			j++
		}
		sec := groups[i].sec
		w.Bits(uint64(sec), 3)
		if sec != secDestroy {
			w.U(uint64(groups[i].class), 4)
			w.U(uint64(j-i), 0)
		}
		for g := i; g < j; g++ {
			order := enc.order[groups[g].start : groups[g].start+groups[g].n]
			enc.sortByID(order)
			if sec == secDestroy {
				enc.writeIDs(w, order)
			} else {
				enc.writeGroup(w, order, sec)
			}
		}
		i = j
	}
	w.Bits(secEnd, 3)
	dst = append(dst, w.Finish()...)
	enc.settle(len(enc.items))
	return dst
}

// arrange groups the queued items by section, class and leaf set, and
// returns the groups in the order a segment writes them: ascending
// section tag, then class, then leaf set. Each group's entries are
// enc.order[start : start+n], of the form slot<<32 | item index, not yet
// sorted.
func (enc *Encoder) arrange() []group {
	items := enc.items
	if enc.groups == nil {
		// Room for a tick's usual groups from the start.
		enc.groups, enc.byHash = make([]group, 0, 32), make(map[uint64]int32, 64)
	}
	enc.groups = enc.groups[:0]
	enc.lastGroup = -1
	clear(enc.byHash)
	for i := range items {
		it := &items[i]
		if it.sec != secDestroy && !it.hashed {
			it.hash = hashSet(enc.set(it))
		}
		it.group = enc.findGroup(it)
		enc.groups[it.group].n++
	}
	groups := enc.groups
	slices.SortFunc(groups, func(a, b group) int {
		if c := cmp.Compare(a.sec, b.sec); c != 0 {
			return c
		}
		if c := cmp.Compare(a.class, b.class); c != 0 {
			return c
		}
		if c := cmp.Compare(a.hash, b.hash); c != 0 {
			return c
		}
		return slices.Compare(enc.sets[a.set:a.set+a.words], enc.sets[b.set:b.set+b.words])
	})
	// Lay the groups out in order in enc.order, each entry a slot in the
	// high half and an item index in the low half, so that sorting a
	// group's entries sorts its items by slot. Segments name entities by
	// slot; creates add the generation.
	enc.remap = fit(enc.remap, len(groups))
	remap := enc.remap
	start := 0
	for i := range groups {
		remap[groups[i].id] = int32(i)
		groups[i].start = start
		start += groups[i].n
		groups[i].n = 0
	}
	enc.order = fit(enc.order[:0], len(items))
	for i := range items {
		g := &groups[remap[items[i].group]]
		enc.order[g.start+g.n] = uint64(items[i].id.Slot())<<32 | uint64(i)
		g.n++
	}
	return groups
}

// sortByID sorts entries of the form ID<<32 | index by ID. Network IDs of
// one tick are usually dense, so a bitmap over the ID span sorts in
// O(n + span/64); sparse spans fall back to a comparison sort.
func (enc *Encoder) sortByID(order []uint64) {
	if len(order) < 16 {
		slices.Sort(order)
		return
	}
	lo, hi := order[0]>>32, order[0]>>32
	for _, o := range order {
		lo, hi = min(lo, o>>32), max(hi, o>>32)
	}
	span := int(hi-lo) + 1
	if span > 64*len(order) {
		slices.Sort(order)
		return
	}
	// Each entry's rank is the number of IDs below it: those in the
	// bitmap words before its own, then those below it in its word. An
	// entity appears once in a group, so ranks are distinct. Only the
	// bitmap (a bit per ID of the span) and the output are written, both
	// small and in order, which matters when a tick starts with cold
	// caches.
	words := (span + 63) / 64
	bm := fit(enc.bitmap[:0], words)
	clear(bm)
	for _, o := range order {
		d := o>>32 - lo
		bm[d>>6] |= 1 << (d & 63)
	}
	ranks := fit(enc.ranks[:0], words)
	r := int32(0)
	for i, w := range bm {
		ranks[i] = r
		r += int32(bits.OnesCount64(w))
	}
	out := fit(enc.sorted[:0], len(order))
	for _, o := range order {
		d := o>>32 - lo
		w := d >> 6
		out[int(ranks[w])+bits.OnesCount64(bm[w]&(1<<(d&63)-1))] = o
	}
	copy(order, out)
	enc.bitmap, enc.ranks, enc.sorted = bm, ranks, out
}

// findGroup returns the index of the group of it, creating it if needed.
// Few groups are scanned; many go through a hash index.
func (enc *Encoder) findGroup(it *item) int32 {
	// Consecutive items usually share a group: try the last one first.
	if g := enc.lastGroup; g >= 0 && int(g) < len(enc.groups) && enc.same(&enc.groups[g], it) {
		return g
	}
	id := enc.lookupGroup(it)
	enc.lastGroup = id
	return id
}

// same reports whether it belongs to group g.
func (enc *Encoder) same(g *group, it *item) bool {
	if g.hash != it.hash || g.sec != it.sec || g.class != it.class || g.words != it.words {
		return false
	}
	if it.words == 1 { // most classes have at most 64 leaves
		return enc.sets[g.set] == enc.sets[it.set]
	}
	return slices.Equal(enc.sets[g.set:g.set+g.words], enc.set(it))
}

// lookupGroup finds the group of it among the groups so far, or creates it.
func (enc *Encoder) lookupGroup(it *item) int32 {
	const scan = 8
	if len(enc.groups) <= scan {
		for i := range enc.groups {
			if enc.same(&enc.groups[i], it) {
				return int32(i)
			}
		}
	} else {
		if len(enc.byHash) == 0 {
			for i := range enc.groups {
				enc.link(int32(i))
			}
		}
		for i, ok := enc.byHash[it.hash^uint64(it.class)<<8^uint64(it.sec)]; ok && i >= 0; i = enc.groups[i].next {
			if enc.same(&enc.groups[i], it) {
				return i
			}
		}
	}
	id := int32(len(enc.groups))
	enc.groups = append(enc.groups, group{id: id, sec: it.sec, class: it.class, hash: it.hash,
		set: it.set, words: it.words, next: -1})
	if len(enc.byHash) > 0 {
		enc.link(id) // the index exists: keep it complete
	}
	return id
}

func (enc *Encoder) link(i int32) {
	g := &enc.groups[i]
	key := g.hash ^ uint64(g.class)<<8 ^ uint64(g.sec)
	if head, ok := enc.byHash[key]; ok {
		g.next = head
	} else {
		g.next = -1
	}
	enc.byHash[key] = i
}

// writeIDs writes a count, a gap code parameter and the ascending slots of
// the items in order as gaps.
func (enc *Encoder) writeIDs(w *wire.Writer, order []uint64) {
	enc.gapv = fit(enc.gapv[:0], len(order))
	enc.gaps.reset()
	prev := int64(-1)
	for i, o := range order {
		id := int64(o >> 32) // the slot
		g := uint64(id - prev - 1)
		enc.gapv[i] = g
		enc.gaps.add(g)
		prev = id
	}
	k := enc.gaps.best(len(order))
	w.U(uint64(len(order)), 3)
	w.Bits(uint64(k), 6)
	enc.gapk = fill(enc.gapk, len(order), uint8(k))
	w.UEach(enc.gapv, enc.gapk)
}

// fill returns s resized to n elements, each v.
func fill(s []uint8, n int, v uint8) []uint8 {
	s = fit(s[:0], n)
	for i := range s {
		s[i] = v
	}
	return s
}

// writeGens writes the generation of each created entity of order, after
// its slots: a code parameter, then one U(k) per entity.
func (enc *Encoder) writeGens(w *wire.Writer, order []uint64) {
	enc.gaps.reset()
	for _, o := range order {
		enc.gaps.add(uint64(enc.items[uint32(o)].id.Gen()))
	}
	k := enc.gaps.best(len(order))
	w.Bits(uint64(k), 6)
	for _, o := range order {
		w.U(uint64(enc.items[uint32(o)].id.Gen()), k)
	}
}

// A leafPlan is how one leaf of a group is written, resolved once per group
// so that the per-entity loop touches no schema.
type leafPlan struct {
	l     *schema.LeafInfo
	leaf  int32
	slot  int32 // numeric or object slot
	code  uint8 // planRaw, planDelta, planU, planZigzag, planStr, planCont
	width uint8 // raw bits, or the modulus of a delta
	k     uint8
}

const (
	planRaw    = iota // width raw bits of the stored value
	planDelta         // U(k) of zigzag(new−old mod 2^width)
	planU             // U(k) of the stored value
	planZigzag        // U(k) of zigzag(stored value)
	planStr
	planCont
)

func (enc *Encoder) plan(c *schema.Struct, set []uint64, delta bool) []leafPlan {
	plans := enc.plans[:0]
	for leaf := state.NextDirty(set, 0); leaf >= 0; leaf = state.NextDirty(set, leaf+1) {
		l := c.Leaf(leaf)
		t := &l.Field.Type
		p := leafPlan{l: l, leaf: int32(leaf)}
		switch k := t.Kind; {
		case k.Numeric():
			p.slot = int32(l.Num)
			switch rb := rawBits(t, delta); {
			case rb != 0:
				p.code, p.width = planRaw, uint8(rb)
			case delta && k != schema.Ref:
				p.code, p.width = planDelta, uint8(deltaWidth(t))
			case !delta && (k.Signed() || k == schema.Float32 || k == schema.Float64):
				p.code = planZigzag
			default:
				p.code = planU
			}
		case k == schema.String || k == schema.Bytes:
			p.code, p.slot = planStr, int32(l.Obj)
		default:
			p.code, p.slot = planCont, int32(l.Obj)
		}
		plans = append(plans, p)
	}
	enc.plans = plans
	return plans
}

// writeGroup writes entities that share a class and a leaf set: the field
// tree once, with a code parameter per numeric leaf, then the IDs, then each
// entity's values in ID order.
func (enc *Encoder) writeGroup(w *wire.Writer, order []uint64, sec uint8) {
	delta := sec == secUpdate
	c, set, plans, allU := enc.prepareGroup(order, delta)
	writeTree(w, c, 0, set, enc.ks, delta, 2)
	enc.writeIDs(w, order)
	if sec == secCreate {
		enc.writeGens(w, order)
	}
	if allU {
		// The common case: the values are exactly codes, in order.
		w.UEach(enc.codes, enc.codeKs)
		return
	}
	for e, o := range order {
		enc.writeValues(w, e, &enc.items[uint32(o)], plans, delta)
	}
}

// prepareGroup plans the group of the items of order, whose section writes
// in delta mode if delta: it returns the class and leaf set of the group,
// its plans, each U(k)-coded plan with the k that minimises the group's
// total (also in enc.ks, by leaf, for writeTree), and whether every value
// of the group is a U(k) code. Codes are computed once, in the pass that
// picks each leaf's k, and kept for the write pass: codes[e*len(plans)+i]
// is entity e's code for plan i, and codeKs[e*len(plans)+i] its k.
func (enc *Encoder) prepareGroup(order []uint64, delta bool) (c *schema.Struct, set []uint64, plans []leafPlan, allU bool) {
	first := &enc.items[uint32(order[0])]
	c = first.e.Class()
	set = enc.set(first)
	if len(enc.ks) < c.Leaves {
		enc.ks = make([]uint8, c.Leaves)
	}
	plans = enc.plan(c, set, delta)
	np := len(plans)
	enc.codes = fit(enc.codes[:0], np*len(order))
	enc.codeKs = fit(enc.codeKs[:0], np*len(order))
	allU = true
	for i := range plans {
		p := &plans[i]
		if !enc.planCodes(p, order, enc.codes[i:], np) {
			allU = false
			continue
		}
		p.k = uint8(enc.pst.best(len(order)))
		enc.ks[p.leaf] = p.k
		for j := i; j < len(enc.codeKs); j += np {
			enc.codeKs[j] = p.k
		}
	}
	return c, set, plans, allU
}

// writeValues writes the values of it, the e-th entity of the group
// prepareGroup planned.
func (enc *Encoder) writeValues(w *wire.Writer, e int, it *item, plans []leafPlan, delta bool) {
	codes := enc.codes[e*len(plans):]
	for i := range plans {
		p := &plans[i]
		switch p.code {
		case planRaw:
			w.Bits(it.e.Num(int(p.slot)), uint(p.width))
		case planDelta, planU, planZigzag:
			w.U(codes[i], uint(p.k))
		case planStr:
			w.String(it.e.Str(int(p.slot)))
		case planCont:
			if delta {
				enc.writeContDelta(w, &it.e.Record, p.l, it.ch.Cont(int(p.leaf)))
			} else {
				enc.writeContWhole(w, &it.e.Record, p.l)
			}
		}
	}
}

// planCodes computes the U(k) code of plan p for each entity of order into
// codes[0], codes[stride], codes[2·stride], … and their bit lengths into
// enc.pst. It reports false, computing nothing, if p does not write a U(k)
// code. Going plan by plan gives each kind of plan its own tight loop.
func (enc *Encoder) planCodes(p *leafPlan, order []uint64, codes []uint64, stride int) bool {
	st := &enc.pst
	st.reset()
	items, slot, j := enc.items, int(p.slot), 0
	switch p.code {
	case planDelta:
		// zigzag(signExtend(new−old, width)), with signExtend's shift
		// count masked as wire.Writer's are: width ≥ 1, being a kind's
		// width or a bounded quantization's 1 to 32 bits.
		s := (64 - uint(p.width)) & 63
		for _, o := range order {
			it := &items[uint32(o)]
			u := zigzag(int64((it.e.Num(slot)-it.ch.Base(slot))<<s) >> s)
			codes[j] = u
			st.add(u)
			j += stride
		}
	case planZigzag:
		for _, o := range order {
			u := zigzag(int64(items[uint32(o)].e.Num(slot)))
			codes[j] = u
			st.add(u)
			j += stride
		}
	case planU:
		for _, o := range order {
			u := items[uint32(o)].e.Num(slot)
			codes[j] = u
			st.add(u)
			j += stride
		}
	default:
		return false
	}
	return true
}

// writeTree writes the subset of st's fields whose leaves intersect set,
// recursively, with the code parameter of each numeric leaf that needs one.
// base is the leaf index of st's first leaf. Field-ID gaps are U(gapK)
// codes: U(2), but U(0) in ranked update sections.
func writeTree(w *wire.Writer, st *schema.Struct, base int, set []uint64, ks []uint8, delta bool, gapK uint) {
	n := 0
	for _, f := range st.Fields {
		if !f.Deprecated && state.AnyDirty(set, base+f.Leaf, base+f.Leaf+span(f)) {
			n++
		}
	}
	w.U(uint64(n), 2)
	prev := uint32(0)
	for _, f := range st.Fields {
		if f.Deprecated || !state.AnyDirty(set, base+f.Leaf, base+f.Leaf+span(f)) {
			continue
		}
		w.U(uint64(f.ID-prev-1), gapK)
		prev = f.ID
		switch t := &f.Type; {
		case t.Kind == schema.Nested:
			writeTree(w, t.Struct, base+f.Leaf, set, ks, delta, gapK)
		case t.Kind.Numeric() && rawBits(t, delta) == 0:
			w.Bits(uint64(ks[base+f.Leaf]), 6)
		}
	}
}

func span(f *schema.Field) int {
	if f.Type.Kind == schema.Nested {
		return f.Type.Struct.Leaves
	}
	return 1
}

// writeContWhole writes the container at leaf l of r whole.
func (enc *Encoder) writeContWhole(w *wire.Writer, r *state.Record, l *schema.LeafInfo) {
	switch l.Field.Type.Kind {
	case schema.List:
		enc.writeList(w, r.List(l.Obj))
	case schema.Map:
		enc.writeMap(w, r.Map(l.Obj))
	case schema.Bag:
		enc.writeBag(w, r.Bag(l.Obj))
	}
}

// elemK picks and writes the code parameter shared by the numeric element
// values vals, if their type codes them with U(k).
func (enc *Encoder) elemK(w *wire.Writer, t *schema.Type, vals []state.Value) uint {
	if !t.Kind.Numeric() || rawBits(t, false) != 0 || len(vals) == 0 {
		return 0
	}
	enc.kst.reset()
	for _, v := range vals {
		enc.kst.add(codeFull(t, v.N))
	}
	k := enc.kst.best(len(vals))
	w.Bits(uint64(k), 6)
	return k
}

func (enc *Encoder) writeElem(w *wire.Writer, t *schema.Type, v state.Value, k uint) {
	switch {
	case t.Kind.Numeric():
		if rb := rawBits(t, false); rb != 0 {
			w.Bits(v.N, rb)
		} else {
			w.U(codeFull(t, v.N), k)
		}
	case t.Kind == schema.Nested:
		enc.writeRecord(w, v.R)
	default:
		w.String(v.S)
	}
}

func (enc *Encoder) writeList(w *wire.Writer, l *state.List) {
	n := l.Len()
	w.U(uint64(n), 4)
	enc.values += n
	start := len(enc.vals)
	for i := 0; i < n; i++ {
		enc.vals = append(enc.vals, l.At(i))
	}
	vals := enc.vals[start:]
	k := enc.elemK(w, l.Type().Elem, vals)
	for _, v := range vals {
		enc.writeElem(w, l.Type().Elem, v, k)
	}
	enc.vals = enc.vals[:start]
}

// writeKeys writes the code parameter for integer keys, if any.
func (enc *Encoder) keyK(w *wire.Writer, key schema.Kind, keys []uint64) uint {
	if key == schema.String || len(keys) == 0 {
		return 0
	}
	t := schema.Type{Kind: key}
	enc.kst.reset()
	for _, k := range keys {
		enc.kst.add(codeFull(&t, k))
	}
	k := enc.kst.best(len(keys))
	w.Bits(uint64(k), 6)
	return k
}

func writeKey(w *wire.Writer, key schema.Kind, n uint64, s string, k uint) {
	if key == schema.String {
		w.String(s)
		return
	}
	t := schema.Type{Kind: key}
	w.U(codeFull(&t, n), k)
}

func (enc *Encoder) writeMap(w *wire.Writer, m *state.Map) {
	t := m.Type()
	start := len(enc.vals)
	enc.vals = m.Keys(enc.vals)
	keys := enc.vals[start:]
	w.U(uint64(len(keys)), 4)
	enc.values += len(keys)
	vstart := len(enc.vals)
	nstart := len(enc.nkeys)
	for _, k := range keys {
		v, _ := m.Get(k)
		enc.vals = append(enc.vals, v)
		enc.nkeys = append(enc.nkeys, k.N)
	}
	keys = enc.vals[start:vstart]
	vals := enc.vals[vstart:]
	kk := enc.keyK(w, t.Key, enc.nkeys[nstart:])
	vk := enc.elemK(w, t.Elem, vals)
	for i, k := range keys {
		writeKey(w, t.Key, k.N, k.S, kk)
		enc.writeElem(w, t.Elem, vals[i], vk)
	}
	enc.vals = enc.vals[:start]
	enc.nkeys = enc.nkeys[:nstart]
}

func (enc *Encoder) writeBag(w *wire.Writer, b *state.Bag) {
	start := len(enc.nkeys)
	enc.nkeys = b.Keys(enc.nkeys)
	keys := enc.nkeys[start:]
	w.U(uint64(len(keys)), 4)
	enc.values += len(keys)
	kk := enc.keyK(w, b.Type().Key, keys)
	for _, k := range keys {
		writeKey(w, b.Type().Key, k, "", kk)
		enc.writeRecord(w, b.Get(k))
	}
	enc.nkeys = enc.nkeys[:start]
}

// AppendRecord appends r as a standalone record, the encoding of RPC
// arguments, and returns the extended slice.
func (enc *Encoder) AppendRecord(dst []byte, r *state.Record) []byte {
	w := &enc.w
	w.Reset(dst[len(dst):])
	enc.values = 0
	enc.writeRecord(w, r)
	return append(dst, w.Finish()...)
}

// writeRecord writes a standalone struct value: the tree of its non-zero
// leaves, each numeric leaf with its own code parameter, then the values.
func (enc *Encoder) writeRecord(w *wire.Writer, r *state.Record) {
	enc.writeRecordLeaves(w, r, nil)
}

// writeRecordLeaves writes the leaves of r in only (all non-zero leaves when
// only is nil) as a standalone value.
func (enc *Encoder) writeRecordLeaves(w *wire.Writer, r *state.Record, only []uint64) {
	enc.values++
	st := r.Type()
	if enc.depth == len(enc.rsets) {
		enc.rsets = append(enc.rsets, nil)
	}
	words := (st.Leaves + 63) / 64
	set := fit(enc.rsets[enc.depth][:0], words)
	clear(set)
	// The numeric leaves of a record use k = the bit length of their own
	// code. The tree is written before the values, whose nested records
	// reuse rks.
	enc.rks = fit(enc.rks[:0], st.Leaves)
	for i := 0; i < st.Leaves; i++ {
		l := st.Leaf(i)
		if only != nil && only[i>>6]&(1<<(i&63)) == 0 || only == nil && r.IsZero(l) {
			continue
		}
		set[i>>6] |= 1 << (i & 63)
		if t := &l.Field.Type; t.Kind.Numeric() && rawBits(t, false) == 0 {
			enc.rks[i] = uint8(ownK(codeFull(t, r.Num(l.Num))))
		}
	}
	enc.rsets[enc.depth] = set
	enc.depth++
	writeTree(w, st, 0, set, enc.rks, false, 2)
	for leaf := state.NextDirty(set, 0); leaf >= 0; leaf = state.NextDirty(set, leaf+1) {
		l := st.Leaf(leaf)
		t := &l.Field.Type
		switch k := t.Kind; {
		case k.Numeric():
			v := r.Num(l.Num)
			if rb := rawBits(t, false); rb != 0 {
				w.Bits(v, rb)
			} else {
				u := codeFull(t, v)
				w.U(u, ownK(u))
			}
		case k == schema.String || k == schema.Bytes:
			w.String(r.Str(l.Obj))
		default:
			enc.writeContWhole(w, r, l)
		}
	}
	enc.depth--
}

// writeContDelta writes what happened to a container in a tick: a 1 bit
// flag, then either the container whole or its operations, whichever is
// smaller.
func (enc *Encoder) writeContDelta(w *wire.Writer, r *state.Record, l *schema.LeafInfo, cc *state.ContChange) {
	if cc == nil || cc.Whole {
		w.Bool(true)
		enc.writeContWhole(w, r, l)
		return
	}
	// Sending the container whole can only win when a large part of it
	// changed; otherwise skip the trial so a small change to a big
	// container costs O(change).
	changes, size := len(cc.Ops)+len(cc.Keys)+len(cc.SKeys), 0
	switch l.Field.Type.Kind {
	case schema.List:
		size = r.List(l.Obj).Len()
	case schema.Map:
		size = r.Map(l.Obj).Len()
	case schema.Bag:
		size = r.Bag(l.Obj).Len()
	}
	ops, start := &enc.ops, enc.values
	if 2*changes < size {
		w.Bool(false)
		ops = w
	} else {
		ops.Reset(ops.Finish())
	}
	switch l.Field.Type.Kind {
	case schema.List:
		enc.writeListOps(ops, r.List(l.Obj), cc)
	case schema.Map:
		enc.writeMapOps(ops, r.Map(l.Obj), cc)
	case schema.Bag:
		enc.writeBagOps(ops, r.Bag(l.Obj), cc)
	}
	if ops == w {
		return
	}
	// Both trials count their values; only the one sent keeps its count.
	afterOps := enc.values
	whole := &enc.whole
	whole.Reset(whole.Finish())
	enc.writeContWhole(whole, r, l)
	src := ops
	if whole.BitLen() < ops.BitLen() {
		src = whole
		enc.values -= afterOps - start
	} else {
		enc.values = afterOps
	}
	w.Bool(src == whole)
	n := src.BitLen()
	w.Append(src.Finish(), n)
}

func (enc *Encoder) writeListOps(w *wire.Writer, l *state.List, cc *state.ContChange) {
	t := l.Type().Elem
	w.U(uint64(len(cc.Ops)), 2)
	enc.values += len(cc.Ops)
	start := len(enc.vals)
	for _, op := range cc.Ops {
		if op.Code == state.OpPush || op.Code == state.OpInsert || op.Code == state.OpSet {
			enc.vals = append(enc.vals, op.V)
		}
	}
	k := enc.elemK(w, t, enc.vals[start:])
	if len(enc.vals) == start && len(cc.Ops) > 0 && t.Kind.Numeric() && rawBits(t, false) == 0 {
		// The decoder reads a k whenever there are operations, even if
		// none of them carries a value.
		w.Bits(0, 6)
	}
	enc.vals = enc.vals[:start]
	for _, op := range cc.Ops {
		if op.Code == state.OpSet && op.Old != nil {
			enc.writeElemSet(w, op)
			continue
		}
		w.Bits(uint64(op.Code), 3)
		switch op.Code {
		case state.OpPush:
			enc.writeElem(w, t, op.V, k)
		case state.OpInsert, state.OpSet:
			w.U(uint64(op.Index), 4)
			enc.writeElem(w, t, op.V, k)
		case state.OpRemove:
			w.U(uint64(op.Index), 4)
		}
	}
}

// writeElemSet writes the set of a struct element of a list as whichever
// is shorter: a patch of the fields that changed, or the element whole.
func (enc *Encoder) writeElemSet(w *wire.Writer, op state.ListOp) {
	base := enc.values
	enc.diff = op.V.R.AppendDiff(enc.diff, op.Old)
	patch := &enc.patch
	patch.Reset(patch.Finish()[:0])
	enc.writeRecordLeaves(patch, op.V.R, enc.diff)
	patchValues := enc.values
	enc.values = base
	whole := &enc.elem
	whole.Reset(whole.Finish()[:0])
	enc.writeRecordLeaves(whole, op.V.R, nil)
	code, src := state.OpSet, whole
	if patch.BitLen() < whole.BitLen() {
		code, src, enc.values = state.OpPatch, patch, patchValues
	}
	w.Bits(uint64(code), 3)
	w.U(uint64(op.Index), 4)
	n := src.BitLen()
	w.Append(src.Finish(), n)
}

// sortedKeys collects the changed keys of cc, sorted, into enc.nkeys or
// enc.skeys, and returns the start offset.
func (enc *Encoder) sortedKeys(cc *state.ContChange, key schema.Kind) int {
	if key == schema.String {
		start := len(enc.skeys)
		for k := range cc.SKeys {
			enc.skeys = append(enc.skeys, k)
		}
		slices.Sort(enc.skeys[start:])
		return start
	}
	start := len(enc.nkeys)
	for k := range cc.Keys {
		enc.nkeys = append(enc.nkeys, k)
	}
	if key.Signed() {
		slices.SortFunc(enc.nkeys[start:], func(a, b uint64) int { return cmp.Compare(int64(a), int64(b)) })
	} else {
		slices.Sort(enc.nkeys[start:])
	}
	return start
}

func (enc *Encoder) keyChange(cc *state.ContChange, key schema.Kind, i int) (*state.KeyChange, state.Value) {
	if key == schema.String {
		return cc.SKeys[enc.skeys[i]], state.Value{S: enc.skeys[i]}
	}
	return cc.Keys[enc.nkeys[i]], state.Value{N: enc.nkeys[i]}
}

// writeMapOps writes the deleted keys, then the keys put with their values.
func (enc *Encoder) writeMapOps(w *wire.Writer, m *state.Map, cc *state.ContChange) {
	t := m.Type()
	nstart, sstart := len(enc.nkeys), len(enc.skeys)
	start := enc.sortedKeys(cc, t.Key)
	end := len(enc.nkeys)
	if t.Key == schema.String {
		end = len(enc.skeys)
	}
	// Deleted keys first, then puts: two passes over the sorted keys.
	for pass := 0; pass < 2; pass++ {
		n := 0
		kstart := len(enc.nkeys)
		vstart := len(enc.vals)
		for i := start; i < end; i++ {
			kc, k := enc.keyChange(cc, t.Key, i)
			if pass == 0 && kc.Removed && kc.Existed || pass == 1 && !kc.Removed {
				n++
				enc.nkeys = append(enc.nkeys, k.N)
				if pass == 1 {
					v, _ := m.Get(k)
					enc.vals = append(enc.vals, v)
				}
			}
		}
		w.U(uint64(n), 2)
		enc.values += n
		kk := enc.keyK(w, t.Key, enc.nkeys[kstart:])
		var vk uint
		if pass == 1 {
			vk = enc.elemK(w, t.Elem, enc.vals[vstart:])
		}
		j := 0
		for i := start; i < end; i++ {
			kc, k := enc.keyChange(cc, t.Key, i)
			if pass == 0 && kc.Removed && kc.Existed {
				writeKey(w, t.Key, k.N, k.S, kk)
			} else if pass == 1 && !kc.Removed {
				writeKey(w, t.Key, k.N, k.S, kk)
				enc.writeElem(w, t.Elem, enc.vals[vstart+j], vk)
				j++
			}
		}
		enc.nkeys = enc.nkeys[:kstart]
		enc.vals = enc.vals[:vstart]
	}
	enc.nkeys, enc.skeys = enc.nkeys[:nstart], enc.skeys[:sstart]
}

// writeBagOps writes removed keys, added items whole, then updated items as
// the tree of their changed fields.
func (enc *Encoder) writeBagOps(w *wire.Writer, b *state.Bag, cc *state.ContChange) {
	t := b.Type()
	start := enc.sortedKeys(cc, t.Key)
	end := len(enc.nkeys)
	for pass := 0; pass < 3; pass++ {
		kstart := len(enc.nkeys)
		for i := start; i < end; i++ {
			kc := cc.Keys[enc.nkeys[i]]
			if bagPass(kc) == pass {
				enc.nkeys = append(enc.nkeys, enc.nkeys[i])
			}
		}
		keys := enc.nkeys[kstart:]
		w.U(uint64(len(keys)), 2)
		enc.values += len(keys)
		kk := enc.keyK(w, t.Key, keys)
		for _, k := range keys {
			writeKey(w, t.Key, k, "", kk)
			switch pass {
			case 1:
				enc.writeRecord(w, b.Get(k))
			case 2:
				enc.writeRecordLeaves(w, b.Get(k), cc.Keys[k].Dirty)
			}
		}
		enc.nkeys = enc.nkeys[:kstart]
	}
	enc.nkeys = enc.nkeys[:start]
}

// bagPass classifies a key change: 0 removed, 1 added, 2 updated, −1 none.
func bagPass(kc *state.KeyChange) int {
	switch {
	case kc.Removed:
		if kc.Existed {
			return 0
		}
		return -1
	case kc.Added || !kc.Existed:
		return 1
	}
	for _, w := range kc.Dirty {
		if w != 0 {
			return 2
		}
	}
	return -1
}

const hashSeed = uint64(14695981039346656037)

func hashWord(h, w uint64) uint64 {
	h = (h ^ w) * 1099511628211
	return h ^ h>>29
}

func hashSet(set []uint64) uint64 {
	h := hashSeed
	for _, w := range set {
		h = hashWord(h, w)
	}
	return h
}

// ownK is the code parameter of a value written on its own: its bit
// length, which costs bitlen+1 bits, capped to what 6 bits can say.
func ownK(u uint64) uint { return min(uint(bits.Len64(u)), wire.MaxK) }
