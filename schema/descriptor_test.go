package schema_test

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/replicago/replica/internal/arena"
	"github.com/replicago/replica/schema"
	"github.com/replicago/replica/wire"
)

// fullSchema returns a schema that uses every kind, every quantization
// form, nesting three deep, every container with scalar and struct
// elements, recursion through a container, deprecated fields and every
// value of every flag.
func fullSchema(t testing.TB) *schema.Schema {
	t.Helper()
	bounded, err := schema.NewQuant(1.0/64, -512, 512, 0, true, true)
	if err != nil {
		t.Fatal(err)
	}
	angle, err := schema.NewQuant(0, 0, 2*math.Pi, 12, true, true)
	if err != nil {
		t.Fatal(err)
	}
	deep := &schema.Struct{Name: "Deep", Fields: []*schema.Field{
		{ID: 1, Name: "D", Type: schema.Type{Kind: schema.Uint8}, Vis: schema.VisAll},
		{ID: 3, Name: "Note", Type: schema.Type{Kind: schema.String}, Vis: schema.VisOwner},
	}}
	mid := &schema.Struct{Name: "Mid", Fields: []*schema.Field{
		{ID: 1, Name: "Deep", Type: schema.Type{Kind: schema.Nested, Struct: deep}, Vis: schema.VisAll},
		{ID: 2, Name: "M", Type: schema.Type{Kind: schema.Int16}, Vis: schema.VisOthers},
	}}
	vec := &schema.Struct{Name: "Vec", Fields: []*schema.Field{
		{ID: 1, Name: "X", Type: schema.Type{Kind: schema.Float32, Quant: bounded}, Vis: schema.VisAll},
		{ID: 2, Name: "Y", Type: schema.Type{Kind: schema.Float32, Quant: bounded}, Vis: schema.VisAll},
		{ID: 3, Name: "Mid", Type: schema.Type{Kind: schema.Nested, Struct: mid}, Vis: schema.VisAll},
	}}
	item := &schema.Struct{Name: "Item", Fields: []*schema.Field{
		{ID: 1, Name: "Count", Type: schema.Type{Kind: schema.Int32}, Vis: schema.VisAll},
		{ID: 2, Name: "Name", Type: schema.Type{Kind: schema.String}, Vis: schema.VisAll},
		{ID: 3, Name: "Tags", Type: schema.Type{Kind: schema.List, Elem: &schema.Type{Kind: schema.String}}, Vis: schema.VisAll},
		{ID: 4, Name: "Pos", Type: schema.Type{Kind: schema.Nested, Struct: vec}, Vis: schema.VisAll},
	}}
	node := &schema.Struct{Name: "Node"}
	node.Fields = []*schema.Field{
		{ID: 1, Name: "V", Type: schema.Type{Kind: schema.Int64}, Vis: schema.VisAll},
		{ID: 2, Name: "Kids", Type: schema.Type{Kind: schema.List, Elem: &schema.Type{Kind: schema.Nested, Struct: node}}, Vis: schema.VisAll},
	}
	kinds := []schema.Kind{schema.Bool, schema.Int8, schema.Int16, schema.Int32, schema.Int64,
		schema.Uint8, schema.Uint16, schema.Uint32, schema.Uint64, schema.Float32, schema.Float64,
		schema.String, schema.Bytes, schema.Ref}
	var fields []*schema.Field
	id := uint32(0)
	add := func(name string, typ schema.Type) *schema.Field {
		id++
		f := &schema.Field{ID: id, Name: name, Type: typ,
			Vis:  schema.Visibility(id % 4),
			Life: schema.Lifetime(id / 4 % 4),
			Chan: schema.Channel(id % 2)}
		fields = append(fields, f)
		return f
	}
	for _, k := range kinds {
		add(k.String(), schema.Type{Kind: k})
	}
	add("F32Unbounded", schema.Type{Kind: schema.Float32, Quant: schema.Quant{Step: 0.25}})
	add("F64Unbounded", schema.Type{Kind: schema.Float64, Quant: schema.Quant{Step: 1e-3}})
	add("F32Bounded", schema.Type{Kind: schema.Float32, Quant: bounded})
	add("F64Bits", schema.Type{Kind: schema.Float64, Quant: angle})
	add("Pos", schema.Type{Kind: schema.Nested, Struct: vec})
	add("Scores", schema.Type{Kind: schema.List, Elem: &schema.Type{Kind: schema.Int32}})
	add("Path", schema.Type{Kind: schema.List, Elem: &schema.Type{Kind: schema.Nested, Struct: vec}})
	add("Heights", schema.Type{Kind: schema.List, Elem: &schema.Type{Kind: schema.Float32, Quant: schema.Quant{Step: 0.5}}})
	add("Stats", schema.Type{Kind: schema.Map, Key: schema.String, Elem: &schema.Type{Kind: schema.Float64}})
	add("Slots", schema.Type{Kind: schema.Map, Key: schema.Int16, Elem: &schema.Type{Kind: schema.Nested, Struct: item}})
	add("Blobs", schema.Type{Kind: schema.Map, Key: schema.Uint64, Elem: &schema.Type{Kind: schema.Bytes}})
	add("Inv", schema.Type{Kind: schema.Bag, Key: schema.Uint32, Struct: item})
	add("Signed", schema.Type{Kind: schema.Bag, Key: schema.Int8, Struct: item})
	add("Tree", schema.Type{Kind: schema.Nested, Struct: node})
	old := add("Old", schema.Type{Kind: schema.Uint16})
	old.Deprecated = true
	id += 5 // a gap in the IDs
	add("AfterGap", schema.Type{Kind: schema.Bool})
	everything := &schema.Struct{Name: "Everything", Class: true, ID: 3, Fields: fields}

	small := &schema.Struct{Name: "Small", Class: true, ID: 1000, Fields: []*schema.Field{
		{ID: 1, Name: "Pos", Type: schema.Type{Kind: schema.Nested, Struct: vec}, Vis: schema.VisAll},
		{ID: 2, Name: "Gone", Type: schema.Type{Kind: schema.Nested, Struct: mid}, Deprecated: true},
	}}
	empty := &schema.Struct{Name: "Empty", Class: true, ID: 1}
	s, err := schema.New(small, everything, empty)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// diffStruct describes the first difference between a and b, or "".
func diffStruct(a, b *schema.Struct, seen map[*schema.Struct]bool) string {
	if seen[a] {
		return ""
	}
	seen[a] = true
	if a.Name != b.Name || a.Class != b.Class || a.ID != b.ID {
		return fmt.Sprintf("struct %s/%v/%d vs %s/%v/%d", a.Name, a.Class, a.ID, b.Name, b.Class, b.ID)
	}
	if a.NumSlots != b.NumSlots || (a.StrSlots+a.ContSlots) != (b.StrSlots+b.ContSlots) || a.Leaves != b.Leaves {
		return fmt.Sprintf("%s layout %d/%d/%d vs %d/%d/%d", a.Name, a.NumSlots, (a.StrSlots + a.ContSlots), a.Leaves, b.NumSlots, (b.StrSlots + b.ContSlots), b.Leaves)
	}
	if len(a.Fields) != len(b.Fields) {
		return fmt.Sprintf("%s: %d fields vs %d", a.Name, len(a.Fields), len(b.Fields))
	}
	for i, fa := range a.Fields {
		fb := b.Fields[i]
		if fa.ID != fb.ID || fa.Name != fb.Name || fa.Vis != fb.Vis || fa.Life != fb.Life ||
			fa.Chan != fb.Chan || fa.Deprecated != fb.Deprecated ||
			fa.Num != fb.Num || fa.Obj != fb.Obj || fa.Leaf != fb.Leaf {
			return fmt.Sprintf("%s field %d: %+v vs %+v", a.Name, i, *fa, *fb)
		}
		if d := diffType(&fa.Type, &fb.Type, seen); d != "" {
			return fmt.Sprintf("%s.%s: %s", a.Name, fa.Name, d)
		}
	}
	for i := 0; i < a.Leaves; i++ {
		la, lb := a.Leaf(i), b.Leaf(i)
		if la.Field.ID != lb.Field.ID || la.Num != lb.Num || la.Obj != lb.Obj || la.Vis != lb.Vis || !equalPath(la.Path, lb.Path) {
			return fmt.Sprintf("%s leaf %d differs", a.Name, i)
		}
	}
	return ""
}

func diffType(a, b *schema.Type, seen map[*schema.Struct]bool) string {
	if a.Kind != b.Kind || a.Key != b.Key || a.Quant != b.Quant {
		return fmt.Sprintf("type %s vs %s", a, b)
	}
	if (a.Struct == nil) != (b.Struct == nil) || (a.Elem == nil) != (b.Elem == nil) {
		return fmt.Sprintf("type %s vs %s: struct or element missing", a, b)
	}
	if a.Struct != nil {
		if d := diffStruct(a.Struct, b.Struct, seen); d != "" {
			return d
		}
	}
	if a.Elem != nil {
		return diffType(a.Elem, b.Elem, seen)
	}
	return ""
}

func diffSchema(a, b *schema.Schema) string {
	if len(a.Classes) != len(b.Classes) {
		return fmt.Sprintf("%d classes vs %d", len(a.Classes), len(b.Classes))
	}
	seen := make(map[*schema.Struct]bool)
	for i, c := range a.Classes {
		if b.Class(c.ID) != b.Classes[i] {
			return fmt.Sprintf("class %d lookup", c.ID)
		}
		if d := diffStruct(c, b.Classes[i], seen); d != "" {
			return d
		}
	}
	return ""
}

func TestDescriptorRoundTrip(t *testing.T) {
	for name, s := range map[string]*schema.Schema{"full": fullSchema(t), "arena": arena.Schema()} {
		prefix := []byte("prefix")
		desc := s.AppendDescriptor(prefix)
		if !bytes.HasPrefix(desc, []byte("prefix")) {
			t.Fatalf("%s: AppendDescriptor clobbered its prefix", name)
		}
		desc = desc[len(prefix):]
		got, err := schema.DecodeDescriptor(desc)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if d := diffSchema(s, got); d != "" {
			t.Fatalf("%s: decoded schema differs: %s", name, d)
		}
		if again := got.AppendDescriptor(nil); !bytes.Equal(again, desc) {
			t.Fatalf("%s: re-encoded descriptor differs:\n%x\n%x", name, desc, again)
		}
		if err := schema.Compatible(s, got); err != nil {
			t.Fatalf("%s: decoded schema incompatible: %v", name, err)
		}
	}
}

func TestDescriptorErrors(t *testing.T) {
	desc := fullSchema(t).AppendDescriptor(nil)
	check := func(name string, b []byte) {
		t.Helper()
		s, err := schema.DecodeDescriptor(b)
		if err == nil || s != nil {
			t.Errorf("%s: accepted", name)
			return
		}
		if !errors.Is(err, schema.ErrDescriptor) {
			t.Errorf("%s: error %v does not wrap ErrDescriptor", name, err)
		}
	}
	check("empty", nil)
	for n := 1; n < len(desc); n += 1 + n/8 {
		check(fmt.Sprintf("truncated to %d bytes", n), desc[:n])
	}
	check("trailing byte", append(append([]byte(nil), desc...), 0))
	check("trailing bits", append(append([]byte(nil), desc[:len(desc)-1]...), desc[len(desc)-1]|0x80))
	check("version 1", []byte{0x01}) // U(0) of 1: the bits 1, 0
	check("version 3", []byte{0x07}) // U(0) of 3: the bits 1, 1, 1, 0
	// Build descriptors by hand for semantic errors.
	type fieldSpec struct {
		name    string
		typ     func(w *wire.Writer)
		deltaID uint64
	}
	bandOf := map[string]uint64{} // fields with a level-of-detail band, by name
	lifeOf := map[string]uint64{} // fields with a lifetime other than session, by name
	// bands, if given, are each class's level-of-detail distances.
	build := func(structs [][]fieldSpec, classes [][2]uint64, bands ...[]float64) []byte {
		var w wire.Writer
		w.U(2, 0)
		w.U(uint64(len(structs)), 2)
		for i, fs := range structs {
			w.String(fmt.Sprintf("S%d", i))
			w.U(uint64(len(fs)), 2)
			for _, f := range fs {
				w.U(f.deltaID, 2)
				w.String(f.name)
				f.typ(&w)
				w.Bits(3, 2)
				w.Bits(lifeOf[f.name], 2)
				w.Bits(0, 1)
				w.Bool(false)
				w.U(bandOf[f.name], 0)
			}
			w.U(0, 0) // no RPCs
		}
		w.U(uint64(len(classes)), 2)
		for i, c := range classes {
			w.U(c[0], 2)
			w.U(c[1], 4)
			var bs []float64
			if i < len(bands) {
				bs = bands[i]
			}
			w.U(uint64(len(bs)), 0)
			for _, d := range bs {
				w.Bits(math.Float64bits(d), 64)
			}
		}
		return w.Finish()
	}
	kind := func(k schema.Kind) func(w *wire.Writer) { return func(w *wire.Writer) { w.Bits(uint64(k), 5) } }
	valid := build([][]fieldSpec{{{"a", kind(schema.Int8), 0}}}, [][2]uint64{{0, 1}})
	if _, err := schema.DecodeDescriptor(valid); err != nil {
		t.Fatalf("hand-built descriptor: %v", err)
	}
	check("kind 0", build([][]fieldSpec{{{"a", kind(schema.Invalid), 0}}}, [][2]uint64{{0, 1}}))
	check("kind 31", build([][]fieldSpec{{{"a", kind(31), 0}}}, [][2]uint64{{0, 1}}))
	check("class index out of range", build([][]fieldSpec{{{"a", kind(schema.Int8), 0}}}, [][2]uint64{{1, 1}}))
	check("class listed twice", build([][]fieldSpec{{{"a", kind(schema.Int8), 0}}}, [][2]uint64{{0, 1}, {0, 2}}))
	check("duplicate class ID", build([][]fieldSpec{{}, {}}, [][2]uint64{{0, 1}, {1, 1}}))
	check("class ID out of range", build([][]fieldSpec{{}}, [][2]uint64{{0, 1 << 32}}))
	check("field ID out of range", build([][]fieldSpec{{{"a", kind(schema.Int8), 1 << 32}}}, [][2]uint64{{0, 1}}))
	nested := func(i uint64) func(w *wire.Writer) {
		return func(w *wire.Writer) { w.Bits(uint64(schema.Nested), 5); w.U(i, 2) }
	}
	check("struct index out of range", build([][]fieldSpec{{{"a", nested(5), 0}}}, [][2]uint64{{0, 1}}))
	check("struct nests itself", build([][]fieldSpec{{{"a", nested(1), 0}}, {{"b", nested(1), 0}}}, [][2]uint64{{0, 1}}))
	check("class nested", build([][]fieldSpec{{{"a", nested(1), 0}}, {}}, [][2]uint64{{0, 1}, {1, 2}}))
	// Lifetimes: a class field's covers what it holds; none below.
	lifeOf["persist"] = uint64(schema.LifePersist)
	if _, err := schema.DecodeDescriptor(build([][]fieldSpec{{{"persist", kind(schema.Int8), 0}}}, [][2]uint64{{0, 1}})); err != nil {
		t.Errorf("a persist class field: %v", err)
	}
	if _, err := schema.DecodeDescriptor(build([][]fieldSpec{{{"a", nested(1), 0}}, {{"b", kind(schema.Int8), 0}}}, [][2]uint64{{0, 1}})); err != nil {
		t.Errorf("a nested struct: %v", err)
	}
	check("lifetime in a nested struct", build([][]fieldSpec{{{"a", nested(1), 0}}, {{"persist", kind(schema.Int8), 0}}}, [][2]uint64{{0, 1}}))
	quant := func(mode uint64, step, min float64, bits uint64) func(w *wire.Writer) {
		return func(w *wire.Writer) {
			w.Bits(uint64(schema.Float32), 5)
			w.Bits(mode, 2)
			if mode == 1 || mode == 2 {
				w.Bits(math.Float64bits(step), 64)
			}
			if mode == 2 {
				w.Bits(math.Float64bits(min), 64)
				w.Bits(bits, 6)
			}
		}
	}
	if _, err := schema.DecodeDescriptor(build([][]fieldSpec{{{"q", quant(2, 0.5, -1, 8), 0}}}, [][2]uint64{{0, 1}})); err != nil {
		t.Errorf("bounded quantization: %v", err)
	}
	check("quant mode 3", build([][]fieldSpec{{{"q", quant(3, 0, 0, 0), 0}}}, [][2]uint64{{0, 1}}))
	check("zero step", build([][]fieldSpec{{{"q", quant(1, 0, 0, 0), 0}}}, [][2]uint64{{0, 1}}))
	check("negative step", build([][]fieldSpec{{{"q", quant(1, -1, 0, 0), 0}}}, [][2]uint64{{0, 1}}))
	check("NaN step", build([][]fieldSpec{{{"q", quant(1, math.NaN(), 0, 0), 0}}}, [][2]uint64{{0, 1}}))
	check("infinite step", build([][]fieldSpec{{{"q", quant(1, math.Inf(1), 0, 0), 0}}}, [][2]uint64{{0, 1}}))
	check("NaN min", build([][]fieldSpec{{{"q", quant(2, 1, math.NaN(), 8), 0}}}, [][2]uint64{{0, 1}}))
	check("infinite min", build([][]fieldSpec{{{"q", quant(2, 1, math.Inf(-1), 8), 0}}}, [][2]uint64{{0, 1}}))
	check("zero bits", build([][]fieldSpec{{{"q", quant(2, 1, 0, 0), 0}}}, [][2]uint64{{0, 1}}))
	check("33 bits", build([][]fieldSpec{{{"q", quant(2, 1, 0, 33), 0}}}, [][2]uint64{{0, 1}}))
	listOf := func(depth int) func(w *wire.Writer) {
		return func(w *wire.Writer) {
			for range depth {
				w.Bits(uint64(schema.List), 5)
			}
			w.Bits(uint64(schema.Int8), 5)
		}
	}
	check("list of list", build([][]fieldSpec{{{"l", listOf(2), 0}}}, [][2]uint64{{0, 1}}))
	check("lists nested too deeply", build([][]fieldSpec{{{"l", listOf(7), 0}}}, [][2]uint64{{0, 1}}))
	mapKey := func(k schema.Kind) func(w *wire.Writer) {
		return func(w *wire.Writer) {
			w.Bits(uint64(schema.Map), 5)
			w.Bits(uint64(k), 5)
			w.Bits(uint64(schema.Int8), 5)
		}
	}
	if _, err := schema.DecodeDescriptor(build([][]fieldSpec{{{"m", mapKey(schema.String), 0}}}, [][2]uint64{{0, 1}})); err != nil {
		t.Errorf("string-keyed map: %v", err)
	}
	check("float map key", build([][]fieldSpec{{{"m", mapKey(schema.Float64), 0}}}, [][2]uint64{{0, 1}}))
	bagKey := func(k schema.Kind, i uint64) func(w *wire.Writer) {
		return func(w *wire.Writer) {
			w.Bits(uint64(schema.Bag), 5)
			w.Bits(uint64(k), 5)
			w.U(i, 2)
		}
	}
	check("string bag key", build([][]fieldSpec{{{"b", bagKey(schema.String, 1), 0}}, {}}, [][2]uint64{{0, 1}}))
	check("bag of a class", build([][]fieldSpec{{{"b", bagKey(schema.Uint8, 0), 0}}}, [][2]uint64{{0, 1}}))
	lod := func(bands ...uint64) [][]fieldSpec {
		var fs []fieldSpec
		for i, b := range bands {
			name := fmt.Sprintf("band%d_%d", b, i)
			bandOf[name] = b
			fs = append(fs, fieldSpec{name, kind(schema.Int8), 0})
		}
		return [][]fieldSpec{fs}
	}
	one := [][2]uint64{{0, 1}}
	if s, err := schema.DecodeDescriptor(build(lod(0, 1, 2), one, []float64{100, 20})); err != nil {
		t.Fatalf("hand-built descriptor with bands: %v", err)
	} else if c := s.Class(1); !slices.Equal(c.Bands(), []float64{100, 20}) || c.Leaf(1).Band != 1 || c.Leaf(2).Band != 2 || c.Leaf(0).Band != 0 {
		t.Errorf("bands decoded as %v, leaf bands %d %d %d", c.Bands(), c.Leaf(0).Band, c.Leaf(1).Band, c.Leaf(2).Band)
	}
	check("band out of range", build(lod(0, 2), one, []float64{100}))
	check("band without a field", build(lod(0, 1), one, []float64{100, 20}))
	check("bands ascending", build(lod(1, 2), one, []float64{20, 100}))
	check("equal bands", build(lod(1, 2), one, []float64{20, 20}))
	check("band distance 0", build(lod(1), one, []float64{0}))
	check("band distance NaN", build(lod(1), one, []float64{math.NaN()}))
	check("band distance infinite", build(lod(1), one, []float64{math.Inf(1)}))
	check("five bands", build(lod(1, 2, 3, 4, 5), one, []float64{50, 40, 30, 20, 10}))
	bandOf["nested1"], bandOf["inner1"] = 1, 1
	check("band in a nested struct", build([][]fieldSpec{{{"nested1", nested(1), 0}}, {{"inner1", kind(schema.Int8), 0}}}, one, []float64{10}))
	check("long name", func() []byte {
		var w wire.Writer
		w.U(2, 0)
		w.U(1, 2)
		w.String(strings.Repeat("x", 257))
		w.U(0, 2)
		w.U(1, 2)
		w.U(0, 2)
		w.U(1, 4)
		w.U(0, 0)
		return w.Finish()
	}())
}

func TestCompatible(t *testing.T) {
	// mk builds a one-class schema; edit changes the fields of the copy.
	mk := func(edit func(c *schema.Struct, item *schema.Struct)) *schema.Schema {
		item := &schema.Struct{Name: "Item", Fields: []*schema.Field{
			{ID: 1, Name: "N", Type: schema.Type{Kind: schema.Int32}},
		}}
		c := &schema.Struct{Name: "C", Class: true, ID: 1, Fields: []*schema.Field{
			{ID: 1, Name: "A", Type: schema.Type{Kind: schema.Int32}},
			{ID: 2, Name: "F", Type: schema.Type{Kind: schema.Float32, Quant: schema.Quant{Step: 0.5}}},
			{ID: 3, Name: "M", Type: schema.Type{Kind: schema.Map, Key: schema.String, Elem: &schema.Type{Kind: schema.Int8}}},
			{ID: 4, Name: "B", Type: schema.Type{Kind: schema.Bag, Key: schema.Uint16, Struct: item}},
			{ID: 5, Name: "L", Type: schema.Type{Kind: schema.List, Elem: &schema.Type{Kind: schema.Uint8}}},
		}}
		if edit != nil {
			edit(c, item)
		}
		s, err := schema.New(c)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	base := mk(nil)
	if err := schema.Compatible(base, base); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		edit func(c, item *schema.Struct)
		want string // "" for compatible
	}{
		{"same", func(c, item *schema.Struct) {}, ""},
		{"appended field", func(c, item *schema.Struct) {
			c.Fields = append(c.Fields, &schema.Field{ID: 6, Name: "New", Type: schema.Type{Kind: schema.String}})
		}, ""},
		{"appended item field", func(c, item *schema.Struct) {
			item.Fields = append(item.Fields, &schema.Field{ID: 2, Name: "New", Type: schema.Type{Kind: schema.Bool}})
		}, ""},
		{"removed field", func(c, item *schema.Struct) { c.Fields = c.Fields[1:] }, ""},
		{"renamed field", func(c, item *schema.Struct) { c.Fields[0].Name = "Renamed" }, ""},
		{"deprecated and retyped", func(c, item *schema.Struct) {
			c.Fields[0].Deprecated = true
			c.Fields[0].Type.Kind = schema.String
		}, ""},
		{"changed flags", func(c, item *schema.Struct) {
			c.Fields[0].Vis, c.Fields[0].Life, c.Fields[0].Chan = schema.VisOwner, schema.LifePersist, schema.Unreliable
		}, ""},
		{"changed kind", func(c, item *schema.Struct) { c.Fields[0].Type.Kind = schema.Int64 }, "field A (ID 1): type int64 here, int32 on the other side"},
		{"changed quant", func(c, item *schema.Struct) { c.Fields[1].Type.Quant.Step = 0.25 }, "field F (ID 2): type float32 q(0.25) here, float32 q(0.5) on the other side"},
		{"quant removed", func(c, item *schema.Struct) { c.Fields[1].Type.Quant = schema.Quant{} }, "field F (ID 2)"},
		{"changed map key", func(c, item *schema.Struct) { c.Fields[2].Type.Key = schema.Int32 }, "type map<int32,int8> here, map<string,int8> on the other side"},
		{"changed map elem", func(c, item *schema.Struct) { c.Fields[2].Type.Elem.Kind = schema.Int16 }, "field M (ID 3)"},
		{"changed bag key", func(c, item *schema.Struct) { c.Fields[3].Type.Key = schema.Uint32 }, "field B (ID 4)"},
		{"changed item field", func(c, item *schema.Struct) { item.Fields[0].Type.Kind = schema.Uint32 }, "field N (ID 1): type uint32 here, int32 on the other side"},
		{"changed list elem", func(c, item *schema.Struct) { c.Fields[4].Type.Elem.Kind = schema.Int8 }, "field L (ID 5)"},
	}
	for _, c := range cases {
		local := mk(c.edit)
		for _, dir := range []struct {
			name          string
			local, remote *schema.Schema
		}{{"local edited", local, base}, {"remote edited", base, local}} {
			err := schema.Compatible(dir.local, dir.remote)
			switch {
			case c.want == "" && err != nil:
				t.Errorf("%s, %s: %v", c.name, dir.name, err)
			case c.want != "" && err == nil:
				t.Errorf("%s, %s: compatible", c.name, dir.name)
			case c.want != "" && !strings.Contains(err.Error(), "class C: ") && dir.name == "local edited":
				t.Errorf("%s: error %q does not name the class", c.name, err)
			case c.want != "" && dir.name == "local edited" && !strings.Contains(err.Error(), c.want):
				t.Errorf("%s: error %q, want it to contain %q", c.name, err, c.want)
			}
		}
	}
	// A class only one side has is fine either way.
	other := &schema.Struct{Name: "Other", Class: true, ID: 2, Fields: []*schema.Field{
		{ID: 1, Name: "A", Type: schema.Type{Kind: schema.String}},
	}}
	withNew, err := schema.New(other, mk(nil).Classes[0])
	if err != nil {
		t.Fatal(err)
	}
	if err := schema.Compatible(base, withNew); err != nil {
		t.Errorf("new class on the remote side: %v", err)
	}
	if err := schema.Compatible(withNew, base); err != nil {
		t.Errorf("new class on the local side: %v", err)
	}
	// A descriptor round trip of a recursive schema is compatible with itself.
	full := fullSchema(t)
	dec, err := schema.DecodeDescriptor(full.AppendDescriptor(nil))
	if err != nil {
		t.Fatal(err)
	}
	if err := schema.Compatible(full, dec); err != nil {
		t.Errorf("full schema vs its descriptor: %v", err)
	}
}

// TestDescriptorCanonical: DecodeDescriptor accepts only what
// AppendDescriptor produces, so one schema has one descriptor. A class list
// out of ID order and a struct no class reaches (never laid out, so never
// validated: here it even contains itself) are second spellings and must be
// rejected.
func TestDescriptorCanonical(t *testing.T) {
	type fieldSpec struct {
		name string
		kind schema.Kind
		sub  uint64 // struct index for Nested
	}
	build := func(structs [][]fieldSpec, classes [][2]uint64) []byte {
		var w wire.Writer
		w.U(2, 0)
		w.U(uint64(len(structs)), 2)
		for i, fs := range structs {
			w.String(fmt.Sprintf("S%d", i))
			w.U(uint64(len(fs)), 2)
			for _, f := range fs {
				w.U(0, 2)
				w.String(f.name)
				w.Bits(uint64(f.kind), 5)
				if f.kind == schema.Nested {
					w.U(f.sub, 2)
				}
				w.Bits(uint64(schema.VisAll), 2)
				w.Bits(0, 2)
				w.Bits(0, 1)
				w.Bool(false)
				w.U(0, 0) // no band
			}
			w.U(0, 0) // no RPCs
		}
		w.U(uint64(len(classes)), 2)
		for _, c := range classes {
			w.U(c[0], 2)
			w.U(c[1], 4)
			w.U(0, 0) // no bands
		}
		return w.Finish()
	}
	cases := map[string][]byte{
		"classes out of ID order": build([][]fieldSpec{{{"a", schema.Int8, 0}}, {{"b", schema.Int16, 0}}},
			[][2]uint64{{0, 2}, {1, 1}}),
		"unreachable self-nesting struct": build([][]fieldSpec{{{"a", schema.Int8, 0}}, {{"b", schema.Nested, 1}}},
			[][2]uint64{{0, 1}}),
	}
	for name, desc := range cases {
		s, err := schema.DecodeDescriptor(desc)
		if err == nil {
			t.Errorf("%s: accepted; re-encodes to\n in  %x\n out %x", name, desc, s.AppendDescriptor(nil))
			continue
		}
		if !errors.Is(err, schema.ErrDescriptor) {
			t.Errorf("%s: error %v does not wrap ErrDescriptor", name, err)
		}
	}
}
