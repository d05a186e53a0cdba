package schema_test

import (
	"testing"

	"github.com/replicago/replica/schema"
)

func TestClientView(t *testing.T) {
	// Inner is only ever stored inline: its server-only field goes.
	inner := &schema.Struct{Name: "Inner", Fields: []*schema.Field{
		field(1, "shown", schema.Int32, schema.VisAll),
		field(2, "innerSecret", schema.Int32, schema.VisServer),
	}}
	// Vec is inline in Player and a list element in Shot: elements are
	// sent whole, so it keeps every field.
	vec := &schema.Struct{Name: "Vec", Fields: []*schema.Field{
		field(1, "x", schema.Float32, schema.VisAll),
		field(2, "vecDebug", schema.Float32, schema.VisServer),
	}}
	item := &schema.Struct{Name: "Item", Fields: []*schema.Field{
		field(1, "count", schema.Uint16, schema.VisAll),
		field(2, "itemNote", schema.String, schema.VisServer),
	}}
	fire := &schema.Struct{Name: "Fire", Fields: []*schema.Field{
		field(1, "aim", schema.Float32, schema.VisAll),
		field(2, "fireTag", schema.Uint8, schema.VisServer),
	}}
	player := &schema.Struct{Name: "Player", Class: true, ID: 1, Fields: []*schema.Field{
		field(1, "hp", schema.Int16, schema.VisAll),
		field(2, "aiSecret", schema.Int64, schema.VisServer),
		field(3, "mine", schema.Uint8, schema.VisOwner),
		{ID: 4, Name: "in", Type: schema.Type{Kind: schema.Nested, Struct: inner}, Vis: schema.VisAll},
		{ID: 5, Name: "pos", Type: schema.Type{Kind: schema.Nested, Struct: vec}, Vis: schema.VisAll},
		{ID: 6, Name: "inv", Type: schema.Type{Kind: schema.Bag, Key: schema.Uint32, Struct: item}, Vis: schema.VisOwner},
		{ID: 7, Name: "hidden", Type: schema.Type{Kind: schema.Nested, Struct: inner}, Vis: schema.VisServer},
	}, RPCs: []*schema.RPC{{ID: 1, Name: "fire", Dir: schema.ClientToServer, Args: fire}}}
	shot := &schema.Struct{Name: "Shot", Class: true, ID: 2, Fields: []*schema.Field{
		{ID: 1, Name: "path", Type: schema.Type{Kind: schema.List, Elem: &schema.Type{Kind: schema.Nested, Struct: vec}}, Vis: schema.VisAll},
	}}
	s, err := schema.New(player, shot)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		st   *schema.Struct
		id   uint32
		want bool
	}{
		{player, 2, true}, {inner, 2, true}, // inline only
		{vec, 2, false}, {item, 2, false}, {fire, 2, false}, // also an element, an item, arguments
		{player, 1, false},
	} {
		if got := s.ServerOnly(c.st, c.st.Field(c.id)); got != c.want {
			t.Errorf("ServerOnly(%s, %s) = %v", c.st.Name, c.st.Field(c.id).Name, got)
		}
	}
	v, err := s.ClientView()
	if err != nil {
		t.Fatal(err)
	}
	desc := v.AppendDescriptor(nil)
	back, err := schema.DecodeDescriptor(desc)
	if err != nil {
		t.Fatal(err)
	}
	names := fieldNames(back)
	for _, name := range []string{"aiSecret", "innerSecret", "hidden"} {
		if names[name] {
			t.Errorf("client view's descriptor names server-only field %q", name)
		}
	}
	for _, name := range []string{"hp", "mine", "shown", "vecDebug", "itemNote", "fireTag", "path"} {
		if !names[name] {
			t.Errorf("client view's descriptor lacks %q", name)
		}
	}
	vp := v.Class(1)
	if vp == player || vp.Field(2) != nil || vp.Field(7) != nil || vp.Field(1) == nil || vp.Field(6) == nil {
		t.Fatalf("view of Player: %+v", vp.Fields)
	}
	if in := vp.Field(4).Type.Struct; in == inner || in.Field(2) != nil || in.Field(1) == nil {
		t.Errorf("view of Inner: %+v", in.Fields)
	}
	if pos := vp.Field(5).Type.Struct; pos.Field(2) == nil || pos != v.Class(2).Field(1).Type.Elem.Struct {
		t.Errorf("view of Vec, shared by Player.pos and Shot.path, lost a field or its sharing")
	}
	if vp.RPC(1).Args.Field(2) == nil {
		t.Error("view of the RPC's arguments lost a field")
	}
	// The original is untouched, and the view is what a client decodes
	// segments against: the server's schema is compatible with it both
	// ways (a dropped field is one the other side does not know).
	if player.Field(2) == nil || inner.Field(2) == nil {
		t.Error("ClientView changed the schema it copied")
	}
	if err := schema.Compatible(s, back); err != nil {
		t.Errorf("server schema vs client view: %v", err)
	}
	if err := schema.Compatible(back, s); err != nil {
		t.Errorf("client view vs server schema: %v", err)
	}
	// A schema with nothing server-only describes the same classes.
	full := fullSchema(t)
	fv, err := full.ClientView()
	if err != nil {
		t.Fatal(err)
	}
	if len(fv.Classes) != len(full.Classes) {
		t.Errorf("view has %d classes, want %d", len(fv.Classes), len(full.Classes))
	}
}

// fieldNames returns the names of every field of every struct s reaches.
func fieldNames(s *schema.Schema) map[string]bool {
	names := make(map[string]bool)
	seen := make(map[*schema.Struct]bool)
	var visit func(st *schema.Struct)
	var visitType func(t *schema.Type)
	visit = func(st *schema.Struct) {
		if st == nil || seen[st] {
			return
		}
		seen[st] = true
		for _, f := range st.Fields {
			names[f.Name] = true
			visitType(&f.Type)
		}
		for _, r := range st.RPCs {
			visit(r.Args)
		}
	}
	visitType = func(t *schema.Type) {
		visit(t.Struct)
		if t.Elem != nil {
			visitType(t.Elem)
		}
	}
	for _, c := range s.Classes {
		visit(c)
	}
	return names
}
