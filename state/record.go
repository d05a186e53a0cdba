package state

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"reflect"
	"slices"
	"sync"
	"unsafe"

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

// A Record holds the values of one struct: an entity, a list element, a map
// value or a bag item. Nested structs are stored inline in their parent's
// slots (see schema.Struct.Layout).
//
// A record's values live in one block of memory with the record itself
// (see allocBlock): numeric values packed at their natural width and
// alignment, then string slots, then container slots. Numeric slots hold:
// bools as 0 or 1; signed integers, read back sign-extended to 64 bits;
// unsigned integers and refs zero-extended; unquantized floats as their
// IEEE bits (float32 in the low 32 bits); quantized floats as their
// integer code (bounded codes in [0, 2^bits), unbounded ones as int64).
//
// Records have no exported mutators: server code mutates them through
// generated setters, which record every change in a [Tracker], and client
// code through a [Txn]. Use records through pointers: a copy of a Record
// value shares the original's values, and [Record.Clone] is the way to
// copy one.
type Record struct {
	t    *schema.Struct
	data unsafe.Pointer // numeric bytes, string slots, container slots; nil if t has none
}

// NewRecord returns a record of type t with every field at its zero value.
// t must have been laid out (schema.Struct.Layout).
func NewRecord(t *schema.Struct) *Record {
	p, data := allocBlock(recordType, t)
	r := (*Record)(p)
	r.init(t, data)
	return r
}

var (
	recordType = reflect.TypeFor[Record]()
	entityType = reflect.TypeFor[Entity]()
)

// blockKey identifies the layout of a block: a header and the storage of
// a struct type.
type blockKey struct {
	hdr                reflect.Type
	words, strs, conts int
}

var blockTypes sync.Map // blockKey → *blockType

// A blockType is the Go type of a block and the offset of its storage,
// kept apart because reflect.Type.Field costs more than the allocation.
type blockType struct {
	typ reflect.Type
	off uintptr
}

// allocBlock allocates, zeroed, a header of type hdr followed by the
// storage of a record of type t, and returns pointers to the header and to
// the storage. One allocation per record keeps the values next to the
// record that owns them and saves the per-object overhead of separate
// slices; building the block as a real Go type (once per shape) tells the
// garbage collector where its strings and containers are.
func allocBlock(hdr reflect.Type, t *schema.Struct) (unsafe.Pointer, unsafe.Pointer) {
	k := blockKey{hdr: hdr, words: t.NumBytes / 8, strs: t.StrSlots, conts: t.ContSlots}
	if k.words == 0 && k.strs == 0 && k.conts == 0 {
		return reflect.New(hdr).UnsafePointer(), nil
	}
	bt, ok := blockTypes.Load(k)
	if !ok {
		fields := []reflect.StructField{{Name: "H", Type: hdr}}
		add := func(name string, n int, elem reflect.Type) {
			if n > 0 {
				fields = append(fields, reflect.StructField{Name: name, Type: reflect.ArrayOf(n, elem)})
			}
		}
		add("N", k.words, reflect.TypeFor[uint64]())
		add("S", k.strs, reflect.TypeFor[string]())
		add("C", k.conts, reflect.TypeFor[any]())
		typ := reflect.StructOf(fields)
		// nums, strs and conts find the arrays one after the other,
		// without padding: each array's size is a multiple of the next
		// one's alignment (a word) on every platform. Checked once per
		// shape, since a wrong offset would corrupt memory.
		at := typ.Field(1).Offset
		for i := 1; i < typ.NumField(); i++ {
			if f := typ.Field(i); f.Offset != at {
				panic(fmt.Sprintf("state: block array %s at offset %d, want %d", f.Name, f.Offset, at))
			} else {
				at += f.Type.Size()
			}
		}
		bt, _ = blockTypes.LoadOrStore(k, &blockType{typ: typ, off: typ.Field(1).Offset})
	}
	b := bt.(*blockType)
	p := reflect.New(b.typ).UnsafePointer()
	return p, unsafe.Add(p, b.off)
}

func (r *Record) init(t *schema.Struct, data unsafe.Pointer) {
	r.t, r.data = t, data
	if t.ContSlots > 0 {
		conts := r.conts()
		for i := 0; i < t.Leaves; i++ {
			l := t.Leaf(i)
			if l.Field.Type.Kind.Container() {
				conts[l.Obj] = newContainer(&l.Field.Type)
			}
		}
	}
}

// numPtr returns the address of numeric slot s. The bounds check relies on
// the layout's alignment: a slot's offset is a multiple of its size and
// NumBytes a multiple of 8, so a slot that starts inside fits inside.
func (r *Record) numPtr(s int) unsafe.Pointer {
	if uint(s>>3) >= uint(r.t.NumBytes) {
		panic(errSlot)
	}
	return unsafe.Add(r.data, s>>3)
}

// errSlot is the panic of a numeric slot outside a record's storage: slots
// come from the schema's layout, so it is a caller's bug. A constant value
// keeps the check cheap enough for Num to be inlined.
var errSlot = errors.New("state: numeric slot outside the record")

// load reads the value of numeric slot s stored at p.
func load(p unsafe.Pointer, s int) uint64 {
	switch s & 7 {
	case 0:
		return uint64(*(*uint8)(p))
	case 1:
		return uint64(*(*uint16)(p))
	case 2:
		return uint64(*(*uint32)(p))
	case 4:
		return uint64(int64(*(*int8)(p)))
	case 5:
		return uint64(int64(*(*int16)(p)))
	case 6:
		return uint64(int64(*(*int32)(p)))
	}
	return *(*uint64)(p) // 8 bytes: nothing to extend
}

// loadSwitch is load with a jump table, which Go compiles for a switch of
// 8 cases: fewer instructions than load's comparisons, but too costly for
// the inliner to put load's callers, Entity.Num among them, inline. The
// paths of Txn that store values use it.
func loadSwitch(p unsafe.Pointer, s int) uint64 {
	switch s & 7 {
	case 0:
		return uint64(*(*uint8)(p))
	case 1:
		return uint64(*(*uint16)(p))
	case 2:
		return uint64(*(*uint32)(p))
	case 4:
		return uint64(int64(*(*int8)(p)))
	case 5:
		return uint64(int64(*(*int16)(p)))
	case 6:
		return uint64(int64(*(*int32)(p)))
	case 3, 7:
		return *(*uint64)(p) // 8 bytes: nothing to extend
	}
	return 0 // not reached: s&7 is one of the cases
}

// store writes v, in stored representation, to numeric slot s at p. Its
// switch names all 8 kinds of slot: with as many cases, Go compiles a
// jump table instead of a chain of comparisons.
func store(p unsafe.Pointer, s int, v uint64) {
	switch s & 7 {
	case 0, 4:
		*(*uint8)(p) = uint8(v)
	case 1, 5:
		*(*uint16)(p) = uint16(v)
	case 2, 6:
		*(*uint32)(p) = uint32(v)
	case 3, 7:
		*(*uint64)(p) = v
	}
}

func (r *Record) setNum(s int, v uint64) { store(r.numPtr(s), s, v) }

// nums returns the numeric storage as bytes.
func (r *Record) nums() []byte {
	if r.t.NumBytes == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(r.data), r.t.NumBytes)
}

// strs returns the string slots.
func (r *Record) strs() []string {
	if r.t.StrSlots == 0 {
		return nil
	}
	return unsafe.Slice((*string)(unsafe.Add(r.data, r.t.NumBytes)), r.t.StrSlots)
}

// conts returns the container slots: each a *List, *Map or *Bag.
func (r *Record) conts() []any {
	if r.t.ContSlots == 0 {
		return nil
	}
	return unsafe.Slice((*any)(unsafe.Add(r.data, r.t.NumBytes+int(unsafe.Sizeof(""))*r.t.StrSlots)), r.t.ContSlots)
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

// Num returns the value in numeric slot s (see schema.NumSlot).
func (r *Record) Num(s int) uint64 { return load(r.numPtr(s), s) }

// Str returns the string or bytes value in string slot i.
func (r *Record) Str(i int) string { return r.strs()[i] }

// List returns the list in container slot i.
func (r *Record) List(i int) *List { return r.conts()[i].(*List) }

// Map returns the map in container slot i.
func (r *Record) Map(i int) *Map { return r.conts()[i].(*Map) }

// Bag returns the bag in container slot i.
func (r *Record) Bag(i int) *Bag { return r.conts()[i].(*Bag) }

// IsZero reports whether leaf l of r holds its zero value: 0, an empty
// string or an empty container.
func (r *Record) IsZero(l *schema.LeafInfo) bool {
	switch k := l.Field.Type.Kind; {
	case k.Numeric():
		return r.Num(l.Num) == 0
	case k == schema.String || k == schema.Bytes:
		return r.Str(l.Obj) == ""
	case k == schema.List:
		return r.List(l.Obj).Len() == 0
	case k == schema.Map:
		return r.Map(l.Obj).Len() == 0
	case k == schema.Bag:
		return r.Bag(l.Obj).Len() == 0
	}
	return true
}

// Clone returns a deep copy of r.
func (r *Record) Clone() *Record {
	c := NewRecord(r.t)
	c.copyFrom(r)
	return c
}

// copyFrom makes r, a record of the same type as o, a deep copy of o.
func (r *Record) copyFrom(o *Record) {
	copy(r.nums(), o.nums())
	copy(r.strs(), o.strs())
	dst := r.conts()
	for i, c := range o.conts() {
		dst[i] = cloneContainer(c)
	}
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
	if r == nil || o == nil || r.t != o.t {
		return false
	}
	if !bytes.Equal(r.nums(), o.nums()) || !slices.Equal(r.strs(), o.strs()) {
		return false
	}
	oc := o.conts()
	for i, c := range r.conts() {
		if !containerEqual(c, oc[i]) {
			return false
		}
	}
	return true
}

// AppendDiff sets in dst, a bit per leaf, the leaves whose values differ
// between r and o, records of the same type, and returns dst, grown to
// the type's leaf count and cleared first.
func (r *Record) AppendDiff(dst []uint64, o *Record) []uint64 {
	words := (r.t.Leaves + 63) / 64
	dst = slices.Grow(dst[:0], words)[:words]
	clear(dst)
	for i := 0; i < r.t.Leaves; i++ {
		l := r.t.Leaf(i)
		var same bool
		switch k := l.Field.Type.Kind; {
		case k.Numeric():
			same = r.Num(l.Num) == o.Num(l.Num)
		case k == schema.String || k == schema.Bytes:
			same = r.Str(l.Obj) == o.Str(l.Obj)
		default:
			same = containerEqual(r.conts()[l.Obj], o.conts()[l.Obj])
		}
		if !same {
			dst[i>>6] |= 1 << (i & 63)
		}
	}
	return dst
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
