package state

import (
	"cmp"
	"slices"

	"github.com/replicago/replica/schema"
)

// A List is an ordered list of values. A nil *List, *Map or *Bag (a
// container of a zero generated value) reads as empty.
type List struct {
	t *schema.Type
	v []Value
}

// Type returns the list's type.
func (l *List) Type() *schema.Type { return l.t }

// Len returns the number of elements.
func (l *List) Len() int {
	if l == nil {
		return 0
	}
	return len(l.v)
}

// At returns element i. A struct element's record must not be modified.
func (l *List) At(i int) Value {
	if l == nil {
		return []Value(nil)[i] // index out of range, as for any empty list
	}
	return l.v[i]
}

func (l *List) clone() *List {
	c := &List{t: l.t, v: slices.Clone(l.v)}
	for i := range c.v {
		if c.v[i].R != nil {
			c.v[i].R = c.v[i].R.Clone()
		}
	}
	return c
}

func (l *List) equal(o *List) bool {
	return slices.EqualFunc(l.v, o.v, Value.equal)
}

func (l *List) insert(i int, v Value) { l.v = slices.Insert(l.v, i, v) }

func (l *List) remove(i int) Value {
	old := l.v[i]
	l.v = slices.Delete(l.v, i, i+1)
	return old
}

// A Map maps integer or string keys to values. Integer keys are stored in
// Value.N with the key kind's numeric representation, string keys in
// Value.S.
type Map struct {
	t *schema.Type
	n map[uint64]Value
	s map[string]Value
}

func newMap(t *schema.Type) *Map {
	m := &Map{t: t}
	if t.Key == schema.String {
		m.s = make(map[string]Value)
	} else {
		m.n = make(map[uint64]Value)
	}
	return m
}

// Type returns the map's type.
func (m *Map) Type() *schema.Type { return m.t }

// Len returns the number of entries.
func (m *Map) Len() int {
	if m == nil {
		return 0
	}
	return len(m.n) + len(m.s)
}

// Get returns the value for key k. A struct value's record must not be
// modified.
func (m *Map) Get(k Value) (Value, bool) {
	if m == nil {
		return Value{}, false
	}
	if m.s != nil {
		v, ok := m.s[k.S]
		return v, ok
	}
	v, ok := m.n[k.N]
	return v, ok
}

// Keys appends the keys in ascending order to dst and returns it.
func (m *Map) Keys(dst []Value) []Value {
	if m == nil {
		return dst
	}
	start := len(dst)
	if m.s != nil {
		for k := range m.s {
			dst = append(dst, Value{S: k})
		}
		slices.SortFunc(dst[start:], func(a, b Value) int { return cmp.Compare(a.S, b.S) })
		return dst
	}
	for k := range m.n {
		dst = append(dst, Value{N: k})
	}
	signed := m.t.Key.Signed()
	slices.SortFunc(dst[start:], func(a, b Value) int { return compareKey(a.N, b.N, signed) })
	return dst
}

func compareKey(a, b uint64, signed bool) int {
	if signed {
		return cmp.Compare(int64(a), int64(b))
	}
	return cmp.Compare(a, b)
}

// all yields every key and value, in no particular order.
func (m *Map) all(yield func(k, v Value) bool) {
	for k, v := range m.s {
		if !yield(Value{S: k}, v) {
			return
		}
	}
	for k, v := range m.n {
		if !yield(Value{N: k}, v) {
			return
		}
	}
}

func (m *Map) put(k, v Value) (old Value, existed bool) {
	if m.s != nil {
		old, existed = m.s[k.S]
		m.s[k.S] = v
		return
	}
	old, existed = m.n[k.N]
	m.n[k.N] = v
	return
}

func (m *Map) del(k Value) (old Value, existed bool) {
	if m.s != nil {
		old, existed = m.s[k.S]
		delete(m.s, k.S)
		return
	}
	old, existed = m.n[k.N]
	delete(m.n, k.N)
	return
}

func (m *Map) clone() *Map {
	c := newMap(m.t)
	for k, v := range m.all {
		if v.R != nil {
			v.R = v.R.Clone()
		}
		c.put(k, v)
	}
	return c
}

func (m *Map) equal(o *Map) bool {
	if m.Len() != o.Len() {
		return false
	}
	for k, v := range m.all {
		if w, ok := o.Get(k); !ok || !v.equal(w) {
			return false
		}
	}
	return true
}

// A Bag is an id-keyed container of struct items. Changing one field of
// one item replicates only that field.
type Bag struct {
	t     *schema.Type
	items map[uint64]*Record
}

func newBag(t *schema.Type) *Bag { return &Bag{t: t, items: make(map[uint64]*Record)} }

// Type returns the bag's type.
func (b *Bag) Type() *schema.Type { return b.t }

// Len returns the number of items.
func (b *Bag) Len() int {
	if b == nil {
		return 0
	}
	return len(b.items)
}

// Get returns the item with key k, or nil. The record must not be modified.
func (b *Bag) Get(k uint64) *Record {
	if b == nil {
		return nil
	}
	return b.items[k]
}

// All yields every item and its key, in no particular order: the cheap
// way to visit every item when the order does not matter (Keys sorts).
// Items must not be modified.
func (b *Bag) All(yield func(k uint64, r *Record) bool) {
	if b == nil {
		return
	}
	for k, r := range b.items {
		if !yield(k, r) {
			return
		}
	}
}

// Keys appends the keys in ascending order to dst and returns it.
func (b *Bag) Keys(dst []uint64) []uint64 {
	if b == nil {
		return dst
	}
	start := len(dst)
	for k := range b.items {
		dst = append(dst, k)
	}
	signed := b.t.Key.Signed()
	slices.SortFunc(dst[start:], func(x, y uint64) int { return compareKey(x, y, signed) })
	return dst
}

func (b *Bag) clone() *Bag {
	c := newBag(b.t)
	for k, r := range b.items {
		c.items[k] = r.Clone()
	}
	return c
}

func (b *Bag) equal(o *Bag) bool {
	if len(b.items) != len(o.items) {
		return false
	}
	for k, r := range b.items {
		if !r.Equal(o.items[k]) {
			return false
		}
	}
	return true
}
