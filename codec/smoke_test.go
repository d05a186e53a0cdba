package codec

import (
	"math"
	"testing"

	"github.com/replicago/replica/schema"
	"github.com/replicago/replica/state"
)

func smokeSchema(t *testing.T) *schema.Schema {
	vec := &schema.Struct{Name: "Vec", Fields: []*schema.Field{
		{ID: 1, Name: "X", Type: schema.Type{Kind: schema.Float32}},
		{ID: 2, Name: "Y", Type: schema.Type{Kind: schema.Float32, Quant: schema.Quant{Step: 1.0 / 64}}},
	}}
	item := &schema.Struct{Name: "Item", Fields: []*schema.Field{
		{ID: 1, Name: "Count", Type: schema.Type{Kind: schema.Int32}},
		{ID: 2, Name: "Name", Type: schema.Type{Kind: schema.String}},
		{ID: 3, Name: "Tags", Type: schema.Type{Kind: schema.List, Elem: &schema.Type{Kind: schema.String}}},
	}}
	player := &schema.Struct{Name: "Player", Class: true, ID: 1, Fields: []*schema.Field{
		{ID: 1, Name: "HP", Type: schema.Type{Kind: schema.Int16}, Vis: schema.VisAll},
		{ID: 2, Name: "Pos", Type: schema.Type{Kind: schema.Nested, Struct: vec}, Vis: schema.VisAll},
		{ID: 3, Name: "Secret", Type: schema.Type{Kind: schema.Uint64}, Vis: schema.VisServer},
		{ID: 4, Name: "Gold", Type: schema.Type{Kind: schema.Uint32}, Vis: schema.VisOwner},
		{ID: 5, Name: "Name", Type: schema.Type{Kind: schema.String}, Vis: schema.VisAll},
		{ID: 6, Name: "Scores", Type: schema.Type{Kind: schema.List, Elem: &schema.Type{Kind: schema.Int32}}, Vis: schema.VisAll},
		{ID: 7, Name: "Stats", Type: schema.Type{Kind: schema.Map, Key: schema.String, Elem: &schema.Type{Kind: schema.Float64}}, Vis: schema.VisAll},
		{ID: 8, Name: "Inv", Type: schema.Type{Kind: schema.Bag, Key: schema.Uint32, Struct: item}, Vis: schema.VisAll},
		{ID: 9, Name: "Alive", Type: schema.Type{Kind: schema.Bool}, Vis: schema.VisAll},
		{ID: 10, Name: "Mood", Type: schema.Type{Kind: schema.Int8}, Vis: schema.VisOthers},
	}}
	s, err := schema.New(player)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestSmokeRoundTrip(t *testing.T) {
	s := smokeSchema(t)
	player := s.Class(1)
	tr := state.NewTracker(s)
	var enc Encoder
	dec, err := NewDecoder(s, nil, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	others := state.NewTable()
	owner := state.NewTable()
	apply := func(tab *state.Table, segs ...[]byte) {
		t.Helper()
		txn := tab.Begin()
		for _, seg := range segs {
			if err := dec.Apply(txn, seg); err != nil {
				txn.Rollback()
				t.Fatalf("apply: %v", err)
			}
		}
		txn.Commit()
	}
	tick := func() {
		t.Helper()
		cs := tr.Commit()
		all := enc.Delta(nil, cs, PartAll, nil)
		oth := enc.Delta(nil, cs, PartOthers, nil)
		own := enc.Delta(nil, cs, PartOwner, nil)
		apply(others, all, oth)
		apply(owner, all, own)
	}
	e, _ := tr.Spawn(player)
	h := e.Handle()
	m5 := int64(-5)
	h.SetNum(0, uint64(m5))
	h.SetStr(player.Field(5).Leaf, "bob")
	tick()
	for i := 0; i < 5; i++ {
		h.SetNum(0, uint64(100+i))
		pos := h.Nested(player.Field(2).Leaf, player.Field(2).Num, player.Field(2).Obj)
		pos.SetNum(0, uint64(math.Float32bits(float32(i)*1.5)))
		pos.SetNum(1, uint64(math.Float32bits(float32(i)*2.25)))
		h.SetNum(player.Field(3).Leaf, 77)
		h.SetNum(player.Field(4).Leaf, uint64(10*i))
		h.SetNum(player.Field(10).Leaf, uint64(i))
		h.List(player.Field(6).Leaf).Push(state.Value{N: uint64(i)})
		if i == 3 {
			h.List(player.Field(6).Leaf).Remove(1)
		}
		m := h.Map(player.Field(7).Leaf)
		m.Put(state.Value{S: "k"}, state.Value{N: math.Float64bits(float64(i))})
		bag := h.Bag(player.Field(8).Leaf)
		if i == 0 {
			it := state.NewValue(player.Field(8).Type.Struct)
			it.SetNum(0, 3)
			bag.Add(7, it)
		} else {
			bag.Get(7).SetNum(0, uint64(i))
			bag.Get(7).List(2).Push(state.Value{S: "t"})
		}
		h.SetNum(player.Field(9).Leaf, uint64(i%2))
		tick()
		oe, we := others.Entity(e.ID()), owner.Entity(e.ID())
		if oe == nil || we == nil {
			t.Fatalf("entity missing")
		}
		check := func(name string, got *state.Entity, vis schema.Visibility) {
			t.Helper()
			for l := 0; l < player.Leaves; l++ {
				li := player.Leaf(l)
				if li.Vis&vis == 0 {
					continue
				}
				switch {
				case li.Num >= 0:
					if got.Num(li.Num) != e.Num(li.Num) {
						t.Errorf("tick %d %s leaf %d (%s): got %d want %d", i, name, l, li.Field.Name, got.Num(li.Num), e.Num(li.Num))
					}
				}
			}
			if vis == schema.VisOthers && got.Num(player.Field(4).Num) != 0 {
				t.Errorf("others saw owner field")
			}
			if got.Num(player.Field(3).Num) != 0 {
				t.Errorf("server field leaked")
			}
		}
		check("others", oe, schema.VisOthers)
		check("owner", we, schema.VisOwner)
		if !oe.List(player.Field(6).Obj).Type().Elem.Kind.Numeric() || oe.List(player.Field(6).Obj).Len() != e.List(player.Field(6).Obj).Len() {
			t.Errorf("list len mismatch")
		}
		if !oe.Bag(player.Field(8).Obj).Get(7).Equal(e.Bag(player.Field(8).Obj).Get(7)) {
			t.Errorf("bag mismatch at %d", i)
		}
	}
	// Late joiner.
	late := state.NewTable()
	ents := tr.AppendEntities(nil)
	apply(late, enc.Full(nil, ents, PartAll), enc.Full(nil, ents, PartOthers))
	if got := late.Entity(e.ID()); got == nil || got.Num(player.Leaf(0).Num) != e.Num(player.Leaf(0).Num) {
		t.Fatalf("late joiner")
	}
}
