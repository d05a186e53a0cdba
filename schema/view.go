package schema

// ClientView returns the schema as clients are told it: a copy of s without
// the fields declared server-only, so that a server's WELCOME does not
// reveal their names and types. Their values never leave the server, so
// nothing a client decodes refers to them.
//
// Visibility applies to the fields of entity classes and of the structs
// stored inline in them. A struct that is also a container element, a bag
// item or RPC arguments keeps every field: there its fields take the
// container's visibility, and all of them are sent.
//
// The copy shares no struct with s and is laid out; field IDs, class IDs
// and types are unchanged.
func (s *Schema) ClientView() (*Schema, error) {
	copies := make(map[*Struct]*Struct)
	var copyStruct func(st *Struct) *Struct
	var copyType func(t Type) Type
	copyStruct = func(st *Struct) *Struct {
		if c := copies[st]; c != nil {
			return c
		}
		c := &Struct{Name: st.Name, Class: st.Class, ID: st.ID}
		copies[st] = c
		for _, f := range st.Fields {
			if s.ServerOnly(st, f) {
				continue
			}
			nf := &Field{ID: f.ID, Name: f.Name, Type: copyType(f.Type), Vis: f.Vis, Life: f.Life,
				Chan: f.Chan, Deprecated: f.Deprecated, LOD: f.LOD}
			c.Fields = append(c.Fields, nf)
		}
		for _, r := range st.RPCs {
			c.RPCs = append(c.RPCs, &RPC{ID: r.ID, Name: r.Name, Dir: r.Dir, Args: copyStruct(r.Args)})
		}
		return c
	}
	copyType = func(t Type) Type {
		if t.Struct != nil {
			t.Struct = copyStruct(t.Struct)
		}
		if t.Elem != nil {
			e := copyType(*t.Elem)
			t.Elem = &e
		}
		return t
	}
	classes := make([]*Struct, len(s.Classes))
	for i, c := range s.Classes {
		classes[i] = copyStruct(c)
	}
	return New(classes...)
}

// ServerOnly reports whether field f of struct st never reaches a client:
// f is declared server-only, and st is stored only in entity classes or
// inline in them. Where st is a container element, a bag item or RPC
// arguments, its fields take the container's visibility and all of them
// are sent, so none is server-only.
func (s *Schema) ServerOnly(st *Struct, f *Field) bool { return f.Vis == VisServer && !s.whole[st] }

// sentWhole returns the structs that classes send with every field: those
// that are, or are inside, a container element, a bag item or RPC
// arguments.
func sentWhole(classes []*Struct) map[*Struct]bool {
	// whole: the structs sent with every field, because they are (or are
	// inside) an element, a bag item or RPC arguments; inline: the classes
	// and the structs stored inline in them.
	whole := make(map[*Struct]bool)
	inline := make(map[*Struct]bool)
	// walk visits st, stored inline in a class (or the class itself) or,
	// when sent, in something sent whole.
	var walk func(st *Struct, sent bool)
	walk = func(st *Struct, sent bool) {
		seen := inline
		if sent {
			seen = whole
		}
		if seen[st] {
			return
		}
		seen[st] = true
		for _, f := range st.Fields {
			if f.Type.Kind == Nested {
				walk(f.Type.Struct, sent)
			} else if elem := f.Type.ElemStruct(); elem != nil {
				walk(elem, true)
			}
		}
		for _, r := range st.RPCs {
			walk(r.Args, true)
		}
	}
	for _, c := range classes {
		walk(c, false)
	}
	return whole
}
