package codec

import (
	"errors"
	"fmt"
	"math"
	"math/bits"

	"github.com/replicago/replica/schema"
	"github.com/replicago/replica/state"
	"github.com/replicago/replica/wire"
)

// Limits bound what a decoder accepts from one segment. Sizes are checked
// against decoded values, not only against the bytes they arrive in. The
// zero value of each field selects its default.
type Limits struct {
	MaxSegmentBytes int // default 4 MiB
	MaxStringBytes  int // per string or bytes value; default 64 KiB
	MaxContainerLen int // elements of one list, map or bag; default 65,536
	MaxDepth        int // nesting of structs and containers; default 16
	MaxEntities     int // entities created, updated or destroyed per segment; default 65,536
	MaxValues       int // container elements and records decoded per segment; default 1,048,576
}

// WithDefaults returns l with every zero field set to its default.
func (l Limits) WithDefaults() Limits {
	for _, f := range l.fields() {
		if *f.v <= 0 {
			*f.v = f.def
		}
	}
	return l
}

// field is one limit, named as in Limits, with its default.
type field struct {
	name string
	v    *int
	def  int
}

// fields returns l's limits in the order HELLO carries them (protocol.md
// §10.2).
func (l *Limits) fields() [6]field {
	return [6]field{{"MaxSegmentBytes", &l.MaxSegmentBytes, 4 << 20}, {"MaxStringBytes", &l.MaxStringBytes, 64 << 10},
		{"MaxContainerLen", &l.MaxContainerLen, 1 << 16}, {"MaxDepth", &l.MaxDepth, 16},
		{"MaxEntities", &l.MaxEntities, 1 << 16}, {"MaxValues", &l.MaxValues, 1 << 20}}
}

// Below returns an error naming the first limit of l, with defaults
// applied, that is lower than the same limit of sent: a decoder with
// limits l may refuse data that stays within sent.
func (l Limits) Below(sent Limits) error {
	l, sent = l.WithDefaults(), sent.WithDefaults()
	have, want := l.fields(), sent.fields()
	for i := range have {
		if *have[i].v < *want[i].v {
			return fmt.Errorf("%s is %d, below %d", have[i].name, *have[i].v, *want[i].v)
		}
	}
	return nil
}

// maxLimit bounds each limit on the wire, so that it fits an int everywhere.
const maxLimit = 1<<31 - 1

// AppendTo writes l, with defaults applied, as HELLO carries it: a U(8)
// code per limit.
func (l Limits) AppendTo(w *wire.Writer) {
	l = l.WithDefaults()
	for _, f := range l.fields() {
		w.U(uint64(min(*f.v, maxLimit)), 8)
	}
}

// ReadLimits reads limits written by AppendTo. A limit of 0 or above
// 2^31 − 1 fails r with wire.ErrMalformed.
func ReadLimits(r *wire.Reader) Limits {
	var l Limits
	for _, f := range l.fields() {
		v := r.U(8)
		if (v == 0 || v > maxLimit) && r.Err() == nil {
			r.Fail(fmt.Errorf("%w: %s %d out of range", wire.ErrMalformed, f.name, v))
		}
		*f.v = int(v)
	}
	return l
}

// Errors of the decoder, beyond those of package wire and package state.
var (
	// ErrUnknown means the data names a class or field the sender's schema
	// does not have.
	ErrUnknown = errors.New("codec: unknown class or field")
	// ErrIncompatible means two schema versions disagree on a field.
	ErrIncompatible = errors.New("codec: incompatible schema")
	// ErrRank means a ranked update section (docs/protocol.md §5.4) names
	// a rank beyond the entities the receiver held when the tick began:
	// the sender's idea of what the receiver holds differs from its own.
	ErrRank = errors.New("codec: entity rank out of range")
)

// A DecodeError reports why a segment was rejected and where.
type DecodeError struct {
	Bit int   // bit offset in the segment where decoding stopped
	Err error // the cause; errors.Is works through it
}

func (e *DecodeError) Error() string {
	return fmt.Sprintf("codec: bad segment at bit %d: %v", e.Bit, e.Err)
}
func (e *DecodeError) Unwrap() error { return e.Err }

// A Decoder decodes segments produced by an [Encoder] into a client's
// entity table. The sender's schema (remote) may be a different version
// of the local one: fields the local schema lacks are skipped, fields the
// sender lacks keep their zero values, and classes the local schema lacks
// are decoded with the sender's layout.
//
// A Decoder is not safe for concurrent use.
type Decoder struct {
	lim    Limits
	local  *schema.Schema
	remote *schema.Schema
	maps   map[[2]*schema.Struct][]int
	r      wire.Reader

	steps    []step   // the current group's, or a record's
	ownSteps []step   // the buffer of steps that no kept plan holds
	ids      []uint32 // slots of the current ID block
	gens     []uint8  // generations of created entities, parallel to ids
	entities int
	values   int
	keys     []state.Value
	vals     []state.Value
	nkeys    []uint64
	recs     []*state.Record
	scratch  map[*schema.Struct]state.Builder // DecodeRecord's reusable records

	// For groups of numbers only (see numericRows): the code of each
	// step, whether every step is a number, and the values and entities
	// of one chunk of rows.
	codes    []wire.Code
	ownCodes []wire.Code
	nums     []state.NumLeaf // the local leaf and slot of each step, when deltas
	ownNums  []state.NumLeaf
	numeric  bool
	deltas   bool // every step is planDelta to a local slot
	rows     []uint64
	ents     []*state.Entity
	noRows   bool // decode entity by entity only, for tests comparing the two paths

	// Plans of recent groups, by the field tree they were read from: a
	// client's groups repeat the same few trees tick after tick. fields
	// counts the fields readTree read, for a plan's need.
	classes   [4]class // the classes met last
	nextClass int

	plans    [planCache]plan
	trees    [planCache]tree // the trees of plans, apart for the search
	nextPlan int
	// The kept plans are chained by planChain, so that a search looks at
	// the few whose trees may match: head holds the first plan of each
	// chain, link the next plan of each plan and chain the chain a plan
	// is on, all as index+1, 0 for none.
	head    [planChains + 1]uint8
	link    [planCache]uint8
	chain   [planCache]uint16
	fields  int
	noPlans bool // keep no plans, for tests comparing with and without
}

// planCache is how many group plans a Decoder keeps.
const planCache = 32

// maxTreeBits is the longest field tree a plan is kept for: what one
// Reader.Peek shows.
const maxTreeBits = 56

// chainBits is how many first bits of a field tree choose the chain its
// plan is kept on, of planChains; trees shorter than that are all on one
// more chain, which every search looks at too.
const (
	chainBits  = 8
	planChains = 1 << chainBits
)

// planChain returns the chain of the plans of trees that start with the
// bits of next, read in sections of the given kind.
func planChain(next uint64, kind uint8) int {
	return int((uint(next) ^ uint(kind)<<(chainBits-2)) & (planChains - 1))
}

// A plan is the decoding of one group's field tree: the steps and codes
// that readTree and planSteps made of the bits tree, read for remote
// class rc in sections of one kind (planKind).
type plan struct {
	rc      *schema.Struct
	need    int // bits that must remain for readTree to succeed again on tree
	kind    uint8
	numeric bool
	deltas  bool
	steps   []step
	codes   []wire.Code
	nums    []state.NumLeaf
}

// A tree is the field tree of a kept plan.
type tree struct {
	tree uint64 // the tree's bits, as Peek returns them
	mask uint64 // its length, as a mask of as many low bits
}

// planKind returns what, besides its bits, decides how a group's field
// tree reads in a section of tag: whether its values are deltas and the
// code of its field-ID gaps.
func planKind(tag uint8) uint8 {
	switch tag {
	case secUpdate:
		return 1
	case secRanked:
		return 2
	}
	return 0
}

// reusePlan looks for a kept plan whose tree the next bits are, for a
// group of remote class rc in a section of the given kind. If it finds
// one, it skips the tree and sets d.steps, d.codes, d.numeric and
// d.deltas as readTree and planSteps would have: d.steps and d.codes are
// then the plan's own, which only nested records' steps may append to.
func (d *Decoder) reusePlan(rc *schema.Struct, kind uint8) bool {
	r := &d.r
	next := r.Peek(maxTreeBits)
	for _, c := range [2]uint8{d.head[planChain(next, kind)], d.head[planChains]} {
		for i := int(c) - 1; i >= 0; i = int(d.link[i]) - 1 {
			t, p := &d.trees[i], &d.plans[i]
			if next&t.mask != t.tree || p.rc != rc || p.kind != kind || r.Remaining() < p.need {
				continue
			}
			r.Bits(uint(bits.OnesCount64(t.mask)))
			d.steps, d.codes, d.nums = p.steps, p.codes, p.nums
			d.numeric, d.deltas = p.numeric, p.deltas
			return true
		}
	}
	return false
}

// readPlan reads a group's field tree into the decoder's own buffers and
// plans its steps.
func (d *Decoder) readPlan(c *class, kind uint8, delta bool) error {
	rc := c.remote
	gapK := uint(2)
	if kind == planKind(secRanked) {
		gapK = 0
	}
	start, next := d.r.Consumed(), d.r.Peek(maxTreeBits)
	// The buffers come from the plan last dropped, perhaps of a smaller
	// tree: room for every leaf of rc, up to a bound, spares readTree
	// and planSteps growing them step by step.
	if n := min(rc.Leaves, maxPlanRoom); cap(d.ownSteps) < n {
		d.ownSteps = make([]step, 0, n)
		d.ownCodes = make([]wire.Code, 0, n)
		d.ownNums = make([]state.NumLeaf, 0, n)
	}
	d.steps, d.codes, d.nums, d.fields = d.ownSteps[:0], d.ownCodes[:0], d.ownNums[:0], 0
	err := d.readTree(rc, 0, delta, gapK, 0)
	d.ownSteps = d.steps
	if err != nil {
		return err
	}
	d.planSteps(rc, c.local, c.lmap, delta)
	d.ownCodes, d.ownNums = d.codes, d.nums
	d.keepPlan(rc, kind, start, next)
	return nil
}

// keepPlan keeps the plan just made of the field tree read from bit
// start, whose first bits were next. The plan takes the decoder's buffers
// and leaves it those of the plan it replaces.
func (d *Decoder) keepPlan(rc *schema.Struct, kind uint8, start int, next uint64) {
	n := d.r.Consumed() - start
	if n > maxTreeBits || d.noPlans {
		return
	}
	i := d.nextPlan
	p, t := &d.plans[i], &d.trees[i]
	d.nextPlan = (d.nextPlan + 1) % planCache
	d.unchain(i)
	c := planChains
	if n >= chainBits {
		c = planChain(next, kind)
	}
	d.link[i], d.head[c], d.chain[i] = d.head[c], uint8(i+1), uint16(c+1)
	p.rc, p.kind = rc, kind
	t.mask = 1<<uint(n) - 1
	t.tree = next & t.mask
	// readTree's counts want 2 bits a field left at the count: with
	// this many bits left at the tree's start, they all have them.
	p.need = n + 2*d.fields
	p.numeric, p.deltas = d.numeric, d.deltas
	d.ownSteps, p.steps = p.steps[:0], d.steps
	d.ownCodes, p.codes = p.codes[:0], d.codes
	d.ownNums, p.nums = p.nums[:0], d.nums
}

// unchain takes kept plan i off its chain, if it is on one.
func (d *Decoder) unchain(i int) {
	c := int(d.chain[i]) - 1
	if c < 0 {
		return
	}
	for at := &d.head[c]; *at != 0; at = &d.link[*at-1] {
		if int(*at) == i+1 {
			*at = d.link[i]
			break
		}
	}
	d.chain[i] = 0
}

// maxPlanRoom bounds the steps readPlan makes room for at once, so that
// a sender's class of many leaves costs memory only as its groups use them.
const maxPlanRoom = 64

// chunkValues is how many values numericRows reads at a time.
const chunkValues = 512

type step struct {
	leaf  int32 // remote leaf
	local int32 // local leaf, or −1 to skip
	k     uint8

	// Resolved once per group by planSteps for the per-entity loop.
	code  uint8 // planRaw, planDelta, planU, planZigzag (numbers), planStr, planCont
	width uint8 // raw bits, or the modulus of a delta
	slot  int32 // local numeric or object slot
	t     *schema.Type

	// planDelta: 64−width, to test a delta's range with shifts; and to
	// bring a sum back to the stored representation, a mask and a shift
	// that sign-extends: width bits and 0 for unsigned kinds, all ones
	// and 64−width for signed ones.
	sh, ext uint8
	mask    uint64
}

// deltaFits reports whether delta d of a planDelta step fits its width.
func (s *step) deltaFits(d int64) bool { sh := s.sh & 63; return d<<sh>>sh == d }

// addDelta returns old plus delta d for a planDelta step, brought back to
// the stored representation: the low width bits, sign-extended for signed
// kinds.
func (s *step) addDelta(old uint64, d int64) uint64 {
	u := old + uint64(d)
	return uint64(int64(u&s.mask<<(s.ext&63)) >> (s.ext & 63))
}

// planSteps resolves each step of a group of remote class rc stored as
// local class lc.
func (d *Decoder) planSteps(rc, lc *schema.Struct, lmap []int, delta bool) {
	d.numeric, d.deltas = true, true
	for i := range d.steps {
		s := &d.steps[i]
		s.local = int32(lmap[s.leaf])
		l := rc.Leaf(int(s.leaf))
		t := &l.Field.Type
		s.t = t
		s.slot = -1
		switch k := t.Kind; {
		case k.Numeric():
			if s.local >= 0 {
				s.slot = int32(lc.Leaf(int(s.local)).Num)
			}
			switch rb := rawBits(t, delta); {
			case rb != 0:
				s.code, s.width = planRaw, uint8(rb)
			case delta && k != schema.Ref:
				s.code, s.width = planDelta, uint8(deltaWidth(t))
				s.sh, s.ext, s.mask = uint8(64-s.width)&63, 0, 1<<s.width-1
				if k.Signed() || s.width == 64 {
					s.ext, s.mask = s.sh, math.MaxUint64
				}
			default:
				s.code = planU // full values and refs: decodeFull / decodeDelta check the range
			}
			d.deltas = d.deltas && s.code == planDelta && s.slot >= 0
			d.nums = append(d.nums, state.NumLeaf{Leaf: s.local, Slot: s.slot})
			if s.code == planRaw {
				d.codes = append(d.codes, wire.Code{Raw: s.width})
			} else {
				d.codes = append(d.codes, wire.Code{K: s.k})
			}
		case k == schema.String || k == schema.Bytes:
			s.code = planStr
			d.numeric, d.deltas = false, false
		default:
			s.code = planCont
			d.numeric, d.deltas = false, false
		}
	}
}

// NewDecoder returns a decoder for data encoded with the remote schema into
// entities of the local schema. It reports ErrIncompatible if the two
// disagree on the type of any field both have.
func NewDecoder(local, remote *schema.Schema, lim Limits) (*Decoder, error) {
	if remote == nil {
		remote = local
	}
	if err := schema.Compatible(local, remote); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrIncompatible, err)
	}
	return &Decoder{lim: lim.WithDefaults(), local: local, remote: remote,
		maps: make(map[[2]*schema.Struct][]int)}, nil
}

// Limits returns the decoder's limits, defaults filled in.
func (d *Decoder) Limits() Limits { return d.lim }

// A class is a remote class the decoder has met, with what its groups
// need.
type class struct {
	id     uint64
	remote *schema.Struct
	local  *schema.Struct // the class its entities are stored as
	lmap   []int          // leafMap(remote, local)
}

// class returns the remote class with ID id, or nil if the sender's
// schema has none. The last few it returned are at hand.
func (d *Decoder) class(id uint64) *class {
	for i := range d.classes {
		if c := &d.classes[i]; c.id == id && c.remote != nil {
			return c
		}
	}
	if id > math.MaxUint32 {
		return nil
	}
	rc := d.remote.Class(uint32(id))
	if rc == nil {
		return nil
	}
	c := &d.classes[d.nextClass]
	d.nextClass = (d.nextClass + 1) % len(d.classes)
	lc := d.localClass(rc)
	*c = class{id: id, remote: rc, local: lc, lmap: d.leafMap(rc, lc)}
	return c
}

// localClass returns the class entities of remote class rc are stored as.
func (d *Decoder) localClass(rc *schema.Struct) *schema.Struct {
	if lc := d.local.Class(rc.ID); lc != nil {
		return lc
	}
	return rc
}

// leafMap returns, for each leaf of remote struct rs, the leaf of local
// struct ls with the same field ID path, or −1.
func (d *Decoder) leafMap(rs, ls *schema.Struct) []int {
	key := [2]*schema.Struct{rs, ls}
	if m, ok := d.maps[key]; ok {
		return m
	}
	m := make([]int, rs.Leaves)
	byPath := make(map[string]int, ls.Leaves)
	for i := 0; i < ls.Leaves; i++ {
		byPath[pathKey(ls.Leaf(i).Path)] = i
	}
	for i := 0; i < rs.Leaves; i++ {
		if rs == ls {
			m[i] = i
			continue
		}
		j, ok := byPath[pathKey(rs.Leaf(i).Path)]
		if !ok {
			j = -1
		}
		m[i] = j
	}
	d.maps[key] = m
	return m
}

func pathKey(p []uint32) string {
	b := make([]byte, 0, 4*len(p))
	for _, id := range p {
		b = append(b, byte(id), byte(id>>8), byte(id>>16), byte(id>>24))
	}
	return string(b)
}

// Apply decodes one segment into txn. On error the transaction holds a
// partial tick: the caller rolls it back.
func (d *Decoder) Apply(txn *state.Txn, seg []byte) error {
	if len(seg) > d.lim.MaxSegmentBytes {
		return &DecodeError{Err: fmt.Errorf("%w: segment of %d bytes > %d", wire.ErrLimit, len(seg), d.lim.MaxSegmentBytes)}
	}
	d.r.Reset(seg)
	d.entities, d.values = 0, 0
	err := d.apply(txn)
	if err == nil {
		err = d.r.Err()
	}
	if err != nil {
		return &DecodeError{Bit: d.r.Consumed(), Err: err}
	}
	return nil
}

func (d *Decoder) apply(txn *state.Txn) error {
	r := &d.r
	for {
		tag := r.Bits(3)
		if err := r.Err(); err != nil {
			return err
		}
		switch tag {
		case secEnd:
			// Only zero padding may follow.
			if rem := r.Remaining(); rem >= 8 || r.Bits(uint(rem)) != 0 {
				return fmt.Errorf("%w: trailing data after the end of the segment", wire.ErrMalformed)
			}
			return nil
		case secDestroy:
			if err := d.readIDs(nil); err != nil {
				return err
			}
			for _, slot := range d.ids {
				if err := txn.DestroySlot(slot); err != nil {
					return err
				}
			}
		case secCreate, secUpdate, secFill, secSet, secRanked:
			cid := r.U(4)
			c := d.class(cid)
			if r.Err() == nil && c == nil {
				return fmt.Errorf("%w: class %d", ErrUnknown, cid)
			}
			groups := r.Count(0, d.lim.MaxEntities, 8, "groups")
			for g := 0; g < groups && r.Err() == nil; g++ {
				if err := d.group(txn, uint8(tag), c); err != nil {
					return err
				}
			}
		default:
			return fmt.Errorf("%w: section tag %d", wire.ErrMalformed, tag)
		}
	}
}

// readIDs reads an ID block into d.ids, as slots. With ranked (a
// transaction), the block gives ranks among the entities the transaction's
// table held when it began, which readIDs turns into their slots.
func (d *Decoder) readIDs(ranked *state.Txn) error {
	r := &d.r
	n := r.Count(3, d.lim.MaxEntities-d.entities, 1, "entities")
	d.entities += n
	k := uint(r.Bits(6))
	d.ids = d.ids[:0]
	prev := int64(-1)
	i := d.readGaps(n, k)
	if i > 0 {
		prev = int64(d.ids[i-1])
	}
	for ; i < n && r.Err() == nil; i++ {
		gap := r.U(k)
		if gap > math.MaxUint32 {
			return fmt.Errorf("%w: entity slot gap %d out of range", wire.ErrMalformed, gap)
		}
		slot := prev + 1 + int64(gap)
		if slot >= 1<<state.SlotBits {
			return fmt.Errorf("%w: entity slot %d out of range", wire.ErrMalformed, slot)
		}
		d.ids = append(d.ids, uint32(slot))
		prev = slot
	}
	if ranked != nil && r.Err() == nil {
		for i, rank := range d.ids {
			slot, ok := ranked.HeldSlot(uint64(rank))
			if !ok {
				return fmt.Errorf("%w: entity rank %d, of %d entities held", ErrRank, rank, ranked.HeldLen())
			}
			d.ids[i] = slot
		}
	}
	return r.Err()
}

func (d *Decoder) group(txn *state.Txn, tag uint8, c *class) error {
	rc, lc := c.remote, c.local
	delta := tag == secUpdate || tag == secRanked
	if kind := planKind(tag); !d.reusePlan(rc, kind) {
		if err := d.readPlan(c, kind, delta); err != nil {
			return err
		}
	}
	var ranked *state.Txn
	if tag == secRanked {
		ranked = txn
	}
	if err := d.readIDs(ranked); err != nil {
		return err
	}
	if tag == secCreate {
		if err := d.readGens(); err != nil {
			return err
		}
	}
	start := 0
	if tag != secCreate && d.numeric && len(d.steps) > 0 && len(d.steps) <= chunkValues && !d.noRows {
		start = d.numericRows(txn, tag == secFill, rc, delta)
	}
	for i := start; i < len(d.ids); i++ {
		slot := d.ids[i]
		var e *state.Entity
		var err error
		switch tag {
		case secCreate:
			e, err = txn.Create(lc, state.MakeID(slot, d.gens[i]))
		case secFill:
			e = txn.AtSlot(slot)
			if e == nil || !txn.Fillable(slot) {
				err = fmt.Errorf("%w: fill for slot %d, neither created nor reset in this tick", state.ErrNotFound, slot)
			}
		default:
			e = txn.AtSlot(slot)
			if e == nil {
				err = fmt.Errorf("%w: %s of slot %d", state.ErrNotFound, map[uint8]string{secUpdate: "update", secRanked: "update", secSet: "set"}[tag], slot)
			}
		}
		if err == nil && e.Class().ID != rc.ID {
			err = fmt.Errorf("%w: slot %d holds a %s, not a %s", wire.ErrMalformed, slot, e.Class().Name, rc.Name)
		}
		if err != nil {
			return err
		}
		if err := d.entityValues(txn, e, rc, delta); err != nil {
			return err
		}
	}
	return d.r.Err()
}

// numericRows applies the values of a fill or update group whose fields
// are all numbers: a table of rows, one per entity, whose columns have
// fixed codes. A chunk of rows at a time, it reads the values with one
// Reader.Codes, checks everything that can fail, and only then applies
// them, in the order the entity-by-entity path would. It returns the
// number of entities applied. At a chunk that fails a check it stops, with
// the Reader back at the chunk's start, so that the entity-by-entity path
// reports the error exactly as it always has.
func (d *Decoder) numericRows(txn *state.Txn, fill bool, rc *schema.Struct, delta bool) int {
	d.allocRows()
	steps, m := d.steps, len(d.steps)
	per := chunkValues / m // rows per chunk
	for a := 0; a < len(d.ids); a += per {
		ids := d.ids[a:min(a+per, len(d.ids))]
		rows := d.rows[:len(ids)*m]
		save := d.r
		d.r.Codes(rows, d.codes)
		if !d.checkRows(txn, fill, rc, delta, ids, rows) {
			d.r = save
			return a
		}
		if d.deltas {
			// Every column a delta applied to a local field: W1's case.
			// checkRows made the rows the new values.
			txn.SetNumRows(d.ents, d.nums, rows)
			continue
		}
		for i, e := range d.ents {
			row := rows[i*m : i*m+m]
			for j := range steps {
				s := &steps[j]
				if s.slot < 0 {
					continue
				}
				u := row[j]
				switch s.code {
				case planDelta:
					u = s.addDelta(e.Num(int(s.slot)), unzigzag(u))
				case planU:
					if delta {
						u, _ = decodeDelta(s.t, e.Num(int(s.slot)), u)
					} else {
						u, _ = decodeFull(s.t, u)
					}
				}
				txn.SetNumAt(e, int(s.local), int(s.slot), u)
			}
		}
	}
	return len(d.ids)
}

// allocRows allocates the buffers of a chunk of rows, once: a chunk has
// at most chunkValues values and as many entities.
func (d *Decoder) allocRows() {
	if d.rows == nil {
		d.rows = make([]uint64, chunkValues)
		d.ents = make([]*state.Entity, 0, chunkValues)
	}
}

// checkRows reports whether a chunk of rows that numericRows read, for
// the entities in slots ids, would apply without error, and collects the
// entities in d.ents. When every step is a delta to a local field, it
// also turns the deltas into the values they make, entity by entity
// (slots ascend, so no entity's value is read after it is changed).
func (d *Decoder) checkRows(txn *state.Txn, fill bool, rc *schema.Struct, delta bool, ids []uint32, rows []uint64) bool {
	if d.r.Err() != nil {
		return false
	}
	d.ents = d.ents[:0]
	for _, slot := range ids {
		e := txn.AtSlot(slot)
		if e == nil || fill && !txn.Fillable(slot) || e.Class().ID != rc.ID {
			return false
		}
		d.ents = append(d.ents, e)
	}
	m := len(d.steps)
	if d.deltas {
		// steps is local: the writes to rows could otherwise change
		// d.steps, as far as the compiler knows.
		steps, rest := d.steps, rows
		for _, e := range d.ents {
			row := rest[:len(steps)]
			rest = rest[len(steps):]
			for j := range steps {
				s := &steps[j]
				dl := unzigzag(row[j])
				if !s.deltaFits(dl) {
					return false
				}
				row[j] = s.addDelta(e.Num(int(s.slot)), dl)
			}
		}
		return true
	}
	for j := range d.steps {
		s := &d.steps[j]
		switch s.code {
		case planDelta:
			for i := j; i < len(rows); i += m {
				if !s.deltaFits(unzigzag(rows[i])) {
					return false
				}
			}
		case planU:
			for i := j; i < len(rows); i += m {
				var ok bool
				if delta {
					_, ok = decodeDelta(s.t, 0, rows[i])
				} else {
					_, ok = decodeFull(s.t, rows[i])
				}
				if !ok {
					return false
				}
			}
		}
	}
	return true
}

// readGaps is the fast path of readIDs: it reads the slot gaps of n IDs,
// coded with U(k), a chunk at a time with one Reader.Codes, into d.ids.
// It stops at a chunk with a gap out of range or a read error, with the
// Reader back at the chunk's start so that readIDs reports the error
// where it always has, and returns the number of IDs read.
func (d *Decoder) readGaps(n int, k uint) int {
	if k > wire.MaxK || n <= 1 || d.noRows {
		return 0
	}
	d.allocRows()
	code := []wire.Code{{K: uint8(k)}}
	prev := int64(-1)
	for a := 0; a < n; a += chunkValues {
		gaps := d.rows[:min(n-a, chunkValues)]
		save := d.r
		d.r.Codes(gaps, code)
		ok := d.r.Err() == nil
		for _, gap := range gaps {
			prev += 1 + int64(gap&math.MaxUint32)
			ok = ok && gap <= math.MaxUint32 && prev < 1<<state.SlotBits
			d.ids = append(d.ids, uint32(prev))
		}
		if !ok {
			d.r = save
			d.ids = d.ids[:a]
			return a
		}
	}
	return n
}

// readGens reads the generations of the created entities of d.ids.
func (d *Decoder) readGens() error {
	r := &d.r
	k := uint(r.Bits(6))
	d.gens = d.gens[:0]
	for range d.ids {
		g := r.U(k)
		if g > math.MaxUint8 && r.Err() == nil {
			return fmt.Errorf("%w: generation %d out of range", wire.ErrMalformed, g)
		}
		d.gens = append(d.gens, uint8(g))
	}
	if k > wire.MaxK && r.Err() == nil {
		return fmt.Errorf("%w: code parameter %d", wire.ErrMalformed, k)
	}
	return r.Err()
}

// readTree reads a field tree of remote struct st into d.steps (group
// trees, with a code parameter per numeric leaf) and returns the number of
// steps read. base is the remote leaf index of st's first leaf.
// Field-ID gaps are U(gapK) codes: U(2), but U(0) in ranked update
// sections.
func (d *Decoder) readTree(st *schema.Struct, base int, delta bool, gapK uint, depth int) error {
	if depth >= d.lim.MaxDepth {
		return fmt.Errorf("%w: nesting deeper than %d", wire.ErrLimit, d.lim.MaxDepth)
	}
	r := &d.r
	n := r.Count(2, len(st.Fields), 2, "fields")
	d.fields += n
	prev := uint64(0)
	for i := 0; i < n && r.Err() == nil; i++ {
		id := prev + 1 + r.U(gapK)
		if id > math.MaxUint32 {
			return fmt.Errorf("%w: field ID out of range", wire.ErrMalformed)
		}
		prev = id
		f := st.Field(uint32(id))
		if r.Err() != nil {
			break
		}
		if f == nil || f.Deprecated {
			return fmt.Errorf("%w: field %d of %s", ErrUnknown, id, st.Name)
		}
		t := &f.Type
		switch {
		case t.Kind == schema.Nested:
			if err := d.readTree(t.Struct, base+f.Leaf, delta, gapK, depth+1); err != nil {
				return err
			}
			continue
		}
		s := step{leaf: int32(base + f.Leaf)}
		if t.Kind.Numeric() && rawBits(t, delta) == 0 {
			s.k = uint8(r.Bits(6))
			if s.k > wire.MaxK {
				return fmt.Errorf("%w: code parameter %d", wire.ErrMalformed, s.k)
			}
		}
		d.steps = append(d.steps, s)
	}
	return r.Err()
}

// readNum reads one numeric value of type t.
func (d *Decoder) readNum(t *schema.Type, k uint, delta bool, old uint64) (uint64, error) {
	r := &d.r
	if rb := rawBits(t, delta); rb != 0 {
		return r.Bits(rb), nil // every bit pattern of a raw field is valid
	}
	u := r.U(k)
	var v uint64
	var ok bool
	if delta {
		v, ok = decodeDelta(t, old, u)
	} else {
		v, ok = decodeFull(t, u)
	}
	if !ok && r.Err() == nil {
		return 0, fmt.Errorf("%w: value out of range for %s", wire.ErrMalformed, t)
	}
	return v, nil
}

func (d *Decoder) entityValues(txn *state.Txn, e *state.Entity, rc *schema.Struct, delta bool) error {
	r := &d.r
	for i := range d.steps {
		s := &d.steps[i]
		switch s.code {
		case planDelta:
			d := unzigzag(r.U(uint(s.k)))
			if !s.deltaFits(d) && r.Err() == nil {
				return fmt.Errorf("%w: delta %d does not fit %d bits", wire.ErrMalformed, d, s.width)
			}
			if s.slot >= 0 {
				txn.SetNumAt(e, int(s.local), int(s.slot), s.addDelta(e.Num(int(s.slot)), d))
			}
		case planRaw:
			v := r.Bits(uint(s.width))
			if s.slot >= 0 {
				txn.SetNumAt(e, int(s.local), int(s.slot), v)
			}
		case planU:
			var old uint64
			if delta && s.slot >= 0 {
				old = e.Num(int(s.slot))
			}
			v, err := d.readNum(s.t, uint(s.k), delta, old)
			if err != nil {
				return err
			}
			if s.slot >= 0 {
				txn.SetNumAt(e, int(s.local), int(s.slot), v)
			}
		case planStr:
			str := r.String(d.lim.MaxStringBytes)
			if s.local >= 0 {
				txn.SetStr(e, int(s.local), str)
			}
		default:
			var lt *schema.Type
			if s.local >= 0 {
				lt = &e.Class().Leaf(int(s.local)).Field.Type
			}
			if !delta || r.Bool() {
				c, err := d.readContainer(s.t, lt, 1)
				if err != nil {
					return err
				}
				if lt != nil {
					txn.ReplaceContainer(e, int(s.local), c)
				}
				break
			}
			if err := d.containerOps(txn, e, s.t, int(s.local)); err != nil {
				return err
			}
		}
		if err := r.Err(); err != nil {
			return err
		}
	}
	return nil
}

func (d *Decoder) countValues(n int) error {
	d.values += n
	if d.values > d.lim.MaxValues {
		return fmt.Errorf("%w: more than %d values in one segment", wire.ErrLimit, d.lim.MaxValues)
	}
	return nil
}

// readElem reads one element of remote type t; lt is the local element
// type, or nil when the element is skipped.
func (d *Decoder) readElem(t, lt *schema.Type, k uint, depth int) (state.Value, error) {
	switch {
	case t.Kind.Numeric():
		v, err := d.readNum(t, k, false, 0)
		return state.Value{N: v}, err
	case t.Kind == schema.Nested:
		var ls *schema.Struct
		if lt != nil {
			ls = lt.Struct
		}
		rec, err := d.readRecord(t.Struct, ls, nil, depth+1)
		return state.Value{R: rec}, err
	}
	return state.Value{S: d.r.String(d.lim.MaxStringBytes)}, nil
}

func (d *Decoder) readK(t *schema.Type, n int) uint {
	if n == 0 || !t.Kind.Numeric() || rawBits(t, false) != 0 {
		return 0
	}
	k := uint(d.r.Bits(6))
	if k > wire.MaxK {
		d.r.Fail(fmt.Errorf("%w: code parameter %d", wire.ErrMalformed, k))
	}
	return k
}

func (d *Decoder) readKey(key schema.Kind, k uint) state.Value {
	if key == schema.String {
		return state.Value{S: d.r.String(d.lim.MaxStringBytes)}
	}
	t := schema.Type{Kind: key}
	u := d.r.U(k)
	v, ok := decodeFull(&t, u)
	if !ok && d.r.Err() == nil {
		d.r.Fail(fmt.Errorf("%w: key out of range for %s", wire.ErrMalformed, key))
	}
	return state.Value{N: v}
}

func (d *Decoder) elemType(lt *schema.Type) *schema.Type {
	if lt == nil {
		return nil
	}
	return lt.Elem
}

// readContainer reads a whole container of remote type t and returns it
// as a container of local type lt (or of t when lt is nil, to be dropped).
func (d *Decoder) readContainer(t, lt *schema.Type, depth int) (any, error) {
	if depth >= d.lim.MaxDepth {
		return nil, fmt.Errorf("%w: nesting deeper than %d", wire.ErrLimit, d.lim.MaxDepth)
	}
	if lt == nil {
		lt = t
	}
	r := &d.r
	n := r.Count(4, d.lim.MaxContainerLen, 1, "container length")
	if err := d.countValues(n); err != nil {
		return nil, err
	}
	switch t.Kind {
	case schema.List:
		vals := make([]state.Value, 0, n)
		k := d.readK(t.Elem, n)
		for i := 0; i < n && r.Err() == nil; i++ {
			v, err := d.readElem(t.Elem, lt.Elem, k, depth)
			if err != nil {
				return nil, err
			}
			vals = append(vals, v)
		}
		return state.NewList(lt, vals), r.Err()
	case schema.Map:
		keys := make([]state.Value, 0, n)
		vals := make([]state.Value, 0, n)
		kk := uint(0)
		if t.Key != schema.String && n > 0 {
			kk = uint(r.Bits(6))
		}
		vk := d.readK(t.Elem, n)
		for i := 0; i < n && r.Err() == nil; i++ {
			keys = append(keys, d.readKey(t.Key, kk))
			if i > 0 && !keyLess(t.Key, keys[i-1], keys[i]) && r.Err() == nil {
				return nil, fmt.Errorf("%w: map keys not in ascending order", wire.ErrMalformed)
			}
			v, err := d.readElem(t.Elem, lt.Elem, vk, depth)
			if err != nil {
				return nil, err
			}
			vals = append(vals, v)
		}
		return state.NewMapOf(lt, keys, vals), r.Err()
	default: // Bag
		keys := make([]uint64, 0, n)
		items := make([]*state.Record, 0, n)
		kk := uint(0)
		if n > 0 {
			kk = uint(r.Bits(6))
		}
		for i := 0; i < n && r.Err() == nil; i++ {
			keys = append(keys, d.readKey(t.Key, kk).N)
			if i > 0 && !keyLess(t.Key, state.Value{N: keys[i-1]}, state.Value{N: keys[i]}) && r.Err() == nil {
				return nil, fmt.Errorf("%w: bag keys not in ascending order", wire.ErrMalformed)
			}
			rec, err := d.readRecord(t.Struct, lt.Struct, nil, depth+1)
			if err != nil {
				return nil, err
			}
			items = append(items, rec)
		}
		return state.NewBagOf(lt, keys, items), r.Err()
	}
}

// DecodeRecord decodes data, a standalone record of the sender's struct
// rs (as Encoder.AppendRecord writes it), into a record of the local
// struct ls: the arguments of an RPC. The record belongs to the decoder
// and is valid until the next DecodeRecord for ls; decoding allocates
// nothing unless the record holds strings or containers.
func (d *Decoder) DecodeRecord(rs, ls *schema.Struct, data []byte) (*state.Record, error) {
	if len(data) > d.lim.MaxSegmentBytes {
		return nil, &DecodeError{Err: fmt.Errorf("%w: record of %d bytes", wire.ErrLimit, len(data))}
	}
	if d.scratch == nil {
		d.scratch = make(map[*schema.Struct]state.Builder)
	}
	b, ok := d.scratch[ls]
	if ok {
		b.Reset()
	} else {
		b = state.Build(ls)
		d.scratch[ls] = b
	}
	d.r.Reset(data)
	d.entities, d.values = 0, 0
	d.steps = d.ownSteps[:0]
	_, err := d.readRecordInto(rs, ls, b, nil, 0)
	d.ownSteps = d.steps
	if err == nil {
		err = d.r.Err()
	}
	if err == nil {
		if rem := d.r.Remaining(); rem >= 8 || d.r.Bits(uint(rem)) != 0 {
			err = fmt.Errorf("%w: trailing data after the record", wire.ErrMalformed)
		}
	}
	if err != nil {
		return nil, &DecodeError{Bit: d.r.Consumed(), Err: err}
	}
	return b.Record(), nil
}

// readRecord reads a standalone struct value of remote type rs into a new
// record of local type ls (rs when ls is nil). With into set, the values
// are applied to an existing bag item through txn instead.
func (d *Decoder) readRecord(rs, ls *schema.Struct, into *itemTarget, depth int) (*state.Record, error) {
	if ls == nil {
		ls = rs
	}
	var b state.Builder
	if into == nil {
		b = state.Build(ls)
	}
	return d.readRecordInto(rs, ls, b, into, depth)
}

// readRecordInto is readRecord with the record to fill given.
func (d *Decoder) readRecordInto(rs, ls *schema.Struct, b state.Builder, into *itemTarget, depth int) (*state.Record, error) {
	if depth >= d.lim.MaxDepth {
		return nil, fmt.Errorf("%w: nesting deeper than %d", wire.ErrLimit, d.lim.MaxDepth)
	}
	if err := d.countValues(1); err != nil {
		return nil, err
	}
	lmap := d.leafMap(rs, ls)
	start := len(d.steps)
	if err := d.readTree(rs, 0, false, 2, depth); err != nil {
		return nil, err
	}
	// d.steps may grow while nested records decode: index, don't range.
	end := len(d.steps)
	for i := start; i < end; i++ {
		s := d.steps[i]
		l := rs.Leaf(int(s.leaf))
		t := &l.Field.Type
		local := lmap[s.leaf]
		switch k := t.Kind; {
		case k.Numeric():
			v, err := d.readNum(t, uint(s.k), false, 0)
			if err != nil {
				return nil, err
			}
			if local < 0 {
				break
			}
			if into != nil {
				into.txn.SetItemNum(into.e, into.leaf, into.key, into.rec, local, v)
			} else {
				b.SetNum(local, v)
			}
		case k == schema.String || k == schema.Bytes:
			str := d.r.String(d.lim.MaxStringBytes)
			if local < 0 {
				break
			}
			if into != nil {
				into.txn.SetItemStr(into.e, into.leaf, into.key, into.rec, local, str)
			} else {
				b.SetStr(local, str)
			}
		default:
			var lt *schema.Type
			if local >= 0 {
				lt = &ls.Leaf(local).Field.Type
			}
			c, err := d.readContainer(t, lt, depth+1)
			if err != nil {
				return nil, err
			}
			if local < 0 {
				break
			}
			if into != nil {
				into.txn.SetItemContainer(into.e, into.leaf, into.key, into.rec, local, c)
			} else {
				b.SetContainer(local, c)
			}
		}
		if err := d.r.Err(); err != nil {
			return nil, err
		}
	}
	d.steps = d.steps[:start]
	return b.Record(), nil
}

type itemTarget struct {
	txn  *state.Txn
	e    *state.Entity
	leaf int
	key  uint64
	rec  *state.Record
}

// containerOps reads and applies the operations on one container of e;
// local is the local leaf, or −1 when the container is skipped.
func (d *Decoder) containerOps(txn *state.Txn, e *state.Entity, t *schema.Type, local int) error {
	r := &d.r
	var lt *schema.Type
	if local >= 0 {
		lt = &e.Class().Leaf(local).Field.Type
	}
	switch t.Kind {
	case schema.List:
		n := r.Count(2, d.lim.MaxContainerLen, 3, "list operations")
		if err := d.countValues(n); err != nil {
			return err
		}
		k := d.readK(t.Elem, n)
		for i := 0; i < n && r.Err() == nil; i++ {
			op := state.OpCode(r.Bits(3))
			if (op > state.OpPatch || op == state.OpPatch && t.Elem.Kind != schema.Nested) && r.Err() == nil {
				return fmt.Errorf("%w: list operation %d", wire.ErrMalformed, op)
			}
			idx := 0
			if op != state.OpPush && op != state.OpClear {
				idx = int(min(r.U(4), uint64(d.lim.MaxContainerLen)+1))
			}
			var v state.Value
			if op == state.OpPatch {
				var err error
				if v, err = d.readPatch(e, t.Elem, lt, local, idx); err != nil {
					return err
				}
				op = state.OpSet
			} else if op == state.OpPush || op == state.OpInsert || op == state.OpSet {
				var err error
				if v, err = d.readElem(t.Elem, d.elemType(lt), k, 1); err != nil {
					return err
				}
			}
			if r.Err() != nil {
				break
			}
			if local < 0 {
				continue
			}
			var err error
			switch op {
			case state.OpPush:
				if txn.ListLen(e, local) >= d.lim.MaxContainerLen {
					return fmt.Errorf("%w: list longer than %d", wire.ErrLimit, d.lim.MaxContainerLen)
				}
				err = txn.ListInsert(e, local, txn.ListLen(e, local), v)
			case state.OpInsert:
				if txn.ListLen(e, local) >= d.lim.MaxContainerLen {
					return fmt.Errorf("%w: list longer than %d", wire.ErrLimit, d.lim.MaxContainerLen)
				}
				err = txn.ListInsert(e, local, idx, v)
			case state.OpRemove:
				err = txn.ListRemove(e, local, idx)
			case state.OpSet:
				err = txn.ListSet(e, local, idx, v)
			case state.OpClear:
				txn.ListClear(e, local)
			default:
				err = fmt.Errorf("%w: list operation %d", wire.ErrMalformed, op)
			}
			if err != nil {
				return err
			}
		}
	case schema.Map:
		for pass := 0; pass < 2 && r.Err() == nil; pass++ {
			n := r.Count(2, d.lim.MaxContainerLen, 1, "map keys")
			if err := d.countValues(n); err != nil {
				return err
			}
			kk := uint(0)
			if t.Key != schema.String && n > 0 {
				kk = uint(r.Bits(6))
			}
			vk := uint(0)
			if pass == 1 {
				vk = d.readK(t.Elem, n)
			}
			for i := 0; i < n && r.Err() == nil; i++ {
				key := d.readKey(t.Key, kk)
				if pass == 0 {
					if local >= 0 && r.Err() == nil {
						if err := txn.MapDelete(e, local, key); err != nil {
							return err
						}
					}
					continue
				}
				v, err := d.readElem(t.Elem, d.elemType(lt), vk, 1)
				if err != nil {
					return err
				}
				if local >= 0 && r.Err() == nil {
					if e.Map(e.Class().Leaf(local).Obj).Len() >= d.lim.MaxContainerLen {
						return fmt.Errorf("%w: map larger than %d", wire.ErrLimit, d.lim.MaxContainerLen)
					}
					txn.MapPut(e, local, key, v)
				}
			}
		}
	case schema.Bag:
		var ls *schema.Struct
		if lt != nil {
			ls = lt.Struct
		}
		for pass := 0; pass < 3 && r.Err() == nil; pass++ {
			n := r.Count(2, d.lim.MaxContainerLen, 1, "bag keys")
			if err := d.countValues(n); err != nil {
				return err
			}
			kk := uint(0)
			if n > 0 {
				kk = uint(r.Bits(6))
			}
			for i := 0; i < n && r.Err() == nil; i++ {
				key := d.readKey(t.Key, kk).N
				if r.Err() != nil {
					break
				}
				switch pass {
				case 0:
					if local >= 0 {
						if err := txn.BagRemove(e, local, key); err != nil {
							return err
						}
					}
				case 1:
					rec, err := d.readRecord(t.Struct, ls, nil, 2)
					if err != nil {
						return err
					}
					if local >= 0 {
						if e.Bag(e.Class().Leaf(local).Obj).Len() >= d.lim.MaxContainerLen {
							return fmt.Errorf("%w: bag larger than %d", wire.ErrLimit, d.lim.MaxContainerLen)
						}
						txn.BagPut(e, local, key, rec)
					}
				case 2:
					var into *itemTarget
					if local >= 0 {
						item, err := txn.BagItem(e, local, key)
						if err != nil {
							return err
						}
						into = &itemTarget{txn: txn, e: e, leaf: local, key: key, rec: item}
					}
					if _, err := d.readRecord(t.Struct, ls, into, 2); err != nil {
						return err
					}
				}
			}
		}
	}
	return r.Err()
}

// readPatch reads a patch of struct element idx of the list at local
// leaf of e (−1: a list the client skips), of remote element type t and
// local list type lt, and returns the patched element: a copy of the
// element with the patch's fields set, which replaces it.
func (d *Decoder) readPatch(e *state.Entity, t, lt *schema.Type, local, idx int) (state.Value, error) {
	ls := t.Struct
	if lt != nil {
		ls = lt.Elem.Struct
	}
	var b state.Builder
	if local >= 0 {
		l := e.List(e.Class().Leaf(local).Obj)
		if idx >= l.Len() {
			return state.Value{}, fmt.Errorf("%w: patch of element %d of a list of %d", state.ErrIndex, idx, l.Len())
		}
		b = state.BuildFrom(l.At(idx).R)
	} else {
		b = state.Build(ls)
	}
	rec, err := d.readRecordInto(t.Struct, ls, b, nil, 2)
	return state.Value{R: rec}, err
}

// keyLess reports whether key a sorts strictly before key b, in the order
// encoders write keys: strings bytewise, signed integers as signed.
func keyLess(k schema.Kind, a, b state.Value) bool {
	switch {
	case k == schema.String:
		return a.S < b.S
	case k.Signed():
		return int64(a.N) < int64(b.N)
	}
	return a.N < b.N
}
