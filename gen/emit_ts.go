package gen

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/replicago/replica/schema"
)

// TypeScript output (replicagen -ts). From the same spec structs,
// GenerateTS renders <package>_replica.ts: typed read-only classes over the
// TypeScript runtime's entities (package @replicago/replica, ts/ in this
// repository), for a browser or Node client:
//
//	export const schema: Schema                       the package's schema, from its embedded descriptor
//	export class Player extends StructView {          one class per class and struct a client reads
//	  static readonly classId: number
//	  static of(e: Entity | undefined): Player | undefined
//	  static all(r: Replica): Player[]
//	  get entity(): Entity
//	  get owned(): boolean                              whether this client owns it (the Go view's IsOwned)
//	  get hp(): number                                  getters named after the fields (base_info → baseInfo)
//	  get pos(): Vec                                    nested structs as views
//	  get inv(): TypedMap<number, Item>                 lists, maps and bags typed and read-only
//	  static onCreate(r, fn: (p: Player) => void): Unregister
//	  static onDestroy / onOwnership / onLevel
//	  static onHpChange(r, fn: (p: Player, old: number, now: number) => void): Unregister
//	  static onInvChange(r, fn: (p: Player, ev: TypedBagEvent<number, Item>) => void): Unregister
//	  fire(conn: Connection, x: number, y: number): void   client→server RPCs
//	  static onHit(conn: Connection, fn: (p: Player, damage: number) => void): Unregister   server→client RPCs
//	}
//
// The class and leaf layout comes from the embedded descriptor; when the
// module loads it checks every leaf it reads against it, so generated code
// never reads the wrong slot. Values have the runtime's JS types: numbers,
// BigInts for 64-bit integers, booleans, strings and Uint8Arrays.

// TSOptions configure GenerateTS and WriteTS.
type TSOptions struct {
	// Import is the module the generated file imports the runtime from;
	// "" means "@replicago/replica".
	Import string
	// Dir is the directory WriteTS writes the file to (replicagen
	// -tsout), relative to the package directory unless absolute; ""
	// means the package directory. A game's npm project is the place:
	// there its TypeScript compiler resolves the runtime's package, and
	// compiles the file as the project's other modules. WriteTS creates
	// no directory.
	Dir string
}

// TSFile returns the path of the TypeScript file replicagen -ts writes:
// <Name>_replica.ts in opts.Dir, relative to the package directory.
func (p *Package) TSFile(opts TSOptions) string {
	dir := opts.Dir
	if !filepath.IsAbs(dir) {
		dir = filepath.Join(p.Dir, dir)
	}
	return filepath.Join(dir, p.Name+"_replica.ts")
}

// WriteTS generates p's TypeScript file (TSFile). With check set it writes
// nothing and reports an error if the file would change.
func (p *Package) WriteTS(check bool, opts TSOptions) error {
	src, err := p.GenerateTS(opts)
	if err != nil {
		return err
	}
	out := p.TSFile(opts)
	old, _ := os.ReadFile(out)
	if bytes.Equal(old, src) {
		return nil
	}
	if check {
		return fmt.Errorf("replicagen: out of date: %s; run go generate", out)
	}
	if fi, err := os.Stat(filepath.Dir(out)); err != nil || !fi.IsDir() {
		return fmt.Errorf("replicagen: -tsout: %s is not a directory", filepath.Dir(out))
	}
	return os.WriteFile(out, src, 0o644)
}

// tsReserved are names a generated class member may not take: the
// members every class has and those of Object.prototype.
var tsReserved = map[string]bool{
	"entity": true, "constructor": true, "toString": true, "valueOf": true, "hasOwnProperty": true,
	"isPrototypeOf": true, "propertyIsEnumerable": true, "toLocaleString": true, "__proto__": true,
}

// tsKeywords are the reserved words of TypeScript that are not Go
// keywords, so a spec name may be one; parameters named so get a suffix.
var tsKeywords = map[string]bool{
	"await": true, "catch": true, "class": true, "delete": true, "do": true, "enum": true, "export": true,
	"extends": true, "false": true, "finally": true, "function": true, "implements": true, "in": true,
	"instanceof": true, "let": true, "new": true, "null": true, "private": true, "protected": true,
	"public": true, "static": true, "super": true, "this": true, "throw": true, "true": true, "try": true,
	"typeof": true, "void": true, "while": true, "with": true, "yield": true, "arguments": true, "eval": true,
	"conn": true, "fn": true, "args": true,
}

// tsName is the name of the getter of field f: its accessor base name with
// the first letter lower-cased (hp, baseInfo, userID).
func tsName(f *Field) string { return lowerFirst(f.Method) }

func tsParam(f *Field) string {
	n := tsName(f)
	if tsKeywords[n] {
		n += "_"
	}
	return n
}

// tsGetter reports whether the TypeScript class of s has a getter for f.
func (p *Package) tsGetter(s *Struct, f *Field) bool {
	if f.Schema.Deprecated {
		return false
	}
	if p.hasView(s) {
		return p.clientField(s, f)
	}
	return true // RPC arguments, and structs only server-only fields hold, are read whole
}

// tsScalarType is the TypeScript type of values of scalar kind k.
func tsScalarType(k schema.Kind) string {
	switch k {
	case schema.Bool:
		return "boolean"
	case schema.Int64, schema.Uint64:
		return "bigint"
	case schema.String:
		return "string"
	case schema.Bytes:
		return "Uint8Array"
	}
	return "number"
}

// tsElemType is the TypeScript type of an element of type t.
func tsElemType(t *schema.Type) string {
	if t.Kind == schema.Nested {
		return t.Struct.Name
	}
	return tsScalarType(t.Kind)
}

// leafNames returns the dotted field names of st's leaves, in leaf order,
// as the TypeScript runtime names them.
func leafNames(st *schema.Struct) []string {
	out := make([]string, st.Leaves)
	for i := range out {
		l := st.Leaf(i)
		cur := st
		var parts []string
		for _, id := range l.Path {
			f := cur.Field(id)
			parts = append(parts, f.Name)
			cur = f.Type.Struct
		}
		out[i] = strings.Join(parts, ".")
	}
	return out
}

type tsEmitter struct {
	p   *Package
	buf bytes.Buffer
}

func (e *tsEmitter) f(format string, args ...any) { fmt.Fprintf(&e.buf, format, args...) }

// tsStructVar is the module constant holding the runtime's StructType of s.
func tsStructVar(s *Struct) string { return s.Name + "$" }

// tsLeafVar is the module constant holding the LeafRef of leaf i of s.
func tsLeafVar(s *Struct, f *Field) string { return s.Name + "$" + f.Name }

// GenerateTS renders the TypeScript file of p (see TSOptions).
func (p *Package) GenerateTS(opts TSOptions) ([]byte, error) {
	if err := p.checkNames(); err != nil {
		return nil, err
	}
	if err := p.tsClashes(); err != nil {
		return nil, err
	}
	imp := opts.Import
	if imp == "" {
		imp = "@replicago/replica"
	}
	e := &tsEmitter{p: p}
	e.f("%s\n", GeneratedMarker)
	e.f("// Typed classes for the replicated classes of Go package %s (%s),\n", p.Name, p.ImportPath)
	e.f("// generated by replicagen -ts from its spec structs.\n\n")
	e.f("/* eslint-disable */\n")
	e.f("import {\n\tStructView, TypedList, TypedMap, schemaFromBase64, structsOf, structNamed, leafRef, nestedAt, elemConv,\n")
	e.f("\tlistEvent, mapEvent, bagEvent, isClassOf,\n")
	e.f("\ttype Connection, type Entity, type Rec, type Replica, type Schema, type StructType, type Elem,\n")
	e.f("\ttype TypedListEvent, type TypedMapEvent, type TypedBagEvent, type Unregister,\n")
	e.f("} from %q;\n\n", imp)

	desc := p.Schema.AppendDescriptor(nil)
	e.f("/** The descriptor (docs/protocol.md §3) of package %s's schema, base64. */\n", p.Name)
	e.f("export const DESCRIPTOR = %q;\n\n", base64.StdEncoding.EncodeToString(desc))
	e.f("/** The schema of package %s: pass it to new Replica(schema) or Connection.connect({ schema }). */\n", p.Name)
	e.f("export const schema: Schema = schemaFromBase64(DESCRIPTOR);\n\n")
	e.f("const structs$ = structsOf(schema);\n")
	for _, s := range p.Structs {
		e.f("const %s: StructType = structNamed(structs$, %q);\n", tsStructVar(s), s.Name)
	}
	e.f("\n")
	for _, s := range p.Structs {
		names := leafNames(s.Schema)
		for _, f := range s.Fields {
			if !p.tsGetter(s, f) {
				continue
			}
			switch {
			case f.Schema.Type.Kind == schema.Nested:
				e.f("const %s = nestedAt(%s, %d, %q);\n", tsLeafVar(s, f), tsStructVar(s), f.Schema.Leaf, f.Name)
			default:
				e.f("const %s = leafRef(%s, %d, %q);\n", tsLeafVar(s, f), tsStructVar(s), f.Schema.Leaf, names[f.Schema.Leaf])
			}
			if t := &f.Schema.Type; (t.Kind == schema.List || t.Kind == schema.Map) && t.Elem.Kind != schema.Nested {
				e.f("const %s$c = elemConv(%s, %d);\n", tsLeafVar(s, f), tsStructVar(s), f.Schema.Leaf)
			}
		}
	}
	e.f("\n")
	for _, s := range p.Structs {
		e.class(s)
	}
	return e.buf.Bytes(), nil
}

// tsClashes reports generated TypeScript names that collide: class
// members with each other or with the members every class has, and
// module-level names.
func (p *Package) tsClashes() error {
	var errs ErrorList
	top := map[string]string{"schema": "the schema", "DESCRIPTOR": "the descriptor"}
	addTop := func(name, what string, s *Struct) {
		if prev, dup := top[name]; dup {
			errs = append(errs, &Error{Pos: s.Pos, Msg: fmt.Sprintf("replicagen -ts generates %s both for %s and for %s; rename one of them", name, prev, what)})
			return
		}
		top[name] = what
	}
	for _, s := range p.Structs {
		addTop(s.Name, "spec "+s.Spec, s)
		inst := map[string]string{}
		static := map[string]string{}
		add := func(m map[string]string, name, what string, f *Field) {
			pos := s.Pos
			if f != nil {
				pos = f.Pos
			}
			if prev, dup := m[name]; dup {
				errs = append(errs, &Error{Pos: pos, Msg: fmt.Sprintf("replicagen -ts generates %s.%s both for %s and for %s; rename one of them", s.Name, name, prev, what)})
				return
			}
			m[name] = what
		}
		if s.Class() {
			for _, n := range []string{"classId", "of", "all", "onCreate", "onDestroy", "onOwnership", "onLevel"} {
				static[n] = "every class"
			}
			inst["owned"] = "every class" // (entity, which every struct's class would have, is in tsReserved)
		}
		for _, f := range s.Fields {
			if !p.tsGetter(s, f) {
				continue
			}
			if n := tsName(f); tsReserved[n] {
				errs = append(errs, &Error{Pos: f.Pos, Msg: fmt.Sprintf("replicagen -ts: field %s.%s would have the getter %s, which every generated class has; rename the field", s.Spec, f.Name, n)})
			} else {
				add(inst, n, "field "+f.Name, f)
			}
		}
		if !s.Class() {
			continue
		}
		for _, cb := range callbackFuncs(s) {
			if cb.f != nil {
				add(static, tsCallbackName(cb), "field "+cb.path, cb.f)
			}
		}
		for _, r := range s.RPCs {
			if r.Dir == schema.ClientToServer {
				add(inst, lowerFirst(r.Method), "RPC "+r.Name, nil)
			} else {
				add(static, "on"+r.Method, "RPC "+r.Name, nil)
			}
			if !r.Positional() {
				addTop(r.Method+"Args", "RPC "+r.Name, s)
			}
		}
	}
	if len(errs) > 0 {
		return errs.sort()
	}
	return nil
}

// tsCallbackName is the static method name of a field change callback:
// onHpChange, onBodyPosXChange.
func tsCallbackName(cb callbackFunc) string {
	return "on" + strings.TrimPrefix(cb.name, "On"+cb.class.Name)
}

func (e *tsEmitter) doc(indent, text string) {
	line := indent + "/**"
	for _, w := range strings.Fields(text) {
		if len(line)+1+len(w) > 100 && strings.TrimSpace(line) != "/**" && strings.TrimSpace(line) != "*" {
			e.f("%s\n", line)
			line = indent + " *"
		}
		line += " " + w
	}
	e.f("%s */\n", line)
}

func (e *tsEmitter) class(s *Struct) {
	p := e.p
	doc := strings.TrimSpace(s.Doc)
	if rest, ok := strings.CutPrefix(doc, s.Spec+" "); ok {
		doc = s.Name + " " + rest
	}
	switch {
	case s.Class():
		doc = strings.TrimSpace(doc + fmt.Sprintf(" A read-only view of %s %s entity of a client replica (class ID %d).", strings.ToLower(article(s.Name)), s.Name, s.Schema.ID))
	case s.RPC != nil:
		doc = strings.TrimSpace(doc + fmt.Sprintf(" The arguments of RPC %s of %s, as a handler reads them.", s.RPC.Name, s.RPC.Class.Name))
	default:
		doc = strings.TrimSpace(doc + fmt.Sprintf(" A read-only view of %s %s value.", strings.ToLower(article(s.Name)), s.Name))
	}
	e.doc("", doc)
	e.f("export class %s extends StructView {\n", s.Name)
	sv := tsStructVar(s)
	if s.Class() {
		e.f("\tstatic readonly classId = %d;\n\n", s.Schema.ID)
		e.f("\t/** The class in the runtime's schema. */\n\tstatic get cls(): StructType {\n\t\treturn %s;\n\t}\n\n", sv)
		e.f("\t/** The %[1]s view of e, or undefined when e is not a %[1]s of this schema. */\n", s.Name)
		e.f("\tstatic of(e: Entity | undefined): %s | undefined {\n\t\treturn isClassOf(e, %s) ? new %s(e) : undefined;\n\t}\n\n", s.Name, sv, s.Name)
		e.f("\t/** Every %s of r, in ascending slot order. */\n", s.Name)
		e.f("\tstatic all(r: Replica): %s[] {\n\t\treturn r.entities().filter((e) => isClassOf(e, %s)).map((e) => new %s(e));\n\t}\n\n", s.Name, sv, s.Name)
		e.f("\t/** The entity. */\n\tget entity(): Entity {\n\t\treturn this.rec$ as Entity;\n\t}\n\n")
		e.f("\t/** Whether this client owns the %s, as of the last tick applied: its client RPCs may be called (the Go view's IsOwned). */\n", s.Name)
		e.f("\tget owned(): boolean {\n\t\treturn this.entity.owned;\n\t}\n\n")
	}
	for _, f := range s.Fields {
		if p.tsGetter(s, f) {
			e.getter(s, f)
		}
	}
	if s.Class() {
		e.classCallbacks(s)
		e.classRPCs(s)
	}
	e.f("}\n\n")
	if s.Class() {
		for _, r := range s.RPCs {
			if !r.Positional() {
				e.argsInterface(r)
			}
		}
	}
}

func (e *tsEmitter) fieldDoc(f *Field, first string) {
	text := first
	if d := strings.TrimSpace(f.Doc); d != "" {
		text += " " + strings.Join(strings.Fields(d), " ")
	}
	e.doc("\t", text)
}

// elemConv returns the expression converting an element of container
// field f to its TypeScript value, and whether elements are structs.
func (e *tsEmitter) elemConv(s *Struct, f *Field) (string, bool) {
	t := &f.Schema.Type
	if t.Kind == schema.Bag || t.Elem.Kind == schema.Nested {
		return fmt.Sprintf("(v: Elem) => new %s(v as Rec)", f.Struct.Name), true
	}
	return tsLeafVar(s, f) + "$c", false
}

func tsKeyType(k schema.Kind) string { return tsScalarType(k) }

func (e *tsEmitter) getter(s *Struct, f *Field) {
	t := &f.Schema.Type
	lv := tsLeafVar(s, f)
	n := tsName(f)
	switch k := t.Kind; {
	case k.Numeric():
		e.fieldDoc(f, fmt.Sprintf("Field %s (%s).", f.Name, t.String()))
		e.f("\tget %s(): %s {\n\t\treturn this.n$(%s);\n\t}\n\n", n, tsScalarType(k), lv)
	case k == schema.String || k == schema.Bytes:
		e.fieldDoc(f, fmt.Sprintf("Field %s (%s).", f.Name, t.String()))
		e.f("\tget %s(): %s {\n\t\treturn this.o$(%s);\n\t}\n\n", n, tsScalarType(k), lv)
	case k == schema.Nested:
		e.fieldDoc(f, fmt.Sprintf("Field %s, a %s stored inline.", f.Name, f.Struct.Name))
		e.f("\tget %s(): %s {\n\t\treturn this.s$(%s, %s);\n\t}\n\n", n, f.Struct.Name, f.Struct.Name, lv)
	case k == schema.List:
		conv, _ := e.elemConv(s, f)
		typ := fmt.Sprintf("TypedList<%s>", tsElemType(t.Elem))
		e.fieldDoc(f, fmt.Sprintf("Field %s (%s), read-only.", f.Name, t.String()))
		e.f("\tget %s(): %s {\n\t\treturn new TypedList(this.o$(%s), %s);\n\t}\n\n", n, typ, lv, conv)
	case k == schema.Map || k == schema.Bag:
		conv, _ := e.elemConv(s, f)
		v := f.Struct
		vt := ""
		if k == schema.Bag {
			vt = v.Name
		} else {
			vt = tsElemType(t.Elem)
		}
		typ := fmt.Sprintf("TypedMap<%s, %s>", tsKeyType(t.Key), vt)
		e.fieldDoc(f, fmt.Sprintf("Field %s (%s), read-only, keys in ascending order.", f.Name, t.String()))
		e.f("\tget %s(): %s {\n\t\treturn new TypedMap(this.o$(%s), %s);\n\t}\n\n", n, typ, lv, conv)
	}
}

func (e *tsEmitter) classCallbacks(c *Struct) {
	n := c.Name
	sv := tsStructVar(c)
	e.f("\t/** Runs fn for each new %s of r, with the whole tick applied. Returns a function that unregisters it. */\n", n)
	e.f("\tstatic onCreate(r: Replica, fn: (p: %[1]s) => void): Unregister {\n\t\treturn r.onCreate(%[2]s, (e) => fn(new %[1]s(e)));\n\t}\n\n", n, sv)
	e.f("\t/** Runs fn for each %s destroyed in r, as it was when destroyed. */\n", n)
	e.f("\tstatic onDestroy(r: Replica, fn: (p: %[1]s) => void): Unregister {\n\t\treturn r.onDestroy(%[2]s, (e) => fn(new %[1]s(e)));\n\t}\n\n", n, sv)
	e.f("\t/** Runs fn when this client gains (owned) or loses ownership of a %s. */\n", n)
	e.f("\tstatic onOwnership(r: Replica, fn: (p: %[1]s, owned: boolean) => void): Unregister {\n\t\treturn r.onOwnership(%[2]s, (e, owned) => fn(new %[1]s(e), owned));\n\t}\n\n", n, sv)
	e.f("\t/** Runs fn when the level of detail a %s is held at changes (0..nbands, nbands: every band). */\n", n)
	e.f("\tstatic onLevel(r: Replica, fn: (p: %[1]s, old: number, now: number) => void): Unregister {\n\t\treturn r.onLevel(%[2]s, (e, old, now) => fn(new %[1]s(e), old, now));\n\t}\n\n", n, sv)
	for _, cb := range callbackFuncs(c) {
		if cb.f == nil {
			continue
		}
		f, t := cb.f, &cb.f.Schema.Type
		name := tsCallbackName(cb)
		switch k := t.Kind; {
		case k.Numeric() || k == schema.String || k == schema.Bytes:
			typ := tsScalarType(k)
			e.doc("\t", fmt.Sprintf("Runs fn when field %s of a %s changes, with its old and new values. A new %s reports its initial value, unless zero, as a change from zero.", cb.path, n, n))
			e.f("\tstatic %s(r: Replica, fn: (p: %s, old: %s, now: %s) => void): Unregister {\n", name, n, typ, typ)
			e.f("\t\treturn r.onField(%s, %d, (e, o, v) => fn(new %s(e), o as %s, v as %s));\n\t}\n\n", sv, cb.leaf, n, typ, typ)
		case k == schema.List:
			conv, structs := e.elemConv(cb.decl, f)
			typ := tsElemType(t.Elem)
			e.doc("\t", fmt.Sprintf("Runs fn for each change to list %s of a %s. A new %s reports its initial elements as added.", cb.path, n, n))
			e.f("\tstatic %s(r: Replica, fn: (p: %s, ev: TypedListEvent<%s>) => void): Unregister {\n", name, n, typ)
			e.f("\t\treturn r.onList(%s, %d, (e, ev) => fn(new %s(e), listEvent(ev, %s, %v)));\n\t}\n\n", sv, cb.leaf, n, tsConvOf(conv, structs), structs)
		case k == schema.Map:
			conv, structs := e.elemConv(cb.decl, f)
			kt, vt := tsKeyType(t.Key), tsElemType(t.Elem)
			e.doc("\t", fmt.Sprintf("Runs fn for each change to map %s of a %s. A new %s reports its initial entries as added.", cb.path, n, n))
			e.f("\tstatic %s(r: Replica, fn: (p: %s, ev: TypedMapEvent<%s, %s>) => void): Unregister {\n", name, n, kt, vt)
			e.f("\t\treturn r.onMap(%s, %d, (e, ev) => fn(new %s(e), mapEvent(ev, %s, %v)));\n\t}\n\n", sv, cb.leaf, n, tsConvOf(conv, structs), structs)
		case k == schema.Bag:
			kt, vt := tsKeyType(t.Key), f.Struct.Name
			e.doc("\t", fmt.Sprintf("Runs fn for each change to bag %s of a %s, item field changes included. A new %s reports its initial items as added.", cb.path, n, n))
			e.f("\tstatic %s(r: Replica, fn: (p: %s, ev: TypedBagEvent<%s, %s>) => void): Unregister {\n", name, n, kt, vt)
			e.f("\t\treturn r.onBag(%s, %d, (e, ev) => fn(new %s(e), bagEvent(ev, (v: Rec) => new %s(v))));\n\t}\n\n", sv, cb.leaf, n, vt)
		}
	}
}

// tsConvOf returns conv for struct elements and an identity for scalar
// ones, whose events already carry converted values.
func tsConvOf(conv string, structs bool) string {
	if structs {
		return conv
	}
	return "(v: any) => v"
}

func (e *tsEmitter) classRPCs(c *Struct) {
	rpcs := slices.Clone(c.RPCs)
	slices.SortFunc(rpcs, func(a, b *RPC) int { return cmpID(a.Schema.ID, b.Schema.ID) })
	for _, r := range rpcs {
		params := r.Params()
		if r.Dir == schema.ClientToServer {
			var sig, obj []string
			for _, f := range params {
				sig = append(sig, fmt.Sprintf("%s: %s", tsParam(f), tsScalarType(f.Schema.Type.Kind)))
				obj = append(obj, fmt.Sprintf("%q: %s", f.Name, tsParam(f)))
			}
			e.doc("\t", fmt.Sprintf("Calls client RPC %s (ID %d) on this %s, which this client must own, over conn. The server runs it at its next tick.", r.Name, r.Schema.ID, c.Name))
			if r.Positional() {
				e.f("\t%s(conn: Connection%s): void {\n", lowerFirst(r.Method), joinPrefixed(sig))
				e.f("\t\tconn.callRPC(this.entity, %d, { %s });\n\t}\n\n", r.Schema.ID, strings.Join(obj, ", "))
			} else {
				e.f("\t%s(conn: Connection, args: %sArgs): void {\n", lowerFirst(r.Method), r.Method)
				e.f("\t\tconn.callRPC(this.entity, %d, args as Record<string, unknown>);\n\t}\n\n", r.Schema.ID)
			}
			continue
		}
		e.doc("\t", fmt.Sprintf("Runs fn for each server RPC %s (ID %d) on a %s that conn's replica holds. Returns a function that unregisters it.", r.Name, r.Schema.ID, c.Name))
		if r.Positional() {
			var sig, vals []string
			for _, f := range params {
				sig = append(sig, fmt.Sprintf("%s: %s", tsParam(f), tsScalarType(f.Schema.Type.Kind)))
				vals = append(vals, "a."+tsName(f))
			}
			e.f("\tstatic on%s(conn: Connection, fn: (p: %s%s) => void): Unregister {\n", r.Method, c.Name, joinPrefixed(sig))
			e.f("\t\treturn conn.handleRPC(%s, %d, (e, args) => {\n\t\t\tconst a = new %s(args);\n\t\t\tfn(new %s(e)%s);\n\t\t});\n\t}\n\n",
				tsStructVar(c), r.Schema.ID, r.Args.Name, c.Name, joinPrefixed(vals))
		} else {
			e.f("\tstatic on%s(conn: Connection, fn: (p: %s, args: %s) => void): Unregister {\n", r.Method, c.Name, r.Args.Name)
			e.f("\t\treturn conn.handleRPC(%s, %d, (e, args) => fn(new %s(e), new %s(args)));\n\t}\n\n", tsStructVar(c), r.Schema.ID, c.Name, r.Args.Name)
		}
	}
}

func joinPrefixed(xs []string) string {
	if len(xs) == 0 {
		return ""
	}
	return ", " + strings.Join(xs, ", ")
}

// argsInterface emits the argument object of a client RPC that is not
// positional: scalars typed, structs and containers as the runtime's
// encodeRecord takes them (objects, arrays, Maps).
func (e *tsEmitter) argsInterface(r *RPC) {
	e.doc("", fmt.Sprintf("The arguments of RPC %s of %s, by field name; absent ones are zero.", r.Name, r.Class.Name))
	e.f("export interface %sArgs {\n", r.Method)
	for _, f := range r.Args.Fields {
		if f.Schema.Deprecated {
			continue
		}
		typ := "unknown"
		if k := f.Schema.Type.Kind; k.Numeric() || k == schema.String || k == schema.Bytes {
			typ = tsScalarType(k)
		}
		e.f("\t%q?: %s;\n", f.Name, typ)
	}
	e.f("}\n\n")
}
