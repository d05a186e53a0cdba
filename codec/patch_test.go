package codec_test

import (
	"testing"

	"github.com/replicago/replica/codec"
	v2 "github.com/replicago/replica/internal/testschema/v2"
	"github.com/replicago/replica/state"
)

// TestListElementPatch: changing one field of one struct element of a
// list sends that field (a patch, list operation 5), not the element; an
// element whose fields all change is sent whole, whichever is smaller.
// Either way the client's list equals the server's.
func TestListElementPatch(t *testing.T) {
	tr := state.NewTracker(v2.Schema())
	var enc codec.Encoder
	dec, err := codec.NewDecoder(v2.Schema(), nil, codec.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	tab := state.NewTable()
	// apply encodes the tick for a client that does not own the hero
	// (loadout is vis=others) and returns the bytes of its others segment.
	apply := func(full bool) int {
		t.Helper()
		cs := tr.Commit()
		var all, others []byte
		if full {
			ents := tr.AppendEntities(nil)
			all, others = enc.Full(nil, ents, codec.PartAll), enc.Full(nil, ents, codec.PartOthers)
		} else {
			all, others = enc.Delta(nil, cs, codec.PartAll, nil), enc.Delta(nil, cs, codec.PartOthers, nil)
		}
		txn := tab.Begin()
		for _, seg := range [][]byte{all, others} {
			if err := dec.Apply(txn, seg); err != nil {
				txn.Rollback()
				t.Fatal(err)
			}
		}
		txn.Commit()
		return len(others)
	}
	same := func() {
		t.Helper()
		se, ce := tr.AppendEntities(nil)[0], tab.AppendEntities(nil)[0]
		c := se.Class()
		for i := range c.Leaves {
			if l := c.Leaf(i); l.Field.Name == "loadout" {
				a, b := se.List(l.Obj), ce.List(l.Obj)
				if a.Len() != b.Len() {
					t.Fatalf("client list of %d, server %d", b.Len(), a.Len())
				}
				for j := range a.Len() {
					if !a.At(j).R.Equal(b.At(j).R) {
						t.Fatalf("element %d differs", j)
					}
				}
				return
			}
		}
		t.Fatal("no loadout")
	}

	h, _ := v2.SpawnHero(tr)
	for i := range 50 {
		it := v2.NewItem()
		it.SetKind(uint16(100 + i))
		it.SetCount(int32(1000 * i))
		it.Pos().SetX(float32(i))
		it.Pos().SetY(-float32(i))
		it.Tags().Push("login")
		it.Tags().Push("eu-west")
		h.Loadout().Push(it)
	}
	apply(true)
	same()

	it := h.Loadout().At(17)
	it.SetCount(it.Count() + 1)
	h.Loadout().Set(17, it)
	one := apply(false)
	same()

	it = v2.NewItem()
	it.SetKind(7)
	it.SetCount(-5)
	it.Pos().SetX(3)
	it.Tags().Push("x")
	h.Loadout().Set(18, it)
	whole := apply(false)
	same()

	// Several fields of several elements, and a set that changes nothing.
	for _, i := range []int{3, 4, 40} {
		it := h.Loadout().At(i)
		it.Pos().SetY(float32(i) + 0.5)
		it.SetKind(it.Kind() + 1)
		h.Loadout().Set(i, it)
	}
	h.Loadout().Set(5, h.Loadout().At(5))
	apply(false)
	same()

	t.Logf("one field of one element: %d bytes; a new element: %d bytes", one, whole)
	if one >= whole || one > 12 {
		t.Fatalf("one field of one element took %d bytes, a new element %d: not a patch", one, whole)
	}
}
