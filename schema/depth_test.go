package schema_test

import (
	"testing"

	"github.com/replicago/replica/schema"
)

// TestDepth checks the nesting levels a decoder counts, by the rules of
// protocol.md §7.1, for bounded structs and for structs that reach
// themselves through a container.
func TestDepth(t *testing.T) {
	i32 := schema.Type{Kind: schema.Int32}
	vec := &schema.Struct{Name: "Vec", Fields: []*schema.Field{{ID: 1, Name: "x", Type: i32}}}
	// Tag: a list of strings, its values one level below Tag's fields.
	tag := &schema.Struct{Name: "Tag", Fields: []*schema.Field{
		{ID: 1, Name: "s", Type: schema.Type{Kind: schema.List, Elem: &schema.Type{Kind: schema.String}}},
	}}
	// Shelf: a nested struct (1), and a bag of Tags: the bag at 1, its
	// items at 2, their list at 3.
	shelf := &schema.Struct{Name: "Shelf", Fields: []*schema.Field{
		{ID: 1, Name: "pos", Type: schema.Type{Kind: schema.Nested, Struct: vec}},
		{ID: 2, Name: "tags", Type: schema.Type{Kind: schema.Bag, Key: schema.Uint8, Struct: tag}},
	}}
	node := &schema.Struct{Name: "Node", Fields: []*schema.Field{{ID: 1, Name: "v", Type: i32}}}
	node.Fields = append(node.Fields, &schema.Field{ID: 2, Name: "kids",
		Type: schema.Type{Kind: schema.Map, Key: schema.String, Elem: &schema.Type{Kind: schema.Nested, Struct: node}}})
	// One class per rule, so that Depth shows each alone.
	list := func(st *schema.Struct) schema.Type {
		return schema.Type{Kind: schema.List, Elem: &schema.Type{Kind: schema.Nested, Struct: st}}
	}
	class := func(id uint32, f *schema.Field) *schema.Struct {
		f.ID, f.Vis = 1, schema.VisAll
		return &schema.Struct{Name: f.Name, Class: true, ID: id, Fields: []*schema.Field{f}}
	}
	flat := class(1, &schema.Field{Name: "hp", Type: i32})
	// A nested Shelf: pos.x two levels down, tags' items' lists at 3,
	// not one more for the nesting of shelf.
	inline := class(2, &schema.Field{Name: "shelf", Type: schema.Type{Kind: schema.Nested, Struct: shelf}})
	// Shelves in a list: the list at 1, a shelf at 2, then Shelf's 3.
	listed := class(3, &schema.Field{Name: "shelves", Type: list(shelf)})
	tree := class(4, &schema.Field{Name: "tree", Type: list(node)})
	if _, err := schema.New(flat, inline, listed, tree); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		st   *schema.Struct
		want int
	}{{vec, 0}, {tag, 1}, {shelf, 3}, {node, -1}, {flat, 0}, {inline, 3}, {listed, 5}, {tree, -1}} {
		if got := c.st.Depth(); got != c.want {
			t.Errorf("%s.Depth() = %d, want %d", c.st.Name, got, c.want)
		}
	}
}
