package state

import (
	"errors"
	"fmt"
	"slices"
	"unsafe"

	"github.com/replicago/replica/schema"
)

// Errors a [Txn] returns for operations that contradict the table's state.
// Decoders wrap them; a peer that sends such data is misbehaving or out of
// sync.
var (
	ErrExists   = errors.New("state: entity already exists")
	ErrNotFound = errors.New("state: no such entity")
	ErrIndex    = errors.New("state: container index out of range")
	ErrNoKey    = errors.New("state: no such key")
)

// A Table is a client's set of entities, changed only through a [Txn]
// so that each tick applies atomically.
type Table struct {
	// dir maps slot>>pageBits to the page of those slots, nil while none
	// of them holds an entity. Looking a slot up is two indexings instead
	// of a map probe. A page is allocated with the first entity of its
	// slots and dropped (at the next Begin) once its last entity is gone,
	// so that a server naming slots anywhere up to 2^SlotBits−1 costs
	// memory in proportion to the entities present; dir itself holds at
	// most 2^(SlotBits−pageBits) pointers (128 KiB).
	dir   []*page
	n     int // entities
	txn   Txn
	watch map[*schema.Struct][]uint64 // leaves whose changes are reported as events

	// held lists the slots of the entities as of the last Commit (so
	// throughout a transaction, as they were when it began), ascending:
	// segments may name an entity by its rank in it (Txn.HeldSlot).
	// Commit merges the transaction's creations and destructions into
	// it, through spare, allocating nothing in steady state.
	held, spare []uint32
}

// pageBits is the base-2 logarithm of the number of slots of a page.
const pageBits = 10

const pageMask = 1<<pageBits - 1

// A page holds the entities of 1<<pageBits consecutive slots.
type page struct {
	ents [1 << pageBits]*Entity
	n    int // non-nil entries of ents

	// born marks the slots whose entity may be filled in the transaction
	// numbered bornTxn (see Txn.Fillable); the marks of an older
	// transaction are stale, so starting a transaction clears nothing.
	born    [(1 << pageBits) / 64]uint64
	bornTxn uint64
}

// NewTable returns an empty table.
func NewTable() *Table {
	t := &Table{}
	t.txn.t = t
	return t
}

// Entity returns the entity with the given ID, or nil. An ID of an older
// generation of the slot names nothing.
func (t *Table) Entity(id ID) *Entity {
	if e := t.AtSlot(id.Slot()); e != nil && e.id == id {
		return e
	}
	return nil
}

// AtSlot returns the entity in slot, or nil. Segments name entities by
// slot.
func (t *Table) AtSlot(slot uint32) *Entity {
	if p := t.page(slot); p != nil {
		return p.ents[slot&pageMask]
	}
	return nil
}

// page returns the page of slot, or nil.
func (t *Table) page(slot uint32) *page {
	if i := slot >> pageBits; i < uint32(len(t.dir)) {
		return t.dir[i]
	}
	return nil
}

// put stores e in its slot, which is empty, and returns the slot's page.
func (t *Table) put(e *Entity) *page {
	slot := e.id.Slot()
	i := int(slot >> pageBits)
	if i >= len(t.dir) {
		t.dir = append(t.dir, make([]*page, i+1-len(t.dir))...)
	}
	p := t.dir[i]
	if p == nil {
		p = new(page)
		t.dir[i] = p
	}
	p.ents[slot&pageMask] = e
	p.n++
	t.n++
	return p
}

// remove empties slot, which holds an entity. A page left empty is noted
// for the next Begin to drop.
func (t *Table) remove(slot uint32) {
	p := t.dir[slot>>pageBits]
	p.ents[slot&pageMask] = nil
	p.n--
	t.n--
	if p.n == 0 {
		t.txn.empty = append(t.txn.empty, slot>>pageBits)
	}
}

// Len returns the number of entities.
func (t *Table) Len() int { return t.n }

// AppendEntities appends every entity, in ascending slot order, to dst.
func (t *Table) AppendEntities(dst []*Entity) []*Entity {
	for _, p := range t.dir {
		if p == nil {
			continue
		}
		for i, left := 0, p.n; left > 0; i++ {
			if e := p.ents[i]; e != nil {
				dst = append(dst, e)
				left--
			}
		}
	}
	return dst
}

// Watch asks for events about leaf of class c: field changes for scalar
// leaves, item events for containers. Leaves nobody watches cost nothing
// beyond applying them. Entity creation and destruction are always
// reported.
func (t *Table) Watch(c *schema.Struct, leaf int) {
	if t.watch == nil {
		t.watch = make(map[*schema.Struct][]uint64)
	}
	w := t.watch[c]
	if w == nil {
		w = make([]uint64, (c.Leaves+63)/64)
		t.watch[c] = w
	}
	w[leaf>>6] |= 1 << (leaf & 63)
	t.txn.lastC = nil
}

// WatchAll asks for events about every leaf of class c.
func (t *Table) WatchAll(c *schema.Struct) {
	for i := 0; i < c.Leaves; i++ {
		t.Watch(c, i)
	}
}

// Begin starts a transaction. A table has one transaction at a time: Begin
// discards the events of the previous one.
func (t *Table) Begin() *Txn {
	x := &t.txn
	x.undo = x.undo[:0]
	x.nums = x.nums[:0]
	clear(x.Events)
	x.Events = x.Events[:0]
	for _, i := range x.empty {
		if p := t.dir[i]; p != nil && p.n == 0 {
			t.dir[i] = nil
		}
	}
	x.empty = x.empty[:0]
	x.serial++
	return x
}

// EventKind says what an [Event] reports.
type EventKind uint8

// Event kinds.
const (
	EvCreate     EventKind = iota + 1 // entity created (its initial values follow as field and item events)
	EvDestroy                         // entity destroyed
	EvField                           // scalar leaf changed: Old → New
	EvListAdd                         // element added at Index: New
	EvListRemove                      // element removed from Index: Old
	EvListSet                         // element at Index replaced: Old → New
	EvMapAdd                          // key added: New
	EvMapRemove                       // key removed: Old
	EvMapSet                          // key's value replaced: Old → New
	EvBagAdd                          // item added (or replaced) under Key
	EvBagRemove                       // item removed from Key: Old.R
	EvBagItem                         // item field ItemLeaf changed: Old → New (zero for container fields)
	EvOwned                           // this client gained (New.N = 1) or lost (New.N = 0) ownership of the entity
	EvLevel                           // the entity's level of detail changed: Old.N → New.N, each as Entity.Level + 1, 0 for every band
)

// An Event is one change a transaction applied, for callbacks.
type Event struct {
	Kind     EventKind
	E        *Entity
	Leaf     int // leaf of the entity's class: the field or container
	Index    int
	Key      Value
	ItemLeaf int
	Old, New Value
}

type undoKind uint8

const (
	uStr undoKind = iota
	uCont
	uCreate
	uDestroy
	uListInsert
	uListRemove
	uListSet
	uListAll
	uMapPut
	uMapDel
	uBagPut
	uBagDel
	uOwned
	uLevel
)

type undo struct {
	kind    undoKind
	r       *Record
	slot    int
	s       string
	c       any
	idx     int
	key     Value
	v       Value
	vals    []Value
	existed bool
	e       *Entity
}

// A Txn applies one tick to a [Table] atomically: Commit keeps every
// change and returns the events to report; Rollback undoes them all. A Txn
// only changes untracked (client) entities.
type Txn struct {
	t      *Table
	undo   []undo
	nums   []numUndo // numeric slot writes, the bulk of most ticks
	serial uint64    // numbers the transactions, for page.bornTxn
	empty  []uint32  // pages (slot>>pageBits) that may have been left empty
	moved  []uint32  // Commit: the slots the transaction created or destroyed in
	Events []Event

	lastC *schema.Struct // one-entry cache of t.watch
	lastW []uint64
}

type numUndo struct {
	p    unsafe.Pointer // the slot's address (see Record.numPtr)
	slot int
	old  uint64
}

// watches reports whether events about any leaf of e's class may be
// watched.
func (x *Txn) watches(e *Entity) bool {
	if e.t != x.lastC {
		x.watchOf(e.t)
	}
	return x.lastW != nil
}

// watchOf looks the watched leaves of class c up, for watches (wants
// looks them up inline, which keeps it small enough to inline itself).
//
//go:noinline
func (x *Txn) watchOf(c *schema.Struct) { x.lastC, x.lastW = c, x.t.watch[c] }

// growNums makes room for n more numeric undo records.
//
//go:noinline
func (x *Txn) growNums(n int) { x.nums = slices.Grow(x.nums, n) }

// wants reports whether events about leaf of e's class are watched.
func (x *Txn) wants(e *Entity, leaf int) bool {
	if e.t != x.lastC {
		x.lastC, x.lastW = e.t, x.t.watch[e.t]
	}
	return x.lastW != nil && x.lastW[leaf>>6]&(1<<(leaf&63)) != 0
}

// AtSlot returns the entity in slot, or nil.
func (x *Txn) AtSlot(slot uint32) *Entity { return x.t.AtSlot(slot) }

// Fillable reports whether a fill section may set partition fields of the
// entity in slot in this transaction: it was created in it, or some of its
// leaves were reset by [Txn.ZeroLeaves] because its owner changed.
func (x *Txn) Fillable(slot uint32) bool {
	p := x.t.page(slot)
	i := slot & pageMask
	return p != nil && p.bornTxn == x.serial && p.born[i>>6]&(1<<(i&63)) != 0
}

// markFillable marks slot, on page p, as [Txn.Fillable].
func (x *Txn) markFillable(p *page, slot uint32) {
	if p.bornTxn != x.serial {
		p.born = [len(p.born)]uint64{}
		p.bornTxn = x.serial
	}
	i := slot & pageMask
	p.born[i>>6] |= 1 << (i & 63)
}

// Create adds an entity of class c.
func (x *Txn) Create(c *schema.Struct, id ID) (*Entity, error) {
	slot := id.Slot()
	if old := x.t.AtSlot(slot); old != nil {
		return nil, fmt.Errorf("%w: slot %d holds entity %#x", ErrExists, slot, uint32(old.id))
	}
	e := NewEntity(c, id)
	x.markFillable(x.t.put(e), slot)
	x.undo = append(x.undo, undo{kind: uCreate, e: e})
	x.Events = append(x.Events, Event{Kind: EvCreate, E: e})
	return e, nil
}

// DestroySlot removes the entity in slot.
func (x *Txn) DestroySlot(slot uint32) error {
	e := x.t.AtSlot(slot)
	if e == nil {
		return fmt.Errorf("%w: slot %d", ErrNotFound, slot)
	}
	x.t.remove(slot)
	x.undo = append(x.undo, undo{kind: uDestroy, e: e, idx: int(e.ch)})
	e.ch = chGone // Valid is false from now on; Owned too
	x.Events = append(x.Events, Event{Kind: EvDestroy, E: e})
	return nil
}

// ZeroLeaves sets every leaf of e in the leaf set set (a bit per leaf, as
// [Change.DirtySet]) to its zero value, and makes e [Txn.Fillable] for the
// rest of the transaction. A client does this when its ownership of e
// changes: the leaves of the partition it no longer sees are forgotten, and
// the server fills in those of the partition it now sees.
func (x *Txn) ZeroLeaves(e *Entity, set []uint64) {
	for leaf := NextDirty(set, 0); leaf >= 0; leaf = NextDirty(set, leaf+1) {
		l := e.t.Leaf(leaf)
		switch k := l.Field.Type.Kind; {
		case k.Numeric():
			x.SetNumAt(e, leaf, l.Num, 0)
		case k == schema.String || k == schema.Bytes:
			x.SetStr(e, leaf, "")
		case k.Container():
			if !e.IsZero(l) {
				x.ReplaceContainer(e, leaf, newContainer(&l.Field.Type))
			}
		}
	}
	slot := e.id.Slot()
	x.markFillable(x.t.page(slot), slot)
}

// SetOwned records that this client owns e (owned) or no longer does, with
// an [EvOwned] event; see [Entity.Owned].
func (x *Txn) SetOwned(e *Entity, owned bool) {
	if e.Owned() == owned {
		return
	}
	x.undo = append(x.undo, undo{kind: uOwned, e: e, existed: !owned})
	e.setOwned(owned)
	var n uint64
	if owned {
		n = 1
	}
	x.Events = append(x.Events, Event{Kind: EvOwned, E: e, New: Value{N: n}})
}

// SetLevel sets the level of detail e is held at (see [Entity.Level]):
// lod is the level + 1, or 0 for every band. A lower level forgets the
// leaves of forget, those of the bands above it, resetting them as
// [Txn.ZeroLeaves] does; a higher one makes e [Txn.Fillable], so that the
// transaction's fills carry the bands it enters.
func (x *Txn) SetLevel(e *Entity, lod uint8, forget []uint64) {
	if e.lod == lod {
		return
	}
	old := e.lod
	x.undo = append(x.undo, undo{kind: uLevel, e: e, v: Value{N: uint64(old)}})
	e.lod = lod
	x.ZeroLeaves(e, forget)
	x.Events = append(x.Events, Event{Kind: EvLevel, E: e, Old: Value{N: uint64(old)}, New: Value{N: uint64(lod)}})
}

func (x *Txn) field(e *Entity, leaf int, old, new Value) {
	if x.wants(e, leaf) {
		x.Events = append(x.Events, Event{Kind: EvField, E: e, Leaf: leaf, Old: old, New: new})
	}
}

func (x *Txn) event(ev Event) {
	if x.wants(ev.E, ev.Leaf) {
		x.Events = append(x.Events, ev)
	}
}

// SetNum sets numeric leaf of e to v, already in stored representation.
func (x *Txn) SetNum(e *Entity, leaf int, v uint64) {
	x.SetNumAt(e, leaf, e.t.Leaf(leaf).Num, v)
}

// SetNumAt is SetNum for a caller that already knows the leaf's slot.
func (x *Txn) SetNumAt(e *Entity, leaf, slot int, v uint64) {
	p := e.numPtr(slot)
	old := loadSwitch(p, slot)
	if old == v {
		return
	}
	x.nums = append(x.nums, numUndo{p: p, slot: slot, old: old})
	store(p, slot, v)
	if x.wants(e, leaf) {
		x.Events = append(x.Events, Event{Kind: EvField, E: e, Leaf: leaf, Old: Value{N: old}, New: Value{N: v}})
	}
}

// A NumLeaf is a numeric leaf of a class and its slot, for SetNumRows.
type NumLeaf struct{ Leaf, Slot int32 }

// SetNumRows sets numeric leaves of entities es from a table of rows, one
// per entity: leaf at[j].Leaf of es[i], in slot at[j].Slot, to
// v[i*len(at)+j], as SetNumAt would one by one. Unless a class of es is
// watched, it makes room for the undo records of the table first, so that
// its loop calls nothing.
func (x *Txn) SetNumRows(es []*Entity, at []NumLeaf, v []uint64) {
	m := len(at)
	v = v[:len(es)*m]
	for _, e := range es {
		if x.watches(e) {
			for i, e := range es {
				for j, a := range at {
					x.SetNumAt(e, int(a.Leaf), int(a.Slot), v[i*m+j])
				}
			}
			return
		}
	}
	n := len(x.nums)
	if cap(x.nums)-n < len(v) {
		x.growNums(len(v))
	}
	undo := x.nums[n : n+len(v)]
	k := 0
	for i, e := range es {
		row := v[i*m : i*m+m]
		for j, a := range at {
			slot := int(a.Slot)
			p := e.numPtr(slot)
			old := loadSwitch(p, slot)
			if old == row[j] {
				continue
			}
			undo[k] = numUndo{p: p, slot: slot, old: old}
			k++
			store(p, slot, row[j])
		}
	}
	x.nums = x.nums[:n+k]
}

// SetStr sets string or bytes leaf of e to s.
func (x *Txn) SetStr(e *Entity, leaf int, s string) {
	slot := e.t.Leaf(leaf).Obj
	p := &e.strs()[slot]
	old := *p
	if old == s {
		return
	}
	x.undo = append(x.undo, undo{kind: uStr, r: &e.Record, slot: slot, s: old})
	*p = s
	x.field(e, leaf, Value{S: old}, Value{S: s})
}

// ReplaceContainer replaces the container at leaf of e with c, a container
// built by [NewList], [NewMap] or [NewBag], and reports the difference as
// item events.
func (x *Txn) ReplaceContainer(e *Entity, leaf int, c any) {
	slot := e.t.Leaf(leaf).Obj
	p := &e.conts()[slot]
	old := *p
	x.undo = append(x.undo, undo{kind: uCont, r: &e.Record, slot: slot, c: old})
	*p = c
	x.diff(e, leaf, old, c)
}

func (x *Txn) diff(e *Entity, leaf int, old, new any) {
	switch o := old.(type) {
	case *List:
		n := new.(*List)
		common := min(len(o.v), len(n.v))
		for i := 0; i < common; i++ {
			if !o.v[i].equal(n.v[i]) {
				x.event(Event{Kind: EvListSet, E: e, Leaf: leaf, Index: i, Old: o.v[i], New: n.v[i]})
			}
		}
		for i := len(o.v) - 1; i >= common; i-- {
			x.event(Event{Kind: EvListRemove, E: e, Leaf: leaf, Index: i, Old: o.v[i]})
		}
		for i := common; i < len(n.v); i++ {
			x.event(Event{Kind: EvListAdd, E: e, Leaf: leaf, Index: i, New: n.v[i]})
		}
	case *Map:
		n := new.(*Map)
		for _, k := range o.Keys(nil) {
			ov, _ := o.Get(k)
			if nv, ok := n.Get(k); !ok {
				x.event(Event{Kind: EvMapRemove, E: e, Leaf: leaf, Key: k, Old: ov})
			} else if !ov.equal(nv) {
				x.event(Event{Kind: EvMapSet, E: e, Leaf: leaf, Key: k, Old: ov, New: nv})
			}
		}
		for _, k := range n.Keys(nil) {
			if _, ok := o.Get(k); !ok {
				nv, _ := n.Get(k)
				x.event(Event{Kind: EvMapAdd, E: e, Leaf: leaf, Key: k, New: nv})
			}
		}
	case *Bag:
		n := new.(*Bag)
		for _, k := range o.Keys(nil) {
			or := o.items[k]
			if nr := n.items[k]; nr == nil {
				x.event(Event{Kind: EvBagRemove, E: e, Leaf: leaf, Key: Value{N: k}, Old: Value{R: or}})
			} else if !or.Equal(nr) {
				x.event(Event{Kind: EvBagAdd, E: e, Leaf: leaf, Key: Value{N: k}, Old: Value{R: or}, New: Value{R: nr}})
			}
		}
		for _, k := range n.Keys(nil) {
			if o.items[k] == nil {
				x.event(Event{Kind: EvBagAdd, E: e, Leaf: leaf, Key: Value{N: k}, New: Value{R: n.items[k]}})
			}
		}
	}
}

func (x *Txn) list(e *Entity, leaf int) *List { return e.List(e.t.Leaf(leaf).Obj) }

// ListInsert inserts v at index i of the list at leaf (i = Len appends).
func (x *Txn) ListInsert(e *Entity, leaf, i int, v Value) error {
	l := x.list(e, leaf)
	if i < 0 || i > len(l.v) {
		return fmt.Errorf("%w: insert at %d of %d", ErrIndex, i, len(l.v))
	}
	l.insert(i, v)
	x.undo = append(x.undo, undo{kind: uListInsert, c: l, idx: i})
	x.event(Event{Kind: EvListAdd, E: e, Leaf: leaf, Index: i, New: v})
	return nil
}

// ListRemove removes element i of the list at leaf.
func (x *Txn) ListRemove(e *Entity, leaf, i int) error {
	l := x.list(e, leaf)
	if i < 0 || i >= len(l.v) {
		return fmt.Errorf("%w: remove %d of %d", ErrIndex, i, len(l.v))
	}
	old := l.remove(i)
	x.undo = append(x.undo, undo{kind: uListRemove, c: l, idx: i, v: old})
	x.event(Event{Kind: EvListRemove, E: e, Leaf: leaf, Index: i, Old: old})
	return nil
}

// ListSet replaces element i of the list at leaf.
func (x *Txn) ListSet(e *Entity, leaf, i int, v Value) error {
	l := x.list(e, leaf)
	if i < 0 || i >= len(l.v) {
		return fmt.Errorf("%w: set %d of %d", ErrIndex, i, len(l.v))
	}
	old := l.v[i]
	l.v[i] = v
	x.undo = append(x.undo, undo{kind: uListSet, c: l, idx: i, v: old})
	x.event(Event{Kind: EvListSet, E: e, Leaf: leaf, Index: i, Old: old, New: v})
	return nil
}

// ListClear removes every element of the list at leaf.
func (x *Txn) ListClear(e *Entity, leaf int) {
	l := x.list(e, leaf)
	old := l.v
	l.v = nil
	x.undo = append(x.undo, undo{kind: uListAll, c: l, vals: old})
	for i := len(old) - 1; i >= 0; i-- {
		x.event(Event{Kind: EvListRemove, E: e, Leaf: leaf, Index: i, Old: old[i]})
	}
}

// ListLen returns the current length of the list at leaf.
func (x *Txn) ListLen(e *Entity, leaf int) int { return len(x.list(e, leaf).v) }

// MapPut sets key k of the map at leaf to v.
func (x *Txn) MapPut(e *Entity, leaf int, k, v Value) {
	m := e.Map(e.t.Leaf(leaf).Obj)
	old, existed := m.put(k, v)
	x.undo = append(x.undo, undo{kind: uMapPut, c: m, key: k, v: old, existed: existed})
	if existed {
		x.event(Event{Kind: EvMapSet, E: e, Leaf: leaf, Key: k, Old: old, New: v})
	} else {
		x.event(Event{Kind: EvMapAdd, E: e, Leaf: leaf, Key: k, New: v})
	}
}

// MapDelete removes key k of the map at leaf.
func (x *Txn) MapDelete(e *Entity, leaf int, k Value) error {
	m := e.Map(e.t.Leaf(leaf).Obj)
	old, existed := m.del(k)
	if !existed {
		return fmt.Errorf("%w: delete of an absent map key", ErrNoKey)
	}
	x.undo = append(x.undo, undo{kind: uMapDel, c: m, key: k, v: old})
	x.event(Event{Kind: EvMapRemove, E: e, Leaf: leaf, Key: k, Old: old})
	return nil
}

func (x *Txn) bag(e *Entity, leaf int) *Bag { return e.Bag(e.t.Leaf(leaf).Obj) }

// BagPut stores item r under key k of the bag at leaf.
func (x *Txn) BagPut(e *Entity, leaf int, k uint64, r *Record) {
	b := x.bag(e, leaf)
	old, existed := b.items[k]
	b.items[k] = r
	x.undo = append(x.undo, undo{kind: uBagPut, c: b, key: Value{N: k}, v: Value{R: old}, existed: existed})
	x.event(Event{Kind: EvBagAdd, E: e, Leaf: leaf, Key: Value{N: k}, Old: Value{R: old}, New: Value{R: r}})
}

// BagRemove removes key k of the bag at leaf.
func (x *Txn) BagRemove(e *Entity, leaf int, k uint64) error {
	b := x.bag(e, leaf)
	old := b.items[k]
	if old == nil {
		return fmt.Errorf("%w: remove of absent bag item %d", ErrNoKey, k)
	}
	delete(b.items, k)
	x.undo = append(x.undo, undo{kind: uBagDel, c: b, key: Value{N: k}, v: Value{R: old}})
	x.event(Event{Kind: EvBagRemove, E: e, Leaf: leaf, Key: Value{N: k}, Old: Value{R: old}})
	return nil
}

// BagItem returns item k of the bag at leaf, or an error if absent.
func (x *Txn) BagItem(e *Entity, leaf int, k uint64) (*Record, error) {
	r := x.bag(e, leaf).items[k]
	if r == nil {
		return nil, fmt.Errorf("%w: update of absent bag item %d", ErrNoKey, k)
	}
	return r, nil
}

// SetItemNum sets numeric leaf itemLeaf of item r (key k of the bag at
// leaf of e).
func (x *Txn) SetItemNum(e *Entity, leaf int, k uint64, r *Record, itemLeaf int, v uint64) {
	slot := r.t.Leaf(itemLeaf).Num
	p := r.numPtr(slot)
	old := load(p, slot)
	if old == v {
		return
	}
	x.nums = append(x.nums, numUndo{p: p, slot: slot, old: old})
	store(p, slot, v)
	x.event(Event{Kind: EvBagItem, E: e, Leaf: leaf, Key: Value{N: k}, ItemLeaf: itemLeaf, Old: Value{N: old}, New: Value{N: v}})
}

// SetItemStr sets string or bytes leaf itemLeaf of item r.
func (x *Txn) SetItemStr(e *Entity, leaf int, k uint64, r *Record, itemLeaf int, s string) {
	slot := r.t.Leaf(itemLeaf).Obj
	p := &r.strs()[slot]
	old := *p
	if old == s {
		return
	}
	x.undo = append(x.undo, undo{kind: uStr, r: r, slot: slot, s: old})
	*p = s
	x.event(Event{Kind: EvBagItem, E: e, Leaf: leaf, Key: Value{N: k}, ItemLeaf: itemLeaf, Old: Value{S: old}, New: Value{S: s}})
}

// SetItemContainer replaces container leaf itemLeaf of item r with c.
func (x *Txn) SetItemContainer(e *Entity, leaf int, k uint64, r *Record, itemLeaf int, c any) {
	slot := r.t.Leaf(itemLeaf).Obj
	p := &r.conts()[slot]
	x.undo = append(x.undo, undo{kind: uCont, r: r, slot: slot, c: *p})
	*p = c
	x.event(Event{Kind: EvBagItem, E: e, Leaf: leaf, Key: Value{N: k}, ItemLeaf: itemLeaf})
}

// HeldLen returns the number of entities the table held when the
// transaction began.
func (x *Txn) HeldLen() int { return len(x.t.held) }

// HeldSlot returns the slot of the entity of rank r (from 0, by ascending
// slot) among those the table held when the transaction began, whatever
// the transaction created or destroyed since; false if r is out of range.
func (x *Txn) HeldSlot(r uint64) (uint32, bool) {
	if r >= uint64(len(x.t.held)) {
		return 0, false
	}
	return x.t.held[r], true
}

// Commit keeps every change and returns the events, in the order the
// changes were applied. The events are valid until the next Begin.
func (x *Txn) Commit() []Event {
	x.moved = x.moved[:0]
	for i := range x.undo {
		if k := x.undo[i].kind; k == uCreate || k == uDestroy {
			x.moved = append(x.moved, x.undo[i].e.id.Slot())
		}
	}
	if len(x.moved) > 0 {
		x.t.mergeHeld(x.moved)
	}
	clear(x.undo)
	x.undo = x.undo[:0]
	x.nums = x.nums[:0]
	return x.Events
}

// mergeHeld brings t.held up to date with the slots moved, where the
// transaction created or destroyed entities: each of them is in held if
// and only if it holds an entity now.
func (t *Table) mergeHeld(moved []uint32) {
	slices.Sort(moved)
	moved = slices.Compact(moved)
	out := MergeSlots(t.spare, t.held, len(moved),
		func(i int) uint32 { return moved[i] },
		func(i int) bool { return t.AtSlot(moved[i]) != nil })
	t.held, t.spare = out, t.held[:0]
}

// MergeSlots returns, in out's array (grown if it must be), the ascending
// slots of held with n more slots decided: slot(i), ascending in i and each
// once, is in the result if in(i) and not otherwise. It keeps a client's
// sorted held set current, on the client's table and on the server's record
// of it (codec.Held), without a sort of the whole set.
func MergeSlots(out, held []uint32, n int, slot func(i int) uint32, in func(i int) bool) []uint32 {
	out = out[:0]
	if m := len(held) + n; cap(out) < m {
		out = make([]uint32, 0, 2*m)
	}
	k := 0
	for i := 0; i < n; i++ {
		s := slot(i)
		for k < len(held) && held[k] < s {
			out = append(out, held[k])
			k++
		}
		if k < len(held) && held[k] == s {
			k++
		}
		if in(i) {
			out = append(out, s)
		}
	}
	return append(out, held[k:]...)
}

// Rollback undoes every change of the transaction, newest first.
func (x *Txn) Rollback() {
	// Numeric writes are independent of the structural changes in x.undo
	// (they never move a slot), so the two logs unwind separately.
	for i := len(x.nums) - 1; i >= 0; i-- {
		store(x.nums[i].p, x.nums[i].slot, x.nums[i].old)
	}
	x.nums = x.nums[:0]
	for i := len(x.undo) - 1; i >= 0; i-- {
		u := &x.undo[i]
		switch u.kind {
		case uStr:
			u.r.strs()[u.slot] = u.s
		case uCont:
			u.r.conts()[u.slot] = u.c
		case uCreate:
			x.t.remove(u.e.id.Slot())
		case uDestroy:
			x.t.put(u.e)
			u.e.ch = int32(u.idx)
		case uListInsert:
			u.c.(*List).remove(u.idx)
		case uListRemove:
			u.c.(*List).insert(u.idx, u.v)
		case uListSet:
			u.c.(*List).v[u.idx] = u.v
		case uListAll:
			u.c.(*List).v = u.vals
		case uMapPut:
			m := u.c.(*Map)
			if u.existed {
				m.put(u.key, u.v)
			} else {
				m.del(u.key)
			}
		case uMapDel:
			u.c.(*Map).put(u.key, u.v)
		case uBagPut:
			b := u.c.(*Bag)
			if u.existed {
				b.items[u.key.N] = u.v.R
			} else {
				delete(b.items, u.key.N)
			}
		case uBagDel:
			u.c.(*Bag).items[u.key.N] = u.v.R
		case uOwned:
			u.e.setOwned(u.existed)
		case uLevel:
			u.e.lod = uint8(u.v.N)
		}
	}
	clear(x.undo)
	x.undo = x.undo[:0]
	clear(x.Events)
	x.Events = x.Events[:0]
	x.serial++ // forget the creations
}

// A Builder fills in a new record before anything else can see it;
// decoders use it for container elements and bag items.
type Builder struct{ r *Record }

// Build starts a new record of type t.
func Build(t *schema.Struct) Builder { return Builder{r: NewRecord(t)} }

// BuildFrom starts a new record with the values of r.
func BuildFrom(r *Record) Builder { return Builder{r: r.Clone()} }

// SetNum sets numeric leaf to v, in stored representation.
func (b Builder) SetNum(leaf int, v uint64) { b.r.setNum(b.r.t.Leaf(leaf).Num, v) }

// SetStr sets string or bytes leaf.
func (b Builder) SetStr(leaf int, s string) { b.r.strs()[b.r.t.Leaf(leaf).Obj] = s }

// SetContainer sets container leaf to c.
func (b Builder) SetContainer(leaf int, c any) { b.r.conts()[b.r.t.Leaf(leaf).Obj] = c }

// Record returns the record being built.
func (b Builder) Record() *Record { return b.r }

// Reset sets every field of the record being built back to its zero
// value, so that one record can be decoded into again and again.
func (b Builder) Reset() {
	clear(b.r.nums())
	clear(b.r.strs())
	b.r.init(b.r.t, b.r.data)
}

// NewList returns a list of type t holding vals (which it keeps).
func NewList(t *schema.Type, vals []Value) *List { return &List{t: t, v: vals} }

// NewMapOf returns a map of type t with the given keys and values.
func NewMapOf(t *schema.Type, keys, vals []Value) *Map {
	m := newMap(t)
	for i, k := range keys {
		m.put(k, vals[i])
	}
	return m
}

// NewBagOf returns a bag of type t with the given keys and items.
func NewBagOf(t *schema.Type, keys []uint64, items []*Record) *Bag {
	b := newBag(t)
	for i, k := range keys {
		b.items[k] = items[i]
	}
	return b
}
