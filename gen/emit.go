package gen

import (
	"bytes"
	"fmt"
	"go/format"
	"go/token"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/replicago/replica/schema"
)

// Generate renders the generated file of p. If the result does not parse
// as Go, Generate returns it unformatted together with the error, so that
// it can be inspected.
func (p *Package) Generate() ([]byte, error) {
	if err := p.checkNames(); err != nil {
		return nil, err
	}
	e := &emitter{p: p, imports: map[string]bool{}}
	e.file()
	var out bytes.Buffer
	out.WriteString(GeneratedMarker + "\n\n")
	fmt.Fprintf(&out, "package %s\n\n", p.Name)
	out.WriteString("import (\n")
	for _, imp := range []string{"iter", "math"} {
		if e.imports[imp] {
			fmt.Fprintf(&out, "\t%q\n", imp)
		}
	}
	out.WriteString("\n")
	if e.imports["replica"] {
		out.WriteString("\t\"github.com/replicago/replica\"\n")
	}
	if e.imports["client"] {
		out.WriteString("\t\"github.com/replicago/replica/client\"\n")
	}
	out.WriteString("\t\"github.com/replicago/replica/schema\"\n")
	out.WriteString("\t\"github.com/replicago/replica/state\"\n")
	out.WriteString(")\n\n")
	out.Write(e.buf.Bytes())
	src, err := format.Source(out.Bytes())
	if err != nil {
		return out.Bytes(), fmt.Errorf("replicagen: formatting generated code: %w", err)
	}
	return src, nil
}

// Write generates p's file and, when needed, rewrites the lock file. With
// check set it writes nothing and reports an error if either file would
// change.
func (p *Package) Write(check bool) error {
	src, err := p.Generate()
	if err != nil {
		if src != nil {
			os.WriteFile(p.OutFile, src, 0o644) // unformatted, for debugging
		}
		return err
	}
	old, _ := os.ReadFile(p.OutFile)
	if check {
		var stale []string
		if !bytes.Equal(old, src) {
			stale = append(stale, p.OutFile)
		}
		if p.LockChanged {
			stale = append(stale, p.LockPath)
		}
		if len(stale) > 0 {
			return fmt.Errorf("replicagen: out of date: %s; run go generate", strings.Join(stale, ", "))
		}
		return nil
	}
	if !bytes.Equal(old, src) {
		if err := os.WriteFile(p.OutFile, src, 0o644); err != nil {
			return err
		}
	}
	if p.LockChanged {
		return p.WriteLock()
	}
	return nil
}

// generatedNames returns every top-level name the generated file declares,
// with the struct it belongs to.
func (p *Package) generatedNames() map[string]*Struct {
	names := map[string]*Struct{}
	for _, s := range p.Structs {
		names[s.Name] = s
	}
	for _, d := range p.structDecls() {
		names[d.name] = d.s
	}
	p.addCallbackNames(names)
	p.addRPCNames(names)
	return names
}

// checkNames reports generated names that clash with declarations of the
// package or with each other, and field accessors that clash with methods
// user files declare. (Load reports accessors that clash with each other
// or with the methods every generated type has.)
func (p *Package) checkNames() error {
	var errs ErrorList
	names := p.generatedNames()
	keys := make([]string, 0, len(names))
	for n := range names {
		keys = append(keys, n)
	}
	sort.Strings(keys)
	for _, n := range keys {
		s := names[n]
		if n == s.Name {
			continue // the front end checks the type names themselves
		}
		if p.Types != nil && p.Types.Scope().Lookup(n) != nil {
			errs = append(errs, &Error{Pos: s.Pos, Msg: fmt.Sprintf(
				"replicagen generates %s for %s, but the package already declares %s; rename one of them", n, s.Spec, n)})
		}
	}
	errs = append(errs, p.typeClashes()...)
	errs = append(errs, p.callbackClashes()...)
	errs = append(errs, p.rpcClashes()...)
	errs = append(errs, p.viewClashes()...)
	for _, s := range p.Structs {
		for _, f := range s.Fields {
			if pos, ok := s.UserMethods[f.Method]; ok && !f.Schema.Deprecated {
				errs = append(errs, clash(pos, s.Name, s, f.Method))
			}
			if pos, ok := s.UserMethods["Set"+f.Method]; ok && !f.Schema.Deprecated {
				errs = append(errs, clash(pos, s.Name, s, "Set"+f.Method))
			}
		}
	}
	if len(errs) > 0 {
		sort.Sort(errs)
		return errs
	}
	return nil
}

// typeClashes reports the types and functions generated for spec structs
// and their container fields that share a name: with underscores dropped,
// field base_info of player_stats and field info of player_stats_base both
// give list type PlayerStatsBaseInfoList; spec playerView and the view of
// class player are both PlayerView.
func (p *Package) typeClashes() ErrorList {
	var errs ErrorList
	seen := map[string]string{}
	add := func(name, what string, pos token.Position) {
		if prev, dup := seen[name]; dup {
			errs = append(errs, &Error{Pos: pos, Msg: fmt.Sprintf(
				"replicagen generates %s both for %s and for %s; rename one of them", name, prev, what)})
			return
		}
		seen[name] = what
	}
	for _, s := range p.Structs {
		add(s.Name, "spec "+s.Spec, s.Pos)
	}
	for _, d := range p.structDecls() {
		add(d.name, d.what(), d.pos())
	}
	return errs
}

// clash reports user method m of type typ, which replicagen generates for
// spec s, that is also the name of a field accessor.
func clash(pos token.Position, typ string, s *Struct, m string) *Error {
	return &Error{Pos: pos, Msg: fmt.Sprintf("method %s.%s clashes with the accessor replicagen generates for a field of %s; rename the method", typ, m, s.Spec)}
}

type emitter struct {
	p       *Package
	buf     bytes.Buffer
	imports map[string]bool
}

func (e *emitter) f(format string, args ...any) { fmt.Fprintf(&e.buf, format, args...) }

func schemaVar(s *Struct) string { return "replica" + s.Name }

func quantVar(s *Struct, f *Field) string { return "replica" + s.Name + "_" + f.Name + "Q" }

var kindIdent = map[schema.Kind]string{
	schema.Bool: "Bool", schema.Int8: "Int8", schema.Int16: "Int16", schema.Int32: "Int32",
	schema.Int64: "Int64", schema.Uint8: "Uint8", schema.Uint16: "Uint16", schema.Uint32: "Uint32",
	schema.Uint64: "Uint64", schema.Float32: "Float32", schema.Float64: "Float64",
	schema.String: "String", schema.Bytes: "Bytes", schema.Ref: "Ref", schema.Nested: "Nested",
	schema.List: "List", schema.Map: "Map", schema.Bag: "Bag",
}

var visIdent = map[schema.Visibility]string{schema.VisServer: "VisServer", schema.VisOwner: "VisOwner", schema.VisOthers: "VisOthers", schema.VisAll: "VisAll"}
var lifeIdent = map[schema.Lifetime]string{schema.LifeSession: "LifeSession", schema.LifeScene: "LifeScene", schema.LifeProcess: "LifeProcess", schema.LifePersist: "LifePersist"}
var chanIdent = map[schema.Channel]string{schema.Reliable: "Reliable", schema.Unreliable: "Unreliable"}

func float(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }

func quantLit(q schema.Quant) string {
	if q.Bounded {
		return fmt.Sprintf("schema.Quant{Step: %s, Min: %s, Bits: %d, Bounded: true}", float(q.Step), float(q.Min), q.Bits)
	}
	return fmt.Sprintf("schema.Quant{Step: %s}", float(q.Step))
}

// quantOf returns the quantization that applies to a field's values or
// elements.
func quantOf(f *Field) schema.Quant {
	t := &f.Schema.Type
	if t.Elem != nil {
		return t.Elem.Quant
	}
	return t.Quant
}

func (e *emitter) typeLit(t *schema.Type, s *Struct, f *Field) string {
	var b strings.Builder
	fmt.Fprintf(&b, "schema.Type{Kind: schema.%s", kindIdent[t.Kind])
	if t.Quant.Enabled() {
		fmt.Fprintf(&b, ", Quant: %s", quantVar(s, f))
	}
	if t.Kind == schema.Map || t.Kind == schema.Bag {
		fmt.Fprintf(&b, ", Key: schema.%s", kindIdent[t.Key])
	}
	if t.Struct != nil {
		fmt.Fprintf(&b, ", Struct: replica%s", t.Struct.Name)
	}
	if t.Elem != nil {
		fmt.Fprintf(&b, ", Elem: &%s", e.typeLit(t.Elem, s, f))
	}
	b.WriteString("}")
	return b.String()
}

func (e *emitter) file() {
	p := e.p
	e.f("// Schema returns the replicated classes of package %s.\n", p.Name)
	e.f("func Schema() *schema.Schema { return replicaSchema }\n\n")
	e.f("var (\n")
	for _, s := range p.Structs {
		e.f("\t%s = new(schema.Struct)\n", schemaVar(s))
	}
	for _, s := range p.Structs {
		for _, f := range s.Fields {
			if q := quantOf(f); q.Enabled() {
				e.f("\t%s = %s\n", quantVar(s, f), quantLit(q))
			}
		}
	}
	e.f("\treplicaSchema = replicaInit()\n)\n\n")

	e.f("func replicaInit() *schema.Schema {\n")
	for _, s := range p.Structs {
		e.f("\t*%s = schema.Struct{Name: %q", schemaVar(s), s.Name)
		if s.Class() {
			e.f(", Class: true, ID: %d", s.Schema.ID)
		}
		e.f(", Fields: []*schema.Field{\n")
		for _, f := range s.Fields {
			sf := f.Schema
			e.f("\t\t{ID: %d, Name: %q, Type: %s, Vis: schema.%s, Life: schema.%s, Chan: schema.%s",
				sf.ID, sf.Name, e.typeLit(&sf.Type, s, f), visIdent[sf.Vis], lifeIdent[sf.Life], chanIdent[sf.Chan])
			if sf.Pos != schema.AxisNone {
				e.f(", Pos: schema.%s", map[schema.Axis]string{schema.AxisX: "AxisX", schema.AxisY: "AxisY"}[sf.Pos])
			}
			if sf.LOD != 0 {
				e.f(", LOD: %s", strconv.FormatFloat(sf.LOD, 'g', -1, 64))
			}
			if sf.Deprecated {
				e.f(", Deprecated: true")
			}
			e.f("},\n")
		}
		e.f("\t}")
		if len(s.RPCs) > 0 {
			e.f(", RPCs: []*schema.RPC{\n")
			rpcs := slices.Clone(s.RPCs)
			slices.SortFunc(rpcs, func(a, b *RPC) int { return cmpID(a.Schema.ID, b.Schema.ID) })
			for _, r := range rpcs {
				dir := "ClientToServer"
				if r.Dir == schema.ServerToClient {
					dir = "ServerToClient"
				}
				e.f("\t\t{ID: %d, Name: %q, Dir: schema.%s, Args: %s},\n", r.Schema.ID, r.Name, dir, schemaVar(r.Args))
			}
			e.f("\t}")
		}
		e.f("}\n")
	}
	e.f("\ts, err := schema.New(")
	for i, c := range p.Classes {
		if i > 0 {
			e.f(", ")
		}
		e.f("%s", schemaVar(c))
	}
	e.f(")\n\tif err != nil {\n\t\tpanic(\"replicagen: generated schema does not lay out: \" + err.Error())\n\t}\n\treturn s\n}\n\n")

	for _, s := range p.Structs {
		e.structType(s)
		if p.hasView(s) {
			e.viewType(s)
		}
		if s.Class() {
			e.callbacks(s)
			e.rpcs(s)
		}
	}
}

// recv describes how a generated type reaches its fields.
type recv struct {
	name   string // receiver name
	typ    string
	num    string // format of a numeric slot read, with %d for the slot
	str    string // format of an object slot read
	handle string // expression of the state.Handle
	setNum string // expression whose SetNum(leaf, v) sets a numeric field
	view   bool   // a client view: getters of view types, no setters
}

func (e *emitter) structType(s *Struct) {
	doc := s.Doc
	if rest, ok := strings.CutPrefix(doc, s.Spec+" "); ok {
		doc = s.Name + " " + rest // the doc describes the spec by its own name
	}
	if doc == "" {
		doc = fmt.Sprintf("%s is generated from the spec %s.\n", s.Name, s.Spec)
	}
	for _, line := range strings.Split(strings.TrimRight(doc, "\n"), "\n") {
		e.f("// %s\n", strings.TrimRight(line, " "))
	}
	var r recv
	if s.Class() {
		e.f("//\n")
		e.comment(fmt.Sprintf("Clients see a %[1]s as a %[1]sView: read-only, without the fields that never reach them.", s.Name))
		e.f("type %s struct{ e *state.Entity }\n\n", s.Name)
		e.f("// Spawn%[1]s creates a %[1]s with every field at its zero value in tr and\n// records its creation in the current tick.\n", s.Name)
		e.f("func Spawn%[1]s(tr *state.Tracker) (%[1]s, error) {\n\te, err := tr.Spawn(%[2]s)\n\treturn %[1]s{e}, err\n}\n\n", s.Name, schemaVar(s))
		e.comment(fmt.Sprintf("%[1]sClass returns the %[1]s class of Schema(), for what takes a class: replica.Server's Load and Restore.", s.Name))
		e.f("func %[1]sClass() *schema.Struct { return %[2]s }\n\n", s.Name, schemaVar(s))
		e.comment(fmt.Sprintf("%[1]sOf returns e as a %[1]s; ok is false if e is nil, of another class or an entity of a client replica, which clients read with %[1]sViewOf.", s.Name))
		e.f("func %[1]sOf(e *state.Entity) (v %[1]s, ok bool) {\n\tif e == nil || e.Class() != %[2]s || e.ReadOnly() {\n\t\treturn v, false\n\t}\n\treturn %[1]s{e}, true\n}\n\n", s.Name, schemaVar(s))
		e.f("// Entity returns the underlying entity.\nfunc (p %s) Entity() *state.Entity { return p.e }\n\n", s.Name)
		e.f("// ID returns the network ID.\nfunc (p %s) ID() state.ID { return p.e.ID() }\n\n", s.Name)
		e.comment(fmt.Sprintf("Valid reports whether p refers to an entity that was not destroyed: it is false for the zero %[1]s and once its tracker destroyed the entity. Getters of an invalid %[1]s return the zero value or, after a destroy, the last values; its setters panic (see state.ErrInvalidHandle).", s.Name))
		e.f("func (p %s) Valid() bool { return p.e.Valid() }\n\n", s.Name)
		r = recv{name: "p", typ: s.Name, num: "p.e.Num(%d)", str: "p.e.Str(%d)", handle: "p.e.Handle()", setNum: "p.e"}
	} else {
		if s.RPC != nil {
			e.f("//\n")
			e.comment(rpcDoc(s.RPC))
		} else {
			doc := fmt.Sprintf("%s %s is a handle: a field of an entity, an item of a bag, or a detached value made by New%s.", article(s.Name), s.Name, s.Name)
			if e.p.hasView(s) {
				doc += fmt.Sprintf(" Clients see %s %s as %s %s.", strings.ToLower(article(s.Name)), s.Name, strings.ToLower(article(s.Name)), viewName(s))
			}
			e.f("//\n")
			e.comment(doc)
		}
		e.f("type %s struct{ h state.Handle }\n\n", s.Name)
		if s.RPC != nil {
			e.f("// New%[1]s returns a detached %[1]s with every argument at its zero value.\n", s.Name)
		} else {
			e.f("// New%[1]s returns a detached %[1]s with every field at its zero value, to\n// store into a list, map, bag or nested field.\n", s.Name)
		}
		e.f("func New%[1]s() %[1]s { return %[1]s{state.NewValue(%[2]s)} }\n\n", s.Name, schemaVar(s))
		e.f("// Clone returns a detached copy of v.\nfunc (v %[1]s) Clone() %[1]s { return %[1]s{v.h.Copy(%[2]s)} }\n\n", s.Name, schemaVar(s))
		e.f("// Valid reports whether v refers to a value that writes reach: it is\n// false for the zero %[1]s, for a bag item removed from its bag (or\n// replaced) and for a value in a destroyed entity. Getters of an invalid\n// %[1]s return the zero value or, once it went stale, the last values; its\n// setters panic (see state.ErrInvalidHandle).\nfunc (v %[1]s) Valid() bool { return v.h.Valid() }\n\n", s.Name)
		r = recv{name: "v", typ: s.Name, num: "v.h.Num(%d)", str: "v.h.Str(%d)", handle: "v.h", setNum: "v.h"}
	}
	for _, f := range s.Fields {
		if !f.Schema.Deprecated {
			e.field(s, f, r)
		}
	}
}

// fieldDoc writes an accessor's doc comment: the generated first sentence,
// then the field's own comment, if it has one, as a paragraph.
func (e *emitter) fieldDoc(s *Struct, f *Field, first string) {
	e.f("// %s\n", first)
	if doc := strings.TrimRight(f.Doc, "\n"); doc != "" {
		e.f("//\n")
		for _, line := range strings.Split(doc, "\n") {
			e.f("// %s\n", strings.TrimRight(line, " "))
		}
	}
	if e.p.Schema.ServerOnly(s.Schema, f.Schema) {
		e.f("//\n")
		if e.p.hasView(s) {
			e.comment(fmt.Sprintf("The field is server-only: clients never receive it, and %s has no getter for it.", viewName(s)))
		} else {
			e.f("// The field is server-only: clients never receive it.\n")
		}
	}
}

func (e *emitter) field(s *Struct, f *Field, r recv) {
	sf := f.Schema
	t := &sf.Type
	leaf, num, obj := sf.Leaf, sf.Num, sf.Obj
	switch k := t.Kind; {
	case k.Numeric():
		e.fieldDoc(s, f, fmt.Sprintf("%s returns the %s field.", f.Method, f.Name))
		read := fmt.Sprintf(r.num, num)
		e.f("func (%s %s) %s() %s { return %s }\n\n", r.name, r.typ, f.Method, f.GoType, e.fromNum(t, f.GoType, quantVar(s, f), read))
		if !r.view {
			e.f("// Set%s sets the %s field.\n", f.Method, f.Name)
			e.f("func (%s %s) Set%s(x %s) { %s.SetNum(%d, %s) }\n\n", r.name, r.typ, f.Method, f.GoType, r.setNum, leaf, e.plain(t, "x"))
		}
	case k == schema.String || k == schema.Bytes:
		e.fieldDoc(s, f, fmt.Sprintf("%s returns the %s field.", f.Method, f.Name))
		e.f("func (%s %s) %s() %s { return %s(%s) }\n\n", r.name, r.typ, f.Method, f.GoType, f.GoType, fmt.Sprintf(r.str, obj))
		if !r.view {
			e.f("// Set%s sets the %s field.\n", f.Method, f.Name)
			e.f("func (%s %s) Set%s(x %s) { %s.SetStr(%d, string(x)) }\n\n", r.name, r.typ, f.Method, f.GoType, r.handle, leaf)
		}
	case k == schema.Nested:
		if r.view {
			n := viewName(f.Struct)
			e.fieldDoc(s, f, fmt.Sprintf("%s returns the %s field.", f.Method, f.Name))
			e.f("func (%s %s) %s() %s { return %s{%s.Nested(%d, %d, %d)} }\n\n", r.name, r.typ, f.Method, n, n, r.handle, leaf, num, obj)
			break
		}
		n := f.Struct.Name
		e.fieldDoc(s, f, fmt.Sprintf("%s returns the %s field; setters on the result change this %s.", f.Method, f.Name, s.Name))
		e.f("func (%s %s) %s() %s { return %s{%s.Nested(%d, %d, %d)} }\n\n", r.name, r.typ, f.Method, n, n, r.handle, leaf, num, obj)
		e.f("// Set%s copies every field of x into the %s field.\n", f.Method, f.Name)
		e.f("func (%s %s) Set%s(x %s) { %s.SetNested(%d, %s, x.h) }\n\n", r.name, r.typ, f.Method, n, r.handle, leaf, schemaVar(f.Struct))
	case k.Container():
		w := containerName(s, f)
		if r.view {
			w += "View"
		}
		what := map[schema.Kind]string{schema.List: "list", schema.Map: "map", schema.Bag: "bag"}[k]
		e.fieldDoc(s, f, fmt.Sprintf("%s returns the %s %s.", f.Method, f.Name, what))
		e.f("func (%s %s) %s() %s { return %s{%s.%s(%d)} }\n\n", r.name, r.typ, f.Method, w, w, r.handle, kindIdent[k], leaf)
		switch k {
		case schema.List:
			e.list(s, f, w, r.view)
		case schema.Map:
			e.mapType(s, f, w, r.view)
		case schema.Bag:
			e.bag(s, f, w, r.view)
		}
	}
}

// plain returns the expression of the plain uint64 representation of the
// Go value x of numeric type t (see state.Normalize).
func (e *emitter) plain(t *schema.Type, x string) string {
	switch k := t.Kind; {
	case k == schema.Bool:
		return "state.BoolBits(bool(" + x + "))"
	case k.Signed():
		return "uint64(int64(" + x + "))"
	case k == schema.Float32:
		e.imports["math"] = true
		return "uint64(math.Float32bits(float32(" + x + ")))"
	case k == schema.Float64:
		e.imports["math"] = true
		return "math.Float64bits(float64(" + x + "))"
	}
	return "uint64(" + x + ")"
}

// fromNum returns the expression converting a stored numeric slot value to
// the Go type goType.
func (e *emitter) fromNum(t *schema.Type, goType, q, x string) string {
	if strings.HasPrefix(goType, "replica.") {
		e.imports["replica"] = true
	}
	switch t.Kind {
	case schema.Bool:
		return goType + "(" + x + " != 0)"
	case schema.Float32, schema.Float64:
		if t.Quant.Enabled() {
			return goType + "(" + q + ".Dequantize(int64(" + x + ")))"
		}
		e.imports["math"] = true
		if t.Kind == schema.Float32 {
			return goType + "(math.Float32frombits(uint32(" + x + ")))"
		}
		return goType + "(math.Float64frombits(" + x + "))"
	}
	return goType + "(" + x + ")"
}

// elemFrom returns the expression converting state.Value x to the element
// Go type of field f, the view type for struct elements when view is set;
// elemTo the reverse.
func (e *emitter) elemFrom(s *Struct, f *Field, t *schema.Type, x string, view bool) string {
	switch {
	case t.Kind == schema.Nested:
		return e.elemGoType(f, view) + "{state.ValueOf(" + x + ".R)}"
	case t.Kind.Numeric():
		return e.fromNum(t, f.GoType, quantVar(s, f), x+".N")
	}
	return f.GoType + "(" + x + ".S)"
}

func (e *emitter) elemTo(f *Field, t *schema.Type, x string) string {
	switch {
	case t.Kind == schema.Nested:
		return x + ".h.Elem(" + schemaVar(f.Struct) + ")"
	case t.Kind.Numeric():
		return "state.Value{N: " + e.plain(t, x) + "}"
	}
	return "state.Value{S: string(" + x + ")}"
}

// elemGoType returns the Go type of the elements of container field f:
// the struct's type, or its view type when view is set, for structs.
func (e *emitter) elemGoType(f *Field, view bool) string {
	switch {
	case f.Struct != nil && view:
		return viewName(f.Struct)
	case f.Struct != nil:
		return f.Struct.Name
	}
	return f.GoType
}

// containerDoc writes the doc comment of container type w, the field f
// of s, which is a list, map or bag (what) and, for a view, read-only.
func (e *emitter) containerDoc(s *Struct, f *Field, w, what, rest string, view bool) {
	if view {
		e.comment(fmt.Sprintf("%s is the %s %s of %s %s, read-only.", w, f.Name, what, strings.ToLower(article(s.Name)), viewName(s)))
		return
	}
	e.f("// %s is the %s %s of %s %s%s\n", w, f.Name, what, strings.ToLower(article(s.Name)), s.Name, rest)
}

func (e *emitter) list(s *Struct, f *Field, w string, view bool) {
	t := f.Schema.Type.Elem
	g := e.elemGoType(f, view)
	e.imports["iter"] = true
	e.containerDoc(s, f, w, "list", "."+replicates(s), view)
	e.f("type %s struct{ l state.ListHandle }\n\n", w)
	e.f("// Len returns the number of elements.\nfunc (l %s) Len() int { return l.l.Len() }\n\n", w)
	copyNote := ""
	if t.Kind == schema.Nested {
		copyNote = " It is a copy: store changes with Set."
		if view {
			copyNote = " It is a copy, which later updates do not change."
		}
	}
	e.f("// At returns element i.%s\nfunc (l %s) At(i int) %s { return %s }\n\n", copyNote, w, g, e.elemFrom(s, f, t, "l.l.At(i)", view))
	e.f("// All iterates over the elements in order.\nfunc (l %s) All() iter.Seq2[int, %s] {\n", w, g)
	e.f("\treturn func(yield func(int, %s) bool) {\n\t\tfor i := 0; i < l.l.Len(); i++ {\n\t\t\tif !yield(i, l.At(i)) {\n\t\t\t\treturn\n\t\t\t}\n\t\t}\n\t}\n}\n\n", g)
	if view {
		return
	}
	e.f("// Push appends x.\nfunc (l %s) Push(x %s) { l.l.Push(%s) }\n\n", w, g, e.elemTo(f, t, "x"))
	e.f("// Insert inserts x at index i.\nfunc (l %s) Insert(i int, x %s) { l.l.Insert(i, %s) }\n\n", w, g, e.elemTo(f, t, "x"))
	e.f("// Set replaces element i with x.\nfunc (l %s) Set(i int, x %s) { l.l.Set(i, %s) }\n\n", w, g, e.elemTo(f, t, "x"))
	e.f("// Remove removes element i.\nfunc (l %s) Remove(i int) { l.l.Remove(i) }\n\n", w)
	e.f("// Clear removes every element.\nfunc (l %s) Clear() { l.l.Clear() }\n\n", w)
}

// keyTo returns the expression of the normalized state.Value of key x.
func (e *emitter) keyTo(t *schema.Type, h, x string) string {
	if t.Key == schema.String {
		return "state.Value{S: string(" + x + ")}"
	}
	return h + ".Key(" + e.plain(&schema.Type{Kind: t.Key}, x) + ")"
}

func (e *emitter) keyFrom(f *Field, t *schema.Type, x string) string {
	if t.Key == schema.String {
		return f.KeyGoType + "(" + x + ".S)"
	}
	return f.KeyGoType + "(" + x + ".N)"
}

func (e *emitter) mapType(s *Struct, f *Field, w string, view bool) {
	t := &f.Schema.Type
	g := e.elemGoType(f, view)
	k := f.KeyGoType
	e.imports["iter"] = true
	e.containerDoc(s, f, w, "map", "."+replicates(s), view)
	e.f("type %s struct{ m state.MapHandle }\n\n", w)
	e.f("// Len returns the number of entries.\nfunc (m %s) Len() int { return m.m.Map().Len() }\n\n", w)
	copyNote := ""
	if t.Elem.Kind == schema.Nested {
		copyNote = " A struct value is a copy: store changes with Put."
		if view {
			copyNote = " A struct value is a copy, which later updates do not change."
		}
	}
	e.f("// Get returns the value of key k.%s\nfunc (m %s) Get(k %s) (v %s, ok bool) {\n", copyNote, w, k, g)
	e.f("\tx, ok := m.m.Map().Get(%s)\n\tif !ok {\n\t\treturn v, false\n\t}\n\treturn %s, true\n}\n\n", e.keyTo(t, "m.m", "k"), e.elemFrom(s, f, t.Elem, "x", view))
	if !view {
		e.f("// Put sets the value of key k.\nfunc (m %s) Put(k %s, x %s) { m.m.Put(%s, %s) }\n\n", w, k, g, e.keyTo(t, "m.m", "k"), e.elemTo(f, t.Elem, "x"))
		e.f("// Delete removes key k.\nfunc (m %s) Delete(k %s) { m.m.Delete(%s) }\n\n", w, k, e.keyTo(t, "m.m", "k"))
		e.f("// Clear removes every key.\nfunc (m %s) Clear() { m.m.Clear() }\n\n", w)
	}
	e.f("// All iterates over the entries in ascending key order.\nfunc (m %s) All() iter.Seq2[%s, %s] {\n", w, k, g)
	e.f("\treturn func(yield func(%s, %s) bool) {\n\t\tfor _, key := range m.m.Map().Keys(nil) {\n", k, g)
	e.f("\t\t\tx, _ := m.m.Map().Get(key)\n\t\t\tif !yield(%s, %s) {\n\t\t\t\treturn\n\t\t\t}\n\t\t}\n\t}\n}\n\n", e.keyFrom(f, t, "key"), e.elemFrom(s, f, t.Elem, "x", view))
}

func (e *emitter) bag(s *Struct, f *Field, w string, view bool) {
	t := &f.Schema.Type
	g := e.elemGoType(f, view)
	k := f.KeyGoType
	e.imports["iter"] = true
	switch {
	case view:
		e.containerDoc(s, f, w, "bag", "", true)
	case s.RPC != nil:
		e.f("// %s is the %s bag of %s %s: items keyed by ID.\n", w, f.Name, strings.ToLower(article(s.Name)), s.Name)
	default:
		e.f("// %s is the %s bag of a %s: items keyed by ID, where changing one\n// field of one item replicates only that field.\n", w, f.Name, s.Name)
	}
	e.f("type %s struct{ b state.BagHandle }\n\n", w)
	e.f("// Len returns the number of items.\nfunc (b %s) Len() int { return b.b.Bag().Len() }\n\n", w)
	if view {
		e.f("// Get returns item k, which shows the later updates of its fields.\n")
	} else {
		e.f("// Get returns item k; setters on it replicate.\n")
	}
	e.f("func (b %s) Get(k %s) (%s, bool) {\n", w, k, g)
	e.f("\th := b.b.Get(b.b.Key(%s))\n\treturn %s{h}, h.Valid()\n}\n\n", e.plain(&schema.Type{Kind: t.Key}, "k"), g)
	if !view {
		e.f("// Add stores a copy of x under key k, replacing any item there, and\n// returns the stored item.\n")
		e.f("func (b %s) Add(k %s, x %s) %s { return %s{b.b.Add(b.b.Key(%s), x.h.Copy(%s))} }\n\n", w, k, g, g, g, e.plain(&schema.Type{Kind: t.Key}, "k"), schemaVar(f.Struct))
		e.f("// Remove removes item k.\nfunc (b %s) Remove(k %s) { b.b.Remove(b.b.Key(%s)) }\n\n", w, k, e.plain(&schema.Type{Kind: t.Key}, "k"))
	}
	e.f("// All iterates over the items in ascending key order.\nfunc (b %s) All() iter.Seq2[%s, %s] {\n", w, k, g)
	e.f("\treturn func(yield func(%s, %s) bool) {\n\t\tfor _, key := range b.b.Bag().Keys(nil) {\n", k, g)
	e.f("\t\t\tif !yield(%s(key), %s{b.b.Get(key)}) {\n\t\t\t\treturn\n\t\t\t}\n\t\t}\n\t}\n}\n\n", k, g)
}

// replicates is the sentence container docs end with: changes to the
// containers of an entity replicate, those of RPC arguments do not.
func replicates(s *Struct) string {
	if s.RPC != nil {
		return ""
	}
	return " Every change replicates."
}

// article returns the indefinite article for name.
func article(name string) string {
	if name != "" && strings.ContainsRune("AEIOU", rune(name[0])) {
		return "An"
	}
	return "A"
}
