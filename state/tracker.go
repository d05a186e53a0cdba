package state

import (
	"errors"
	"fmt"
	"math"
	"math/bits"
	"slices"
	"unsafe"

	"github.com/replicago/replica/schema"
)

// ID is an entity's network ID: a slot in its low SlotBits bits and the
// slot's generation in the high bits. A slot is reused only after the tick
// that freed it is committed, first in first out, and each reuse bumps its
// generation, so a stale ID held by a client or a reference names no
// entity rather than the wrong one until its slot has been reused 256
// times.
type ID uint32

// SlotBits is the number of bits of an ID that name the slot.
const SlotBits = 24

const slotMask = 1<<SlotBits - 1

// MakeID returns the ID of generation gen of slot.
func MakeID(slot uint32, gen uint8) ID { return ID(uint32(gen)<<SlotBits | slot&slotMask) }

// Slot returns the slot of id.
func (id ID) Slot() uint32 { return uint32(id) & slotMask }

// Gen returns the generation of id.
func (id ID) Gen() uint8 { return uint8(id >> SlotBits) }

// An Entity is a replicated object: a record of its class plus its network
// ID. Server entities belong to a [Tracker], which records every change made
// through generated setters; client entities are changed only by a [Txn].
type Entity struct {
	Record
	id ID
	// Server entities: 1 + the index of this tick's change in tr.cur, or
	// 0; after Destroy (which drops tr) that index or −1, see destroyed.
	// Client entities, which have no tracker: chOwned while the client
	// owns the entity, chGone once a transaction destroyed it, or 0.
	ch int32
	// lod is a client entity's level of detail + 1, or 0 for every band
	// (docs/protocol.md §5.8).
	lod uint8
	tr  *Tracker
}

// Level returns the level of detail a client holds e at (docs/protocol.md
// §5.8): its leaves of level-of-detail bands 1..level are known, those of
// higher bands are not and hold zero values. all is true when e is held
// at every band of its class, as every entity of a room and every server
// entity is; level is then −1.
func (e *Entity) Level() (level int, all bool) {
	if e == nil || e.lod == 0 {
		return -1, true
	}
	return int(e.lod) - 1, false
}

// chOwned in Entity.ch marks a client entity its client owns, and chGone
// one a transaction destroyed: values no change index has.
const (
	chOwned = math.MinInt32
	chGone  = math.MinInt32 + 1
)

// Owned reports whether this client owns the entity: on a client replica,
// as the server's TICK messages say (docs/protocol.md §10.2). Server
// entities report false: the server keeps their owners itself
// (replica.Server.Owner). Owned on a nil entity is false.
func (e *Entity) Owned() bool { return e != nil && e.tr == nil && e.ch == chOwned }

// ReadOnly reports whether e is an entity of a client replica: one that
// only the server's updates, applied by a [Txn], change, and whose setters
// panic with an error wrapping [ErrReadOnly]. It is false for nil and for
// the entities of a [Tracker], destroyed ones included. Generated code
// tells with it a client's entity, read through the generated view type,
// from a server's.
func (e *Entity) ReadOnly() bool {
	// A client entity never has a tracker and holds 0, chOwned or chGone;
	// a server entity that lost its tracker to Destroy holds a change
	// index or −1 (see destroyed).
	return e != nil && e.tr == nil && (e.ch == 0 || e.ch == chOwned || e.ch == chGone)
}

func (e *Entity) setOwned(owned bool) {
	e.ch = 0
	if owned {
		e.ch = chOwned
	}
}

// newEntity allocates an entity of class c, its values in the same block.
func newEntity(c *schema.Struct, id ID, tr *Tracker) *Entity {
	p, data := allocBlock(entityType, c)
	e := (*Entity)(p)
	e.id, e.tr = id, tr
	e.init(c, data)
	return e
}

// ID returns the entity's network ID.
func (e *Entity) ID() ID {
	if e == nil {
		return 0
	}
	return e.id
}

// Class returns the entity's class.
func (e *Entity) Class() *schema.Struct { return e.t }

// Handle returns a handle on the entity's own fields.
// A nil entity (a zero generated value) gives the zero, invalid Handle.
func (e *Entity) Handle() Handle {
	if e == nil {
		return Handle{}
	}
	return Handle{e: e, r: &e.Record, bagLeaf: -1, pin: -1}
}

// SetNum sets numeric leaf of e to v, given in its plain representation
// (see [Normalize]), and records the change. It is the fast path of the
// setters generated for an entity's own fields. A NaN for a quantized
// float is refused (see [ErrNaN]): the field keeps its value. It panics, with an error
// wrapping [ErrInvalidHandle], if e is nil or destroyed, and with one
// wrapping [ErrReadOnly] if e belongs to a client replica.
func (e *Entity) SetNum(leaf int, v uint64) {
	if e == nil || e.tr == nil {
		e.mustWrite()
	}
	l := e.t.Leaf(leaf)
	if t := &l.Field.Type; t.Kind != schema.Float32 || t.Quant.Enabled() {
		if RefusesNaN(t, v) {
			if e.tr != nil {
				e.noteRefusal(&NaNError{Class: e.t.Name, Field: fieldPath(e.t, leaf)})
			}
			return
		}
		v = Normalize(t, v)
	} else {
		v = uint64(uint32(v))
	}
	s := l.Num
	p := e.numPtr(s)
	old := load(p, s)
	if old == v {
		return
	}
	store(p, s, v)
	if e.tr == nil {
		return
	}
	var c *Change
	if e.ch == 0 {
		c = e.change()
	} else if c = e.tr.cur[e.ch-1]; c.Created {
		return
	}
	w, b := leaf>>6, uint64(1)<<(leaf&63)
	if c.dirty[w]&b == 0 {
		c.dirty[w] |= b
		c.setBase(s, old)
	}
}

// RefusesNaN reports whether an entity refuses v, in plain representation
// (see [Normalize]), for a numeric field of type t: a NaN for a quantized
// float, which has no code for it (see [ErrNaN]).
func RefusesNaN(t *schema.Type, v uint64) bool {
	if !t.Quant.Enabled() {
		return false
	}
	if t.Kind == schema.Float32 {
		f := math.Float32frombits(uint32(v))
		return f != f
	}
	f := math.Float64frombits(v)
	return f != f
}

// NewEntity returns an untracked entity of class c with the given ID. Client
// replicas create their entities this way, and change them only through a
// [Txn]: setters on an untracked entity panic (see [ErrReadOnly]).
func NewEntity(c *schema.Struct, id ID) *Entity {
	return newEntity(c, id, nil)
}

// Errors of Spawn.
var (
	// ErrUnknownClass is returned when spawning a class the tracker's
	// schema does not contain.
	ErrUnknownClass = errors.New("state: unknown class")
	// ErrFull is returned when every slot holds a live entity.
	ErrFull = errors.New("state: no free entity slot")
)

// A Tracker owns the server's entities and records what changes in each
// tick. It is not safe for concurrent use: the tick goroutine owns it.
type Tracker struct {
	schema   *schema.Schema
	ents     []*Entity // by slot; nil for free slots and slot 0
	gens     []uint8   // by slot: the generation of its current or next entity
	free     []uint32  // slots reusable now, oldest first, from freeHead on
	freeHead int
	freed    []uint32 // slots freed in the current tick
	live     int

	cur  []*Change // changes of the tick in progress, in first-touch order
	done Changeset // the last committed tick
	// Recycled change records, a pool per class (by class ID; the last
	// pool for the classes of IDs over maxPooledID): a record keeps the
	// buffers of its class (its base values, its dirty set, its
	// container records), so that reusing it for the class allocates
	// nothing, where a record of one class reused for a larger one grew.
	pools    []changePool
	keyPool  []*KeyChange
	keysMade int // key records made: keyPool has room for them all
	// The changes of the tick in progress and of the last one that have
	// container changes, whose key records go back to keyPool at commit.
	contsCur, contsDone []*Change

	limits   Limits
	depths   map[*schema.Struct]int // Struct.Depth of the structs stored in containers, once computed
	refusals []error                // writes refused since TakeRefusals, at most maxRefusals
	refused  int                    // their number
}

// A changePool holds one class's recycled change records, and the records
// of the tick in progress and of the last committed one, which return to
// it at the next commits.
type changePool struct {
	free      []*Change // they may keep an entity of an earlier tick until reused
	cur, done []*Change
}

// maxPooledID is the largest class ID with a change pool of its own.
const maxPooledID = 255

// NewTracker returns a tracker for the classes of s.
func NewTracker(s *schema.Schema) *Tracker {
	n := 1
	for _, c := range s.Classes {
		if c.ID <= maxPooledID {
			n = max(n, int(c.ID)+2)
		}
	}
	return &Tracker{schema: s, ents: make([]*Entity, 1), gens: make([]uint8, 1), done: Changeset{Schema: s},
		limits: Limits{}.withDefaults(), pools: make([]changePool, n)}
}

// poolOf returns the change pool of class c.
func (t *Tracker) poolOf(c *schema.Struct) *changePool {
	if i := int(c.ID); i < len(t.pools)-1 {
		return &t.pools[i]
	}
	return &t.pools[len(t.pools)-1]
}

// Schema returns the tracker's schema.
func (t *Tracker) Schema() *schema.Schema { return t.schema }

// Spawn creates an entity of class c with every field at its zero value and
// records its creation in the current tick.
func (t *Tracker) Spawn(c *schema.Struct) (*Entity, error) {
	if t.schema.Class(c.ID) != c {
		return nil, fmt.Errorf("%w: %s (ID %d)", ErrUnknownClass, c.Name, c.ID)
	}
	var slot uint32
	if t.freeHead < len(t.free) {
		slot = t.free[t.freeHead]
		t.freeHead++
	} else {
		if len(t.ents) > slotMask {
			return nil, ErrFull
		}
		slot = uint32(len(t.ents))
		t.ents = append(t.ents, nil)
		t.gens = append(t.gens, 0)
	}
	e := newEntity(c, MakeID(slot, t.gens[slot]), t)
	t.ents[slot] = e
	t.live++
	e.change().Created = true
	return e, nil
}

// Destroy removes e and records its destruction in the current tick. An
// entity created and destroyed in the same tick leaves no trace. Destroying
// nil, or an entity already destroyed, does nothing.
func (t *Tracker) Destroy(e *Entity) {
	if e == nil || e.tr != t || t.Entity(e.id) != e {
		return
	}
	slot := e.id.Slot()
	t.ents[slot] = nil
	t.gens[slot]++
	t.freed = append(t.freed, slot)
	t.live--
	e.change().Destroyed = true
	e.tr = nil // later writes panic: see destroyed
}

// Entity returns the live entity with the given ID, or nil.
func (t *Tracker) Entity(id ID) *Entity {
	slot := id.Slot()
	if int(slot) >= len(t.ents) {
		return nil
	}
	if e := t.ents[slot]; e != nil && e.id == id {
		return e
	}
	return nil
}

// Created reports whether e was spawned by t in the current tick, the
// one the next Commit ends: no changeset has reported it yet.
func (t *Tracker) Created(e *Entity) bool {
	return e != nil && e.tr == t && e.ch > 0 && t.cur[e.ch-1].Created
}

// Len returns the number of live entities.
func (t *Tracker) Len() int { return t.live }

// AppendEntities appends every live entity, in ascending slot order, to dst.
func (t *Tracker) AppendEntities(dst []*Entity) []*Entity {
	for _, e := range t.ents {
		if e != nil {
			dst = append(dst, e)
		}
	}
	return dst
}

// Commit ends the current tick and returns its changeset. The changeset and
// everything it references stay valid until the next call to Commit.
func (t *Tracker) Commit() *Changeset {
	// The last tick's records go back to their pools (below) without
	// being read: change clears a record when it is reused, so only
	// those with container changes, which hold pooled key records, are
	// visited. A commit then costs no cache miss per record of the last
	// tick.
	for _, c := range t.contsDone {
		t.recycleConts(c)
	}
	clear(t.contsDone)
	t.contsDone, t.contsCur = t.contsCur, t.contsDone[:0]
	clear(t.done.Changes) // the pools own them now; the array must not pin them
	t.done.Changes = t.done.Changes[:0]
	if cap(t.done.Changes) > 4*len(t.cur)+256 {
		t.done.Changes = nil
	}
	t.done.Tick++
	// Slots freed in the tick become reusable now, after every older one.
	if t.freeHead > len(t.free)/2 {
		t.free = append(t.free[:0], t.free[t.freeHead:]...)
		t.freeHead = 0
	}
	t.free = append(t.free, t.freed...)
	t.freed = t.freed[:0]
	for _, c := range t.cur {
		c.Entity.ch = 0
		if c.Destroyed {
			c.Entity.ch = -1 // see destroyed
		}
		if c.Created && c.Destroyed {
			continue // no trace; its pool takes the record back with the others
		}
		t.done.Changes = append(t.done.Changes, c)
	}
	clear(t.cur)
	t.cur = t.cur[:0]
	// The last tick's records go back to their pools. Keep enough of each
	// class's for a tick like this one; let a spike (a mass spawn) go to
	// the garbage collector.
	for i := range t.pools {
		p := &t.pools[i]
		if len(p.done)+len(p.cur)+len(p.free) == 0 {
			continue
		}
		keep := 2*len(p.cur) + 16
		if len(p.free) > keep {
			clear(p.free[keep:])
			p.free = p.free[:keep]
		}
		if cap(p.free) < keep {
			p.free = slices.Grow(p.free, 2*keep-len(p.free)) // twice: few ticks need more
		}
		n := min(len(p.done), keep-len(p.free))
		p.free = append(p.free, p.done[:n]...)
		clear(p.done)
		p.done, p.cur = p.cur, p.done[:0]
		if cap(p.cur) < len(p.done) {
			p.cur = make([]*Change, 0, 2*len(p.done)) // likewise
		}
		if cap(p.free) > 8*keep {
			p.free = slices.Clip(slices.Clone(p.free))
		}
	}
	if keep := 2*len(t.done.Changes) + 16; cap(t.cur) > 4*keep {
		t.cur = nil
	}
	return &t.done
}

// recycleConts returns the container change records of c to the pools.
func (t *Tracker) recycleConts(c *Change) {
	for _, cc := range c.conts[:c.nconts] {
		for _, k := range cc.Keys {
			t.keyPool = append(t.keyPool, k)
		}
		for _, k := range cc.SKeys {
			t.keyPool = append(t.keyPool, k)
		}
		clear(cc.Keys)
		clear(cc.SKeys)
		cc.Ops = cc.Ops[:0]
		cc.Whole = false
	}
	c.nconts = 0
}

func (e *Entity) change() *Change {
	t := e.tr
	if e.ch != 0 {
		return t.cur[e.ch-1]
	}
	var c *Change
	p := t.poolOf(e.t)
	if n := len(p.free); n > 0 {
		c, p.free = p.free[n-1], p.free[:n-1]
	} else {
		c = new(Change)
	}
	p.cur = append(p.cur, c)
	words := (e.t.Leaves + 63) / 64
	c.dirty = slices.Grow(c.dirty[:0], words)[:words]
	clear(c.dirty)
	c.base = slices.Grow(c.base[:0], e.t.NumBytes)[:e.t.NumBytes]
	c.Entity, c.Created, c.Destroyed = e, false, false
	t.cur = append(t.cur, c)
	e.ch = int32(len(t.cur))
	return c
}

func (t *Tracker) keyChange(existed bool) *KeyChange {
	var k *KeyChange
	if n := len(t.keyPool); n > 0 {
		k, t.keyPool = t.keyPool[n-1], t.keyPool[:n-1]
		clear(k.Dirty)
		k.Dirty = k.Dirty[:0]
		k.Added, k.Removed = false, false
	} else {
		k = new(KeyChange)
		if t.keysMade++; cap(t.keyPool) < t.keysMade {
			// Room for every key record, so that taking them all
			// back never grows the pool.
			t.keyPool = slices.Grow(t.keyPool, 2*t.keysMade-len(t.keyPool))
		}
	}
	k.Existed = existed
	return k
}

// tracked reports whether changes to e must be recorded now.
func (e *Entity) tracked() bool {
	return e != nil && e.tr != nil && (e.ch == 0 || !e.tr.cur[e.ch-1].Created)
}

func (e *Entity) markNum(leaf, slot int, old uint64) {
	c := e.change()
	w, b := leaf>>6, uint64(1)<<(leaf&63)
	if c.dirty[w]&b == 0 {
		c.dirty[w] |= b
		c.setBase(slot, old)
	}
}

func (e *Entity) markLeaf(leaf int) {
	c := e.change()
	c.dirty[leaf>>6] |= 1 << (leaf & 63)
}

func (e *Entity) cont(leaf int) *ContChange {
	c := e.change()
	c.dirty[leaf>>6] |= 1 << (leaf & 63)
	for _, cc := range c.conts[:c.nconts] {
		if cc.Leaf == leaf {
			return cc
		}
	}
	if c.nconts == 0 {
		e.tr.contsCur = append(e.tr.contsCur, c)
	}
	if c.nconts == len(c.conts) {
		c.conts = append(c.conts, &ContChange{})
	}
	cc := c.conts[c.nconts]
	c.nconts++
	cc.Leaf = leaf
	return cc
}

// listOp records a list operation on the entity's list at leaf.
func (e *Entity) listOp(leaf int, l *List, op ListOp) {
	cc := e.cont(leaf)
	if cc.Whole {
		return
	}
	// Past this many ops the whole list is cheaper to send and to keep.
	if len(cc.Ops) > len(l.v)+8 {
		cc.Whole = true
		cc.Ops = cc.Ops[:0]
		return
	}
	cc.Ops = append(cc.Ops, op)
}

// keyed returns the change record of key k in the map or bag at leaf.
func (e *Entity) keyed(leaf int, k Value, existed bool) *KeyChange {
	cc := e.cont(leaf)
	if l := e.t.Leaf(leaf); l.Field.Type.Kind == schema.Map && l.Field.Type.Key == schema.String {
		if cc.SKeys == nil {
			cc.SKeys = make(map[string]*KeyChange)
		}
		kc := cc.SKeys[k.S]
		if kc == nil {
			kc = e.tr.keyChange(existed)
			cc.SKeys[k.S] = kc
		}
		return kc
	}
	if cc.Keys == nil {
		cc.Keys = make(map[uint64]*KeyChange)
	}
	kc := cc.Keys[k.N]
	if kc == nil {
		kc = e.tr.keyChange(existed)
		cc.Keys[k.N] = kc
	}
	return kc
}

// A Changeset is what changed in one tick: per entity, whether it was
// created or destroyed, which leaves changed and, for containers, which
// operations or keys. It is the one input of every consumer of a tick:
// network encoders, persistence, history and replay.
type Changeset struct {
	Schema  *schema.Schema // the classes of every changed entity
	Tick    uint64
	Changes []*Change // in the order entities were first touched in the tick
}

// A Change is what happened to one entity in a tick.
//
// A created entity is sent whole, so its dirty set is not maintained. A
// destroyed entity's record is still readable until the next commit.
type Change struct {
	Entity    *Entity
	Created   bool
	Destroyed bool

	dirty  []uint64 // leaf bit set
	base   []byte   // numeric storage at tick start, laid out as the record's (8-byte aligned, as every allocation of 8 bytes or more); valid for dirty numeric leaves
	conts  []*ContChange
	nconts int
}

// Dirty reports whether leaf changed.
func (c *Change) Dirty(leaf int) bool { return c.dirty[leaf>>6]&(1<<(leaf&63)) != 0 }

// DirtySet returns the leaf bit set: bit i of word i/64 is leaf i. The slice
// must not be modified.
func (c *Change) DirtySet() []uint64 { return c.dirty }

// Base returns numeric slot s's value at the start of the tick. It is valid
// only for slots of dirty leaves.
func (c *Change) Base(s int) uint64 { return load(c.basePtr(s), s) }

func (c *Change) setBase(s int, v uint64) { store(c.basePtr(s), s, v) }

// basePtr returns the address of slot s in c.base, which has the layout of
// the record's numeric storage (see Record.numPtr for the bounds check).
func (c *Change) basePtr(s int) unsafe.Pointer {
	return unsafe.Pointer(&c.base[s>>3])
}

// Cont returns the change record of the container at leaf, or nil.
func (c *Change) Cont(leaf int) *ContChange {
	for _, cc := range c.conts[:c.nconts] {
		if cc.Leaf == leaf {
			return cc
		}
	}
	return nil
}

// A ContChange is what happened to one container of an entity in a tick.
// Lists record operations in order; maps and bags record per key what
// happened, so repeated writes to one key or one item field coalesce.
type ContChange struct {
	Leaf  int
	Whole bool     // a list changed too much: send it whole
	Ops   []ListOp // list operations, in order
	Keys  map[uint64]*KeyChange
	SKeys map[string]*KeyChange // string-keyed maps
}

// OpCode names a list operation.
type OpCode uint8

// List operations. The numeric values are part of the wire format.
const (
	OpPush   OpCode = iota // append V
	OpInsert               // insert V at Index
	OpRemove               // remove the element at Index
	OpSet                  // replace the element at Index with V
	OpClear                // remove every element
	// OpPatch changes some fields of the struct element at Index. The
	// tracker records OpSet; encoders send a set of a struct element as
	// a patch of its changed fields when that is smaller.
	OpPatch
)

// ListOp is one recorded list operation.
type ListOp struct {
	Code  OpCode
	Index int
	V     Value
	// Old is the element OpSet replaced, when elements are structs: the
	// encoder sends only the fields that differ from it. Elements are
	// never changed in place, so it keeps its values.
	Old *Record
}

// KeyChange is what happened to one key of a map or bag in a tick.
type KeyChange struct {
	Existed bool     // the key was present at the start of the tick
	Removed bool     // the key is absent now
	Added   bool     // the value was replaced wholesale: send it whole
	Dirty   []uint64 // bag items: leaf bit set of changed item fields
}

// AnyDirty reports whether any bit in set is in [lo, hi).
func AnyDirty(set []uint64, lo, hi int) bool {
	for lo < hi {
		w := lo >> 6
		m := ^uint64(0) << (lo & 63)
		if end := (w + 1) << 6; hi < end {
			m &= ^uint64(0) >> (end - hi)
		}
		if set[w]&m != 0 {
			return true
		}
		lo = (w + 1) << 6
	}
	return false
}

// NextDirty returns the first set bit ≥ i in set, or −1.
func NextDirty(set []uint64, i int) int {
	w := i >> 6
	if w >= len(set) {
		return -1
	}
	if m := set[w] >> (i & 63); m != 0 {
		return i + bits.TrailingZeros64(m)
	}
	for w++; w < len(set); w++ {
		if set[w] != 0 {
			return w<<6 + bits.TrailingZeros64(set[w])
		}
	}
	return -1
}
