package state_test

import (
	"testing"

	"github.com/replicago/replica/schema"
	"github.com/replicago/replica/state"
)

func idSchema(t *testing.T) (*schema.Schema, *schema.Struct) {
	t.Helper()
	c := &schema.Struct{Name: "C", Class: true, ID: 1, Fields: []*schema.Field{
		{ID: 1, Name: "v", Type: schema.Type{Kind: schema.Int32}, Vis: schema.VisAll},
	}}
	s, err := schema.New(c)
	if err != nil {
		t.Fatal(err)
	}
	return s, c
}

// TestSlotReuse checks how IDs are handed out: a slot freed in a tick is
// not reused in that tick, freed slots are reused oldest first, each reuse
// bumps the generation, and a stale ID names nothing.
func TestSlotReuse(t *testing.T) {
	s, c := idSchema(t)
	tr := state.NewTracker(s)
	var ents []*state.Entity
	for range 3 {
		e, err := tr.Spawn(c)
		if err != nil {
			t.Fatal(err)
		}
		ents = append(ents, e)
	}
	tr.Commit()
	a, b := ents[0], ents[1]
	tr.Destroy(b)
	tr.Destroy(a)
	// Freed in this tick: a new entity takes a fresh slot.
	fresh, _ := tr.Spawn(c)
	if fresh.ID().Slot() != 4 || fresh.ID().Gen() != 0 {
		t.Fatalf("spawn in the freeing tick got %#x, want slot 4 gen 0", uint32(fresh.ID()))
	}
	tr.Commit()
	// Now the freed slots come back in the order they were freed.
	r1, _ := tr.Spawn(c)
	r2, _ := tr.Spawn(c)
	if r1.ID() != state.MakeID(b.ID().Slot(), 1) || r2.ID() != state.MakeID(a.ID().Slot(), 1) {
		t.Fatalf("reused %#x, %#x; want slot %d then %d, generation 1", uint32(r1.ID()), uint32(r2.ID()), b.ID().Slot(), a.ID().Slot())
	}
	if tr.Entity(a.ID()) != nil || tr.Entity(b.ID()) != nil {
		t.Fatal("a stale ID still names an entity")
	}
	if tr.Entity(r1.ID()) != r1 || tr.Len() != 4 {
		t.Fatalf("lookup of a reused slot failed (len %d)", tr.Len())
	}
	// Generations wrap after 256 reuses of one slot.
	e := r1
	for i := 0; i < 256; i++ {
		tr.Destroy(e)
		tr.Commit()
		e, _ = tr.Spawn(c)
		if e.ID().Slot() != r1.ID().Slot() {
			t.Fatalf("reuse %d took slot %d", i, e.ID().Slot())
		}
	}
	if e.ID() != r1.ID() {
		t.Fatalf("after 256 reuses the ID is %#x, want %#x again", uint32(e.ID()), uint32(r1.ID()))
	}
}

// TestTableStaleID checks that a client table resolves only the current
// generation of a slot.
func TestTableStaleID(t *testing.T) {
	_, c := idSchema(t)
	tab := state.NewTable()
	x := tab.Begin()
	old := state.MakeID(5, 3)
	if _, err := x.Create(c, old); err != nil {
		t.Fatal(err)
	}
	x.Commit()
	if tab.Entity(old) == nil || tab.Entity(state.MakeID(5, 4)) != nil || tab.AtSlot(5) == nil {
		t.Fatal("lookup by ID does not check the generation")
	}
	x = tab.Begin()
	if _, err := x.Create(c, state.MakeID(5, 4)); err == nil {
		t.Fatal("created a second entity in an occupied slot")
	}
	x.Rollback()
}
