package state

import (
	"fmt"

	"github.com/replicago/replica/schema"
)

// A Handle addresses the fields of one struct inside a record: an entity's
// own fields, a nested struct stored inline, or a bag item. Generated code
// wraps handles in typed accessors; setters on a handle record the change in
// the entity's tracker, so code outside a schema package can only change
// state in ways that replicate.
//
// Leaf and slot numbers passed to a handle are relative to the struct it
// addresses (schema.Field.Leaf, .Num, .Obj).
//
// On an entity of a tracker, a write that would store a string or a
// container over the tracker's [Limits] is refused and reported by
// [Tracker.TakeRefusals]; the value stays as it was.
//
// The zero Handle, a handle on a removed bag item and a handle into a
// destroyed entity are invalid (see [Handle.Valid]): reads return zeros or
// the last values, and writes panic with [ErrInvalidHandle]. Writes to an
// entity of a client replica panic with [ErrReadOnly].
type Handle struct {
	e              *Entity // root entity; nil for a detached value
	r              *Record
	leaf, num, obj int32 // offsets of the addressed struct within r
	bagLeaf        int32 // leaf of e's bag holding r, or −1 when r is e's record
	pin            int32 // ≥ 0: mark this item leaf instead (r is inside a container of the item)
	depth          int32 // nesting level of r in the entity (protocol.md §7.1): 0, or 2 more per bag
	key            uint64
}

// NewValue returns a handle on a new detached struct value of type t: a
// value not yet part of any entity, for passing to a list, map or bag.
// Setters on a detached value change only the value.
func NewValue(t *schema.Struct) Handle {
	return Handle{r: NewRecord(t), bagLeaf: -1, pin: -1}
}

// ValueOf returns a detached handle on a copy of r.
func ValueOf(r *Record) Handle {
	return Handle{r: r.Clone(), bagLeaf: -1, pin: -1}
}

// ValueWithLeaf returns a detached handle on a copy of r whose scalar
// leaf holds v, in stored representation, and true; or, for a container
// leaf, the zero Handle and false. Typed bag callbacks report with it the
// item as it was before one of its fields changed.
func ValueWithLeaf(r *Record, leaf int, v Value) (Handle, bool) {
	l := r.t.Leaf(leaf)
	k := l.Field.Type.Kind
	if k.Container() {
		return Handle{}, false
	}
	c := r.Clone()
	if k.Numeric() {
		c.setNum(l.Num, v.N)
	} else {
		c.strs()[l.Obj] = v.S
	}
	return Handle{r: c, bagLeaf: -1, pin: -1}, true
}

// Record returns the record the handle points into.
func (h Handle) Record() *Record { return h.r }

// Value returns the addressed struct as a container element value. It is
// only meaningful for a handle on a whole record (a detached value or a bag
// item).
func (h Handle) Value() Value { return Value{R: h.r} }

// Num returns numeric slot s of the addressed struct, or 0 for the zero
// Handle.
func (h Handle) Num(s int) uint64 {
	if h.r == nil {
		return 0
	}
	return h.r.Num(int(h.num) + s)
}

// Str returns the string or bytes in string slot i, or "" for the zero
// Handle.
func (h Handle) Str(i int) string {
	if h.r == nil {
		return ""
	}
	return h.r.Str(int(h.obj) + i)
}

// Nested returns a handle on the nested struct field that starts at leaf
// and its slots.
func (h Handle) Nested(leaf, num, obj int) Handle {
	h.leaf += int32(leaf)
	h.num += int32(num)
	h.obj += int32(obj)
	return h
}

func (h Handle) leafInfo(leaf int) (int, *schema.LeafInfo) {
	abs := int(h.leaf) + leaf
	return abs, h.r.t.Leaf(abs)
}

// mark records that leaf abs of h.r changed. It reports false when the
// change need not be recorded in detail (untracked, created this tick, or
// inside a bag item, which mark handles itself).
func (h Handle) mark(abs int) bool {
	if !h.e.tracked() {
		return false
	}
	if h.bagLeaf < 0 {
		return true
	}
	item := abs
	if h.pin >= 0 {
		item = int(h.pin)
	}
	bag := h.e.Bag(h.e.t.Leaf(int(h.bagLeaf)).Obj)
	kc := h.e.keyed(int(h.bagLeaf), Value{N: h.key}, bag.items[h.key] != nil)
	if !kc.Added {
		words := (bag.t.Struct.Leaves + 63) / 64
		for len(kc.Dirty) < words {
			kc.Dirty = append(kc.Dirty, 0)
		}
		kc.Dirty[item>>6] |= 1 << (item & 63)
	}
	return false
}

// SetNum sets the numeric field at leaf to v, given in its plain
// representation (see [Normalize]).
func (h Handle) SetNum(leaf int, v uint64) {
	h.mustWrite()
	if h.bagLeaf < 0 && h.e != nil {
		h.e.SetNum(int(h.leaf)+leaf, v)
		return
	}
	_, l := h.leafInfo(leaf)
	h.setStored(leaf, Normalize(&l.Field.Type, v))
}

// setStored is SetNum for a value already in stored representation.
func (h Handle) setStored(leaf int, v uint64) {
	abs, l := h.leafInfo(leaf)
	old := h.r.Num(l.Num)
	if old == v {
		return
	}
	h.r.setNum(l.Num, v)
	if h.mark(abs) {
		h.e.markNum(abs, l.Num, old)
	}
}

// SetStr sets the string or bytes field at leaf.
func (h Handle) SetStr(leaf int, s string) {
	h.mustWrite()
	abs, l := h.leafInfo(leaf)
	p := &h.r.strs()[l.Obj]
	if *p == s {
		return
	}
	if lim := h.limited(abs); lim != nil && len(s) > lim.MaxString {
		h.e.refuse(h.entityLeaf(abs), "string", len(s), lim.MaxString)
		return
	}
	*p = s
	if h.mark(abs) {
		h.e.markLeaf(abs)
	}
}

// SetNested copies every field of src, a value of struct type st, into the
// nested struct field of type st that starts at leaf. The type is passed
// explicitly: leaf is also the first leaf of the nested struct's own first
// field, so it does not identify the field on its own.
func (h Handle) SetNested(leaf int, st *schema.Struct, src Handle) {
	h.mustWrite()
	if src.r == nil {
		src = NewValue(st) // the zero value reads as zeros
	}
	for i := 0; i < st.Leaves; i++ {
		l := st.Leaf(i)
		switch k := l.Field.Type.Kind; {
		case k.Numeric():
			// src holds stored values, which SetNum would normalize
			// again: a quantized code is not a float's bits.
			h.setStored(leaf+i, src.Num(l.Num))
		case k == schema.String || k == schema.Bytes:
			h.SetStr(leaf+i, src.Str(l.Obj))
		default:
			_, sl := src.leafInfo(i)
			h.setContainer(leaf+i, src.r.conts()[sl.Obj])
		}
	}
}

// Copy returns a detached copy of the struct h addresses, of type t.
func (h Handle) Copy(t *schema.Struct) Handle {
	r := NewRecord(t)
	if h.r == nil {
		return Handle{r: r, bagLeaf: -1, pin: -1} // the zero value reads as zeros
	}
	off := int(h.num) >> 3
	copy(r.nums(), h.r.nums()[off:off+t.NumBytes])
	copy(r.strs(), h.r.strs()[h.obj:])
	conts := r.conts()
	for i := 0; i < t.Leaves; i++ {
		if l := t.Leaf(i); l.Field.Type.Kind.Container() {
			_, src := h.leafInfo(i)
			conts[l.Obj] = cloneContainer(h.r.conts()[src.Obj])
		}
	}
	return Handle{r: r, bagLeaf: -1, pin: -1}
}

// BoolBits returns the plain representation of b.
func BoolBits(b bool) uint64 {
	if b {
		return 1
	}
	return 0
}

// setContainer replaces the container at leaf with a copy of c.
func (h Handle) setContainer(leaf int, c any) {
	abs, l := h.leafInfo(leaf)
	if lim := h.limited(abs); lim != nil {
		what, n, max := containerOver(lim, c)
		if what == "" {
			if n = h.contLevels(c); n > lim.MaxDepth {
				what, max = "nesting", lim.MaxDepth
			}
		}
		if what != "" {
			h.e.refuse(h.entityLeaf(abs), what, n, max)
			return
		}
	}
	slot := &h.r.conts()[l.Obj]
	*slot = cloneContainer(c)
	if h.mark(abs) {
		cc := h.e.cont(abs)
		cc.Whole = true
		cc.Ops = cc.Ops[:0]
		// Keyed containers are sent whole by marking every key as added.
		switch c := (*slot).(type) {
		case *Map:
			h.wholeKeys(abs, c)
		case *Bag:
			for k := range c.items {
				h.e.keyed(abs, Value{N: k}, true).Added = true
			}
		}
	}
}

func (h Handle) wholeKeys(abs int, m *Map) {
	for k := range m.n {
		h.e.keyed(abs, Value{N: k}, true).Added = true
	}
	for k := range m.s {
		h.e.keyed(abs, Value{S: k}, true).Added = true
	}
}

// List returns a handle on the list field at leaf.
func (h Handle) List(leaf int) ListHandle {
	if h.r == nil {
		return ListHandle{} // reads as empty
	}
	abs, l := h.leafInfo(leaf)
	return ListHandle{h: h, leaf: int32(abs), l: h.r.List(l.Obj)}
}

// Map returns a handle on the map field at leaf.
func (h Handle) Map(leaf int) MapHandle {
	if h.r == nil {
		return MapHandle{}
	}
	abs, l := h.leafInfo(leaf)
	return MapHandle{h: h, leaf: int32(abs), m: h.r.Map(l.Obj)}
}

// Bag returns a handle on the bag field at leaf.
func (h Handle) Bag(leaf int) BagHandle {
	if h.r == nil {
		return BagHandle{}
	}
	abs, l := h.leafInfo(leaf)
	return BagHandle{h: h, leaf: int32(abs), b: h.r.Bag(l.Obj)}
}

// inner returns the handle for a record stored inside the container at
// leaf abs of h: changes inside it mark that container leaf of the
// enclosing bag item, or nothing for a container owned by the entity (only
// bags give out tracked handles on their items).
func (h Handle) inner(abs int) Handle {
	if h.bagLeaf >= 0 && h.pin < 0 {
		h.pin = int32(abs)
	}
	return h
}

func checkElem(t *schema.Type, v Value) Value {
	if t.Kind == schema.Nested {
		if v.R == nil || v.R.t != t.Struct {
			panic(fmt.Sprintf("state: element of type %s expected", t.Struct.Name))
		}
		return Value{R: v.R.Clone()}
	}
	if t.Kind.Numeric() {
		return Value{N: Normalize(t, v.N)}
	}
	return Value{S: v.S}
}

// A ListHandle changes a list and records each change.
type ListHandle struct {
	h    Handle
	leaf int32
	l    *List
}

// List returns the list for reading.
func (lh ListHandle) List() *List { return lh.l }

// Len returns the number of elements.
func (lh ListHandle) Len() int { return lh.l.Len() }

// At returns element i. A struct element's record must not be modified:
// copy it with [ValueOf] and store it back with Set.
func (lh ListHandle) At(i int) Value { return lh.l.At(i) }

func (lh ListHandle) record(op ListOp) {
	if !lh.h.mark(int(lh.leaf)) {
		if lh.h.bagLeaf >= 0 && lh.h.e.tracked() {
			lh.h.inner(int(lh.leaf)).mark(int(lh.leaf))
		}
		return
	}
	lh.h.e.listOp(int(lh.leaf), lh.l, op)
}

// Push appends v.
func (lh ListHandle) Push(v Value) {
	lh.h.mustWrite()
	if lh.h.overflows(lh.leaf, "list", len(lh.l.v)) || lh.h.tooLarge(lh.leaf, v) {
		return
	}
	v = checkElem(lh.l.t.Elem, v)
	lh.l.v = append(lh.l.v, v)
	lh.record(ListOp{Code: OpPush, V: v})
}

// Insert inserts v at index i (0 ≤ i ≤ Len).
func (lh ListHandle) Insert(i int, v Value) {
	lh.h.mustWrite()
	if lh.h.overflows(lh.leaf, "list", len(lh.l.v)) || lh.h.tooLarge(lh.leaf, v) {
		return
	}
	v = checkElem(lh.l.t.Elem, v)
	lh.l.insert(i, v)
	lh.record(ListOp{Code: OpInsert, Index: i, V: v})
}

// Remove removes element i.
func (lh ListHandle) Remove(i int) {
	lh.h.mustWrite()
	lh.l.remove(i)
	lh.record(ListOp{Code: OpRemove, Index: i})
}

// Set replaces element i with v.
func (lh ListHandle) Set(i int, v Value) {
	lh.h.mustWrite()
	if lh.h.tooLarge(lh.leaf, v) {
		return
	}
	v = checkElem(lh.l.t.Elem, v)
	old := lh.l.v[i].R
	lh.l.v[i] = v
	lh.record(ListOp{Code: OpSet, Index: i, V: v, Old: old})
}

// Clear removes every element.
func (lh ListHandle) Clear() {
	lh.h.mustWrite()
	clear(lh.l.v)
	lh.l.v = lh.l.v[:0]
	lh.record(ListOp{Code: OpClear})
}

// A MapHandle changes a map and records each change.
type MapHandle struct {
	h    Handle
	leaf int32
	m    *Map
}

// Map returns the map for reading.
func (mh MapHandle) Map() *Map { return mh.m }

// Key normalizes an integer key given in plain representation.
func (mh MapHandle) Key(k uint64) Value {
	if mh.m == nil {
		return Value{N: k} // an empty map of the zero value: no key matches
	}
	return Value{N: Normalize(&schema.Type{Kind: mh.m.t.Key}, k)}
}

func (mh MapHandle) record(k Value, existed, removed bool) {
	if !mh.h.mark(int(mh.leaf)) {
		if mh.h.bagLeaf >= 0 && mh.h.e.tracked() {
			mh.h.inner(int(mh.leaf)).mark(int(mh.leaf))
		}
		return
	}
	kc := mh.h.e.keyed(int(mh.leaf), k, existed)
	kc.Removed = removed
	kc.Added = !removed
}

// Put sets the value of key k (already normalized, see Key).
func (mh MapHandle) Put(k, v Value) {
	mh.h.mustWrite()
	if _, ok := mh.m.Get(k); !ok && mh.h.overflows(mh.leaf, "map", mh.m.Len()) ||
		mh.h.tooLarge(mh.leaf, Value{S: k.S}) || mh.h.tooLarge(mh.leaf, v) {
		return
	}
	v = checkElem(mh.m.t.Elem, v)
	_, existed := mh.m.put(k, v)
	mh.record(k, existed, false)
}

// Delete removes key k.
func (mh MapHandle) Delete(k Value) {
	mh.h.mustWrite()
	if _, existed := mh.m.del(k); existed {
		mh.record(k, true, true)
	}
}

// Clear removes every key.
func (mh MapHandle) Clear() {
	mh.h.mustWrite()
	for _, k := range mh.m.Keys(nil) {
		mh.Delete(k)
	}
}

// A BagHandle changes a bag and records each change.
type BagHandle struct {
	h    Handle
	leaf int32
	b    *Bag
}

// Bag returns the bag for reading.
func (bh BagHandle) Bag() *Bag { return bh.b }

// Key normalizes an integer key given in plain representation.
func (bh BagHandle) Key(k uint64) uint64 {
	if bh.b == nil {
		return k
	}
	return Normalize(&schema.Type{Kind: bh.b.t.Key}, k)
}

// Get returns a tracked handle on item k, or an invalid handle if absent.
func (bh BagHandle) Get(k uint64) Handle {
	r := bh.b.Get(k)
	if r == nil {
		return Handle{}
	}
	return bh.itemHandle(k, r)
}

func (bh BagHandle) itemHandle(k uint64, r *Record) Handle {
	h := bh.h
	h.depth += 2 // the bag's level, then the item's
	if h.bagLeaf >= 0 {
		// An item of a bag inside a bag item: changes resend the outer
		// item's bag field whole.
		h = h.inner(int(bh.leaf))
	} else {
		h.bagLeaf, h.key, h.pin = bh.leaf, k, -1
	}
	h.r, h.leaf, h.num, h.obj = r, 0, 0, 0
	return h
}

func (bh BagHandle) record(k uint64, existed, removed bool) {
	if !bh.h.mark(int(bh.leaf)) {
		if bh.h.bagLeaf >= 0 && bh.h.e.tracked() {
			bh.h.inner(int(bh.leaf)).mark(int(bh.leaf))
		}
		return
	}
	kc := bh.h.e.keyed(int(bh.leaf), Value{N: k}, existed)
	kc.Removed = removed
	kc.Added = !removed
	clear(kc.Dirty)
}

// Add stores a copy of item v under key k, replacing any item there, and
// returns a tracked handle on the stored item, or an invalid handle if the
// tracker refused the item (see [Limits]).
func (bh BagHandle) Add(k uint64, v Handle) Handle {
	bh.h.mustWrite()
	if v.r == nil || v.r.t != bh.b.t.Struct {
		panic(fmt.Sprintf("state: bag item of type %s expected", bh.b.t.Struct.Name))
	}
	_, existed := bh.b.items[k]
	if !existed && bh.h.overflows(bh.leaf, "bag", len(bh.b.items)) || bh.h.tooLarge(bh.leaf, Value{R: v.r}) {
		return Handle{}
	}
	r := v.r.Clone()
	bh.b.items[k] = r
	bh.record(k, existed, false)
	return bh.itemHandle(k, r)
}

// Remove removes item k.
func (bh BagHandle) Remove(k uint64) {
	bh.h.mustWrite()
	if _, existed := bh.b.items[k]; existed {
		delete(bh.b.items, k)
		bh.record(k, true, true)
	}
}

// Elem returns the struct h addresses, of type t, as a container element
// value. The list, map or bag that receives it stores a copy.
func (h Handle) Elem(t *schema.Struct) Value {
	if h.r != nil && h.r.t == t && h.leaf == 0 {
		return Value{R: h.r}
	}
	return h.Copy(t).Value()
}
