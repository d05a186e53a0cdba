package gen

import (
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"go/types"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/tools/go/packages"

	"github.com/replicago/replica/schema"
	"github.com/replicago/replica/state"
)

const replicaPath = "github.com/replicago/replica"

// typeDecl is a package-level type declaration.
type typeDecl struct {
	spec  *ast.TypeSpec
	doc   *ast.CommentGroup
	obj   *types.TypeName
	class bool   // has a //replica:class directive
	id    uint32 // explicit class id, or 0

	// A //replica:rpc directive.
	rpc      bool
	rpcPos   token.Pos // the directive
	rpcClass string    // the class's spec name
	rpcDir   schema.Direction
	rpcID    uint32 // explicit RPC id, or 0
}

// loader holds the state of one Load.
type loader struct {
	cfg      Config
	dir      string
	fset     *token.FileSet
	pkg      *packages.Package
	info     *types.Info
	errs     ErrorList
	decls    map[*types.TypeName]*typeDecl
	order    []*typeDecl        // declarations in source order
	genNames map[string]string  // generated type name → spec name, for hints
	genTypes map[string]*Struct // generated type name → its spec struct
	specs    map[*types.TypeName]*Struct
	queue    []*Struct
	explicit map[*Field]uint32 // explicit id= of fields
	was      map[*Field]string // was= of fields
	renames  map[string]string // "struct.field" → old name, for fields renamed with was=
	notes    ErrorList         // see Package.Notes
	typeErrs []types.Error
	cycles   map[string]bool // inline recursions reported, by member names
	isGen    map[string]bool // absolute names of generated files
	methods  map[string]map[string]token.Position
}

// Load loads the package in cfg.Dir, resolves its spec structs, assigns
// stable IDs against the lock file and lays out the schema. Mistakes in the
// package come back as an ErrorList of every one found; problems loading
// the package at all (no Go files, go command failure) as other errors.
// Load does not write anything: call WriteLock after generating.
func Load(cfg Config) (*Package, error) {
	dir := cfg.Dir
	if dir == "" {
		dir = "."
	}
	dir, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	overlay, genFiles, err := stubGenerated(dir)
	if err != nil {
		return nil, err
	}
	l := &loader{
		cfg:      cfg,
		dir:      dir,
		fset:     token.NewFileSet(),
		decls:    map[*types.TypeName]*typeDecl{},
		genNames: map[string]string{},
		genTypes: map[string]*Struct{},
		specs:    map[*types.TypeName]*Struct{},
		explicit: map[*Field]uint32{},
		was:      map[*Field]string{},
		renames:  map[string]string{},
		isGen:    map[string]bool{},
		cycles:   map[string]bool{},
		methods:  map[string]map[string]token.Position{},
	}
	for _, f := range genFiles {
		l.isGen[f] = true
	}
	pcfg := &packages.Config{
		Mode: packages.NeedName | packages.NeedFiles | packages.NeedSyntax |
			packages.NeedTypes | packages.NeedTypesInfo | packages.NeedImports,
		Dir:     dir,
		Fset:    l.fset,
		Overlay: overlay,
	}
	pkgs, err := packages.Load(pcfg, ".")
	if err != nil {
		return nil, fmt.Errorf("replicagen: loading %s: %w", dir, err)
	}
	if len(pkgs) != 1 {
		return nil, fmt.Errorf("replicagen: %s: found %d packages, want 1", dir, len(pkgs))
	}
	pkg := pkgs[0]
	l.pkg, l.info, l.typeErrs = pkg, pkg.TypesInfo, pkg.TypeErrors
	var other []string
	for _, e := range pkg.Errors {
		switch e.Kind {
		case packages.ParseError:
			l.errs = append(l.errs, &Error{Pos: parsePos(e.Pos), Msg: e.Msg})
		case packages.TypeError:
			// Tolerated: user code may call methods of the generated
			// types, which are stubbed out. Spec field types that do not
			// resolve are reported where they are used.
		default:
			other = append(other, e.Error())
		}
	}
	if pkg.Types == nil || pkg.TypesInfo == nil || len(pkg.Syntax) == 0 || pkg.Name == "" {
		if len(other) == 0 {
			other = append(other, "no Go files")
		}
		return nil, fmt.Errorf("replicagen: loading %s: %s", dir, strings.Join(other, "; "))
	}
	if len(l.errs) > 0 {
		return nil, l.errs.sort()
	}

	p := &Package{
		Name:           pkg.Name,
		ImportPath:     pkg.PkgPath,
		Dir:            dir,
		OutFile:        filepath.Join(dir, pkg.Name+"_replica.go"),
		GeneratedFiles: genFiles,
		LockPath:       filepath.Join(dir, LockFile),
		Types:          pkg.Types,
		Fset:           l.fset,
	}
	if cfg.lockFile != "" {
		p.LockPath = cfg.lockFile
	}
	l.collect()
	classes := l.findClasses()
	l.findRPCs(classes)
	for len(l.queue) > 0 {
		s := l.queue[0]
		l.queue = l.queue[1:]
		l.resolveFields(s)
	}
	for _, s := range l.specs {
		l.checkStruct(s)
		s.UserMethods = l.methods[s.Name]
		s.ViewMethods = l.methods[s.Name+"View"]
	}
	if len(l.errs) > 0 {
		return nil, l.errs.sort()
	}

	for _, s := range l.specs {
		p.Structs = append(p.Structs, s)
	}
	slices.SortFunc(p.Structs, func(a, b *Struct) int { return strings.Compare(a.Spec, b.Spec) })
	if err := l.assignIDs(p, classes); err != nil {
		return nil, err
	}
	if len(l.errs) > 0 {
		return nil, l.errs.sort()
	}

	for _, s := range p.Structs {
		s.Schema.Fields = s.Schema.Fields[:0]
		for _, f := range s.Fields {
			s.Schema.Fields = append(s.Schema.Fields, f.Schema)
		}
	}
	l.checkLeaves(p.Structs)
	l.checkLOD(p)
	if len(l.errs) > 0 {
		return nil, l.errs.sort()
	}
	p.Classes = slices.Clone(classes)
	slices.SortFunc(p.Classes, func(a, b *Struct) int { return cmpID(a.Schema.ID, b.Schema.ID) })
	sc := make([]*schema.Struct, len(p.Classes))
	for i, c := range p.Classes {
		sc[i] = c.Schema
	}
	if p.Schema, err = schema.New(sc...); err != nil {
		// The checks above should have caught everything schema checks.
		return nil, ErrorList{{Pos: token.Position{Filename: dir}, Msg: err.Error()}}
	}
	l.checkDepth(p)
	l.checkPositions(p)
	if len(l.errs) > 0 {
		return nil, l.errs.sort()
	}
	if cfg.Check && p.LockChanged {
		msg := LockFile + " is out of date"
		if len(p.LockChanges) > 0 {
			msg += " (" + strings.Join(p.LockChanges, "; ") + ")"
		} else if _, err := os.Stat(p.LockPath); err != nil {
			msg = LockFile + " is missing"
		}
		msg += "; run go generate and commit " + LockFile
		return nil, ErrorList{{Pos: token.Position{Filename: p.LockPath}, Msg: msg}}
	}
	p.Notes = l.notes.sort()
	return p, nil
}

// stubGenerated finds the generated files in dir and returns an overlay
// that replaces each with its package clause, and their sorted paths.
func stubGenerated(dir string) (map[string][]byte, []string, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, nil, fmt.Errorf("replicagen: %w", err)
	}
	overlay := map[string][]byte{}
	var files []string
	for _, e := range ents {
		name := e.Name()
		if e.IsDir() || !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			continue
		}
		path := filepath.Join(dir, name)
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.PackageClauseOnly|parser.ParseComments)
		if err != nil || f.Name == nil {
			continue // the package loader reports it
		}
		gen := name == f.Name.Name+"_replica.go"
		for _, cg := range f.Comments {
			if cg.Pos() > f.Package {
				break
			}
			for _, c := range cg.List {
				if c.Text == GeneratedMarker {
					gen = true
				}
			}
		}
		if gen {
			overlay[path] = []byte(GeneratedMarker + "\n\npackage " + f.Name.Name + "\n")
			files = append(files, path)
		}
	}
	return overlay, files, nil
}

// parsePos parses "file:line:col" as printed by go/packages.
func parsePos(s string) token.Position {
	var p token.Position
	rest := s
	var nums []int
	for range 2 {
		i := strings.LastIndexByte(rest, ':')
		if i < 0 {
			break
		}
		n, err := strconv.Atoi(rest[i+1:])
		if err != nil {
			break
		}
		nums = append(nums, n)
		rest = rest[:i]
	}
	p.Filename = rest
	switch len(nums) {
	case 2:
		p.Line, p.Column = nums[1], nums[0]
	case 1:
		p.Line = nums[0]
	}
	return p
}

func (l *loader) errorf(pos token.Pos, format string, args ...any) {
	l.errs = append(l.errs, &Error{Pos: l.fset.Position(pos), Msg: fmt.Sprintf(format, args...)})
}

// upperFirst upper-cases the first rune of s.
func upperFirst(s string) string {
	r, n := utf8.DecodeRuneInString(s)
	return string(unicode.ToUpper(r)) + s[n:]
}

// goName returns the Go name replicagen generates from a spec name: the
// name split at underscores, each word with its first letter upper-cased
// and the rest kept as written, joined. hp gives Hp, baseInfo BaseInfo,
// base_info BaseInfo, expire_ts ExpireTs, user_id UserId, userID UserID.
// It returns "" for a name of underscores only.
func goName(s string) string {
	var b strings.Builder
	for w := range strings.SplitSeq(s, "_") {
		if w != "" {
			b.WriteString(upperFirst(w))
		}
	}
	return b.String()
}

// collect records the package-level type declarations, their directives
// and the methods user files declare.
func (l *loader) collect() {
	for _, f := range l.pkg.Syntax {
		if l.isGen[l.fset.Position(f.Package).Filename] {
			continue
		}
		for _, d := range f.Decls {
			switch d := d.(type) {
			case *ast.FuncDecl:
				l.collectMethod(d)
			case *ast.GenDecl:
				if d.Tok != token.TYPE {
					continue
				}
				for _, sp := range d.Specs {
					ts := sp.(*ast.TypeSpec)
					doc := ts.Doc
					if doc == nil && !d.Lparen.IsValid() {
						doc = d.Doc
					}
					obj, _ := l.info.Defs[ts.Name].(*types.TypeName)
					if obj == nil {
						continue
					}
					td := &typeDecl{spec: ts, doc: doc, obj: obj}
					l.parseDirectives(td)
					l.decls[obj] = td
					l.order = append(l.order, td)
					if _, ok := ts.Type.(*ast.StructType); ok && !ts.Assign.IsValid() && !obj.Exported() {
						l.genNames[goName(obj.Name())] = obj.Name()
					}
				}
			}
		}
	}
}

// collectMethod records a method declared on some type, keyed by the
// receiver's base type name.
func (l *loader) collectMethod(d *ast.FuncDecl) {
	if d.Recv == nil || len(d.Recv.List) == 0 {
		return
	}
	t := d.Recv.List[0].Type
	for {
		switch x := t.(type) {
		case *ast.StarExpr:
			t = x.X
			continue
		case *ast.ParenExpr:
			t = x.X
			continue
		case *ast.IndexExpr:
			t = x.X
			continue
		case *ast.IndexListExpr:
			t = x.X
			continue
		}
		break
	}
	id, ok := t.(*ast.Ident)
	if !ok {
		return
	}
	m := l.methods[id.Name]
	if m == nil {
		m = map[string]token.Position{}
		l.methods[id.Name] = m
	}
	m[d.Name.Name] = l.fset.Position(d.Name.Pos())
}

// parseDirectives reads the //replica: directives of a type declaration.
func (l *loader) parseDirectives(td *typeDecl) {
	if td.doc == nil {
		return
	}
	for _, c := range td.doc.List {
		if strings.HasPrefix(c.Text, "// replica:class") || strings.HasPrefix(c.Text, "// replica:rpc") {
			word, _, _ := strings.Cut(strings.TrimPrefix(c.Text, "// replica:"), " ")
			l.errorf(c.Pos(), "write the directive as //replica:%s, with no space after //", word)
			continue
		}
		rest, ok := strings.CutPrefix(c.Text, "//replica:")
		if !ok {
			continue
		}
		words := strings.Fields(rest)
		switch {
		case len(words) > 0 && words[0] == "class":
			l.classDirective(td, c, words[1:])
		case len(words) > 0 && words[0] == "rpc":
			l.rpcDirective(td, c, words[1:])
		default:
			l.errorf(c.Pos(), "unknown directive %s; the directives are //replica:class [id=N] and //replica:rpc CLASS client|server [id=N]", c.Text)
		}
	}
}

// parseID parses the argument id=N, w, of a directive into *id, and
// reports a bad or repeated one.
func (l *loader) parseID(c *ast.Comment, directive, w string, id *uint32) {
	v, ok := strings.CutPrefix(w, "id=")
	if !ok {
		return
	}
	n, err := strconv.ParseUint(v, 10, 32)
	switch {
	case err != nil || n == 0:
		l.errorf(c.Pos(), "bad id=%s in //replica:%s: want a whole number from 1 to 4294967295", v, directive)
	case *id != 0:
		l.errorf(c.Pos(), "//replica:%s gives id= twice", directive)
	default:
		*id = uint32(n)
	}
}

// classDirective reads //replica:class [id=N].
func (l *loader) classDirective(td *typeDecl, c *ast.Comment, args []string) {
	if td.class {
		l.errorf(c.Pos(), "//replica:class is given twice for %s", td.spec.Name.Name)
		return
	}
	td.class = true
	for _, w := range args {
		if !strings.HasPrefix(w, "id=") {
			l.errorf(c.Pos(), "bad //replica:class argument %q: the only argument is id=N", w)
			continue
		}
		l.parseID(c, "class", w, &td.id)
	}
}

// rpcDirective reads //replica:rpc CLASS client|server [id=N].
func (l *loader) rpcDirective(td *typeDecl, c *ast.Comment, args []string) {
	if td.rpc {
		l.errorf(c.Pos(), "//replica:rpc is given twice for %s; an RPC is named after its argument struct, so every RPC needs a struct type of its own",
			td.spec.Name.Name)
		return
	}
	var pos []string
	for _, w := range args {
		if strings.HasPrefix(w, "id=") {
			l.parseID(c, "rpc", w, &td.rpcID)
		} else {
			pos = append(pos, w)
		}
	}
	if len(pos) != 2 {
		l.errorf(c.Pos(), "//replica:rpc needs the class and the direction, as in //replica:rpc player client or //replica:rpc player server id=3")
		return
	}
	td.rpc, td.rpcPos, td.rpcClass = true, c.Pos(), pos[0]
	switch pos[1] {
	case "client":
		td.rpcDir = schema.ClientToServer
	case "server":
		td.rpcDir = schema.ServerToClient
	default:
		l.errorf(c.Pos(), "bad direction %q in //replica:rpc: want client (the client that owns the entity calls it, the server handles it) or server (the server sends it to the clients that see the entity)",
			pos[1])
	}
}

// findClasses creates the classes marked with //replica:class, in source
// order.
func (l *loader) findClasses() []*Struct {
	var classes []*Struct
	for _, td := range l.order {
		if !td.class {
			continue
		}
		if td.rpc {
			l.errorf(td.rpcPos, "%s is marked both //replica:class and //replica:rpc; an RPC's argument struct cannot be an entity class", td.spec.Name.Name)
			continue
		}
		if l.checkSpecDecl(td, "//replica:class") {
			classes = append(classes, l.newStruct(td, true))
		}
	}
	ids := map[uint32]*Struct{}
	for _, c := range classes {
		id := l.decls[c.Type.Obj()].id
		if id == 0 {
			continue
		}
		if other := ids[id]; other != nil {
			l.errs = append(l.errs, &Error{Pos: c.Pos, Msg: fmt.Sprintf(
				"classes %s and %s both have id %d; every class needs its own id", other.Spec, c.Spec, id)})
			continue
		}
		ids[id] = c
	}
	if len(classes) == 0 && len(l.errs) == 0 {
		l.errs = append(l.errs, &Error{Pos: token.Position{Filename: l.dir}, Msg: fmt.Sprintf(
			"package %s has no entity classes; mark an unexported spec struct with a //replica:class line in its doc comment", l.pkg.Name)})
	}
	return classes
}

// checkSpecDecl reports whether the declaration that directive marks can
// be a spec struct, and reports why not.
func (l *loader) checkSpecDecl(td *typeDecl, directive string) bool {
	name := td.spec.Name.Name
	pos := td.spec.Name.Pos()
	_, isStruct := td.spec.Type.(*ast.StructType)
	switch {
	case td.spec.Assign.IsValid():
		l.errorf(pos, "%s marks %s, which is an alias; mark the struct type itself", directive, name)
	case !isStruct:
		l.errorf(pos, "%s marks %s, which is not declared as a struct type", directive, name)
	case td.spec.TypeParams != nil:
		l.errorf(pos, "spec type %s cannot be generic", name)
	case td.obj.Exported():
		l.errorf(pos, "spec type %s must be unexported: replicagen generates the exported type %s from it; rename the spec to %s",
			name, name, lowerFirst(name))
	case !startsLower(name):
		l.errorf(pos, "spec type name %s must start with a lower-case letter, so that replicagen can name the generated type by upper-casing it", name)
	default:
		return true
	}
	return false
}

// findRPCs creates the RPCs marked with //replica:rpc, in source order,
// with their argument structs, and attaches them to their classes.
func (l *loader) findRPCs(classes []*Struct) {
	bySpec := map[string]*Struct{}
	for _, c := range classes {
		bySpec[c.Spec] = c
	}
	for _, td := range l.order {
		if !td.rpc || td.class {
			continue // both: findClasses reported it
		}
		c := bySpec[td.rpcClass]
		if c == nil {
			l.errorf(td.rpcPos, "//replica:rpc names class %s, %s", td.rpcClass, l.notAClass(td.rpcClass))
			continue
		}
		if !l.checkSpecDecl(td, "//replica:rpc") {
			continue
		}
		args := l.newStruct(td, false)
		r := &RPC{
			Name:   args.Spec,
			Method: args.Name,
			Dir:    td.rpcDir,
			Pos:    l.fset.Position(td.rpcPos),
			Class:  c,
			Args:   args,
			Schema: &schema.RPC{Name: args.Spec, Dir: td.rpcDir, Args: args.Schema},
		}
		args.RPC = r
		c.RPCs = append(c.RPCs, r)
		c.Schema.RPCs = append(c.Schema.RPCs, r.Schema)
	}
}

// notAClass explains why name, given to //replica:rpc, names no class.
func (l *loader) notAClass(name string) string {
	if td := l.declNamed(name); td != nil {
		if td.class {
			return "which is not a valid entity class (see the errors there)"
		}
		return fmt.Sprintf("but %s is not an entity class; mark it with //replica:class", name)
	}
	if spec, ok := l.genNames[name]; ok {
		if td := l.declNamed(spec); td != nil && td.class {
			return fmt.Sprintf("but %s is the generated type; name the class by its spec type, %s", name, spec)
		}
	}
	return fmt.Sprintf("but the package declares no type %s; name the spec type of an entity class (the one marked //replica:class)", name)
}

func lowerFirst(s string) string {
	r, n := utf8.DecodeRuneInString(s)
	return string(unicode.ToLower(r)) + s[n:]
}

func startsLower(s string) bool {
	r, _ := utf8.DecodeRuneInString(s)
	return unicode.IsLower(r) && unicode.ToUpper(r) != r
}

// newStruct creates the spec struct of a declaration and queues its fields.
func (l *loader) newStruct(td *typeDecl, class bool) *Struct {
	name := td.spec.Name.Name
	s := &Struct{
		Spec:   name,
		Name:   goName(name),
		Doc:    td.doc.Text(),
		Pos:    l.fset.Position(td.spec.Name.Pos()),
		Schema: &schema.Struct{Name: goName(name), Class: class},
		Type:   td.obj.Type().(*types.Named),
	}
	l.specs[td.obj] = s
	l.queue = append(l.queue, s)
	if other := l.genTypes[s.Name]; other != nil {
		l.errorf(td.spec.Name.Pos(), "specs %s (%s) and %s both generate the type %s (replicagen drops underscores and upper-cases the first letter of each word); rename one of them",
			other.Spec, posString(other.Pos), name, s.Name)
	} else {
		l.genTypes[s.Name] = s
	}
	if obj := l.pkg.Types.Scope().Lookup(s.Name); obj != nil {
		l.errorf(td.spec.Name.Pos(), "replicagen generates the type %s from spec %s, but %s is already declared at %s; rename one of them",
			s.Name, name, s.Name, posString(l.fset.Position(obj.Pos())))
	}
	return s
}

// resolveFields turns the fields of s into Fields.
func (l *loader) resolveFields(s *Struct) {
	td := l.decls[s.Type.Obj()]
	st := td.spec.Type.(*ast.StructType)
	for _, af := range st.Fields.List {
		var tg *tag
		var tagErrs []string
		if af.Tag != nil {
			raw, err := strconv.Unquote(af.Tag.Value)
			if err != nil {
				raw = ""
			}
			tg, tagErrs = parseTag(raw)
		} else {
			tg, _ = parseTag("")
		}
		if tg.skip {
			continue
		}
		if s.RPC != nil {
			for _, key := range []string{"vis", "life", "chan"} {
				if tg.given[key] {
					tagErrs = append(tagErrs, fmt.Sprintf("%s= means nothing on an argument of RPC %s, which goes once to whoever receives the call; remove it", key, s.Spec))
				}
			}
		}
		if s.RPC == nil && !s.Schema.Class && tg.given["life"] {
			tagErrs = append(tagErrs, fmt.Sprintf("life= is set on a class field and covers everything in it; %s is not a class: set life= on the class field that holds it", s.Spec))
		}
		for _, msg := range tagErrs {
			if len(af.Names) > 0 {
				msg = "field " + af.Names[0].Name + ": " + msg
			}
			l.errorf(af.Tag.Pos(), "%s", msg)
		}
		if len(af.Names) == 0 {
			l.errorf(af.Type.Pos(), "embedded field %s is not supported in a spec struct; give it a name, or tag it replica:\"-\" to leave it out",
				types.ExprString(af.Type))
			continue
		}
		names := make([]string, len(af.Names))
		for i, n := range af.Names {
			names[i] = n.Name
		}
		typ, goType, keyGoType, sub, ok := l.fieldType(s, names[0], af, tg)
		doc := af.Doc.Text() + af.Comment.Text()
		for _, n := range af.Names {
			if n.Name == "_" {
				l.errorf(n.Pos(), "blank field _ cannot be replicated; give it a name, or tag it replica:\"-\" to leave it out")
				continue
			}
			method := goName(n.Name)
			if !token.IsExported(method) {
				l.errorf(n.Pos(), "field %s must start with a letter that has an upper-case form (after any underscores), so that its accessors are exported", n.Name)
				continue
			}
			if !ok {
				continue
			}
			f := &Field{
				Name:      n.Name,
				Method:    method,
				Doc:       doc,
				Pos:       l.fset.Position(n.Pos()),
				GoType:    goType,
				KeyGoType: keyGoType,
				Struct:    sub,
				Schema: &schema.Field{
					Name:       n.Name,
					Type:       typ,
					Vis:        tg.vis,
					Life:       tg.life,
					Chan:       tg.ch,
					Pos:        tg.pos,
					LOD:        tg.lod,
					Deprecated: tg.deprecated,
				},
			}
			if tg.id != 0 {
				l.explicit[f] = tg.id
			}
			if tg.was != "" {
				l.was[f] = tg.was
			}
			s.Fields = append(s.Fields, f)
		}
	}
}

// builtinMethods returns the methods every generated type like s, or its
// view, has whatever its fields, with the type that has each.
func builtinMethods(s *Struct) map[string]string {
	if s.Class() {
		return map[string]string{"Entity": s.Name, "ID": s.Name, "IsOwned": s.Name + "View", "Valid": s.Name}
	}
	return map[string]string{"Clone": s.Name, "Valid": s.Name}
}

// hasSetter reports whether replicagen generates Set<Method> for f: for
// scalars and nested structs, not for lists, maps and bags.
func hasSetter(f *Field) bool { return !f.Schema.Type.Kind.Container() }

// checkStruct reports generated method names that clash, with each other
// or with the methods every generated type has, and duplicate explicit
// field and RPC IDs.
func (l *loader) checkStruct(s *Struct) {
	builtin := builtinMethods(s)
	type gen struct {
		f      *Field
		setter bool
	}
	methods := map[string]gen{}
	ids := map[uint32]*Field{}
	for _, f := range s.Fields {
		names := []string{f.Method}
		if hasSetter(f) {
			names = append(names, "Set"+f.Method)
		}
		for i, m := range names {
			what := "getter"
			if i > 0 {
				what = "setter"
			}
			if typ, ok := builtin[m]; ok {
				l.errs = append(l.errs, &Error{Pos: f.Pos, Msg: fmt.Sprintf(
					"field %s would generate the %s %s, a method every generated %s has; rename the field", f.Name, what, m, typ)})
				continue
			}
			g, dup := methods[m]
			if !dup {
				methods[m] = gen{f, i > 0}
				continue
			}
			if g.f == f {
				continue
			}
			if g.f.Method == f.Method {
				if i == 0 {
					l.errs = append(l.errs, &Error{Pos: f.Pos, Msg: fmt.Sprintf(
						"fields %s and %s of %s both generate the method %s (replicagen drops underscores and upper-cases the first letter of each word); rename one of them",
						g.f.Name, f.Name, s.Spec, m)})
				}
				continue
			}
			gw := "getter"
			if g.setter {
				gw = "setter"
			}
			l.errs = append(l.errs, &Error{Pos: f.Pos, Msg: fmt.Sprintf(
				"the %s %s of field %s is also the %s of field %s of %s; rename one of them", what, m, f.Name, gw, g.f.Name, s.Spec)})
		}
		if id := l.explicit[f]; id != 0 {
			if g := ids[id]; g != nil {
				l.errs = append(l.errs, &Error{Pos: f.Pos, Msg: fmt.Sprintf(
					"id=%d is given to both %s and %s in %s; every field needs its own id", id, g.Name, f.Name, s.Spec)})
			} else {
				ids[id] = f
			}
		}
	}
	rpcs := map[uint32]*RPC{}
	for _, r := range s.RPCs {
		id := l.decls[r.Args.Type.Obj()].rpcID
		if id == 0 {
			continue
		}
		if o := rpcs[id]; o != nil {
			l.errs = append(l.errs, &Error{Pos: r.Pos, Msg: fmt.Sprintf(
				"RPCs %s and %s of %s both have id %d; every RPC of a class needs its own id", o.Name, r.Name, s.Spec, id)})
		} else {
			rpcs[id] = r
		}
	}
}

var errUnresolved = errors.New("unresolved")

// checkLeaves reports, at its declaration, each struct that flattens to
// more than schema.MaxLeaves leaves (nested struct fields count with all
// of theirs), unless a nested struct it holds is itself over the limit.
func (l *loader) checkLeaves(structs []*Struct) {
	memo := map[*Struct]int{}
	var count func(s *Struct) int
	count = func(s *Struct) int {
		if n, ok := memo[s]; ok {
			return n
		}
		n := 0
		for _, f := range s.Fields {
			switch {
			case f.Schema.Deprecated:
			case f.Schema.Type.Kind == schema.Nested:
				n += count(f.Struct)
			default:
				n++
			}
		}
		memo[s] = n
		return n
	}
	for _, s := range structs {
		n := count(s)
		if n <= schema.MaxLeaves {
			continue
		}
		inner := false
		for _, f := range s.Fields {
			if !f.Schema.Deprecated && f.Schema.Type.Kind == schema.Nested && count(f.Struct) > schema.MaxLeaves {
				inner = true
			}
		}
		if !inner {
			l.errs = append(l.errs, &Error{Pos: s.Pos, Msg: fmt.Sprintf(
				"struct %s flattens to %d fields, over the limit of %d: a nested struct field counts with every field of its struct; hold some of them in a list, map or bag, or split the class",
				s.Spec, n, schema.MaxLeaves)})
		}
	}
}

// checkPositions reports position tags the server could not use: pos= on
// a field that is not a number, on a field no class holds as its own
// (one inside a list, map or bag element), or a class without exactly
// one pos=x and one pos=y field when it has either.
func (l *loader) checkPositions(p *Package) {
	var tagged []*Field
	fields := map[*schema.Field]*Field{}
	for _, s := range p.Structs {
		for _, f := range s.Fields {
			fields[f.Schema] = f
			if f.Schema.Pos == schema.AxisNone {
				continue
			}
			if k := f.Schema.Type.Kind; !k.Numeric() || k == schema.Bool || k == schema.Ref {
				l.errs = append(l.errs, &Error{Pos: f.Pos, Msg: fmt.Sprintf(
					"field %s.%s: pos=%s needs a number (an int or float type), not %s", s.Spec, f.Name, f.Schema.Pos, &f.Schema.Type)})
				continue
			}
			tagged = append(tagged, f)
		}
	}
	used := map[*Field]bool{}
	for _, c := range p.Classes {
		var n [3]int
		// Fields declared together (a, b float32 `replica:"pos=x"`) share
		// their tag: the error then names them.
		type decl struct {
			file string
			line int
		}
		var shared string // "a, b"
		seen := map[decl]*Field{}
		for i := range c.Schema.Leaves {
			lf := c.Schema.Leaf(i)
			if f := fields[lf.Field]; f != nil && slices.Contains(tagged, f) {
				used[f] = true
				n[lf.Field.Pos]++
				d := decl{f.Pos.Filename, f.Pos.Line}
				if g := seen[d]; g != nil && shared == "" {
					shared = g.Name + ", " + f.Name
				}
				seen[d] = f
			}
		}
		if n[schema.AxisX] != n[schema.AxisY] || n[schema.AxisX] > 1 {
			msg := fmt.Sprintf("class %s has %d pos=x and %d pos=y fields: a position needs exactly one of each", c.Spec, n[schema.AxisX], n[schema.AxisY])
			if shared != "" {
				msg += fmt.Sprintf(" (%s are declared together, so both get the tag: declare each coordinate on its own line)", shared)
			}
			l.errs = append(l.errs, &Error{Pos: c.Pos, Msg: msg})
		}
	}
	for _, f := range tagged {
		if !used[f] {
			l.errs = append(l.errs, &Error{Pos: f.Pos, Msg: fmt.Sprintf(
				"field %s: pos=%s is only read from a class's own fields (or structs nested in them), not from list, map or bag elements", f.Name, f.Schema.Pos)})
		}
	}
}

// checkLOD reports level-of-detail tags the server could not use: lod= on
// a field of a struct that is not an entity class (a nested struct's
// fields share the band of the class field that holds them), on a
// server-only field, in a class without a position (the distance is
// measured from it: such a class's fields would go to every client that
// sees the entity), and more distinct distances in a class than
// schema.MaxBands.
func (l *loader) checkLOD(p *Package) {
	for _, s := range p.Structs {
		var bands []float64
		if s.Class() && !hasPosition(s) {
			for _, f := range s.Fields {
				if f.Schema.LOD != 0 {
					l.errs = append(l.errs, &Error{Pos: f.Pos, Msg: fmt.Sprintf(
						"field %s.%s: lod= needs a position to measure the distance from: tag class %s's coordinates pos=x and pos=y", s.Spec, f.Name, s.Spec)})
					break
				}
			}
		}
		for _, f := range s.Fields {
			lod := f.Schema.LOD
			switch {
			case lod == 0:
				continue
			case !s.Class():
				l.errs = append(l.errs, &Error{Pos: f.Pos, Msg: fmt.Sprintf(
					"field %s.%s: lod= applies to fields of entity classes; tag the class field that holds %s instead", s.Spec, f.Name, s.Spec)})
			case f.Schema.Vis == schema.VisServer:
				l.errs = append(l.errs, &Error{Pos: f.Pos, Msg: fmt.Sprintf(
					"field %s.%s: lod= on a vis=server field: it is never sent", s.Spec, f.Name)})
			case !f.Schema.Deprecated && !slices.Contains(bands, lod):
				bands = append(bands, lod)
				if len(bands) == schema.MaxBands+1 {
					l.errs = append(l.errs, &Error{Pos: f.Pos, Msg: fmt.Sprintf(
						"class %s has more than %d distinct lod= distances", s.Spec, schema.MaxBands)})
				}
			}
		}
	}
}

// hasPosition reports whether class s has a field tagged pos= (nested
// ones included; checkPositions reports a position that is incomplete).
func hasPosition(s *Struct) bool {
	var walk func(st *schema.Struct, depth int) bool
	walk = func(st *schema.Struct, depth int) bool {
		for _, f := range st.Fields {
			if f.Pos != schema.AxisNone {
				return true
			}
			// Nested structs only (not list, map or bag elements); the
			// depth stops a cycle, which checkLeaves reports.
			if f.Type.Kind == schema.Nested && f.Type.Struct != nil && depth < 64 && walk(f.Type.Struct, depth+1) {
				return true
			}
		}
		return false
	}
	return walk(s.Schema, 0)
}

// checkDepth reports, at the field's declaration, each field of a class
// that clients see and that sits deeper than the default client limit
// (state.Limits and codec.Limits MaxDepth) allows whatever its value:
// replica.NewServer would refuse the schema.
func (l *loader) checkDepth(p *Package) {
	fields := map[*schema.Field]*Field{}
	for _, s := range p.Structs {
		for _, f := range s.Fields {
			fields[f.Schema] = f
		}
	}
	maxDepth := state.Limits{}.WithDefaults().MaxDepth
	reported := map[*Field]bool{}
	for _, c := range p.Classes {
		for i := range c.Schema.Leaves {
			lf := c.Schema.Leaf(i)
			n := state.LeafLevels(c.Schema, i)
			f := fields[lf.Field]
			if lf.Vis == schema.VisServer || n <= maxDepth || f == nil || reported[f] {
				continue
			}
			reported[f] = true
			path, st := c.Spec, c.Schema
			for _, id := range lf.Path {
				sf := st.Field(id)
				path += "." + sf.Name
				st = sf.Type.Struct
			}
			l.errs = append(l.errs, &Error{Pos: f.Pos, Msg: fmt.Sprintf(
				"field %s is %d levels deep, over the limit of %d that clients decode by default (codec.Limits.MaxDepth), so replica.NewServer would refuse the schema; nest fewer structs, or tag a field on the path vis=server if clients never need it",
				path, n, maxDepth)})
		}
	}
}
