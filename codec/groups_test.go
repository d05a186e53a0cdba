package codec

import (
	"errors"
	"fmt"
	"testing"

	"github.com/replicago/replica/schema"
	"github.com/replicago/replica/state"
	"github.com/replicago/replica/wire"
)

// TestManyGroups changes a different subset of fields on each of many
// entities, so one segment holds far more groups than the encoder scans
// linearly, and checks the client ends equal to the server.
func TestManyGroups(t *testing.T) {
	c := &schema.Struct{Name: "C", Class: true, ID: 1}
	for i := 1; i <= 12; i++ {
		c.Fields = append(c.Fields, &schema.Field{ID: uint32(i), Name: "f", Type: schema.Type{Kind: schema.Int32}, Vis: schema.VisAll})
	}
	s, err := schema.New(c)
	if err != nil {
		t.Fatal(err)
	}
	tr := state.NewTracker(s)
	var ents []*state.Entity
	for range 300 {
		e, _ := tr.Spawn(c)
		ents = append(ents, e)
	}
	var enc Encoder
	dec, _ := NewDecoder(s, nil, Limits{})
	tab := state.NewTable()
	apply := func() {
		t.Helper()
		seg := enc.Delta(nil, tr.Commit(), PartAll, nil)
		x := tab.Begin()
		if err := dec.Apply(x, seg); err != nil {
			x.Rollback()
			t.Fatal(err)
		}
		x.Commit()
	}
	apply()
	for tick := 1; tick <= 5; tick++ {
		for i, e := range ents {
			mask := (i*7 + tick*13) % 4096 // up to 4096 distinct field subsets
			for f := range 12 {
				if mask&(1<<f) != 0 {
					e.SetNum(f, uint64(i*tick+f))
				}
			}
		}
		apply()
		for _, e := range ents {
			if got := tab.Entity(e.ID()); got == nil || !got.Equal(&e.Record) {
				t.Fatalf("tick %d: entity %d differs", tick, e.ID())
			}
		}
	}
}

// TestSlotReuseOnTheWire destroys entities and reuses their slots in later
// ticks; the client must follow, ending with the new generations.
func TestSlotReuseOnTheWire(t *testing.T) {
	c := &schema.Struct{Name: "C", Class: true, ID: 1, Fields: []*schema.Field{
		{ID: 1, Name: "v", Type: schema.Type{Kind: schema.Int32}, Vis: schema.VisAll},
	}}
	s, _ := schema.New(c)
	tr := state.NewTracker(s)
	var enc Encoder
	dec, _ := NewDecoder(s, nil, Limits{})
	tab := state.NewTable()
	tick := func() {
		t.Helper()
		seg := enc.Delta(nil, tr.Commit(), PartAll, nil)
		x := tab.Begin()
		if err := dec.Apply(x, seg); err != nil {
			x.Rollback()
			t.Fatal(err)
		}
		x.Commit()
	}
	live := map[state.ID]*state.Entity{}
	for i := range 50 {
		e, _ := tr.Spawn(c)
		e.SetNum(0, uint64(i))
		live[e.ID()] = e
	}
	tick()
	for round := range 20 {
		n := 0
		for id, e := range live {
			if n == 10 {
				break
			}
			tr.Destroy(e)
			delete(live, id)
			n++
		}
		tick()
		for range 10 {
			e, _ := tr.Spawn(c)
			e.SetNum(0, uint64(1000+round))
			live[e.ID()] = e
		}
		tick()
		if tab.Len() != len(live) {
			t.Fatalf("round %d: client has %d entities, server %d", round, tab.Len(), len(live))
		}
		for id, e := range live {
			if got := tab.Entity(id); got == nil || !got.Equal(&e.Record) {
				t.Fatalf("round %d: entity %#x missing or different on the client", round, uint32(id))
			}
		}
	}
}

// TestLargeClasses round-trips a class with 1,000 fields and one nested 8
// levels deep through full state and deltas.
func TestLargeClasses(t *testing.T) {
	big := &schema.Struct{Name: "Big", Class: true, ID: 1}
	for i := 1; i <= 1000; i++ {
		k := []schema.Kind{schema.Int32, schema.Float32, schema.String, schema.Bool}[i%4]
		big.Fields = append(big.Fields, &schema.Field{ID: uint32(i), Name: "f", Type: schema.Type{Kind: k}, Vis: schema.VisAll})
	}
	var inner *schema.Struct
	for d := 8; d >= 1; d-- {
		st := &schema.Struct{Name: "N", Fields: []*schema.Field{{ID: 1, Name: "v", Type: schema.Type{Kind: schema.Int64}, Vis: schema.VisAll}}}
		if inner != nil {
			st.Fields = append(st.Fields, &schema.Field{ID: 2, Name: "next", Type: schema.Type{Kind: schema.Nested, Struct: inner}, Vis: schema.VisAll})
		}
		inner = st
	}
	deep := &schema.Struct{Name: "Deep", Class: true, ID: 2, Fields: []*schema.Field{
		{ID: 1, Name: "root", Type: schema.Type{Kind: schema.Nested, Struct: inner}, Vis: schema.VisAll},
	}}
	s, err := schema.New(big, deep)
	if err != nil {
		t.Fatal(err)
	}
	if big.Leaves != 1000 || deep.Leaves != 8 {
		t.Fatalf("leaves: big %d, deep %d", big.Leaves, deep.Leaves)
	}
	tr := state.NewTracker(s)
	b, _ := tr.Spawn(big)
	d, _ := tr.Spawn(deep)
	set := func(tick int) {
		for leaf := 0; leaf < big.Leaves; leaf += 1 + tick%7 {
			l := big.Leaf(leaf)
			if l.Field.Type.Kind == schema.String {
				b.Handle().SetStr(leaf, fmt.Sprint("s", tick, leaf))
			} else {
				b.SetNum(leaf, uint64(tick*leaf))
			}
		}
		for leaf := 0; leaf < deep.Leaves; leaf++ {
			d.SetNum(leaf, uint64(-tick*leaf))
		}
	}
	var enc Encoder
	dec, _ := NewDecoder(s, nil, Limits{})
	tab := state.NewTable()
	late := state.NewTable()
	for tick := 1; tick <= 5; tick++ {
		set(tick)
		seg := enc.Delta(nil, tr.Commit(), PartAll, nil)
		x := tab.Begin()
		if err := dec.Apply(x, seg); err != nil {
			t.Fatalf("tick %d: %v", tick, err)
		}
		x.Commit()
	}
	x := late.Begin()
	if err := dec.Apply(x, enc.Full(nil, tr.AppendEntities(nil), PartAll)); err != nil {
		t.Fatal(err)
	}
	x.Commit()
	for _, e := range []*state.Entity{b, d} {
		if !tab.Entity(e.ID()).Equal(&e.Record) || !late.Entity(e.ID()).Equal(&e.Record) {
			t.Fatalf("%s differs on a client", e.Class().Name)
		}
	}
}

// TestManyClasses changes entities of more classes than the decoder keeps
// at hand, in an order that varies from tick to tick, and checks the
// client ends equal to the server; a class the sender's schema lacks, or
// one whose ID only matches when cut to 32 bits, is refused.
func TestManyClasses(t *testing.T) {
	var classes []*schema.Struct
	for id := uint32(1); id <= 7; id++ {
		c := &schema.Struct{Name: fmt.Sprintf("C%d", id), Class: true, ID: id}
		for f := uint32(1); f <= id; f++ {
			c.Fields = append(c.Fields, &schema.Field{ID: f, Name: fmt.Sprintf("f%d", f), Type: schema.Type{Kind: schema.Int32}, Vis: schema.VisAll})
		}
		classes = append(classes, c)
	}
	s, err := schema.New(classes...)
	if err != nil {
		t.Fatal(err)
	}
	tr := state.NewTracker(s)
	var ents []*state.Entity
	for i := range 70 {
		e, _ := tr.Spawn(classes[i%len(classes)])
		ents = append(ents, e)
	}
	var enc Encoder
	dec, _ := NewDecoder(s, nil, Limits{})
	tab := state.NewTable()
	for tick := range 12 {
		for i, e := range ents {
			if (i*5+tick*3)%4 != 0 {
				e.SetNum((i+tick)%e.Class().Leaves, uint64(i*tick))
			}
		}
		seg := enc.Delta(nil, tr.Commit(), PartAll, nil)
		x := tab.Begin()
		if err := dec.Apply(x, seg); err != nil {
			t.Fatalf("tick %d: %v", tick, err)
		}
		x.Commit()
		for _, e := range ents {
			if got := tab.Entity(e.ID()); got == nil || !got.Equal(&e.Record) {
				t.Fatalf("tick %d: entity %d differs", tick, e.ID())
			}
		}
	}
	for _, id := range []uint64{99, 1<<32 | 1} {
		var w wire.Writer
		w.Bits(secUpdate, 3)
		w.U(id, 4)
		w.U(1, 0)
		x := tab.Begin()
		if err := dec.Apply(x, w.Finish()); !errors.Is(err, ErrUnknown) {
			t.Errorf("class %d: %v, want ErrUnknown", id, err)
		}
		x.Rollback()
	}
}
