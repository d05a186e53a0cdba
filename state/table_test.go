package state

import (
	"testing"

	"github.com/replicago/replica/schema"
)

// TestTablePages checks the slot directory of a Table: slots far apart,
// ascending order, Fillable across transactions, and that a page whose
// last entity is destroyed (or whose creation is rolled back) is dropped,
// so that memory follows the entities present.
func TestTablePages(t *testing.T) {
	c := &schema.Struct{Name: "C", Class: true, ID: 1, Fields: []*schema.Field{
		{ID: 1, Name: "v", Type: schema.Type{Kind: schema.Int32}, Vis: schema.VisAll},
	}}
	if _, err := schema.New(c); err != nil {
		t.Fatal(err)
	}
	pages := func(tab *Table) int {
		n := 0
		for _, p := range tab.dir {
			if p != nil {
				n++
			}
		}
		return n
	}
	slots := []uint32{1<<SlotBits - 1, 5, 1 << pageBits, 0, 3 << pageBits}
	tab := NewTable()
	x := tab.Begin()
	for _, s := range slots {
		if _, err := x.Create(c, MakeID(s, 1)); err != nil {
			t.Fatal(err)
		}
		if !x.Fillable(s) {
			t.Fatalf("Fillable(%d) = false in the creating transaction", s)
		}
	}
	if x.Fillable(6) || x.Fillable(1<<SlotBits-2) || x.Fillable(1<<31) {
		t.Fatal("Fillable reports a slot nothing was created in")
	}
	x.Commit()
	if tab.Len() != len(slots) || pages(tab) != 4 {
		t.Fatalf("%d entities in %d pages, want %d in 4", tab.Len(), pages(tab), len(slots))
	}
	got := tab.AppendEntities(nil)
	want := []uint32{0, 5, 1 << pageBits, 3 << pageBits, 1<<SlotBits - 1}
	for i, e := range got {
		if e.ID().Slot() != want[i] {
			t.Fatalf("AppendEntities: slot %d at %d, want %d", e.ID().Slot(), i, want[i])
		}
	}

	x = tab.Begin()
	if x.Fillable(5) {
		t.Fatal("Fillable(5) = true in a later transaction")
	}
	for _, s := range []uint32{1<<SlotBits - 1, 1 << pageBits} {
		if err := x.DestroySlot(s); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := x.Create(c, MakeID(7<<pageBits, 1)); err != nil {
		t.Fatal(err)
	}
	x.Rollback()
	tab.Begin()
	if tab.Len() != len(slots) || pages(tab) != 4 || tab.AtSlot(7<<pageBits) != nil {
		t.Fatalf("after Rollback: %d entities in %d pages", tab.Len(), pages(tab))
	}

	x = tab.Begin()
	for _, s := range []uint32{1<<SlotBits - 1, 1 << pageBits, 5} {
		if err := x.DestroySlot(s); err != nil {
			t.Fatal(err)
		}
	}
	x.Commit()
	tab.Begin()
	if tab.Len() != 2 || pages(tab) != 2 || tab.AtSlot(0) == nil || tab.AtSlot(3<<pageBits) == nil {
		t.Fatalf("after destroying: %d entities in %d pages", tab.Len(), pages(tab))
	}
}
