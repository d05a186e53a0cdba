package store_test

import (
	"errors"
	"strings"
	"testing"

	"pgregory.net/rapid"

	"github.com/replicago/replica/internal/mutate"
	v1 "github.com/replicago/replica/internal/testschema/v1"
	v2 "github.com/replicago/replica/internal/testschema/v2"
	"github.com/replicago/replica/schema"
	"github.com/replicago/replica/state"
	"github.com/replicago/replica/store"
)

// allPersist returns a copy of s in which every field of every class is
// persist, so that the codec stores every kind of value.
func allPersist(t testing.TB, s *schema.Schema) *schema.Schema {
	t.Helper()
	c, err := schema.DecodeDescriptor(s.AppendDescriptor(nil))
	if err != nil {
		t.Fatal(err)
	}
	for _, cl := range c.Classes {
		for _, f := range cl.Fields {
			f.Life = schema.LifePersist
		}
	}
	return c
}

// spawn returns a tracked entity of class cl holding the values of src.
func spawn(t testing.TB, s *schema.Schema, cl *schema.Struct, src state.Handle) *state.Entity {
	t.Helper()
	tr := state.NewTracker(s)
	e, err := tr.Spawn(cl)
	if err != nil {
		t.Fatal(err)
	}
	e.Handle().SetNested(0, cl, src)
	tr.Commit()
	return e
}

// TestRoundTripAllKinds: every kind of value, quantized floats, nested
// structs, lists, maps and bags (with containers inside their items) read
// back exactly, by Decode and by Restore into a fresh entity.
func TestRoundTripAllKinds(t *testing.T) {
	s := allPersist(t, v1.Schema())
	c := store.NewCodec(s)
	rapid.Check(t, func(rt *rapid.T) {
		cl := rapid.SampledFrom(s.Classes).Draw(rt, "class")
		e := spawn(t, s, cl, mutate.Record(rt, cl, 0))
		doc := c.Document("k", 7, e)
		got, err := c.Decode(doc)
		if err != nil {
			rt.Fatalf("Decode: %v", err)
		}
		if !got.Equal(&e.Record) {
			rt.Fatalf("decoded record differs from the entity")
		}
		e2 := spawn(t, s, cl, state.Handle{})
		if err := c.Restore(e2, doc); err != nil {
			rt.Fatalf("Restore: %v", err)
		}
		if !e2.Record.Equal(&e.Record) {
			rt.Fatalf("restored entity differs")
		}
		if again := c.AppendEntity(nil, e2); len(again) != len(doc.Data) {
			rt.Fatalf("re-encoding the restored entity gives %d bytes, first %d", len(again), len(doc.Data))
		}
	})
}

// TestOnlyPersist: only persist fields are stored and loaded; the others
// keep the values the entity had before Restore.
func TestOnlyPersist(t *testing.T) {
	s := v1.Schema()
	c := store.NewCodec(s)
	cl := s.Class(1) // hero: i16 and i64 are persist
	rapid.Check(t, func(rt *rapid.T) {
		src := mutate.Record(rt, cl, 0)
		e := spawn(t, s, cl, src)
		doc := c.Document("k", 1, e)
		other := spawn(t, s, cl, mutate.Record(rt, cl, 0))
		before := other.Record.Clone()
		if err := c.Restore(other, doc); err != nil {
			rt.Fatal(err)
		}
		for i := 0; i < cl.Leaves; i++ {
			l := cl.Leaf(i)
			persist := l.Field.Life == schema.LifePersist && len(l.Path) == 1
			want := before
			if persist {
				want = &e.Record
			}
			if !sameLeaf(&other.Record, want, l) {
				rt.Fatalf("leaf %s (persist %v) not as expected", l.Field.Name, persist)
			}
		}
	})
}

func sameLeaf(a, b *state.Record, l *schema.LeafInfo) bool {
	switch k := l.Field.Type.Kind; {
	case k.Numeric():
		return a.Num(l.Num) == b.Num(l.Num)
	case k == schema.String || k == schema.Bytes:
		return a.Str(l.Obj) == b.Str(l.Obj)
	}
	// Containers: compare through a one-leaf diff.
	d := a.AppendDiff(nil, b)
	for i := 0; i < a.Type().Leaves; i++ {
		if a.Type().Leaf(i) == l {
			return d[i>>6]&(1<<(i&63)) == 0
		}
	}
	return false
}

// TestEvolveGenerated: documents of every class written with the
// all-persist v1 schema load with the v2 schema, which appended fields and
// deprecated one.
func TestEvolveGenerated(t *testing.T) {
	s1, s2 := allPersist(t, v1.Schema()), allPersist(t, v2.Schema())
	c1, c2 := store.NewCodec(s1), store.NewCodec(s2)
	rapid.Check(t, func(rt *rapid.T) {
		cl := rapid.SampledFrom(s1.Classes).Draw(rt, "class")
		e := spawn(t, s1, cl, mutate.Record(rt, cl, 0))
		r, err := c2.Decode(c1.Document("k", 1, e))
		if err != nil {
			rt.Fatalf("v2 decoding a v1 document: %v", err)
		}
		// Back to v1: equal, but for the fields v2 no longer stores.
		back, err := c1.Decode(store.Document{Key: "k", Class: cl.ID, Data: c2.NewEncoder().AppendRecord(nil, r)})
		if err != nil {
			rt.Fatal(err)
		}
		diff := back.AppendDiff(nil, &e.Record)
		for i := 0; i < cl.Leaves; i++ {
			if diff[i>>6]&(1<<(i&63)) == 0 {
				continue
			}
			l := cl.Leaf(i)
			if f2 := s2.Class(cl.ID).Field(l.Path[0]); f2 != nil && !f2.Deprecated && len(l.Path) == 1 {
				rt.Fatalf("field %s lost going through v2", l.Field.Name)
			}
		}
	})
}

// Hand-built schemas for evolution of single fields.
func oneField(t testing.TB, typ schema.Type, extra ...*schema.Field) (*schema.Schema, *schema.Struct) {
	t.Helper()
	cl := &schema.Struct{Name: "p", Class: true, ID: 1, Fields: append([]*schema.Field{
		{ID: 1, Name: "v", Type: typ, Life: schema.LifePersist},
	}, extra...)}
	s, err := schema.New(cl)
	if err != nil {
		t.Fatal(err)
	}
	return s, cl
}

func TestEvolveKinds(t *testing.T) {
	q := func(step float64) schema.Quant { return schema.Quant{Step: step} }
	for _, c := range []struct {
		name     string
		from, to schema.Type
		set      uint64 // plain
		want     uint64 // stored, in the new type
		err      error
	}{
		{"int16 to int32", schema.Type{Kind: schema.Int16}, schema.Type{Kind: schema.Int32}, uint64(1<<64 - 5), uint64(1<<64 - 5), nil},
		{"uint8 to int64", schema.Type{Kind: schema.Uint8}, schema.Type{Kind: schema.Int64}, 200, 200, nil},
		{"int32 to int8 fits", schema.Type{Kind: schema.Int32}, schema.Type{Kind: schema.Int8}, 100, 100, nil},
		{"int32 to int8 overflows", schema.Type{Kind: schema.Int32}, schema.Type{Kind: schema.Int8}, 1000, 0, store.ErrIncompatible},
		{"negative to unsigned", schema.Type{Kind: schema.Int32}, schema.Type{Kind: schema.Uint32}, uint64(1<<64 - 1), 0, store.ErrIncompatible},
		{"bool to uint8", schema.Type{Kind: schema.Bool}, schema.Type{Kind: schema.Uint8}, 1, 1, nil},
		{"int to string", schema.Type{Kind: schema.Int32}, schema.Type{Kind: schema.String}, 1, 0, store.ErrIncompatible},
		{"float32 to float64", schema.Type{Kind: schema.Float32}, schema.Type{Kind: schema.Float64}, 0x3fc00000, 0x3ff8000000000000, nil},
		{"float to int", schema.Type{Kind: schema.Float64}, schema.Type{Kind: schema.Int64}, 0, 0, store.ErrIncompatible},
		{"requantized", schema.Type{Kind: schema.Float64, Quant: q(0.5)}, schema.Type{Kind: schema.Float64, Quant: q(0.25)}, 0x4004000000000000 /* 2.5 */, 10, nil},
		{"dequantized", schema.Type{Kind: schema.Float64, Quant: q(0.5)}, schema.Type{Kind: schema.Float64}, 0x4004000000000000, 0x4004000000000000, nil},
		{"list of int16 to list of int64", schema.Type{Kind: schema.List, Elem: &schema.Type{Kind: schema.Int16}}, schema.Type{Kind: schema.List, Elem: &schema.Type{Kind: schema.Int64}}, 0, 0, nil},
		{"list to map", schema.Type{Kind: schema.List, Elem: &schema.Type{Kind: schema.Int16}}, schema.Type{Kind: schema.Map, Key: schema.Int16, Elem: &schema.Type{Kind: schema.Int64}}, 0, 0, store.ErrIncompatible},
		{"list of int16 to list of string", schema.Type{Kind: schema.List, Elem: &schema.Type{Kind: schema.Int16}}, schema.Type{Kind: schema.List, Elem: &schema.Type{Kind: schema.String}}, 0, 0, store.ErrIncompatible},
	} {
		t.Run(c.name, func(t *testing.T) {
			s1, cl1 := oneField(t, c.from)
			s2, cl2 := oneField(t, c.to)
			tr := state.NewTracker(s1)
			e, _ := tr.Spawn(cl1)
			if c.from.Kind == schema.List {
				e.Handle().List(0).Push(state.Value{N: uint64(1<<64 - 7)})
			} else {
				e.SetNum(0, c.set)
			}
			doc := store.NewCodec(s1).Document("k", 1, e)
			r, err := store.NewCodec(s2).Decode(doc)
			if c.err != nil {
				var de *store.DecodeError
				if !errors.Is(err, c.err) || !errors.As(err, &de) || !strings.Contains(de.Field, "v") {
					t.Fatalf("Decode error = %v, want %v in field v", err, c.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if c.to.Kind == schema.List {
				if l := r.List(0); l.Len() != 1 || int64(l.At(0).N) != -7 {
					t.Fatalf("list = %v elements, first %d", l.Len(), int64(l.At(0).N))
				}
				return
			}
			if got := r.Num(cl2.Leaf(0).Num); got != c.want {
				t.Fatalf("value %#x, want %#x", got, c.want)
			}
		})
	}
}

// TestEvolveAppendDeprecate: a field appended since a document was written
// loads at its default; a field deprecated since is skipped, whatever its
// value (a container with nested items here).
func TestEvolveAppendDeprecate(t *testing.T) {
	item := &schema.Struct{Name: "item", Fields: []*schema.Field{{ID: 1, Name: "n", Type: schema.Type{Kind: schema.Int32}}}}
	bag := schema.Type{Kind: schema.Bag, Key: schema.Uint32, Struct: item}
	s1, cl1 := oneField(t, schema.Type{Kind: schema.Int32},
		&schema.Field{ID: 2, Name: "old", Type: bag, Life: schema.LifePersist})
	item2 := &schema.Struct{Name: "item", Fields: []*schema.Field{{ID: 1, Name: "n", Type: schema.Type{Kind: schema.Int32}}}}
	s2, cl2 := oneField(t, schema.Type{Kind: schema.Int32},
		&schema.Field{ID: 2, Name: "old", Type: schema.Type{Kind: schema.Bag, Key: schema.Uint32, Struct: item2}, Life: schema.LifePersist, Deprecated: true},
		&schema.Field{ID: 3, Name: "added", Type: schema.Type{Kind: schema.String}, Life: schema.LifePersist})
	tr := state.NewTracker(s1)
	e, _ := tr.Spawn(cl1)
	e.SetNum(0, 42)
	it := state.NewValue(item)
	it.SetNum(0, 9)
	e.Handle().Bag(1).Add(5, it)
	doc := store.NewCodec(s1).Document("k", 1, e)

	e2, _ := state.NewTracker(s2).Spawn(cl2)
	if err := store.NewCodec(s2).Restore(e2, doc); err != nil {
		t.Fatal(err)
	}
	if got := int32(e2.Num(cl2.Field(1).Num)); got != 42 {
		t.Errorf("v = %d, want 42", got)
	}
	if got := e2.Str(cl2.Field(3).Obj); got != "" {
		t.Errorf("added = %q, want the default", got)
	}
}

func TestRestoreErrors(t *testing.T) {
	s, cl := oneField(t, schema.Type{Kind: schema.Int32})
	c := store.NewCodec(s)
	e, _ := state.NewTracker(s).Spawn(cl)
	e.SetNum(0, 5)
	if err := c.Restore(e, store.Document{Key: "k", Class: 2}); !errors.Is(err, store.ErrIncompatible) {
		t.Errorf("Restore of another class: %v", err)
	}
	if _, err := c.Decode(store.Document{Key: "k", Class: 2}); !errors.Is(err, store.ErrUnknownClass) {
		t.Errorf("Decode of an unknown class: %v", err)
	}
	for _, data := range []string{"", "\x01", "\x01\x01\x03\xff", "\x01\x01\x04\x00\x00", "\x01\x01\x63\x00", "\x00\x00"} {
		err := c.Restore(e, store.Document{Key: "k", Class: 1, Data: []byte(data)})
		if !errors.Is(err, store.ErrMalformed) {
			t.Errorf("Restore(%q) = %v, want ErrMalformed", data, err)
		}
		if got := int32(e.Num(cl.Field(1).Num)); got != 5 {
			t.Errorf("Restore(%q) changed the entity: v = %d", data, got)
		}
	}
}
