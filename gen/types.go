package gen

import (
	"errors"
	"fmt"
	"go/ast"
	"go/types"
	"slices"
	"strings"

	"github.com/replicago/replica/schema"
)

// typeError is a problem with a field's Go type.
type typeError struct{ msg string }

func (e *typeError) Error() string { return e.msg }

func typeErrorf(format string, args ...any) error {
	return &typeError{fmt.Sprintf(format, args...)}
}

// fieldType converts the type of a spec field (the first of the names of
// af) to a schema type and applies the type-related tag options. It
// reports errors itself; ok is false after an error.
func (l *loader) fieldType(s *Struct, name string, af *ast.Field, tg *tag) (typ schema.Type, goType, keyGoType string, sub *Struct, ok bool) {
	t := l.info.TypeOf(af.Type)
	var err error
	if t == nil {
		err = errUnresolved
	} else {
		typ, goType, keyGoType, sub, err = l.convField(t, tg.bag)
	}
	if err != nil {
		if errors.Is(err, errUnresolved) {
			l.unresolved(name, af.Type)
		} else {
			l.errorf(af.Type.Pos(), "field %s: %s", name, err)
		}
		return typ, "", "", nil, false
	}
	if tg.bag && typ.Kind != schema.Bag {
		// convField reported nothing: the type is not a map.
		l.errorf(af.Type.Pos(), "field %s: bag applies only to maps of structs, but %s is %s", name, name, l.typeString(t))
		return typ, "", "", nil, false
	}
	if tg.quantKey != "" {
		target := &typ
		if typ.Kind == schema.List || typ.Kind == schema.Map {
			target = typ.Elem
		}
		if target.Kind != schema.Float32 && target.Kind != schema.Float64 {
			l.errorf(af.Tag.Pos(), "field %s: %s= applies only to float32 and float64 fields and to lists and maps of them, but %s is %s",
				name, tg.quantKey, name, l.typeString(t))
			return typ, "", "", nil, false
		}
		q, err := tg.quant()
		if err != nil {
			l.errorf(af.Tag.Pos(), "field %s: bad quantization: %s", name, err)
			return typ, "", "", nil, false
		}
		if target == typ.Elem {
			elem := *typ.Elem
			elem.Quant = q
			typ.Elem = &elem
		} else {
			typ.Quant = q
		}
	}
	return typ, goType, keyGoType, sub, true
}

// convField converts the Go type of a field.
func (l *loader) convField(t types.Type, bag bool) (typ schema.Type, goType, keyGoType string, sub *Struct, err error) {
	switch u := types.Unalias(t).(type) {
	case *types.Slice:
		if isByte(u.Elem()) {
			return schema.Type{Kind: schema.Bytes}, "[]byte", "", nil, nil
		}
		elem, goType, sub, err := l.convElem(u.Elem(), "list")
		if err != nil {
			return typ, "", "", nil, err
		}
		return schema.Type{Kind: schema.List, Elem: &elem}, goType, "", sub, nil
	case *types.Map:
		key, keyGoType, _, err := l.convScalar(u.Key())
		if err != nil {
			return typ, "", "", nil, err
		}
		if bag {
			if !key.Kind.ValidKey() || key.Kind == schema.String {
				return typ, "", "", nil, typeErrorf("bag keys must be integers, but the keys are %s", l.typeString(u.Key()))
			}
			elem, _, sub, err := l.convElem(u.Elem(), "bag")
			if err != nil {
				return typ, "", "", nil, err
			}
			if sub == nil {
				return typ, "", "", nil, typeErrorf("bag items must be a struct type declared in this package, but the values are %s; drop bag for a map of scalars",
					l.typeString(u.Elem()))
			}
			_ = elem
			return schema.Type{Kind: schema.Bag, Key: key.Kind, Struct: sub.Schema}, "", keyGoType, sub, nil
		}
		if !key.Kind.ValidKey() {
			return typ, "", "", nil, typeErrorf("map keys must be integers or strings, but the keys are %s", l.typeString(u.Key()))
		}
		elem, goType, sub, err := l.convElem(u.Elem(), "map")
		if err != nil {
			return typ, "", "", nil, err
		}
		return schema.Type{Kind: schema.Map, Key: key.Kind, Elem: &elem}, goType, keyGoType, sub, nil
	}
	typ, goType, sub, err = l.convScalar(t)
	return typ, goType, "", sub, err
}

// convElem converts the element type of a list or map, or the item type
// of a bag.
func (l *loader) convElem(t types.Type, container string) (schema.Type, string, *Struct, error) {
	switch u := types.Unalias(t).(type) {
	case *types.Slice:
		if isByte(u.Elem()) {
			return schema.Type{Kind: schema.Bytes}, "[]byte", nil, nil
		}
		return schema.Type{}, "", nil, typeErrorf("unsupported type %s: a %s cannot hold lists; wrap the inner list in a struct, for example type row struct { items %s }",
			l.typeString(t), container, l.typeString(t))
	case *types.Map:
		return schema.Type{}, "", nil, typeErrorf("unsupported type %s: a %s cannot hold maps; wrap the inner map in a struct, for example type row struct { items %s }",
			l.typeString(t), container, l.typeString(t))
	}
	return l.convScalar(t)
}

// convScalar converts a scalar or nested struct type.
func (l *loader) convScalar(t types.Type) (schema.Type, string, *Struct, error) {
	ts := l.typeString(t)
	switch u := types.Unalias(t).(type) {
	case *types.Basic:
		k, err := basicKind(u, ts)
		return schema.Type{Kind: k}, ts, nil, err
	case *types.Named:
		obj := u.Obj()
		if obj.Pkg() == nil {
			return schema.Type{}, "", nil, typeErrorf("unsupported type %s: interfaces cannot be replicated; use a concrete type", ts)
		}
		if obj.Pkg().Path() == replicaPath && obj.Name() == "Ref" {
			return schema.Type{Kind: schema.Ref}, ts, nil, nil
		}
		if obj.Pkg() != l.pkg.Types {
			switch u.Underlying().(type) {
			case *types.Struct:
				return schema.Type{}, "", nil, typeErrorf("unsupported type %s: structs from other packages cannot be replicated; declare an unexported struct type in this package with the fields to replicate", ts)
			case *types.Basic:
				return schema.Type{}, "", nil, typeErrorf("unsupported type %s: named types from other packages cannot be replicated; use its underlying type %s, or declare a named type in this package",
					ts, l.typeString(u.Underlying()))
			}
			return schema.Type{}, "", nil, typeErrorf("unsupported type %s: types from other packages cannot be replicated", ts)
		}
		if u.TypeArgs().Len() > 0 || u.TypeParams().Len() > 0 {
			return schema.Type{}, "", nil, typeErrorf("unsupported type %s: generic types cannot be replicated", ts)
		}
		switch under := u.Underlying().(type) {
		case *types.Basic:
			if under.Kind() == types.Invalid {
				return schema.Type{}, "", nil, errUnresolved
			}
			if td := l.decls[obj]; td != nil && l.isRef(td.spec.Type) {
				return schema.Type{Kind: schema.Ref}, ts, nil, nil
			}
			k, err := basicKind(under, ts+" (underlying type "+under.Name()+")")
			return schema.Type{Kind: k}, ts, nil, err
		case *types.Struct:
			sub, err := l.nested(obj)
			if err != nil {
				return schema.Type{}, "", nil, err
			}
			return schema.Type{Kind: schema.Nested, Struct: sub.Schema}, "", sub, nil
		case *types.Slice, *types.Map:
			return schema.Type{}, "", nil, typeErrorf("unsupported type %s: named slice and map types cannot be replicated; write the type %s itself",
				ts, l.typeString(under))
		}
		return schema.Type{}, "", nil, typeErrorf("unsupported type %s (underlying type %s): %s", ts, l.typeString(u.Underlying()), hintFor(u.Underlying()))
	case *types.Struct:
		return schema.Type{}, "", nil, typeErrorf("unsupported type %s: declare a named unexported struct type for it", ts)
	default:
		return schema.Type{}, "", nil, typeErrorf("unsupported type %s: %s", ts, hintFor(u))
	}
}

// hintFor explains how to replace an unsupported type.
func hintFor(t types.Type) string {
	switch t := t.(type) {
	case *types.Basic:
		if t.Kind() == types.Invalid {
			return "it does not resolve"
		}
		_, err := basicKind(t, "")
		if err != nil {
			_, hint, _ := strings.Cut(err.Error(), ": ")
			return hint
		}
	case *types.Pointer:
		return "pointers cannot be replicated; store the value inline, or use replica.Ref to refer to an entity"
	case *types.Array:
		return "arrays cannot be replicated; use a slice or a struct with one field per element"
	case *types.Chan:
		return "channels cannot be replicated; tag the field replica:\"-\" to leave it out"
	case *types.Signature:
		return "functions cannot be replicated; tag the field replica:\"-\" to leave it out"
	case *types.Interface:
		return "interfaces cannot be replicated; use a concrete type"
	case *types.Slice:
		return "use a list field of a struct type"
	case *types.Map:
		return "use a map field of a struct type"
	}
	return "this type cannot be replicated"
}

// basicKind maps a basic Go type to its kind; name is how messages call
// the type.
func basicKind(b *types.Basic, name string) (schema.Kind, error) {
	switch b.Kind() {
	case types.Bool:
		return schema.Bool, nil
	case types.Int8:
		return schema.Int8, nil
	case types.Int16:
		return schema.Int16, nil
	case types.Int32:
		return schema.Int32, nil
	case types.Int64:
		return schema.Int64, nil
	case types.Uint8:
		return schema.Uint8, nil
	case types.Uint16:
		return schema.Uint16, nil
	case types.Uint32:
		return schema.Uint32, nil
	case types.Uint64:
		return schema.Uint64, nil
	case types.Float32:
		return schema.Float32, nil
	case types.Float64:
		return schema.Float64, nil
	case types.String:
		return schema.String, nil
	case types.Int:
		return schema.Invalid, typeErrorf("unsupported type %s: its size depends on the platform; use a sized integer such as int32", name)
	case types.Uint:
		return schema.Invalid, typeErrorf("unsupported type %s: its size depends on the platform; use a sized unsigned integer such as uint32", name)
	case types.Uintptr:
		return schema.Invalid, typeErrorf("unsupported type %s: use a sized unsigned integer such as uint64", name)
	case types.Complex64, types.Complex128:
		return schema.Invalid, typeErrorf("unsupported type %s: store the real and imaginary parts in two float fields or a small struct", name)
	case types.UnsafePointer:
		return schema.Invalid, typeErrorf("unsupported type %s: pointers cannot be replicated", name)
	case types.Invalid:
		return schema.Invalid, errUnresolved
	}
	return schema.Invalid, typeErrorf("unsupported type %s", name)
}

// isByte reports whether t is byte (uint8), not a named type over it.
func isByte(t types.Type) bool {
	b, ok := types.Unalias(t).(*types.Basic)
	return ok && b.Kind() == types.Uint8
}

// isRef reports whether the type expression e denotes replica.Ref.
func (l *loader) isRef(e ast.Expr) bool {
	n, ok := types.Unalias(l.info.TypeOf(e)).(*types.Named)
	return ok && n.Obj().Pkg() != nil && n.Obj().Pkg().Path() == replicaPath && n.Obj().Name() == "Ref"
}

// typeString writes t as the package would: its own types unqualified,
// others qualified by package name.
func (l *loader) typeString(t types.Type) string {
	return types.TypeString(t, func(p *types.Package) string {
		if p == l.pkg.Types {
			return ""
		}
		return p.Name()
	})
}

// nested returns the nested spec declared by obj, creating it on first use.
func (l *loader) nested(obj *types.TypeName) (*Struct, error) {
	td := l.decls[obj]
	if s := l.specs[obj]; s != nil && s.Schema.Class || td != nil && td.class {
		return nil, typeErrorf("entity class %s cannot be nested; use replica.Ref to refer to an entity", obj.Name())
	}
	if td != nil && td.rpc {
		return nil, typeErrorf("%s is the argument struct of RPC %s on %s and cannot also be a field type; declare a struct type of its own for the field",
			obj.Name(), obj.Name(), td.rpcClass)
	}
	if s := l.specs[obj]; s != nil {
		return s, nil
	}
	name := obj.Name()
	switch {
	case obj.Exported():
		return nil, typeErrorf("nested struct type %s must be unexported: replicagen generates the exported type %s from it; rename it to %s",
			name, name, lowerFirst(name))
	case !startsLower(name):
		return nil, typeErrorf("nested struct type name %s must start with a lower-case letter, so that replicagen can name the generated type by upper-casing it", name)
	case td == nil:
		return nil, typeErrorf("struct type %s must be declared at package level", name)
	}
	if _, ok := td.spec.Type.(*ast.StructType); !ok {
		return nil, typeErrorf("nested struct type %s must be declared with a struct literal, as in type %s struct { ... }", name, name)
	}
	return l.newStruct(td, false), nil
}

// unresolved reports a field type that did not type-check, with the type
// checker's message when there is one inside the type expression.
func (l *loader) unresolved(field string, e ast.Expr) {
	// A name that replicagen generates: the user meant the spec.
	var hint string
	ast.Inspect(e, func(n ast.Node) bool {
		id, ok := n.(*ast.Ident)
		if !ok || hint != "" || l.info.Uses[id] != nil {
			return true
		}
		if spec, ok := l.genNames[id.Name]; ok {
			if td := l.declNamed(spec); td != nil && td.class {
				hint = fmt.Sprintf("%s is generated by replicagen from entity class %s, which cannot be nested; use replica.Ref to refer to an entity", id.Name, spec)
			} else {
				hint = fmt.Sprintf("%s is generated by replicagen; use the spec type %s", id.Name, spec)
			}
		}
		return true
	})
	if hint != "" {
		l.errorf(e.Pos(), "field %s: %s", field, hint)
		return
	}
	// A struct that contains itself: Go rejects it as an invalid recursive
	// type; explain it in the terms of replication.
	cyclic := false
	ast.Inspect(e, func(n ast.Node) bool {
		if id, ok := n.(*ast.Ident); ok && !cyclic {
			if obj, ok := l.info.Uses[id].(*types.TypeName); ok && obj.Pkg() == l.pkg.Types {
				cyclic = l.reportCycle(obj)
			}
		}
		return !cyclic
	})
	if cyclic {
		return
	}
	for _, te := range l.typeErrs {
		if te.Fset == l.fset && te.Pos >= e.Pos() && te.Pos < e.End() {
			l.errorf(e.Pos(), "field %s: its type %s does not resolve: %s", field, types.ExprString(e), te.Msg)
			return
		}
	}
	l.errorf(e.Pos(), "field %s: its type %s does not resolve; fix the errors in its declaration", field, types.ExprString(e))
}

func (l *loader) declNamed(name string) *typeDecl {
	for _, td := range l.order {
		if td.spec.Name.Name == name {
			return td
		}
	}
	return nil
}

// reportCycle reports an inline recursion through the struct type obj: a
// chain of struct fields, without list, map or bag in between, that leads
// back to obj. It reports each cycle once and returns whether obj is on one.
func (l *loader) reportCycle(obj *types.TypeName) bool {
	type step struct {
		from  *types.TypeName
		field *ast.Ident
	}
	var path []step
	onPath := map[*types.TypeName]bool{}
	var found []step
	var visit func(t *types.TypeName) bool
	visit = func(t *types.TypeName) bool {
		td := l.decls[t]
		if td == nil {
			return false
		}
		st, ok := td.spec.Type.(*ast.StructType)
		if !ok {
			return false
		}
		onPath[t] = true
		defer delete(onPath, t)
		for _, f := range st.Fields.List {
			x := ast.Unparen(f.Type)
			id, ok := x.(*ast.Ident)
			if !ok {
				continue
			}
			next, ok := l.info.Uses[id].(*types.TypeName)
			if !ok || next.Pkg() != l.pkg.Types {
				continue
			}
			var name *ast.Ident
			if len(f.Names) > 0 {
				name = f.Names[0]
			} else {
				name = id
			}
			path = append(path, step{t, name})
			if next == obj {
				found = slices.Clone(path)
				return true
			}
			if !onPath[next] && visit(next) {
				return true
			}
			path = path[:len(path)-1]
		}
		return false
	}
	if !visit(obj) {
		return false
	}
	var names, through []string
	for _, s := range found {
		names = append(names, s.from.Name())
		through = append(through, s.from.Name()+"."+s.field.Name)
	}
	key := strings.Join(slices.Sorted(slices.Values(names)), ",")
	if l.cycles[key] {
		return true
	}
	l.cycles[key] = true
	// Report at the field that closes the cycle.
	last := found[len(found)-1]
	l.errorf(last.field.Pos(), "struct %s contains itself through %s, which would make it infinitely large; hold %s values in a list, a map or a bag, or refer to an entity with replica.Ref",
		obj.Name(), strings.Join(through, " → "), obj.Name())
	return true
}
