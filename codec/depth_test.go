package codec

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/replicago/replica/schema"
	"github.com/replicago/replica/state"
	"github.com/replicago/replica/wire"
)

// depthSchema nests without bound: nodes hold lists of nodes, boxes bags
// of boxes and maps of nodes, and lists of a struct that does not nest. Leaves of Tree: 0 Roots, 1 Boxes, 2 Hidden,
// 3 Wrap.Kids.
func depthSchema(t *testing.T) (s *schema.Schema, node, box *schema.Struct) {
	t.Helper()
	vec := &schema.Struct{Name: "Vec", Fields: []*schema.Field{{ID: 1, Name: "X", Type: schema.Type{Kind: schema.Int32}}}}
	node = &schema.Struct{Name: "Node", Fields: []*schema.Field{
		{ID: 1, Name: "Pos", Type: schema.Type{Kind: schema.Nested, Struct: vec}}, // leaf 0
	}}
	node.Fields = append(node.Fields, &schema.Field{ID: 2, Name: "Kids", Type: schema.Type{Kind: schema.List, Elem: &schema.Type{Kind: schema.Nested, Struct: node}}}) // leaf 1
	box = &schema.Struct{Name: "Box", Fields: []*schema.Field{
		{ID: 1, Name: "N", Type: schema.Type{Kind: schema.Int32}}, // leaf 0
	}}
	leafy := &schema.Struct{Name: "Leafy", Fields: []*schema.Field{
		{ID: 1, Name: "V", Type: schema.Type{Kind: schema.Int32}},
		{ID: 2, Name: "Tags", Type: schema.Type{Kind: schema.List, Elem: &schema.Type{Kind: schema.String}}},
	}}
	box.Fields = append(box.Fields,
		&schema.Field{ID: 2, Name: "Items", Type: schema.Type{Kind: schema.Bag, Key: schema.Uint32, Struct: box}},                                          // leaf 1
		&schema.Field{ID: 3, Name: "Nodes", Type: schema.Type{Kind: schema.Map, Key: schema.Int16, Elem: &schema.Type{Kind: schema.Nested, Struct: node}}}, // leaf 2
		&schema.Field{ID: 4, Name: "Flat", Type: schema.Type{Kind: schema.List, Elem: &schema.Type{Kind: schema.Nested, Struct: leafy}}})                   // leaf 3: bounded
	wrap := &schema.Struct{Name: "Wrap", Fields: []*schema.Field{
		{ID: 1, Name: "Kids", Type: schema.Type{Kind: schema.List, Elem: &schema.Type{Kind: schema.Nested, Struct: node}}, Vis: schema.VisAll},
	}}
	tree := &schema.Struct{Name: "Tree", Class: true, ID: 1, Fields: []*schema.Field{
		{ID: 1, Name: "Roots", Type: schema.Type{Kind: schema.List, Elem: &schema.Type{Kind: schema.Nested, Struct: node}}, Vis: schema.VisAll},
		{ID: 2, Name: "Boxes", Type: schema.Type{Kind: schema.Bag, Key: schema.Uint32, Struct: box}, Vis: schema.VisAll},
		{ID: 3, Name: "Hidden", Type: schema.Type{Kind: schema.List, Elem: &schema.Type{Kind: schema.Nested, Struct: node}}, Vis: schema.VisServer},
		{ID: 4, Name: "Wrap", Type: schema.Type{Kind: schema.Nested, Struct: wrap}, Vis: schema.VisAll},
	}}
	s, err := schema.New(tree)
	if err != nil {
		t.Fatal(err)
	}
	return s, node, box
}

// depthOp is one write into a Tree entity: at the end of a path of bag
// keys (Boxes, then Items of each box), store a node chain whose kids
// nest kids levels deep.
type depthOp struct {
	path []uint64
	what int // see apply
	key  uint64
	kids int
	idx  int
}

// nodeChain returns a node whose Kids hold one node, whose Kids hold one
// node, kids times.
func nodeChain(node *schema.Struct, kids int, x uint64) state.Value {
	var v state.Value
	for i := 0; i <= kids; i++ {
		h := state.NewValue(node)
		h.SetNum(0, x) // Pos.X, so that the nested struct is sent
		if i > 0 {
			h.List(1).Push(v)
		}
		v = h.Value()
	}
	return v
}

// apply performs op on e, creating empty boxes along its path where
// missing. If a box on the path is refused, it returns the op that made
// it (which was refused) and false.
func (op depthOp) apply(e *state.Entity, node, box *schema.Struct) (depthOp, bool) {
	h := e.Handle()
	bag := h.Bag(1)
	for i, k := range op.path {
		it := bag.Get(k)
		if !it.Valid() {
			if it = bag.Add(k, state.NewValue(box)); !it.Valid() {
				return depthOp{path: op.path[:i], what: 2, key: k, idx: op.idx}, false
			}
		}
		h, bag = it, it.Bag(1)
	}
	v := nodeChain(node, op.kids, uint64(op.idx+1))
	switch op.what {
	case 0: // a node chain pushed to Roots
		e.Handle().List(0).Push(v)
	case 1: // to Hidden
		e.Handle().List(2).Push(v)
	case 2: // an empty box added to the bag at the path's end
		b := state.NewValue(box)
		b.SetNum(0, uint64(op.kids+1))
		bag.Add(op.key, b)
	case 3: // a node chain put in the Nodes of the box at the path's end
		m := h.Map(2)
		m.Put(m.Key(op.key), v)
	case 4: // a box holding boxes kids deep added to the bag
		b := state.NewValue(box)
		for range op.kids {
			outer := state.NewValue(box)
			outer.Bag(1).Add(op.key, b)
			b = outer
		}
		bag.Add(op.key, b)
	case 5: // Wrap set whole, its Kids holding the node chain
		wrap := e.Class().Field(4).Type.Struct
		w := state.NewValue(wrap)
		w.List(0).Push(v)
		e.Handle().SetNested(3, wrap, w)
	case 6: // a Leafy pushed to the Flat of the box at the path's end, with a tag or without
		l := state.NewValue(h.List(3).List().Type().Elem.Struct)
		if op.kids%2 == 1 {
			l.List(1).Push(state.Value{S: "tag"})
		}
		h.List(3).Push(l.Value())
	}
	return op, true
}

// TestDepthLimit checks the tracker's nesting limit against the decoder's:
// random writes of recursive values, at random depths, into a tracker
// limited to MaxDepth levels. Every tick it accepts must decode under the
// same MaxDepth, full state and delta alike; every write it refuses must
// be one the decoder refuses, checked on a fresh tracker with no such
// limit; server-only fields are never refused.
func TestDepthLimit(t *testing.T) {
	for maxDepth := 6; maxDepth <= 9; maxDepth++ {
		t.Run(fmt.Sprint(maxDepth), func(t *testing.T) { testDepthLimit(t, maxDepth) })
	}
}

func testDepthLimit(t *testing.T, maxDepth int) {
	s, node, box := depthSchema(t)
	lim := Limits{MaxDepth: maxDepth}
	rng := rand.New(rand.NewPCG(5, uint64(maxDepth)))
	tr := state.NewTracker(s)
	tr.SetLimits(state.Limits{MaxDepth: maxDepth})
	e, _ := tr.Spawn(s.Class(1))
	client := newDepthClient(t, s, lim)
	var enc Encoder
	client.apply(t, enc.Delta(nil, tr.Commit(), PartAll, nil))
	refused, hidden := 0, 0
	for i := range 600 {
		op := depthOp{what: rng.IntN(7), key: uint64(rng.IntN(3)), kids: rng.IntN(5), idx: i}
		for range rng.IntN(5) {
			op.path = append(op.path, uint64(rng.IntN(2)))
		}
		if (op.what == 3 || op.what == 6) && len(op.path) == 0 {
			op.path = []uint64{0} // Nodes and Flat belong to a box
		}
		if op.what == 5 {
			op.path = nil // Wrap belongs to the entity
		}
		op, _ = op.apply(e, node, box) // if a box on the path is refused, op is that box's
		errs, n := tr.TakeRefusals()
		if op.what == 1 {
			hidden++
			if n != 0 {
				t.Fatalf("op %d: a write to a server-only field was refused", i)
			}
		}
		if n > 0 {
			refused++
			if !tooDeepForClients(t, s, op, node, box, lim) {
				t.Fatalf("op %d (%+v): refused (%v), but clients accept it", i, op, errs)
			}
		}
		client.apply(t, enc.Delta(nil, tr.Commit(), PartAll, nil))
	}
	if refused < 40 || hidden < 40 {
		t.Fatalf("%d writes refused, %d hidden: the test does not reach the limit", refused, hidden)
	}
	late := newDepthClient(t, s, lim)
	late.apply(t, enc.Full(nil, tr.AppendEntities(nil), PartAll))
	want := state.ValueOf(&e.Record)
	want.List(2).Clear() // Hidden is not sent
	if want.List(0).Len() == 0 || want.Bag(1).Bag().Len() == 0 || want.Nested(3, 0, 0).List(0).Len() == 0 {
		t.Fatal("nothing stored")
	}
	for _, c := range []*depthClient{client, late} {
		if got := c.tab.Entity(e.ID()); got == nil || !got.Equal(want.Record()) {
			t.Fatal("a client's replica differs from the server's entity")
		}
	}
}

// tooDeepForClients performs op on a fresh tracker whose nesting is not
// limited and reports whether the decoder refuses the result for depth.
func tooDeepForClients(t *testing.T, s *schema.Schema, op depthOp, node, box *schema.Struct, lim Limits) bool {
	t.Helper()
	tr := state.NewTracker(s)
	tr.SetLimits(state.Limits{MaxDepth: 64})
	e, _ := tr.Spawn(s.Class(1))
	if _, ok := op.apply(e, node, box); !ok {
		t.Fatal("a write refused without a depth limit")
	}
	var enc Encoder
	seg := enc.Full(nil, tr.AppendEntities(nil), PartAll)
	dec, _ := NewDecoder(s, nil, lim)
	x := state.NewTable().Begin()
	defer x.Rollback()
	err := dec.Apply(x, seg)
	if err != nil && !errors.Is(err, wire.ErrLimit) {
		t.Fatalf("decode: %v", err)
	}
	return err != nil
}

type depthClient struct {
	tab *state.Table
	dec *Decoder
}

func newDepthClient(t *testing.T, s *schema.Schema, lim Limits) *depthClient {
	dec, err := NewDecoder(s, nil, lim)
	if err != nil {
		t.Fatal(err)
	}
	return &depthClient{tab: state.NewTable(), dec: dec}
}

func (c *depthClient) apply(t *testing.T, seg []byte) {
	t.Helper()
	x := c.tab.Begin()
	if err := c.dec.Apply(x, seg); err != nil {
		x.Rollback()
		t.Fatalf("a client refused a tick the tracker let through: %v", err)
	}
	x.Commit()
}

// TestCheckSchemaDepth checks that a field nested deeper than the limit
// fails the schema check, and server-only fields do not.
func TestCheckSchemaDepth(t *testing.T) {
	s := limitSchema(t) // C.d.n.n.v: four levels
	if err := (state.Limits{MaxDepth: 4}).CheckSchema(s); err != nil {
		t.Fatalf("four levels, limit 4: %v", err)
	}
	err := (state.Limits{MaxDepth: 3}).CheckSchema(s)
	if err == nil || err.Error() != "state: C.d.n.n.v is 4 levels deep, over the limit of 3" {
		t.Fatalf("limit 3: %v", err)
	}
	ds, _, _ := depthSchema(t)
	if err := (state.Limits{MaxDepth: 2}).CheckSchema(ds); err != nil {
		t.Fatalf("containers, limit 2: %v", err)
	}
	if err := (state.Limits{MaxDepth: 1}).CheckSchema(ds); err == nil {
		t.Fatal("containers pass a limit of 1")
	}
}
