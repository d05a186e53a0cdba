package gen

import (
	"fmt"
	"go/token"
	"strings"

	"github.com/replicago/replica/schema"
)

// Client views. Clients read entities through view types rather than
// through the types the server writes with. For class player, for every
// struct a client reaches from a class and for their container fields, the
// generated file declares
//
//	type PlayerView struct{ e *state.Entity }
//	func PlayerViewOf(e *state.Entity) (PlayerView, bool)
//	type ItemView struct{ h state.Handle }
//	type PlayerInvBagView struct{ b state.BagHandle }
//
// A view has getters, and no setters, for the fields that reach a client:
// those neither deprecated nor server-only (schema.Schema.ServerOnly). Its
// nested structs are views and its lists, maps and bags read-only. Typed
// client callbacks and the client side of RPCs pass views.

// viewName returns the name of the view type of s.
func viewName(s *Struct) string { return s.Name + "View" }

// containerName returns the name of the type replicagen generates for
// container field f of s, or "" when f is not a list, map or bag.
func containerName(s *Struct, f *Field) string {
	suffix := map[schema.Kind]string{schema.List: "List", schema.Map: "Map", schema.Bag: "Bag"}[f.Schema.Type.Kind]
	if suffix == "" {
		return ""
	}
	return s.Name + f.Method + suffix
}

// clientField reports whether the view of s has a getter for f: whether
// f is neither deprecated nor server-only.
func (p *Package) clientField(s *Struct, f *Field) bool {
	return !f.Schema.Deprecated && !p.Schema.ServerOnly(s.Schema, f.Schema)
}

// hasView reports whether replicagen generates a view of s: whether s is
// a class, or a struct that a client field of a struct with a view holds
// (as nested struct, element or bag item). Structs only RPC arguments or
// server-only fields hold have none.
func (p *Package) hasView(s *Struct) bool {
	if p.views == nil {
		p.views = map[*Struct]bool{}
		var walk func(s *Struct)
		walk = func(s *Struct) {
			if p.views[s] {
				return
			}
			p.views[s] = true
			for _, f := range s.Fields {
				if f.Struct != nil && p.clientField(s, f) {
					walk(f.Struct)
				}
			}
		}
		for _, c := range p.Classes {
			walk(c)
		}
	}
	return p.views[s]
}

// A genDecl is a type or function that the generated file declares for a
// spec struct or one of its fields, besides the type named after the spec.
type genDecl struct {
	name string
	fn   bool    // a function rather than a type
	s    *Struct // the struct it is generated for
	f    *Field  // the container field a list, map or bag type is for
}

// what describes what d is generated for, for messages: "class player",
// "spec item", "field player.inv".
func (d genDecl) what() string {
	switch {
	case d.f != nil:
		return "field " + d.s.Spec + "." + d.f.Name
	case d.s.Class():
		return "class " + d.s.Spec
	}
	return "spec " + d.s.Spec
}

// kind is "type" or "function".
func (d genDecl) kind() string {
	if d.fn {
		return "function"
	}
	return "type"
}

func (d genDecl) pos() token.Position {
	if d.f != nil {
		return d.f.Pos
	}
	return d.s.Pos
}

// structDecls returns the types and functions generated for the spec
// structs and their fields, other than the types named after the specs:
// Spawn and Of of classes, New of other structs, the container types, the
// views, their container types and the Of of class views.
func (p *Package) structDecls() []genDecl {
	var out []genDecl
	for _, s := range p.Structs {
		if s.Class() {
			out = append(out, genDecl{name: "Spawn" + s.Name, fn: true, s: s}, genDecl{name: s.Name + "Of", fn: true, s: s},
				genDecl{name: s.Name + "Class", fn: true, s: s})
		} else {
			out = append(out, genDecl{name: "New" + s.Name, fn: true, s: s})
		}
		for _, f := range s.Fields {
			if w := containerName(s, f); w != "" && !f.Schema.Deprecated {
				out = append(out, genDecl{name: w, s: s, f: f})
			}
		}
		if !p.hasView(s) {
			continue
		}
		out = append(out, genDecl{name: viewName(s), s: s})
		if s.Class() {
			out = append(out, genDecl{name: viewName(s) + "Of", fn: true, s: s})
		}
		for _, f := range s.Fields {
			if w := containerName(s, f); w != "" && p.clientField(s, f) {
				out = append(out, genDecl{name: w + "View", s: s, f: f})
			}
		}
	}
	return out
}

// viewType emits the view type of s and its accessors.
func (e *emitter) viewType(s *Struct) {
	v := viewName(s)
	var r recv
	if s.Class() {
		e.comment(fmt.Sprintf("%s is %s %s as clients see it: read-only (only the server's updates change it), with getters for the fields that reach clients and none for server-only fields. Typed callbacks pass %ss, and %sOf makes one of an entity.",
			v, strings.ToLower(article(s.Name)), s.Name, v, v))
		e.f("type %s struct{ e *state.Entity }\n\n", v)
		e.comment(fmt.Sprintf("%[1]sOf returns e as a %[1]s; ok is false if e is nil or of another class.", v))
		e.f("func %[1]sOf(e *state.Entity) (v %[1]s, ok bool) {\n\tif e == nil || e.Class() != %[2]s {\n\t\treturn v, false\n\t}\n\treturn %[1]s{e}, true\n}\n\n", v, schemaVar(s))
		e.f("// Entity returns the underlying entity.\nfunc (p %s) Entity() *state.Entity { return p.e }\n\n", v)
		e.f("// ID returns the network ID.\nfunc (p %s) ID() state.ID { return p.e.ID() }\n\n", v)
		e.comment(fmt.Sprintf("Valid reports whether p refers to an entity that was not destroyed: it is false for the zero %[1]s and once a tick destroyed the entity. Getters of an invalid %[1]s return the zero value or, after a destroy, the last values.", v))
		e.f("func (p %s) Valid() bool { return p.e.Valid() }\n\n", v)
		e.comment(fmt.Sprintf("IsOwned reports whether this client owns p, as the server said. It is false for a %s of a server's entity: the server tells owners with Server.Owner.", v))
		e.f("func (p %s) IsOwned() bool { return p.e.Owned() }\n\n", v)
		r = recv{name: "p", typ: v, num: "p.e.Num(%d)", str: "p.e.Str(%d)", handle: "p.e.Handle()", view: true}
	} else {
		e.comment(fmt.Sprintf("%s is %s %s as clients see it: read-only, with getters for the fields that reach clients. It is a field of an entity or an item of a bag, or a copy that a typed callback or a list or map getter returns.",
			v, strings.ToLower(article(s.Name)), s.Name))
		e.f("type %s struct{ h state.Handle }\n\n", v)
		e.comment(fmt.Sprintf("Valid reports whether v refers to a value: it is false for the zero %[1]s, for a bag item removed from its bag (or replaced) and for a value in a destroyed entity. Getters of an invalid %[1]s return the zero value or, once it went stale, the last values.", v))
		e.f("func (v %s) Valid() bool { return v.h.Valid() }\n\n", v)
		r = recv{name: "v", typ: v, num: "v.h.Num(%d)", str: "v.h.Str(%d)", handle: "v.h", view: true}
	}
	for _, f := range s.Fields {
		if e.p.clientField(s, f) {
			e.field(s, f, r)
		}
	}
}

// viewClashes reports the getters of views that clash with methods user
// files declare on the view types.
func (p *Package) viewClashes() ErrorList {
	var errs ErrorList
	for _, s := range p.Structs {
		if !p.hasView(s) {
			continue
		}
		for _, f := range s.Fields {
			if pos, ok := s.ViewMethods[f.Method]; ok && p.clientField(s, f) {
				errs = append(errs, clash(pos, viewName(s), s, f.Method))
			}
		}
	}
	return errs
}
