package v1_test

import (
	"errors"
	"testing"

	v1 "github.com/replicago/replica/internal/testschema/v1"
	"github.com/replicago/replica/state"
)

// mustPanicInvalid checks that f panics with an error wrapping
// state.ErrInvalidHandle, not with a nil dereference.
func mustPanicInvalid(t *testing.T, what string, f func()) {
	t.Helper()
	defer func() {
		t.Helper()
		r := recover()
		if err, _ := r.(error); !errors.Is(err, state.ErrInvalidHandle) {
			t.Errorf("%s: recovered %v, want an error wrapping state.ErrInvalidHandle", what, r)
		}
	}()
	f()
}

// TestZeroValues reads and writes through zero generated values, as a
// typed Removed bag event's New is: getters return what a new value holds,
// Valid is false and setters panic with ErrInvalidHandle.
func TestZeroValues(t *testing.T) {
	var h v1.Hero
	if h.Valid() || h.ID() != 0 || h.I16() != 0 || h.Name() != "" || h.Body().Mark() != 0 ||
		h.Body().Pos().Z() != 0 || h.Scores().Len() != 0 || h.Cds().Len() != 0 || h.Inv().Len() != 0 {
		t.Errorf("zero Hero reads non-zero or valid")
	}
	if _, ok := h.Inv().Get(1); ok {
		t.Errorf("zero Hero has an item")
	}
	if _, ok := h.Cds().Get("a"); ok {
		t.Errorf("zero Hero has a map entry")
	}
	for range h.Inv().All() {
		t.Errorf("zero Hero iterates over items")
	}
	mustPanicInvalid(t, "Hero.SetI16", func() { h.SetI16(1) })
	mustPanicInvalid(t, "Hero.SetName", func() { h.SetName("x") })
	mustPanicInvalid(t, "Hero.Body().SetMark", func() { h.Body().SetMark(1) })
	mustPanicInvalid(t, "Hero.Scores().Push", func() { h.Scores().Push(1) })
	mustPanicInvalid(t, "Hero.Cds().Put", func() { h.Cds().Put("a", 1) })
	mustPanicInvalid(t, "Hero.Inv().Add", func() { h.Inv().Add(1, v1.NewItem()) })

	var it v1.Item
	if it.Valid() || it.Kind() != 0 || it.Count() != 0 || it.Pos().Z() != 0 || it.Tags().Len() != 0 ||
		it.Mods().Len() != 0 || it.Sub().Len() != 0 {
		t.Errorf("zero Item reads non-zero or valid")
	}
	mustPanicInvalid(t, "Item.SetCount", func() { it.SetCount(1) })
	mustPanicInvalid(t, "Item.Pos().SetZ", func() { it.Pos().SetZ(1) })
	mustPanicInvalid(t, "Item.Tags().Push", func() { it.Tags().Push("x") })
	mustPanicInvalid(t, "Item.Sub().Remove", func() { it.Sub().Remove(1) })
	// A zero value copies as a new value.
	if c := it.Clone(); !c.Valid() || c.Count() != 0 {
		t.Errorf("Clone of the zero Item: valid %v", c.Valid())
	}

	// Zero views read the same.
	var hv v1.HeroView
	if hv.Valid() || hv.IsOwned() || hv.ID() != 0 || hv.I16() != 0 || hv.Body().Pos().Z() != 0 || hv.Scores().Len() != 0 {
		t.Errorf("zero HeroView reads non-zero or valid")
	}
	if _, ok := hv.Inv().Get(1); ok {
		t.Errorf("zero HeroView has an item")
	}
	var iv v1.ItemView
	if iv.Valid() || iv.Count() != 0 || iv.Sub().Len() != 0 {
		t.Errorf("zero ItemView reads non-zero or valid")
	}
}

// TestStaleHandles checks handles on removed bag items and destroyed
// entities: Valid is false, getters return the last values, setters panic
// and nothing is recorded.
func TestStaleHandles(t *testing.T) {
	tr := state.NewTracker(v1.Schema())
	h, err := v1.SpawnHero(tr)
	if err != nil {
		t.Fatal(err)
	}
	x := v1.NewItem()
	x.SetCount(5)
	it := h.Inv().Add(7, x)
	inner := it.Sub().Add(2, v1.NewBuff())
	if !it.Valid() || !inner.Valid() || !x.Valid() {
		t.Fatal("new items are not valid")
	}
	tr.Commit()

	h.Inv().Remove(7)
	if it.Valid() || inner.Valid() {
		t.Errorf("a removed item (valid %v) or an item of its bag (valid %v) is still valid", it.Valid(), inner.Valid())
	}
	if it.Count() != 5 || it.Pos().Z() != 0 {
		t.Errorf("removed item reads count %d, want its last value 5", it.Count())
	}
	mustPanicInvalid(t, "removed Item.SetCount", func() { it.SetCount(6) })
	mustPanicInvalid(t, "removed Item.Pos().SetZ", func() { it.Pos().SetZ(1) })
	mustPanicInvalid(t, "removed Item.Tags().Push", func() { it.Tags().Push("x") })
	mustPanicInvalid(t, "removed Item.Mods().Put", func() { it.Mods().Put("a", 1) })
	mustPanicInvalid(t, "removed Item.Sub().Add", func() { it.Sub().Add(3, v1.NewBuff()) })
	mustPanicInvalid(t, "Buff of a removed Item", func() { inner.SetKind(1) })
	if it.Count() != 5 {
		t.Errorf("refused write changed the item: count %d", it.Count())
	}
	cs := tr.Commit()
	if len(cs.Changes) != 1 {
		t.Fatalf("%d changes, want the removal only", len(cs.Changes))
	}

	// A replaced item: the old handle is stale, the new one valid.
	a := h.Inv().Add(1, v1.NewItem())
	b := h.Inv().Add(1, v1.NewItem())
	if a.Valid() || !b.Valid() {
		t.Errorf("replaced item valid %v, replacement valid %v", a.Valid(), b.Valid())
	}
	mustPanicInvalid(t, "replaced Item.SetKind", func() { a.SetKind(1) })
	b.SetKind(3)
	if got, _ := h.Inv().Get(1); got.Kind() != 3 {
		t.Errorf("item reads kind %d, want 3", got.Kind())
	}
	// An item of an inner bag removed while its outer item stays.
	in := b.Sub().Add(4, v1.NewBuff())
	b.Sub().Remove(4)
	if in.Valid() || !b.Valid() {
		t.Errorf("removed inner item valid %v, outer item valid %v", in.Valid(), b.Valid())
	}
	mustPanicInvalid(t, "removed inner Buff.SetKind", func() { in.SetKind(1) })

	// A destroyed entity.
	h.SetI16(4)
	body := h.Body()
	tr.Destroy(h.Entity())
	if h.Valid() || body.Valid() || b.Valid() {
		t.Errorf("destroyed hero valid %v, its body %v, its item %v", h.Valid(), body.Valid(), b.Valid())
	}
	if h.I16() != 4 {
		t.Errorf("destroyed hero reads %d, want its last value 4", h.I16())
	}
	mustPanicInvalid(t, "destroyed Hero.SetI16", func() { h.SetI16(5) })
	mustPanicInvalid(t, "destroyed Hero.SetName", func() { h.SetName("x") })
	mustPanicInvalid(t, "destroyed Hero body", func() { body.SetMark(1) })
	mustPanicInvalid(t, "destroyed Hero item", func() { b.SetKind(1) })
	tr.Commit()
	mustPanicInvalid(t, "destroyed Hero.SetI16 after the commit", func() { h.SetI16(5) })
}

// TestClientReadOnly checks that an entity of a client replica (one
// without a tracker) is read only through its view: HeroOf refuses it,
// HeroViewOf takes it (and a server's entity too), and the setters of the
// state package, which only the entity itself still reaches, panic with
// ErrReadOnly.
func TestClientReadOnly(t *testing.T) {
	e := state.NewEntity(v1.Schema().Class(1), state.MakeID(1, 0))
	if h, ok := v1.HeroOf(e); ok || h.Valid() {
		t.Fatal("HeroOf accepts an entity of a client replica")
	}
	v, ok := v1.HeroViewOf(e)
	if !ok || !v.Valid() || v.I16() != 0 || !v.Body().Valid() || v.Inv().Len() != 0 || v.Entity() != e {
		t.Fatal("client hero: not a valid HeroView")
	}
	if _, ok := v1.MissileViewOf(e); ok {
		t.Error("MissileViewOf accepts a hero")
	}
	if _, ok := v1.HeroViewOf(nil); ok {
		t.Error("HeroViewOf accepts nil")
	}
	for what, f := range map[string]func(){
		"SetNum":          func() { v.Entity().SetNum(0, 1) },
		"Handle().SetStr": func() { v.Entity().Handle().SetStr(15, "x") },
	} {
		func() {
			defer func() {
				r := recover()
				if err, _ := r.(error); !errors.Is(err, state.ErrReadOnly) {
					t.Errorf("%s on a client hero: recovered %v, want ErrReadOnly", what, r)
				}
			}()
			f()
		}()
	}

	tr := state.NewTracker(v1.Schema())
	h, err := v1.SpawnHero(tr)
	if err != nil {
		t.Fatal(err)
	}
	h.SetI16(4)
	if got, ok := v1.HeroOf(h.Entity()); !ok || got != h {
		t.Error("HeroOf refuses a server's entity")
	}
	if sv, ok := v1.HeroViewOf(h.Entity()); !ok || sv.I16() != 4 || sv.IsOwned() {
		t.Error("HeroViewOf of a server's entity: not a view of it")
	}
	tr.Destroy(h.Entity())
	if _, ok := v1.HeroOf(h.Entity()); !ok {
		t.Error("HeroOf refuses a server's entity once destroyed")
	}
}
