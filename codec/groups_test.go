package codec

import (
	"testing"

	"github.com/replicago/replica/schema"
	"github.com/replicago/replica/state"
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
