package schema_test

import (
	"math"
	"strings"
	"testing"

	"github.com/replicago/replica/schema"
)

func TestNewQuantErrors(t *testing.T) {
	nan, inf := math.NaN(), math.Inf(1)
	cases := []struct {
		name           string
		step, min, max float64
		bits           int
		hasMin, hasMax bool
		want           string
	}{
		{"step and bits", 0.5, 0, 10, 8, true, true, "give either quant= or bits=, not both"},
		{"bits without range", 0, 0, 0, 8, false, false, "bits= needs both min= and max="},
		{"bits without max", 0, 0, 0, 8, true, false, "bits= needs both min= and max="},
		{"bits without min", 0, 0, 10, 8, false, true, "bits= needs both min= and max="},
		{"bits too large", 0, 0, 10, 33, true, true, "bits=33 out of range 1..32"},
		{"bits negative", 0, 0, 10, -1, true, true, "bits=-1 out of range 1..32"},
		{"bits empty range", 0, 5, 5, 8, true, true, "max=5 must be greater than min=5"},
		{"bits reversed range", 0, 5, 1, 8, true, true, "max=1 must be greater than min=5"},
		{"bits NaN max", 0, 0, nan, 8, true, true, "max=NaN must be greater than min=0"},
		{"negative step", -1, 0, 0, 0, false, false, "quant=-1 must be a positive step"},
		{"NaN step", nan, 0, 0, 0, false, false, "quant=NaN must be a positive step"},
		{"infinite step", inf, 0, 0, 0, false, false, "quant=+Inf must be a positive step"},
		{"step with min only", 0.5, 0, 0, 0, true, false, "min= and max= go together"},
		{"step with max only", 0.5, 0, 10, 0, false, true, "min= and max= go together"},
		{"step empty range", 0.5, 3, 3, 0, true, true, "max=3 must be greater than min=3"},
		{"step range too wide", 1e-9, 0, 1e9, 0, true, true, "range 0..1e+09 at step 1e-09 needs more than 32 bits"},
		{"range without step", 0, 0, 10, 0, true, true, "min= and max= need quant= or bits="},
		{"min without step", 0, 1, 0, 0, true, false, "min= and max= need quant= or bits="},
	}
	for _, c := range cases {
		q, err := schema.NewQuant(c.step, c.min, c.max, c.bits, c.hasMin, c.hasMax)
		if err == nil {
			t.Errorf("%s: no error, got %+v", c.name, q)
			continue
		}
		if !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %q, want it to contain %q", c.name, err, c.want)
		}
		if q != (schema.Quant{}) {
			t.Errorf("%s: non-zero Quant %+v with the error", c.name, q)
		}
	}
}

func TestNewQuantValid(t *testing.T) {
	cases := []struct {
		name           string
		step, min, max float64
		bits           int
		hasMin, hasMax bool
		want           schema.Quant
	}{
		{"absent", 0, 0, 0, 0, false, false, schema.Quant{}},
		{"unbounded", 0.25, 0, 0, 0, false, false, schema.Quant{Step: 0.25}},
		{"step and range", 1.0 / 64, 0, 1000, 0, true, true, schema.Quant{Step: 1.0 / 64, Min: 0, Bits: 16, Bounded: true}},
		{"exact power of two minus one", 1, 0, 255, 0, true, true, schema.Quant{Step: 1, Bits: 8, Bounded: true}},
		{"one more", 1, 0, 256, 0, true, true, schema.Quant{Step: 1, Bits: 9, Bounded: true}},
		{"tiny range", 1, 0, 0.5, 0, true, true, schema.Quant{Step: 1, Bits: 1, Bounded: true}},
		{"negative min", 0.5, -10, 10, 0, true, true, schema.Quant{Step: 0.5, Min: -10, Bits: 6, Bounded: true}},
		{"32 bits", 1, 0, math.MaxUint32, 0, true, true, schema.Quant{Step: 1, Bits: 32, Bounded: true}},
		{"bits", 0, 0, 4095, 12, true, true, schema.Quant{Step: 1, Bits: 12, Bounded: true}},
		{"bits 1", 0, -1, 1, 1, true, true, schema.Quant{Step: 2, Min: -1, Bits: 1, Bounded: true}},
		{"bits 32", 0, 0, math.MaxUint32, 32, true, true, schema.Quant{Step: 1, Bits: 32, Bounded: true}},
	}
	for _, c := range cases {
		q, err := schema.NewQuant(c.step, c.min, c.max, c.bits, c.hasMin, c.hasMax)
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		if q != c.want {
			t.Errorf("%s: got %+v, want %+v", c.name, q, c.want)
		}
		if q.Enabled() != (c.want.Step != 0) {
			t.Errorf("%s: Enabled = %v", c.name, q.Enabled())
		}
	}
	// The range is covered: Max is at least the requested max.
	q, _ := schema.NewQuant(0.3, 1, 7, 0, true, true)
	if q.Max() < 7 || q.Bits != 5 {
		t.Errorf("Max = %v for step 0.3 over 1..7 (bits %d)", q.Max(), q.Bits)
	}
	q, _ = schema.NewQuant(0, 0, 2*math.Pi, 12, true, true)
	if math.Abs(q.Max()-2*math.Pi) > 1e-12 || q.Step != 2*math.Pi/4095 {
		t.Errorf("bits=12 over 0..2π: step %v, max %v", q.Step, q.Max())
	}
}

func TestQuantizeBounded(t *testing.T) {
	q, err := schema.NewQuant(1.0/64, -100, 1000, 0, true, true)
	if err != nil {
		t.Fatal(err)
	}
	top := int64(1)<<q.Bits - 1
	// Every code survives Dequantize → Quantize.
	for c := int64(0); c <= top; c++ {
		if got := q.Quantize(q.Dequantize(c)); got != c {
			t.Fatalf("Quantize(Dequantize(%d)) = %d", c, got)
		}
	}
	cases := []struct {
		v    float64
		want int64
	}{
		{-100, 0},
		{-100.01, 0},
		{-1e300, 0},
		{math.Inf(-1), 0},
		{math.NaN(), 0},
		{q.Max(), top},
		{q.Max() + 1, top},
		{math.Inf(1), top},
		{1e300, top},
		{0, 6400},
		{0.0078125, 6401}, // half a step rounds away from zero
		{0.0078124, 6400},
		{-99.99, 1},
	}
	for _, c := range cases {
		if got := q.Quantize(c.v); got != c.want {
			t.Errorf("Quantize(%v) = %d, want %d", c.v, got, c.want)
		}
	}
	if got := q.Dequantize(6400); got != 0 {
		t.Errorf("Dequantize(6400) = %v", got)
	}
	// Values round to the nearest step.
	for _, v := range []float64{-100, -3.14159, 0.1, 12.345, 999.99} {
		d := q.Dequantize(q.Quantize(v))
		if math.Abs(d-v) > q.Step/2+1e-9 {
			t.Errorf("%v → %v: off by more than half a step", v, d)
		}
	}
}

func TestQuantizeUnbounded(t *testing.T) {
	q := schema.Quant{Step: 0.5}
	for _, c := range []int64{0, 1, -1, 12345, -12345, 1 << 40, -(1 << 40)} {
		if got := q.Quantize(q.Dequantize(c)); got != c {
			t.Errorf("Quantize(Dequantize(%d)) = %d", c, got)
		}
	}
	cases := []struct {
		v    float64
		want int64
	}{
		{0, 0},
		{0.25, 1}, // ties round away from zero
		{-0.25, -1},
		{0.2, 0},
		{1.3, 3},
		{-1.3, -3},
		{math.NaN(), 0},
		{math.Inf(1), 1 << 62},
		{math.Inf(-1), -(1 << 62)},
		{1e300, 1 << 62},
		{-1e300, -(1 << 62)},
	}
	for _, c := range cases {
		if got := q.Quantize(c.v); got != c.want {
			t.Errorf("Quantize(%v) = %d, want %d", c.v, got, c.want)
		}
	}
	if got := q.Dequantize(-7); got != -3.5 {
		t.Errorf("Dequantize(-7) = %v", got)
	}
}

func field(id uint32, name string, k schema.Kind, vis schema.Visibility) *schema.Field {
	return &schema.Field{ID: id, Name: name, Type: schema.Type{Kind: k}, Vis: vis}
}

func TestLayoutSlots(t *testing.T) {
	inner := &schema.Struct{Name: "Inner", Fields: []*schema.Field{
		field(2, "S", schema.String, schema.VisAll),
		field(1, "A", schema.Int32, schema.VisAll),
		field(3, "O", schema.Uint8, schema.VisOthers),
	}}
	mid := &schema.Struct{Name: "Mid", Fields: []*schema.Field{
		field(1, "M", schema.Float64, schema.VisOwner),
		{ID: 2, Name: "In", Type: schema.Type{Kind: schema.Nested, Struct: inner}, Vis: schema.VisAll},
		{ID: 3, Name: "L", Type: schema.Type{Kind: schema.List, Elem: &schema.Type{Kind: schema.Int8}}, Vis: schema.VisAll},
	}}
	// Declared out of ID order: Layout sorts by ID.
	c := &schema.Struct{Name: "C", Class: true, ID: 7, Fields: []*schema.Field{
		{ID: 5, Name: "Mid", Type: schema.Type{Kind: schema.Nested, Struct: mid}, Vis: schema.VisOwner},
		field(1, "B", schema.Bool, schema.VisAll),
		field(3, "Name", schema.String, schema.VisOthers),
		{ID: 4, Name: "Old", Type: schema.Type{Kind: schema.Int64}, Deprecated: true},
		field(2, "R", schema.Ref, schema.VisServer),
		{ID: 9, Name: "Tags", Type: schema.Type{Kind: schema.Map, Key: schema.String, Elem: &schema.Type{Kind: schema.Bool}}, Vis: schema.VisAll},
	}}
	s, err := schema.New(c)
	if err != nil {
		t.Fatal(err)
	}
	if s.Class(7) != c || s.Class(1) != nil {
		t.Fatal("Class lookup")
	}
	for i, f := range c.Fields {
		if i > 0 && c.Fields[i-1].ID >= f.ID {
			t.Fatalf("fields not sorted by ID: %d before %d", c.Fields[i-1].ID, f.ID)
		}
	}
	if inner.NumSlots != 2 || (inner.StrSlots+inner.ContSlots) != 1 || inner.Leaves != 3 {
		t.Errorf("Inner: %d num, %d obj, %d leaves", inner.NumSlots, (inner.StrSlots + inner.ContSlots), inner.Leaves)
	}
	if mid.NumSlots != 3 || (mid.StrSlots+mid.ContSlots) != 2 || mid.Leaves != 5 {
		t.Errorf("Mid: %d num, %d obj, %d leaves", mid.NumSlots, (mid.StrSlots + mid.ContSlots), mid.Leaves)
	}
	if c.NumSlots != 5 || (c.StrSlots+c.ContSlots) != 4 || c.Leaves != 9 {
		t.Errorf("C: %d num, %d obj, %d leaves", c.NumSlots, (c.StrSlots + c.ContSlots), c.Leaves)
	}
	type want struct {
		field string
		num   int
		obj   int
		vis   schema.Visibility
		path  []uint32
	}
	wants := []want{
		// Numeric values are packed at their natural alignment; nested
		// structs start on 8 bytes. Strings and containers number their
		// slots apart.
		{"B", schema.NumSlot(0, 1, false), -1, schema.VisAll, []uint32{1}},
		{"R", schema.NumSlot(4, 4, false), -1, schema.VisServer, []uint32{2}},
		{"Name", -1, 0, schema.VisOthers, []uint32{3}},
		{"M", schema.NumSlot(8, 8, false), -1, schema.VisOwner, []uint32{5, 1}},
		{"A", schema.NumSlot(16, 4, true), -1, schema.VisOwner, []uint32{5, 2, 1}},   // all ∩ all ∩ owner
		{"S", -1, 1, schema.VisOwner, []uint32{5, 2, 2}},                             // all ∩ all ∩ owner
		{"O", schema.NumSlot(20, 1, false), -1, schema.VisServer, []uint32{5, 2, 3}}, // others ∩ all ∩ owner
		{"L", -1, 0, schema.VisOwner, []uint32{5, 3}},                                // all ∩ owner
		{"Tags", -1, 1, schema.VisAll, []uint32{9}},
	}
	for i, w := range wants {
		l := c.Leaf(i)
		if l.Field.Name != w.field || l.Num != w.num || l.Obj != w.obj || l.Vis != w.vis || !equalPath(l.Path, w.path) {
			t.Errorf("leaf %d = {%s num %d obj %d vis %v path %v}, want %+v", i, l.Field.Name, l.Num, l.Obj, l.Vis, l.Path, w)
		}
	}
	// Field offsets are relative to their own struct.
	checkField := func(st *schema.Struct, id uint32, num, obj, leaf int) {
		t.Helper()
		f := st.Field(id)
		if f == nil {
			t.Fatalf("%s has no field %d", st.Name, id)
		}
		if f.Num != num || f.Obj != obj || f.Leaf != leaf {
			t.Errorf("%s.%s: num %d obj %d leaf %d, want %d %d %d", st.Name, f.Name, f.Num, f.Obj, f.Leaf, num, obj, leaf)
		}
	}
	checkField(c, 1, 0, -1, 0)
	checkField(c, 2, schema.NumSlot(4, 4, false), -1, 1)
	checkField(c, 3, -1, 0, 2)
	checkField(c, 4, -1, -1, 3)                         // deprecated: no slots, no leaf of its own
	checkField(c, 5, schema.NumSlot(8, 1, false), 1, 3) // nested: its first byte, first string slot and leaf
	checkField(c, 9, -1, 1, 8)
	checkField(mid, 2, schema.NumSlot(8, 1, false), 0, 1)
	checkField(mid, 3, -1, 0, 4)
	checkField(inner, 1, schema.NumSlot(0, 4, true), -1, 0)
	checkField(inner, 2, -1, 0, 1)
	checkField(inner, 3, schema.NumSlot(4, 1, false), -1, 2)
	if c.NumBytes != 24 || mid.NumBytes != 16 || inner.NumBytes != 8 {
		t.Errorf("numeric bytes C %d, Mid %d, Inner %d; want 24, 16, 8", c.NumBytes, mid.NumBytes, inner.NumBytes)
	}
	if c.Field(6) != nil {
		t.Error("Field(6) exists")
	}
	// Layout is idempotent.
	if err := c.Layout(); err != nil || c.Leaves != 9 || c.Leaf(8).Field.Name != "Tags" {
		t.Errorf("second Layout: %v, %d leaves", err, c.Leaves)
	}
}

func equalPath(a, b []uint32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestLayoutErrors(t *testing.T) {
	self := &schema.Struct{Name: "Self"}
	self.Fields = []*schema.Field{{ID: 1, Name: "Me", Type: schema.Type{Kind: schema.Nested, Struct: self}}}
	a := &schema.Struct{Name: "A"}
	b := &schema.Struct{Name: "B", Fields: []*schema.Field{{ID: 1, Name: "A", Type: schema.Type{Kind: schema.Nested, Struct: a}}}}
	a.Fields = []*schema.Field{{ID: 1, Name: "B", Type: schema.Type{Kind: schema.Nested, Struct: b}}}
	class := &schema.Struct{Name: "K", Class: true, ID: 9}
	cases := []struct {
		name   string
		fields []*schema.Field
		want   string
	}{
		{"ID 0", []*schema.Field{field(0, "Z", schema.Int8, schema.VisAll)}, "C.Z: field ID 0 is reserved"},
		{"duplicate ID", []*schema.Field{field(3, "X", schema.Int8, schema.VisAll), field(3, "Y", schema.Int8, schema.VisAll)}, "duplicate field ID 3"},
		{"invalid kind", []*schema.Field{field(1, "X", schema.Invalid, schema.VisAll)}, "C.X: invalid kind 0"},
		{"kind out of range", []*schema.Field{field(1, "X", schema.Kind(40), schema.VisAll)}, "invalid kind 40"},
		{"self recursion", []*schema.Field{{ID: 1, Name: "S", Type: schema.Type{Kind: schema.Nested, Struct: self}}}, "struct Self contains itself"},
		{"mutual recursion", []*schema.Field{{ID: 1, Name: "A", Type: schema.Type{Kind: schema.Nested, Struct: a}}}, "contains itself; use a list, map or bag for recursion"},
		{"nested class", []*schema.Field{{ID: 1, Name: "K", Type: schema.Type{Kind: schema.Nested, Struct: class}}}, "entity class K cannot be nested; use a ref"},
		{"nested nil", []*schema.Field{{ID: 1, Name: "N", Type: schema.Type{Kind: schema.Nested}}}, "struct kind without a struct"},
		{"list without elem", []*schema.Field{{ID: 1, Name: "L", Type: schema.Type{Kind: schema.List}}}, "list without an element type"},
		{"list of list", []*schema.Field{{ID: 1, Name: "L", Type: schema.Type{Kind: schema.List, Elem: &schema.Type{Kind: schema.List, Elem: &schema.Type{Kind: schema.Int8}}}}}, "list of list: wrap the inner container in a struct"},
		{"map float key", []*schema.Field{{ID: 1, Name: "M", Type: schema.Type{Kind: schema.Map, Key: schema.Float32, Elem: &schema.Type{Kind: schema.Int8}}}}, "map key kind float32: want an integer or string"},
		{"map of bag", []*schema.Field{{ID: 1, Name: "M", Type: schema.Type{Kind: schema.Map, Key: schema.Int8, Elem: &schema.Type{Kind: schema.Bag}}}}, "map of bag"},
		{"bag string key", []*schema.Field{{ID: 1, Name: "G", Type: schema.Type{Kind: schema.Bag, Key: schema.String, Struct: b}}}, "bag key kind string: want an integer"},
		{"bag of class", []*schema.Field{{ID: 1, Name: "G", Type: schema.Type{Kind: schema.Bag, Key: schema.Uint8, Struct: class}}}, "bag items must be a nested struct type"},
		{"bad quant", []*schema.Field{{ID: 1, Name: "F", Type: schema.Type{Kind: schema.Float32, Quant: schema.Quant{Step: -1}}}}, "invalid quantization"},
		{"bad quant bits", []*schema.Field{{ID: 1, Name: "F", Type: schema.Type{Kind: schema.Float64, Quant: schema.Quant{Step: 1, Bits: 33, Bounded: true}}}}, "invalid quantization"},
		{"bad list elem", []*schema.Field{{ID: 1, Name: "L", Type: schema.Type{Kind: schema.List, Elem: &schema.Type{Kind: schema.Float32, Quant: schema.Quant{Step: math.NaN()}}}}}, "invalid quantization"},
		{"lifetime in a nested struct", []*schema.Field{{ID: 1, Name: "S", Type: schema.Type{Kind: schema.Nested, Struct: &schema.Struct{Name: "Stats",
			Fields: []*schema.Field{{ID: 1, Name: "Gold", Type: schema.Type{Kind: schema.Int32}, Life: schema.LifePersist}}}}}},
			"Stats.Gold: lifetime persist: a lifetime is for fields of entity classes only"},
		{"lifetime in a bag item", []*schema.Field{{ID: 1, Name: "G", Type: schema.Type{Kind: schema.Bag, Key: schema.Uint8, Struct: &schema.Struct{Name: "Item",
			Fields: []*schema.Field{{ID: 1, Name: "N", Type: schema.Type{Kind: schema.Int32}, Life: schema.LifeScene}}}}}},
			"Item.N: lifetime scene: a lifetime is for fields of entity classes only"},
	}
	for _, c := range cases {
		st := &schema.Struct{Name: "C", Class: true, ID: 1, Fields: c.fields}
		err := st.Layout()
		if err == nil {
			t.Errorf("%s: no error", c.name)
			continue
		}
		if !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %q, want it to contain %q", c.name, err, c.want)
		}
	}
}

func TestNewErrors(t *testing.T) {
	a := &schema.Struct{Name: "A", Class: true, ID: 1}
	b := &schema.Struct{Name: "B", Class: true, ID: 1}
	if _, err := schema.New(a, b); err == nil || !strings.Contains(err.Error(), "duplicate class ID 1") {
		t.Errorf("duplicate class: %v", err)
	}
	n := &schema.Struct{Name: "N"}
	if _, err := schema.New(n); err == nil || !strings.Contains(err.Error(), "N is not an entity class") {
		t.Errorf("non-class: %v", err)
	}
	bad := &schema.Struct{Name: "Bad", Class: true, ID: 2, Fields: []*schema.Field{field(0, "X", schema.Int8, schema.VisAll)}}
	if _, err := schema.New(bad); err == nil {
		t.Error("New accepted a class that does not lay out")
	}
	// Classes come out sorted by ID.
	c3 := &schema.Struct{Name: "C3", Class: true, ID: 3}
	c1 := &schema.Struct{Name: "C1", Class: true, ID: 1}
	s, err := schema.New(c3, c1)
	if err != nil || s.Classes[0] != c1 || s.Classes[1] != c3 {
		t.Errorf("classes not sorted: %v", err)
	}
}

func TestRecursionThroughContainers(t *testing.T) {
	// A tree node: children in a list, a bag and a map of nodes.
	node := &schema.Struct{Name: "Node"}
	node.Fields = []*schema.Field{
		field(1, "V", schema.Int32, schema.VisAll),
		{ID: 2, Name: "Kids", Type: schema.Type{Kind: schema.List, Elem: &schema.Type{Kind: schema.Nested, Struct: node}}, Vis: schema.VisAll},
		{ID: 3, Name: "Bag", Type: schema.Type{Kind: schema.Bag, Key: schema.Uint16, Struct: node}, Vis: schema.VisAll},
		{ID: 4, Name: "Map", Type: schema.Type{Kind: schema.Map, Key: schema.String, Elem: &schema.Type{Kind: schema.Nested, Struct: node}}, Vis: schema.VisAll},
	}
	c := &schema.Struct{Name: "Tree", Class: true, ID: 1, Fields: []*schema.Field{
		{ID: 1, Name: "Root", Type: schema.Type{Kind: schema.Nested, Struct: node}, Vis: schema.VisAll},
	}}
	if _, err := schema.New(c); err != nil {
		t.Fatal(err)
	}
	if node.Leaves != 4 || node.NumSlots != 1 || (node.StrSlots+node.ContSlots) != 3 {
		t.Errorf("Node: %d leaves, %d num, %d obj", node.Leaves, node.NumSlots, (node.StrSlots + node.ContSlots))
	}
	if c.Leaves != 4 || c.NumSlots != 1 || (c.StrSlots+c.ContSlots) != 3 {
		t.Errorf("Tree: %d leaves, %d num, %d obj", c.Leaves, c.NumSlots, (c.StrSlots + c.ContSlots))
	}
}

// TestRecursionContainerThenInline lays out A { list<B> } where B holds an
// A inline: a legal recursion (each B is a separate list element). Laying
// out A reaches B through the list while A is still being laid out; B then
// reaches A inline, finds it "in progress" (Struct.layout returns nil when
// s.laying) and copies A's leaves and slot counts as they are at that
// moment: only X, because Bs is the field being laid out. B ends up with
// no object slot for B.A.Bs, so a record of B is too small for the A stored
// in it and B.A.Bs is missing from B's flattened layout.
func TestRecursionContainerThenInline(t *testing.T) {
	a := &schema.Struct{Name: "A"}
	b := &schema.Struct{Name: "B", Fields: []*schema.Field{
		{ID: 1, Name: "A", Type: schema.Type{Kind: schema.Nested, Struct: a}, Vis: schema.VisAll},
	}}
	a.Fields = []*schema.Field{
		field(1, "X", schema.Int32, schema.VisAll),
		{ID: 2, Name: "Bs", Type: schema.Type{Kind: schema.List, Elem: &schema.Type{Kind: schema.Nested, Struct: b}}, Vis: schema.VisAll},
	}
	c := &schema.Struct{Name: "C", Class: true, ID: 1, Fields: []*schema.Field{
		{ID: 1, Name: "A", Type: schema.Type{Kind: schema.Nested, Struct: a}, Vis: schema.VisAll},
	}}
	if _, err := schema.New(c); err != nil {
		t.Fatal(err)
	}
	if a.Leaves != 2 || a.NumSlots != 1 || (a.StrSlots+a.ContSlots) != 1 {
		t.Fatalf("A: %d leaves, %d num, %d obj", a.Leaves, a.NumSlots, (a.StrSlots + a.ContSlots))
	}
	if b.Leaves != a.Leaves || b.NumSlots != a.NumSlots || (b.StrSlots+b.ContSlots) != (a.StrSlots+a.ContSlots) {
		t.Errorf("B = {A A} has %d leaves, %d num and %d obj slots; A has %d, %d, %d",
			b.Leaves, b.NumSlots, (b.StrSlots + b.ContSlots), a.Leaves, a.NumSlots, (a.StrSlots + a.ContSlots))
	}
}

func TestMaxLeaves(t *testing.T) {
	many := func(name string, n int) *schema.Struct {
		st := &schema.Struct{Name: name, Fields: make([]*schema.Field, n)}
		for i := range st.Fields {
			st.Fields[i] = &schema.Field{ID: uint32(i + 1), Name: "f", Type: schema.Type{Kind: schema.Bool}, Vis: schema.VisAll}
		}
		return st
	}
	// Exactly MaxLeaves through nesting is fine.
	half := many("Half", schema.MaxLeaves/2)
	ok := &schema.Struct{Name: "OK", Class: true, ID: 1, Fields: []*schema.Field{
		{ID: 1, Name: "A", Type: schema.Type{Kind: schema.Nested, Struct: half}},
		{ID: 2, Name: "B", Type: schema.Type{Kind: schema.Nested, Struct: half}},
	}}
	if err := ok.Layout(); err != nil || ok.Leaves != schema.MaxLeaves {
		t.Fatalf("MaxLeaves leaves: %v, %d", err, ok.Leaves)
	}
	// One more through nesting is refused.
	big := &schema.Struct{Name: "Big", Class: true, ID: 2, Fields: []*schema.Field{
		{ID: 1, Name: "A", Type: schema.Type{Kind: schema.Nested, Struct: half}},
		{ID: 2, Name: "B", Type: schema.Type{Kind: schema.Nested, Struct: half}},
		{ID: 3, Name: "C", Type: schema.Type{Kind: schema.Nested, Struct: many("One", 1)}},
	}}
	if err := big.Layout(); err == nil || !strings.Contains(err.Error(), "flattens to more than 65536 fields") {
		t.Errorf("MaxLeaves+1 leaves through nesting: %v", err)
	}
}

// TestMaxLeavesFlat shows that the MaxLeaves bound is only checked after a
// nested field: a struct with MaxLeaves+1 plain fields lays out.
func TestMaxLeavesFlat(t *testing.T) {
	flat := &schema.Struct{Name: "Flat", Class: true, ID: 1, Fields: make([]*schema.Field, schema.MaxLeaves+1)}
	for i := range flat.Fields {
		flat.Fields[i] = &schema.Field{ID: uint32(i + 1), Name: "f", Type: schema.Type{Kind: schema.Int8}, Vis: schema.VisAll}
	}
	if err := flat.Layout(); err == nil {
		t.Errorf("a struct of %d scalar fields laid out (MaxLeaves = %d)", flat.Leaves, schema.MaxLeaves)
	}
}

func TestKindPredicates(t *testing.T) {
	for k := schema.Invalid; k <= schema.Bag; k++ {
		numeric := k >= schema.Bool && k <= schema.Float64 || k == schema.Ref
		if k.Numeric() != numeric {
			t.Errorf("%v.Numeric() = %v", k, k.Numeric())
		}
		if k.Container() != (k == schema.List || k == schema.Map || k == schema.Bag) {
			t.Errorf("%v.Container() = %v", k, k.Container())
		}
		if strings.HasPrefix(k.String(), "kind(") {
			t.Errorf("kind %d has no name", k)
		}
	}
	widths := map[schema.Kind]uint{schema.Bool: 1, schema.Int8: 8, schema.Uint8: 8, schema.Int16: 16,
		schema.Uint16: 16, schema.Int32: 32, schema.Uint32: 32, schema.Float32: 32, schema.Ref: 32,
		schema.Int64: 64, schema.Uint64: 64, schema.Float64: 64, schema.String: 0}
	for k, w := range widths {
		if k.Width() != w {
			t.Errorf("%v.Width() = %d, want %d", k, k.Width(), w)
		}
	}
	if schema.Kind(40).String() != "kind(40)" {
		t.Errorf("Kind(40) = %s", schema.Kind(40))
	}
	typ := schema.Type{Kind: schema.Bag, Key: schema.Uint32, Struct: &schema.Struct{Name: "Item"}}
	if typ.String() != "bag<uint32,Item>" {
		t.Errorf("bag type = %s", typ.String())
	}
	typ = schema.Type{Kind: schema.List, Elem: &schema.Type{Kind: schema.Float32, Quant: schema.Quant{Step: 1.0 / 64}}}
	if typ.String() != "list<float32 q(0.015625)>" {
		t.Errorf("list type = %s", typ.String())
	}
}

// TestFieldPath resolves dotted paths through nested structs, and none
// through a missing, deprecated or non-struct field.
func TestFieldPath(t *testing.T) {
	vec := &schema.Struct{Name: "Vec", Fields: []*schema.Field{
		{ID: 1, Name: "x", Type: schema.Type{Kind: schema.Float32}},
		{ID: 2, Name: "old", Type: schema.Type{Kind: schema.Float32}, Deprecated: true},
	}}
	body := &schema.Struct{Name: "Body", Fields: []*schema.Field{
		{ID: 1, Name: "pos", Type: schema.Type{Kind: schema.Nested, Struct: vec}},
	}}
	unit := &schema.Struct{Name: "Unit", Class: true, ID: 1, Fields: []*schema.Field{
		{ID: 1, Name: "hp", Type: schema.Type{Kind: schema.Int16}},
		{ID: 2, Name: "body", Type: schema.Type{Kind: schema.Nested, Struct: body}},
	}}
	for path, want := range map[string][]uint32{
		"hp": {1}, "body": {2}, "body.pos": {2, 1}, "body.pos.x": {2, 1, 1},
		"": nil, "mp": nil, "hp.x": nil, "body.pos.old": nil, "body.pos.x.y": nil, "body.": nil,
	} {
		var got []uint32
		for _, f := range unit.FieldPath(path) {
			got = append(got, f.ID)
		}
		if !equalPath(got, want) || (want == nil) != (unit.FieldPath(path) == nil) {
			t.Errorf("FieldPath(%q) = %v, want %v", path, got, want)
		}
	}
}
