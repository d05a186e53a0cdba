package state

import (
	"math"

	"github.com/replicago/replica/schema"
)

// A Value is one element of a list or map, or a key: numeric kinds use N
// (see [Record.Num] for the representation), strings and bytes use S, and
// struct elements use R.
type Value struct {
	N uint64
	S string
	R *Record
}

// obj is an object slot: a string or bytes value, or a container.
type obj struct {
	s string
	c any // *List, *Map or *Bag
}

// A Record holds the values of one struct: an entity, a list element, a map
// value or a bag item. Nested structs are stored inline in their parent's
// slots (see schema.Struct.Layout).
//
// Numeric slots hold: bools as 0 or 1; signed integers sign-extended to 64
// bits; unsigned integers and refs zero-extended; unquantized floats as
// their IEEE bits (float32 in the low 32 bits); quantized floats as their
// integer code (bounded codes in [0, 2^bits), unbounded ones as int64).
//
// Records have no exported mutators: server code mutates them through
// generated setters, which record every change in a [Tracker], and client
// code through a [Txn].
type Record struct {
	t   *schema.Struct
	num []uint64
	obj []obj
}

// NewRecord returns a record of type t with every field at its zero value.
// t must have been laid out (schema.Struct.Layout).
func NewRecord(t *schema.Struct) *Record {
	r := &Record{t: t}
	r.init(t)
	return r
}

func (r *Record) init(t *schema.Struct) {
	r.t = t
	if t.NumSlots > 0 {
		r.num = make([]uint64, t.NumSlots)
	}
	if t.ObjSlots > 0 {
		r.obj = make([]obj, t.ObjSlots)
		for i := 0; i < t.Leaves; i++ {
			l := t.Leaf(i)
			if l.Obj >= 0 && l.Field.Type.Kind.Container() {
				r.obj[l.Obj].c = newContainer(&l.Field.Type)
			}
		}
	}
}

func newContainer(t *schema.Type) any {
	switch t.Kind {
	case schema.List:
		return &List{t: t}
	case schema.Map:
		return newMap(t)
	case schema.Bag:
		return newBag(t)
	}
	return nil
}

// Type returns the record's struct type.
func (r *Record) Type() *schema.Struct { return r.t }

// Num returns numeric slot i.
func (r *Record) Num(i int) uint64 { return r.num[i] }

// Str returns the string or bytes value in object slot i.
func (r *Record) Str(i int) string { return r.obj[i].s }

// List returns the list in object slot i.
func (r *Record) List(i int) *List { return r.obj[i].c.(*List) }

// Map returns the map in object slot i.
func (r *Record) Map(i int) *Map { return r.obj[i].c.(*Map) }

// Bag returns the bag in object slot i.
func (r *Record) Bag(i int) *Bag { return r.obj[i].c.(*Bag) }

// IsZero reports whether leaf l of r holds its zero value: 0, an empty
// string or an empty container.
func (r *Record) IsZero(l *schema.LeafInfo) bool {
	switch k := l.Field.Type.Kind; {
	case k.Numeric():
		return r.num[l.Num] == 0
	case k == schema.String || k == schema.Bytes:
		return r.obj[l.Obj].s == ""
	case k == schema.List:
		return len(r.obj[l.Obj].c.(*List).v) == 0
	case k == schema.Map:
		return r.obj[l.Obj].c.(*Map).Len() == 0
	case k == schema.Bag:
		return len(r.obj[l.Obj].c.(*Bag).items) == 0
	}
	return true
}

// Clone returns a deep copy of r.
func (r *Record) Clone() *Record {
	c := &Record{t: r.t}
	if r.num != nil {
		c.num = append([]uint64(nil), r.num...)
	}
	if r.obj != nil {
		c.obj = make([]obj, len(r.obj))
		for i, o := range r.obj {
			c.obj[i].s = o.s
			if o.c != nil {
				c.obj[i].c = cloneContainer(o.c)
			}
		}
	}
	return c
}

func cloneContainer(c any) any {
	switch c := c.(type) {
	case *List:
		return c.clone()
	case *Map:
		return c.clone()
	case *Bag:
		return c.clone()
	}
	return nil
}

// Equal reports whether r and o hold the same values. Unquantized floats
// compare by bits, so NaNs with equal payloads are equal.
func (r *Record) Equal(o *Record) bool {
	if r == o {
		return true
	}
	if r == nil || o == nil || r.t != o.t || len(r.num) != len(o.num) {
		return false
	}
	for i, v := range r.num {
		if o.num[i] != v {
			return false
		}
	}
	for i, a := range r.obj {
		b := o.obj[i]
		if a.s != b.s {
			return false
		}
		if a.c != nil && !containerEqual(a.c, b.c) {
			return false
		}
	}
	return true
}

func containerEqual(a, b any) bool {
	switch a := a.(type) {
	case *List:
		b, ok := b.(*List)
		return ok && a.equal(b)
	case *Map:
		b, ok := b.(*Map)
		return ok && a.equal(b)
	case *Bag:
		b, ok := b.(*Bag)
		return ok && a.equal(b)
	}
	return false
}

func (v Value) equal(o Value) bool {
	if v.R != nil || o.R != nil {
		return v.R.Equal(o.R)
	}
	return v.N == o.N && v.S == o.S
}

// Normalize maps a value of kind k with quantization q, given in its plain
// representation (float bits for floats, sign-extended integers), to the
// representation stored in numeric slots: integers are truncated to their
// width and re-extended, bools become 0 or 1, and quantized floats become
// their integer code.
func Normalize(t *schema.Type, v uint64) uint64 {
	switch k := t.Kind; k {
	case schema.Bool:
		if v != 0 {
			return 1
		}
		return 0
	case schema.Int8:
		return uint64(int64(int8(v)))
	case schema.Int16:
		return uint64(int64(int16(v)))
	case schema.Int32:
		return uint64(int64(int32(v)))
	case schema.Uint8:
		return uint64(uint8(v))
	case schema.Uint16:
		return uint64(uint16(v))
	case schema.Uint32, schema.Ref:
		return uint64(uint32(v))
	case schema.Float32:
		if t.Quant.Enabled() {
			return uint64(t.Quant.Quantize(float64(math.Float32frombits(uint32(v)))))
		}
		return uint64(uint32(v))
	case schema.Float64:
		if t.Quant.Enabled() {
			return uint64(t.Quant.Quantize(math.Float64frombits(v)))
		}
	}
	return v
}

// Float returns the float value of a numeric slot holding kind Float32 or
// Float64, dequantizing if needed.
func Float(t *schema.Type, v uint64) float64 {
	if t.Quant.Enabled() {
		return t.Quant.Dequantize(int64(v))
	}
	if t.Kind == schema.Float32 {
		return float64(math.Float32frombits(uint32(v)))
	}
	return math.Float64frombits(v)
}

// Float32 is [Float] for float32 fields, rounding the dequantized value.
func Float32(t *schema.Type, v uint64) float32 {
	if t.Quant.Enabled() {
		return float32(t.Quant.Dequantize(int64(v)))
	}
	return math.Float32frombits(uint32(v))
}
