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
	room := &schema.Struct{Name: "Room", Class: true, ID: 1, Fields: []*schema.Field{
		{ID: 1, Name: "hp", Type: i32, Vis: schema.VisAll},                                                                                         // leaf 0
		{ID: 2, Name: "shelf", Type: schema.Type{Kind: schema.Nested, Struct: shelf}, Vis: schema.VisAll},                                          // leaves 1, 2
		{ID: 3, Name: "shelves", Type: schema.Type{Kind: schema.List, Elem: &schema.Type{Kind: schema.Nested, Struct: shelf}}, Vis: schema.VisAll}, // leaf 3
		{ID: 4, Name: "tree", Type: schema.Type{Kind: schema.List, Elem: &schema.Type{Kind: schema.Nested, Struct: node}}, Vis: schema.VisAll},     // leaf 4
	}}
	if _, err := schema.New(room); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		st   *schema.Struct
		want int
	}{{vec, 0}, {tag, 1}, {shelf, 3}, {node, -1}, {room, -1}} {
		if got := c.st.Depth(); got != c.want {
			t.Errorf("%s.Depth() = %d, want %d", c.st.Name, got, c.want)
		}
	}
	// hp 0; shelf.pos.x 2 (two nested levels); shelf.tags 3 (its items'
	// lists, not one more for the nesting of shelf); shelves 2 + 3; tree
	// unbounded.
	for leaf, want := range []int{0, 2, 3, 5, -1} {
		if got := room.LeafDepth(leaf); got != want {
			t.Errorf("LeafDepth(%d) = %d, want %d", leaf, got, want)
		}
	}
}
