// Package mutate makes random changes to replicated values through state
// handles, as generated setters do, for property tests: every field kind,
// containers and their operations, nested structs and bag items, with
// values that favour edge cases (extremes, special floats, long strings).
package mutate

import (
	"math"
	"slices"
	"strings"

	"pgregory.net/rapid"

	"github.com/replicago/replica/schema"
	"github.com/replicago/replica/state"
)

// ---- schema walking ----

func ScalarLeaves(st *schema.Struct) []int {
	var out []int
	for i := 0; i < st.Leaves; i++ {
		if !st.Leaf(i).Field.Type.Kind.Container() {
			out = append(out, i)
		}
	}
	return out
}

func ContainerLeaves(st *schema.Struct) []int {
	var out []int
	for i := 0; i < st.Leaves; i++ {
		if st.Leaf(i).Field.Type.Kind.Container() {
			out = append(out, i)
		}
	}
	return out
}

// NestedPaths returns the field ID paths of every nested struct field of
// st, at any depth.
func NestedPaths(st *schema.Struct) [][]uint32 {
	var out [][]uint32
	var walk func(s *schema.Struct, prefix []uint32)
	walk = func(s *schema.Struct, prefix []uint32) {
		for _, f := range s.Fields {
			if f.Deprecated || f.Type.Kind != schema.Nested {
				continue
			}
			p := append(slices.Clip(prefix), f.ID)
			out = append(out, p)
			walk(f.Type.Struct, p)
		}
	}
	walk(st, nil)
	return out
}

// Reach follows path from h, a handle on a struct of type st, through
// nested fields the way generated accessors do, and returns the handle on
// the struct holding the last field, and that field.
func Reach(h state.Handle, st *schema.Struct, path []uint32) (state.Handle, *schema.Field) {
	for _, id := range path[:len(path)-1] {
		f := st.Field(id)
		h = h.Nested(f.Leaf, f.Num, f.Obj)
		st = f.Type.Struct
	}
	return h, st.Field(path[len(path)-1])
}

// PlainOf returns leaf l of r as a value a setter accepts: the plain
// representation for numeric leaves.
func PlainOf(r *state.Record, l *schema.LeafInfo) state.Value {
	t := &l.Field.Type
	switch {
	case t.Kind.Numeric():
		v := r.Num(l.Num)
		if t.Quant.Enabled() {
			f := state.Float(t, v)
			if t.Kind == schema.Float32 {
				return state.Value{N: uint64(math.Float32bits(float32(f)))}
			}
			return state.Value{N: math.Float64bits(f)}
		}
		return state.Value{N: v}
	case t.Kind == schema.String || t.Kind == schema.Bytes:
		return state.Value{S: r.Str(l.Obj)}
	}
	return state.Value{}
}

// ---- random values ----

// Plain draws a value of numeric type t in plain representation,
// favouring extremes and special floats.
func Plain(t *rapid.T, typ *schema.Type, label string) uint64 {
	switch k := typ.Kind; {
	case k == schema.Bool:
		return rapid.SampledFrom([]uint64{0, 1, 2, 1 << 63}).Draw(t, label)
	case k.Signed():
		w := k.Width()
		lo, hi := -(int64(1) << (w - 1)), int64(1)<<(w-1)-1
		return uint64(rapid.OneOf(
			rapid.SampledFrom([]int64{0, -1, 1, lo, hi, lo + 1, hi - 1}),
			rapid.Int64Range(-300, 300),
			rapid.Int64Range(lo, hi),
			rapid.Int64(), // wider than the kind: setters truncate
		).Draw(t, label))
	case k == schema.Float32 || k == schema.Float64:
		if typ.Quant.Enabled() {
			f := QuantFloat(t, typ.Quant, label)
			if k == schema.Float32 {
				return uint64(math.Float32bits(float32(f)))
			}
			return math.Float64bits(f)
		}
		if k == schema.Float32 {
			return uint64(rapid.OneOf(
				rapid.SampledFrom([]uint32{0, 0x80000000, 0x7fc00000, 0xffc00000, 0x7f800001, 0x7fbfffff,
					0x7f800000, 0xff800000, 0x00000001, 0x807fffff, 0x7f7fffff, 0xff7fffff, 0x3f800000}),
				rapid.Map(rapid.Float32Range(-1000, 1000), math.Float32bits),
				rapid.Uint32(),
			).Draw(t, label))
		}
		return rapid.OneOf(
			rapid.SampledFrom([]uint64{0, 1 << 63, 0x7ff8000000000000, 0xfff8000000000001, 0x7ff0000000000001,
				0x7ff0000000000000, 0xfff0000000000000, 1, 0x800fffffffffffff, 0x7fefffffffffffff, 0x3ff0000000000000}),
			rapid.Map(rapid.Float64Range(-1e6, 1e6), math.Float64bits),
			rapid.Uint64(),
		).Draw(t, label)
	default: // unsigned and Ref
		w := k.Width()
		hi := uint64(math.MaxUint64)
		if w < 64 {
			hi = 1<<w - 1
		}
		return rapid.OneOf(
			rapid.SampledFrom([]uint64{0, 1, hi, hi - 1, hi >> 1, hi>>1 + 1}),
			rapid.Uint64Range(0, 300),
			rapid.Uint64Range(0, hi),
			rapid.Uint64(),
		).Draw(t, label)
	}
}

func QuantFloat(t *rapid.T, q schema.Quant, label string) float64 {
	specials := []float64{0, math.Copysign(0, -1), math.NaN(), math.Inf(1), math.Inf(-1), 1e30, -1e30,
		math.MaxFloat64, -math.MaxFloat64, q.Step, -q.Step, q.Step / 2, 1.5 * q.Step}
	lo, hi := -1e6, 1e6
	if q.Bounded {
		specials = append(specials, q.Min, q.Max(), q.Min-q.Step, q.Max()+q.Step, q.Min+q.Step/2)
		lo, hi = q.Min-10*q.Step, q.Max()+10*q.Step
	}
	return rapid.OneOf(
		rapid.SampledFrom(specials),
		rapid.Float64Range(lo, hi),
		rapid.Map(rapid.Int64Range(-1000, 1000), func(n int64) float64 { return q.Min + float64(n)*q.Step }),
		rapid.Float64(),
	).Draw(t, label)
}

var longString = strings.Repeat("long-string-", 200)

func Str(t *rapid.T, label string) string {
	return rapid.OneOf(
		rapid.Just(""),
		rapid.SampledFrom([]string{"a", "b", "hero", "ü", "\x00", "\xff\xfe", longString, longString[:1000]}),
		rapid.String(),
		rapid.Map(rapid.SliceOfN(rapid.Byte(), 0, 40), func(b []byte) string { return string(b) }),
		rapid.Map(rapid.IntRange(100, 3000), func(n int) string { return strings.Repeat("x", n) }),
	).Draw(t, label)
}

// ValidUTF8Keys makes Key draw string keys that are valid UTF-8 only, for
// tests with TypeScript clients, which decode strings as UTF-8 with
// replacement characters (docs/protocol.md OQ 10): two invalid keys can
// decode to the same JS string there.
var ValidUTF8Keys bool

// Key draws a map or bag key of kind k, from a small range most of the
// time so that operations hit existing keys.
func Key(t *rapid.T, k schema.Kind) state.Value {
	if k == schema.String {
		if ValidUTF8Keys {
			return state.Value{S: strings.ToValidUTF8(rapid.OneOf(
				rapid.SampledFrom([]string{"", "a", "b", "c", "\uFEFF"}),
				rapid.String(),
			).Draw(t, "key"), "\uFFFD")}
		}
		return state.Value{S: rapid.OneOf(
			rapid.SampledFrom([]string{"", "a", "b", "c", "\xff"}),
			rapid.String(),
		).Draw(t, "key")}
	}
	if rapid.IntRange(0, 3).Draw(t, "smallKey") > 0 {
		return state.Value{N: uint64(rapid.Int64Range(-3, 5).Draw(t, "key"))}
	}
	return state.Value{N: Plain(t, &schema.Type{Kind: k}, "key")}
}

// Elem draws a container element of type typ, plain for numerics.
func Elem(t *rapid.T, typ *schema.Type, depth int) state.Value {
	switch {
	case typ.Kind == schema.Nested:
		return Record(t, typ.Struct, depth+1).Value()
	case typ.Kind.Numeric():
		return state.Value{N: Plain(t, typ, "elem")}
	}
	return state.Value{S: Str(t, "elem")}
}

// Record draws a detached value of struct type st.
func Record(t *rapid.T, st *schema.Struct, depth int) state.Handle {
	h := state.NewValue(st)
	n := rapid.IntRange(0, st.Leaves).Draw(t, "fields")
	for i := 0; i < n; i++ {
		Struct(t, h, st, depth)
	}
	return h
}

// ---- generic mutations through state handles ----

// SetScalar sets the scalar field at leaf of h, of type typ and with
// numeric slot num or object slot obj, and checks that it reads back.
func SetScalar(t *rapid.T, h state.Handle, leaf, num, obj int, typ *schema.Type) {
	if typ.Kind.Numeric() {
		v := Plain(t, typ, "num")
		old := h.Num(num)
		h.SetNum(leaf, v)
		got, want := h.Num(num), state.Normalize(typ, v)
		// A NaN for a quantized float of an entity (not of a bag's item)
		// is refused, the field keeping its value (state.ErrNaN).
		if refused := state.RefusesNaN(typ, v) && got == old; got != want && !refused {
			t.Fatalf("SetNum(%d, %#x) stored %#x, want %#x", leaf, v, got, want)
		}
	} else {
		s := Str(t, "str")
		h.SetStr(leaf, s)
		if got := h.Str(obj); got != s {
			t.Fatalf("SetStr(%d) stored %.20q, want %.20q", leaf, got, s)
		}
	}
}

// SetNested copies src into the nested field f of the struct h addresses
// and checks that the field then equals src.
func SetNested(t *rapid.T, h state.Handle, f *schema.Field, src state.Handle) {
	st := f.Type.Struct
	want := src.Copy(st).Record()
	h.SetNested(f.Leaf, st, src)
	if got := h.Nested(f.Leaf, f.Num, f.Obj).Copy(st).Record(); !got.Equal(want) {
		t.Fatalf("SetNested(%s): field differs from the value copied", f.Name)
	}
}

// Struct makes one random change to the struct of type st that h
// addresses: a leaf through its flat index or through the nested handles
// on its path, or a whole nested field.
func Struct(t *rapid.T, h state.Handle, st *schema.Struct, depth int) {
	if st.Leaves == 0 {
		return
	}
	mode := rapid.IntRange(0, 5).Draw(t, "mode")
	if paths := NestedPaths(st); mode == 5 && len(paths) > 0 {
		path := rapid.SampledFrom(paths).Draw(t, "nested")
		ph, f := Reach(h, st, path)
		SetNested(t, ph, f, Record(t, f.Type.Struct, depth+1))
		return
	}
	i := rapid.IntRange(0, st.Leaves-1).Draw(t, "leaf")
	l := st.Leaf(i)
	leaf := i
	var f *schema.Field
	if mode%2 == 1 {
		h, f = Reach(h, st, l.Path)
		leaf = f.Leaf
	}
	if typ := &l.Field.Type; !typ.Kind.Container() {
		num, obj := l.Num, l.Obj
		if mode%2 == 1 {
			num, obj = f.Num, f.Obj
		}
		SetScalar(t, h, leaf, num, obj, typ)
	} else {
		Container(t, h, leaf, typ, depth)
	}
}

// Container applies one random operation to the container at leaf of
// h, of type typ.
func Container(t *rapid.T, h state.Handle, leaf int, typ *schema.Type, depth int) {
	switch typ.Kind {
	case schema.List:
		lh := h.List(leaf)
		n := lh.Len()
		switch op := rapid.IntRange(0, 6).Draw(t, "listOp"); {
		case op == 0 || n == 0:
			lh.Push(Elem(t, typ.Elem, depth))
		case op == 1:
			lh.Insert(rapid.IntRange(0, n).Draw(t, "index"), Elem(t, typ.Elem, depth))
		case op == 2:
			lh.Remove(rapid.IntRange(0, n-1).Draw(t, "index"))
		case op == 3:
			lh.Set(rapid.IntRange(0, n-1).Draw(t, "index"), Elem(t, typ.Elem, depth))
		case op == 4:
			lh.Clear()
		case op == 5:
			// Many operations: past a threshold the list is sent whole.
			for k := rapid.IntRange(1, 20).Draw(t, "pushes"); k > 0; k-- {
				lh.Push(Elem(t, typ.Elem, depth))
			}
		default:
			if typ.Elem.Kind == schema.Nested {
				i := rapid.IntRange(0, n-1).Draw(t, "index")
				v := state.ValueOf(lh.At(i).R)
				Struct(t, v, typ.Elem.Struct, depth+1)
				lh.Set(i, v.Value())
			} else {
				lh.Set(rapid.IntRange(0, n-1).Draw(t, "index"), lh.At(rapid.IntRange(0, n-1).Draw(t, "from")))
			}
		}
	case schema.Map:
		mh := h.Map(leaf)
		key := func() state.Value {
			if mh.Map().Len() > 0 && rapid.Bool().Draw(t, "existingKey") {
				return rapid.SampledFrom(mh.Map().Keys(nil)).Draw(t, "key")
			}
			k := Key(t, typ.Key)
			if typ.Key != schema.String {
				k = mh.Key(k.N)
			}
			return k
		}
		switch op := rapid.IntRange(0, 4).Draw(t, "mapOp"); op {
		case 0, 1:
			mh.Put(key(), Elem(t, typ.Elem, depth))
		case 2:
			mh.Delete(key())
		case 3:
			mh.Clear()
		default:
			k := key()
			v, ok := mh.Map().Get(k)
			if ok && typ.Elem.Kind == schema.Nested {
				r := state.ValueOf(v.R)
				Struct(t, r, typ.Elem.Struct, depth+1)
				v = r.Value()
			} else {
				v = Elem(t, typ.Elem, depth)
			}
			mh.Put(k, v)
		}
	case schema.Bag:
		bh := h.Bag(leaf)
		key := func() uint64 {
			if bh.Bag().Len() > 0 && rapid.Bool().Draw(t, "existingKey") {
				return rapid.SampledFrom(bh.Bag().Keys(nil)).Draw(t, "key")
			}
			return bh.Key(Key(t, typ.Key).N)
		}
		switch op := rapid.IntRange(0, 5).Draw(t, "bagOp"); {
		case op == 0 || op == 1:
			it := bh.Add(key(), Record(t, typ.Struct, depth+1))
			if rapid.Bool().Draw(t, "changeAdded") {
				Struct(t, it, typ.Struct, depth+1)
			}
		case op == 2:
			bh.Remove(key())
		default:
			if bh.Bag().Len() == 0 {
				return
			}
			k := rapid.SampledFrom(bh.Bag().Keys(nil)).Draw(t, "item")
			it := bh.Get(k)
			for n := rapid.IntRange(1, 3).Draw(t, "itemChanges"); n > 0; n-- {
				Struct(t, it, typ.Struct, depth+1)
			}
		}
	}
}
