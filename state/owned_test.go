package state

import (
	"testing"

	"github.com/replicago/replica/schema"
)

// TestOwnedAndValid: a client entity's ownership flag and a server
// entity's destruction share Entity.ch; neither may pass for the other,
// and ReadOnly tells a client entity from a server one in every state.
func TestOwnedAndValid(t *testing.T) {
	c := &schema.Struct{Name: "C", Class: true, ID: 1, Fields: []*schema.Field{
		{ID: 1, Name: "hp", Type: schema.Type{Kind: schema.Int16}, Vis: schema.VisAll},
	}}
	s, err := schema.New(c)
	if err != nil {
		t.Fatal(err)
	}
	tab := NewTable()
	x := tab.Begin()
	e, err := x.Create(c, MakeID(1, 0))
	if err != nil {
		t.Fatal(err)
	}
	if !e.ReadOnly() {
		t.Fatal("a new client entity is not ReadOnly")
	}
	x.SetOwned(e, true)
	x.Commit()
	if !e.Owned() || !e.Valid() || !e.ReadOnly() {
		t.Fatalf("an owned client entity: Owned %v, Valid %v, ReadOnly %v", e.Owned(), e.Valid(), e.ReadOnly())
	}
	x = tab.Begin()
	x.SetOwned(e, false)
	x.Commit()
	if e.Owned() || !e.Valid() || !e.ReadOnly() {
		t.Fatalf("a client entity no longer owned: Owned %v, Valid %v, ReadOnly %v", e.Owned(), e.Valid(), e.ReadOnly())
	}

	// Destroyed by a tick: no longer valid, nor owned; a rolled-back
	// destroy restores both.
	x = tab.Begin()
	x.SetOwned(e, true)
	x.Commit()
	x = tab.Begin()
	if err := x.DestroySlot(1); err != nil {
		t.Fatal(err)
	}
	if e.Valid() || e.Owned() || !e.ReadOnly() {
		t.Fatalf("a destroyed client entity: Valid %v, Owned %v, ReadOnly %v", e.Valid(), e.Owned(), e.ReadOnly())
	}
	x.Rollback()
	if !e.Valid() || !e.Owned() || !e.ReadOnly() {
		t.Fatalf("after the destroy rolled back: Valid %v, Owned %v, ReadOnly %v", e.Valid(), e.Owned(), e.ReadOnly())
	}
	x = tab.Begin()
	if err := x.DestroySlot(1); err != nil {
		t.Fatal(err)
	}
	x.Commit()
	if e.Valid() || !e.ReadOnly() {
		t.Fatalf("a client entity destroyed and committed: Valid %v, ReadOnly %v", e.Valid(), e.ReadOnly())
	}
	if (*Entity)(nil).ReadOnly() {
		t.Fatal("a nil entity is ReadOnly")
	}

	tr := NewTracker(s)
	for _, commit := range []bool{false, true} {
		se, err := tr.Spawn(c)
		if err != nil {
			t.Fatal(err)
		}
		tr.Commit()
		if se.ReadOnly() {
			t.Fatal("a server entity is ReadOnly")
		}
		se.SetNum(0, 5) // a change index this tick
		tr.Destroy(se)
		if commit {
			tr.Commit()
		}
		if se.Owned() || se.Valid() || se.ReadOnly() {
			t.Fatalf("a destroyed server entity (committed %v): Owned %v, Valid %v, ReadOnly %v", commit, se.Owned(), se.Valid(), se.ReadOnly())
		}
	}
}
