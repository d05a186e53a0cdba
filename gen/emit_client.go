package gen

import (
	"fmt"
	"go/token"
	"strings"

	"github.com/replicago/replica/schema"
)

// Typed client callbacks. For each class the generated file declares
// functions that register callbacks on a client.Replica with the values
// converted to their Go types and entities, and struct values, passed as
// views (see emit_view.go):
//
//	On<Class>Create(r, func(ClassView)) func()
//	On<Class>Destroy(r, func(ClassView)) func()
//	On<Class>Ownership(r, func(ClassView, owned bool)) func()
//	On<Class><Path>Change(r, func(ClassView, old, new T)) func()                    scalar leaves
//	On<Class><Path>Change(r, func(ClassView, client.ListChange[T])) func()          lists
//	On<Class><Path>Change(r, func(ClassView, client.MapChange[K, V])) func()        maps
//	On<Class><Path>Change(r, func(ClassView, client.BagChange[K, ItemView])) func() bags
//
// where Path is the accessor base names of the fields from the class down
// to the leaf: Hp for field hp, BodyPosX for field x of field pos of field
// body. T and V are view types for struct elements.

// A callbackFunc is one generated typed registration function.
type callbackFunc struct {
	name  string
	class *Struct
	event string  // "Create", "Destroy", "Ownership" or "Change"
	decl  *Struct // Change: the struct that declares f
	f     *Field  // Change: the leaf field
	leaf  int     // Change: the leaf's index in the class
	path  string  // Change: the field names from the class down, "body.pos.x"
}

// callbackFuncs returns the typed callback functions of class c, in the
// order they are generated.
func callbackFuncs(c *Struct) []callbackFunc {
	out := []callbackFunc{
		{name: "On" + c.Name + "Create", class: c, event: "Create"},
		{name: "On" + c.Name + "Destroy", class: c, event: "Destroy"},
		{name: "On" + c.Name + "Ownership", class: c, event: "Ownership"},
	}
	var walk func(s *Struct, base int, method, path string)
	walk = func(s *Struct, base int, method, path string) {
		for _, f := range s.Fields {
			if f.Schema.Deprecated {
				continue
			}
			leaf := base + f.Schema.Leaf
			if f.Schema.Type.Kind == schema.Nested {
				walk(f.Struct, leaf, method+f.Method, path+f.Name+".")
				continue
			}
			if c.Schema.Leaf(leaf).Vis == schema.VisServer {
				continue // never reaches a client: no callback could fire
			}
			out = append(out, callbackFunc{name: "On" + c.Name + method + f.Method + "Change", class: c,
				event: "Change", decl: s, f: f, leaf: leaf, path: path + f.Name})
		}
	}
	walk(c, 0, "", "")
	return out
}

// addCallbackNames adds the names of the typed callback functions to
// names, the generated names of p.
func (p *Package) addCallbackNames(names map[string]*Struct) {
	for _, c := range p.Classes {
		for _, cb := range callbackFuncs(c) {
			names[cb.name] = c
		}
	}
}

// callbackClashes reports typed callback functions that share a name with
// each other or with a generated type.
func (p *Package) callbackClashes() ErrorList {
	var errs ErrorList
	type typ struct {
		what string
		pos  token.Position
	}
	types := map[string]typ{}
	for _, s := range p.Structs {
		types[s.Name] = typ{s.Spec, s.Pos}
	}
	for _, d := range p.structDecls() {
		if !d.fn {
			types[d.name] = typ{d.what(), d.pos()}
		}
	}
	seen := map[string]callbackFunc{}
	for _, c := range p.Classes {
		for _, cb := range callbackFuncs(c) {
			if t, ok := types[cb.name]; ok {
				errs = append(errs, &Error{Pos: t.pos, Msg: fmt.Sprintf(
					"replicagen generates the type %s for %s and the function %s for %s; rename one of them", cb.name, t.what, cb.name, cb.what())})
			}
			if prev, dup := seen[cb.name]; dup {
				errs = append(errs, &Error{Pos: cb.pos(), Msg: fmt.Sprintf(
					"replicagen generates %s both for %s and for %s; rename one of the fields", cb.name, prev.what(), cb.what())})
				continue
			}
			seen[cb.name] = cb
		}
	}
	return errs
}

// what describes what cb reports on, for messages.
func (cb callbackFunc) what() string {
	if cb.f == nil {
		return "class " + cb.class.Spec
	}
	return "field " + cb.class.Spec + "." + cb.path
}

func (cb callbackFunc) pos() token.Position {
	if cb.f == nil {
		return cb.class.Pos
	}
	return cb.f.Pos
}

// callbacks emits the typed callback functions of class c.
func (e *emitter) callbacks(c *Struct) {
	e.imports["client"] = true
	v := viewName(c)
	for _, cb := range callbackFuncs(c) {
		switch cb.event {
		case "Create":
			e.comment(fmt.Sprintf("%s registers fn to run for each new %s in r, with the whole tick applied, and returns a func that unregisters it.", cb.name, c.Name))
			e.f("func %s(r *client.Replica, fn func(%s)) (cancel func()) {\n", cb.name, v)
			e.f("\treturn r.OnCreate(%s, func(e *state.Entity) { fn(%s{e}) })\n}\n\n", schemaVar(c), v)
		case "Destroy":
			e.comment(fmt.Sprintf("%s registers fn to run for each %s destroyed in r, as it was when destroyed, and returns a func that unregisters it.", cb.name, c.Name))
			e.f("func %s(r *client.Replica, fn func(%s)) (cancel func()) {\n", cb.name, v)
			e.f("\treturn r.OnDestroy(%s, func(e *state.Entity) { fn(%s{e}) })\n}\n\n", schemaVar(c), v)
		case "Ownership":
			e.comment(fmt.Sprintf("%s registers fn to run when this client gains (owned is true) or loses ownership of a %s in r, the %ss it owns on joining included, and returns a func that unregisters it.", cb.name, c.Name, c.Name))
			e.f("func %s(r *client.Replica, fn func(p %s, owned bool)) (cancel func()) {\n", cb.name, v)
			e.f("\treturn r.OnOwnership(%s, func(e *state.Entity, owned bool) { fn(%s{e}, owned) })\n}\n\n", schemaVar(c), v)
		default:
			e.changeCallback(cb)
		}
	}
}

func (e *emitter) changeCallback(cb callbackFunc) {
	c, f, s := cb.class, cb.f, cb.decl
	v := viewName(c)
	t := &f.Schema.Type
	switch k := t.Kind; {
	case k.Numeric() || k == schema.String || k == schema.Bytes:
		conv := func(x string) string {
			if k.Numeric() {
				return e.fromNum(t, f.GoType, quantVar(s, f), x+".N")
			}
			return f.GoType + "(" + x + ".S)"
		}
		e.comment(fmt.Sprintf("%s registers fn to run when the %s field of a %s in r changes, with its old and new values, and returns a func that unregisters it. A new %s reports its initial %s, unless it is the value every new %s starts with, as a change from that value.", cb.name, cb.path, c.Name, c.Name, cb.path, c.Name))
		e.f("func %s(r *client.Replica, fn func(p %s, old, new %s)) (cancel func()) {\n", cb.name, v, f.GoType)
		e.f("\treturn r.OnField(%s, %d, func(e *state.Entity, o, n state.Value) {\n", schemaVar(c), cb.leaf)
		e.f("\t\tfn(%s{e}, %s, %s)\n\t})\n}\n\n", v, conv("o"), conv("n"))
	case k == schema.List:
		g := e.elemGoType(f, true)
		ev := "client.ListChange[" + g + "]"
		e.comment(fmt.Sprintf("%s registers fn to run for each change to the %s list of a %s in r, and returns a func that unregisters it. A new %s reports its initial elements as added.", cb.name, cb.path, c.Name, c.Name))
		e.f("func %s(r *client.Replica, fn func(p %s, ev %s)) (cancel func()) {\n", cb.name, v, ev)
		e.f("\treturn r.OnList(%s, %d, func(e *state.Entity, ev client.ListEvent) {\n", schemaVar(c), cb.leaf)
		e.f("\t\tc := %s{Kind: ev.Kind, Index: ev.Index}\n", ev)
		e.elemValues(s, f, t.Elem)
		e.f("\t\tfn(%s{e}, c)\n\t})\n}\n\n", v)
	case k == schema.Map:
		g := e.elemGoType(f, true)
		ev := "client.MapChange[" + f.KeyGoType + ", " + g + "]"
		e.comment(fmt.Sprintf("%s registers fn to run for each change to the %s map of a %s in r, and returns a func that unregisters it. A new %s reports its initial entries as added.", cb.name, cb.path, c.Name, c.Name))
		e.f("func %s(r *client.Replica, fn func(p %s, ev %s)) (cancel func()) {\n", cb.name, v, ev)
		e.f("\treturn r.OnMap(%s, %d, func(e *state.Entity, ev client.MapEvent) {\n", schemaVar(c), cb.leaf)
		e.f("\t\tc := %s{Kind: ev.Kind, Key: %s}\n", ev, e.keyFrom(f, t, "ev.Key"))
		e.elemValues(s, f, t.Elem)
		e.f("\t\tfn(%s{e}, c)\n\t})\n}\n\n", v)
	case k == schema.Bag:
		g := viewName(f.Struct)
		ev := "client.BagChange[" + f.KeyGoType + ", " + g + "]"
		e.comment(fmt.Sprintf("%s registers fn to run for each change to the %s bag of a %s in r, item field changes included, and returns a func that unregisters it. A new %s reports its initial items as added. When one field of an item changed (ItemLeaf ≥ 0), New is the item as the tick left it and Old the same item with that field at its old value, or the zero %s for a list, map or bag field.", cb.name, cb.path, c.Name, c.Name, g))
		e.f("func %s(r *client.Replica, fn func(p %s, ev %s)) (cancel func()) {\n", cb.name, v, ev)
		e.f("\treturn r.OnBag(%s, %d, func(e *state.Entity, ev client.BagEvent) {\n", schemaVar(c), cb.leaf)
		e.f("\t\tc := %s{Kind: ev.Kind, Key: %s(ev.Key), ItemLeaf: ev.ItemLeaf}\n", ev, f.KeyGoType)
		e.f("\t\tif ev.Old.R != nil {\n\t\t\tc.Old = %s{state.ValueOf(ev.Old.R)}\n\t\t}\n", g)
		e.f("\t\tif ev.Kind != client.Removed && ev.Item != nil {\n\t\t\tc.New = %s{state.ValueOf(ev.Item)}\n\t\t}\n", g)
		e.f("\t\tif ev.ItemLeaf >= 0 && ev.Item != nil {\n\t\t\tif h, ok := state.ValueWithLeaf(ev.Item, ev.ItemLeaf, ev.Old); ok {\n\t\t\t\tc.Old = %s{h}\n\t\t\t}\n\t\t}\n", g)
		e.f("\t\tfn(%s{e}, c)\n\t})\n}\n\n", v)
	}
}

// elemValues emits the statements that set c.Old and c.New of a typed
// list or map event from ev, for elements of type t. Where the event has no
// value, the typed one stays the zero value of its Go type (converting the
// zero state.Value would give, for a bounded quantization, its minimum).
func (e *emitter) elemValues(s *Struct, f *Field, t *schema.Type) {
	e.f("\t\tif ev.Kind != client.Added {\n\t\t\tc.Old = %s\n\t\t}\n", e.elemFrom(s, f, t, "ev.Old", true))
	e.f("\t\tif ev.Kind != client.Removed {\n\t\t\tc.New = %s\n\t\t}\n", e.elemFrom(s, f, t, "ev.New", true))
}

// comment emits text as a doc comment wrapped at 80 columns.
func (e *emitter) comment(text string) {
	line := "//"
	for _, w := range strings.Fields(text) {
		if len(line)+1+len(w) > 80 && line != "//" {
			e.f("%s\n", line)
			line = "//"
		}
		line += " " + w
	}
	e.f("%s\n", line)
}
