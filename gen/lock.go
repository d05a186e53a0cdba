package gen

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"go/token"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/replicago/replica/schema"
)

// lockVersion is the version of the lock file format.
const lockVersion = 1

// lockFile is the content of replica.lock.json.
type lockFile struct {
	Version int `json:"version"`
	// Classes maps the spec name of each entity class to its class ID.
	Classes map[string]uint32 `json:"classes"`
	// RetiredClasses are class IDs of removed classes, never reused.
	RetiredClasses []lockEntry `json:"retiredClasses,omitempty"`
	// Structs maps the spec name of every spec struct, classes and nested
	// ones, present or removed, to its fields.
	Structs map[string]*lockStruct `json:"structs"`
}

// lockStruct records the field IDs of one spec struct and, for a class,
// its RPC IDs.
type lockStruct struct {
	Fields      []lockEntry `json:"fields"`                // present fields, by ID
	Retired     []lockEntry `json:"retired,omitempty"`     // removed fields, by ID; their IDs are never reused
	RPCs        []lockRPC   `json:"rpcs,omitempty"`        // present RPCs, by ID
	RetiredRPCs []lockRPC   `json:"retiredRpcs,omitempty"` // removed RPCs, by ID; their IDs are never reused
}

// lockRPC is an RPC or retired RPC of a class.
type lockRPC struct {
	Name string `json:"name"`
	ID   uint32 `json:"id"`
	Dir  string `json:"dir"`  // schema.Direction.String(): client or server
	Args string `json:"args"` // the argument signature, see rpcArgs
}

// entry and rpcOf convert between lockRPC and the lockEntry that assign
// works on, whose Type is the direction and the arguments.
func (r lockRPC) entry() lockEntry {
	return lockEntry{Name: r.Name, ID: r.ID, Type: r.Dir + " " + r.Args}
}

func rpcOf(e lockEntry) lockRPC {
	dir, args, _ := strings.Cut(e.Type, " ")
	return lockRPC{Name: e.Name, ID: e.ID, Dir: dir, Args: args}
}

func rpcEntries(rs []lockRPC) []lockEntry {
	out := make([]lockEntry, len(rs))
	for i, r := range rs {
		out[i] = r.entry()
	}
	return out
}

// lockEntry is a field, retired field or retired class.
type lockEntry struct {
	Name       string `json:"name"`
	ID         uint32 `json:"id"`
	Type       string `json:"type,omitempty"` // (*schema.Type).String(); fields only
	Deprecated bool   `json:"deprecated,omitempty"`
}

// marshal renders f deterministically: 2-space indentation, keys sorted,
// one line per field entry so that diffs of the lock file read well, and a
// trailing newline.
func (f *lockFile) marshal() []byte {
	var b bytes.Buffer
	entries := func(indent string, es []lockEntry) {
		b.WriteString("[")
		for i, e := range es {
			if i > 0 {
				b.WriteString(",")
			}
			b.WriteString("\n" + indent + "  {\"name\": " + jsonString(e.Name) + ", \"id\": " + strconv.FormatUint(uint64(e.ID), 10))
			if e.Type != "" {
				b.WriteString(", \"type\": " + jsonString(e.Type))
			}
			if e.Deprecated {
				b.WriteString(", \"deprecated\": true")
			}
			b.WriteString("}")
		}
		if len(es) > 0 {
			b.WriteString("\n" + indent)
		}
		b.WriteString("]")
	}
	rpcs := func(indent string, rs []lockRPC) {
		b.WriteString("[")
		for i, r := range rs {
			if i > 0 {
				b.WriteString(",")
			}
			fmt.Fprintf(&b, "\n%s  {\"name\": %s, \"id\": %d, \"dir\": %s, \"args\": %s}",
				indent, jsonString(r.Name), r.ID, jsonString(r.Dir), jsonString(r.Args))
		}
		if len(rs) > 0 {
			b.WriteString("\n" + indent)
		}
		b.WriteString("]")
	}
	fmt.Fprintf(&b, "{\n  \"version\": %d,\n  \"classes\": {", f.Version)
	for i, name := range sortedKeys(f.Classes) {
		if i > 0 {
			b.WriteString(",")
		}
		fmt.Fprintf(&b, "\n    %s: %d", jsonString(name), f.Classes[name])
	}
	if len(f.Classes) > 0 {
		b.WriteString("\n  ")
	}
	b.WriteString("},\n")
	if len(f.RetiredClasses) > 0 {
		b.WriteString("  \"retiredClasses\": ")
		entries("  ", f.RetiredClasses)
		b.WriteString(",\n")
	}
	b.WriteString("  \"structs\": {")
	for i, name := range sortedKeys(f.Structs) {
		if i > 0 {
			b.WriteString(",")
		}
		s := f.Structs[name]
		b.WriteString("\n    " + jsonString(name) + ": {\n      \"fields\": ")
		entries("      ", s.Fields)
		if len(s.Retired) > 0 {
			b.WriteString(",\n      \"retired\": ")
			entries("      ", s.Retired)
		}
		if len(s.RPCs) > 0 {
			b.WriteString(",\n      \"rpcs\": ")
			rpcs("      ", s.RPCs)
		}
		if len(s.RetiredRPCs) > 0 {
			b.WriteString(",\n      \"retiredRpcs\": ")
			rpcs("      ", s.RetiredRPCs)
		}
		b.WriteString("\n    }")
	}
	if len(f.Structs) > 0 {
		b.WriteString("\n  ")
	}
	b.WriteString("}\n}\n")
	return b.Bytes()
}

// jsonString quotes s as a JSON string, leaving <, > and & alone.
func jsonString(s string) string {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(s); err != nil {
		panic(err) // a string always encodes
	}
	return strings.TrimSuffix(b.String(), "\n")
}

// readLock reads and checks the lock file. A missing file is an empty lock
// with exists false.
func readLock(path string) (lf *lockFile, data []byte, exists bool, err error) {
	lf = &lockFile{Version: lockVersion, Classes: map[string]uint32{}, Structs: map[string]*lockStruct{}}
	data, err = os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return lf, nil, false, nil
	}
	if err != nil {
		return nil, nil, false, err
	}
	bad := func(off int64, format string, args ...any) error {
		pos := token.Position{Filename: path}
		if off > 0 {
			pos.Line, pos.Column = 1, 1
			for _, c := range data[:min(off, int64(len(data)))] {
				if c == '\n' {
					pos.Line++
					pos.Column = 1
				} else {
					pos.Column++
				}
			}
		}
		return ErrorList{{Pos: pos, Msg: fmt.Sprintf(format, args...)}}
	}
	if err := json.Unmarshal(data, lf); err != nil {
		var se *json.SyntaxError
		var te *json.UnmarshalTypeError
		switch {
		case errors.As(err, &se):
			return nil, nil, false, bad(se.Offset, "%s is not valid JSON: %v; restore it from version control", LockFile, err)
		case errors.As(err, &te):
			return nil, nil, false, bad(te.Offset, "%s is malformed: %v; restore it from version control", LockFile, err)
		}
		return nil, nil, false, bad(0, "%s is malformed: %v; restore it from version control", LockFile, err)
	}
	if lf.Version != lockVersion {
		return nil, nil, false, bad(0, "%s has version %d, but this replicagen reads version %d; use the replicagen that wrote it", LockFile, lf.Version, lockVersion)
	}
	if lf.Classes == nil {
		lf.Classes = map[string]uint32{}
	}
	if lf.Structs == nil {
		lf.Structs = map[string]*lockStruct{}
	}
	inconsistent := func(format string, args ...any) error {
		return bad(0, "%s is inconsistent: %s; restore it from version control", LockFile, fmt.Sprintf(format, args...))
	}
	classIDs := map[uint32]string{}
	for _, name := range sortedKeys(lf.Classes) {
		id := lf.Classes[name]
		if id == 0 {
			return nil, nil, false, inconsistent("class %s has id 0", name)
		}
		if other, dup := classIDs[id]; dup {
			return nil, nil, false, inconsistent("classes %s and %s both have id %d", other, name, id)
		}
		classIDs[id] = name
	}
	for _, e := range lf.RetiredClasses {
		if other, dup := classIDs[e.ID]; dup || e.ID == 0 {
			return nil, nil, false, inconsistent("retired class %s has id %d, which %s also has", e.Name, e.ID, other)
		}
		classIDs[e.ID] = e.Name
	}
	for _, sname := range sortedKeys(lf.Structs) {
		s := lf.Structs[sname]
		if s == nil {
			s = &lockStruct{}
			lf.Structs[sname] = s
		}
		ids := map[uint32]string{}
		names := map[string]bool{}
		for i, e := range slices.Concat(s.Fields, s.Retired) {
			if e.ID == 0 || e.Name == "" {
				return nil, nil, false, inconsistent("struct %s has an entry without a name or id", sname)
			}
			if other, dup := ids[e.ID]; dup {
				return nil, nil, false, inconsistent("struct %s records id %d for both %s and %s", sname, e.ID, other, e.Name)
			}
			ids[e.ID] = e.Name
			if i < len(s.Fields) {
				if names[e.Name] {
					return nil, nil, false, inconsistent("struct %s records field %s twice", sname, e.Name)
				}
				names[e.Name] = true
			}
		}
		clear(ids)
		clear(names)
		for i, r := range slices.Concat(s.RPCs, s.RetiredRPCs) {
			if r.ID == 0 || r.Name == "" {
				return nil, nil, false, inconsistent("struct %s has an RPC without a name or id", sname)
			}
			if r.Dir != schema.ClientToServer.String() && r.Dir != schema.ServerToClient.String() {
				return nil, nil, false, inconsistent("RPC %s of %s has direction %q", r.Name, sname, r.Dir)
			}
			if other, dup := ids[r.ID]; dup {
				return nil, nil, false, inconsistent("struct %s records RPC id %d for both %s and %s", sname, r.ID, other, r.Name)
			}
			ids[r.ID] = r.Name
			if i < len(s.RPCs) {
				if names[r.Name] {
					return nil, nil, false, inconsistent("struct %s records RPC %s twice", sname, r.Name)
				}
				names[r.Name] = true
			}
		}
	}
	return lf, data, true, nil
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

var quantRE = regexp.MustCompile(` q\([^)]*\)`)

// kindSig is a type signature without quantization parameters: a removed
// field that comes back with the same kindSig gets its old ID back (the
// type check that follows still refuses a changed quantization).
func kindSig(typ string) string { return quantRE.ReplaceAllString(typ, "") }

// idItem is a field or class that needs an ID.
type idItem struct {
	name     string
	explicit uint32 // explicit id=, or 0
	typ      string // type signature; fields only
	was      string // previous name (was= tag), or ""; fields only
	pos      token.Position
	id       uint32 // result
	fresh    bool   // id is a new one, above every ID used before
	persist  bool   // a field saved to the database (life=persist)
}

// refuse reports a change that breaks clients built with the locked
// schema, unless Config.Force accepts it.
func (l *loader) refuse(pos token.Position, format string, args ...any) {
	if !l.cfg.Force {
		msg := fmt.Sprintf(format, args...) + ", or run replicagen with -force if every client will be rebuilt"
		l.errs = append(l.errs, &Error{Pos: pos, Msg: msg})
	}
}

// assign gives each item an ID against the locked entries of its struct
// (what is "field", or "argument" for an RPC's argument struct), class
// (what is "RPC") or package (what is "class") and returns the new retired
// entries. owner names the struct for field messages. Type changes are
// refused only for fields: the argument signature of an RPC covers those
// of its arguments (see assignRPCs).
func (l *loader) assign(what, owner string, items []*idItem, oldLive, oldRetired []lockEntry) []lockEntry {
	byID := map[uint32]lockEntry{}
	retired := map[uint32]bool{}
	byName := map[string]lockEntry{}
	var top uint32
	for _, e := range oldLive {
		byID[e.ID] = e
		byName[e.Name] = e
		top = max(top, e.ID)
	}
	for _, e := range oldRetired {
		byID[e.ID] = e
		retired[e.ID] = true
		top = max(top, e.ID)
	}
	refuse := l.refuse
	idTag := "id=%d"
	if what == "class" {
		idTag = "//replica:class id=%d"
	}
	claimed := map[uint32]*idItem{}
	for _, it := range items {
		if it.explicit == 0 {
			continue
		}
		if claimed[it.explicit] != nil {
			continue // duplicates were reported before IDs are assigned
		}
		claimed[it.explicit] = it
		it.id = it.explicit
		tagText := fmt.Sprintf(idTag, it.explicit)
		if e, ok := byID[it.explicit]; ok && it.was != "" && e.Name == it.was && !retired[e.ID] {
			l.renames[owner+"."+it.name] = it.was
		}
		if e, ok := byID[it.explicit]; ok && e.Name != it.name && !(e.Name == it.was && !retired[e.ID]) {
			if retired[e.ID] {
				refuse(it.pos, "%s of %s %s was used by the removed %s %s (see %s); IDs are never reused, because clients built with an older schema would take %s for %s. Use an unused id",
					tagText, what, it.name, what, e.Name, LockFile, it.name, e.Name)
			} else {
				refuse(it.pos, "%s of %s %s belongs to %s %s in %s; clients built with that schema would take %s for %s. Use an unused id",
					tagText, what, it.name, what, e.Name, LockFile, it.name, e.Name)
			}
		} else if e, ok := byName[it.name]; ok && e.ID != it.explicit {
			refuse(it.pos, "%s %s has id %d in %s; %s would change it, and clients built with that schema would no longer recognise %s. Remove %s",
				what, it.name, e.ID, LockFile, tagText, it.name, tagText)
		}
	}
	for _, it := range items {
		if it.explicit != 0 {
			continue
		}
		if e, ok := byName[it.name]; ok && claimed[e.ID] == nil {
			it.id = e.ID
			claimed[e.ID] = it
			continue
		}
		if it.was != "" {
			// A renamed field keeps the ID of its old name, live or
			// retired; the type check below still applies.
			l.renamed(what, owner, it, items, oldLive, oldRetired, claimed)
			if it.id != 0 {
				continue
			}
		}
		// A removed field that comes back with the same kind gets its ID
		// back; old clients know it by that ID.
		for _, e := range oldRetired {
			if e.Name == it.name && kindSig(e.Type) == kindSig(it.typ) && claimed[e.ID] == nil && e.ID > it.id {
				it.id = e.ID
			}
		}
		if it.id != 0 {
			claimed[it.id] = it
		}
	}
	for id := range claimed {
		top = max(top, id)
	}
	for _, it := range items {
		if it.id != 0 {
			continue
		}
		if top == math.MaxUint32 {
			l.errs = append(l.errs, &Error{Pos: it.pos, Msg: fmt.Sprintf("no %s IDs are left above %d; give %s an explicit unused id", what, top, it.name)})
			continue
		}
		top++
		it.id = top
		it.fresh = true
		claimed[top] = it
	}
	if what == "field" {
		for _, it := range items {
			// The full signature counts, quantization included: clients
			// apply deltas to the quantized codes they store, so a client
			// built with other quantization parameters cannot follow.
			if e, ok := byID[it.id]; ok && (e.Name == it.name || e.Name == it.was) && e.Type != it.typ {
				saved := ""
				if it.persist {
					// -force rebuilds clients; it cannot rewrite the
					// database, whose every document holding the field
					// would then fail to load.
					saved = fmt.Sprintf(". The field is saved (life=persist): every stored document holding it was written as %s and would fail to load (store.ErrIncompatible), -force or not; migrate them (docs/persistence.md, Evolution)", e.Type)
				}
				refuse(it.pos, "field %s of %s changed type from %s to %s; clients built with the schema in %s would decode id %d as %s. Add a field with a new name instead (and tag the old one deprecated)%s",
					it.name, owner, e.Type, it.typ, LockFile, e.ID, e.Type, saved)
			}
		}
	}
	if what == "field" {
		l.noteRenames(owner, items, oldLive, claimed)
	}
	var out []lockEntry
	seen := map[uint32]bool{}
	for _, e := range slices.Concat(oldRetired, oldLive) {
		if claimed[e.ID] != nil || seen[e.ID] {
			continue
		}
		seen[e.ID] = true
		e.Deprecated = false
		out = append(out, e)
	}
	slices.SortFunc(out, func(a, b lockEntry) int { return cmpID(a.ID, b.ID) })
	return out
}

// renamed gives it, a field tagged was=OLD whose name the lock does not
// record, the ID the lock records for OLD, live or retired, and reports a
// was= that names no such field or a field that still exists.
func (l *loader) renamed(what, owner string, it *idItem, items []*idItem, oldLive, oldRetired []lockEntry, claimed map[uint32]*idItem) {
	for _, o := range items {
		if o.name == it.was {
			l.errs = append(l.errs, &Error{Pos: it.pos, Msg: fmt.Sprintf(
				"%s %s is tagged was=%s, but %s %s of %s still exists; a rename keeps one ID for one field, so remove was= or the old field",
				what, it.name, it.was, what, it.was, owner)})
			return
		}
	}
	for _, e := range oldLive {
		if e.Name == it.was && claimed[e.ID] == nil {
			it.id = e.ID
			claimed[e.ID] = it
			l.renames[owner+"."+it.name] = it.was
			return
		}
	}
	for _, e := range oldRetired {
		if e.Name == it.was && claimed[e.ID] == nil && e.ID > it.id {
			it.id = e.ID
		}
	}
	if it.id != 0 {
		claimed[it.id] = it
		return
	}
	l.errs = append(l.errs, &Error{Pos: it.pos, Msg: fmt.Sprintf(
		"%s %s is tagged was=%s, but %s records no %s %s for %s; fix the old name, or remove was= to make %s a new %s",
		what, it.name, it.was, LockFile, what, it.was, owner, it.name, what)})
}

// noteRenames adds a note for each new field of owner that has the type of
// a field the lock records and that disappeared: it may be a rename, which
// without a was= tag gets a new ID, so clients built with the old schema
// stop receiving the field.
func (l *loader) noteRenames(owner string, items []*idItem, oldLive []lockEntry, claimed map[uint32]*idItem) {
	for _, it := range items {
		if !it.fresh || it.was != "" {
			continue
		}
		var gone []string
		for _, e := range oldLive {
			if claimed[e.ID] == nil && e.Type == it.typ {
				gone = append(gone, e.Name)
			}
		}
		if len(gone) == 0 {
			continue
		}
		tags := make([]string, len(gone))
		for i, g := range gone {
			tags[i] = `replica:"was=` + g + `"`
		}
		l.notes = append(l.notes, &Error{Pos: it.pos, Msg: fmt.Sprintf(
			"new field %s of %s gets a new ID, and %s of the same type %s disappeared: if %s is a rename, tag it %s so that it keeps the old ID and clients built with the old schema keep receiving it",
			it.name, owner, orList(gone, "field "), it.typ, it.name, strings.Join(tags, " or "))})
	}
}

// orList joins names as "field a", "field a or field b", ...
func orList(names []string, prefix string) string {
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = prefix + n
	}
	if len(out) == 1 {
		return out[0]
	}
	return strings.Join(out[:len(out)-1], ", ") + " or " + out[len(out)-1]
}

func cmpID(a, b uint32) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// assignIDs assigns class and field IDs, builds the new lock file and
// compares it with the old one. Refused changes are added to l.errs; a
// lock file that cannot be read is returned as the error.
func (l *loader) assignIDs(p *Package, classes []*Struct) error {
	old, oldData, exists, err := readLock(p.LockPath)
	if err != nil {
		return err
	}
	nf := &lockFile{Version: lockVersion, Classes: map[string]uint32{}, Structs: map[string]*lockStruct{}}

	// Classes.
	var items []*idItem
	var oldLive []lockEntry
	for _, name := range sortedKeys(old.Classes) {
		oldLive = append(oldLive, lockEntry{Name: name, ID: old.Classes[name]})
	}
	for _, c := range classes {
		items = append(items, &idItem{name: c.Spec, explicit: l.decls[c.Type.Obj()].id, pos: c.Pos})
	}
	nf.RetiredClasses = l.assign("class", "", items, oldLive, old.RetiredClasses)
	for i, c := range classes {
		c.Schema.ID = items[i].id
		nf.Classes[c.Spec] = items[i].id
	}

	// Fields.
	for _, s := range p.Structs {
		var ls lockStruct
		if o := old.Structs[s.Spec]; o != nil {
			ls = *o
		}
		items := make([]*idItem, len(s.Fields))
		for i, f := range s.Fields {
			items[i] = &idItem{name: f.Name, explicit: l.explicit[f], typ: f.Schema.Type.String(), was: l.was[f], pos: f.Pos,
				persist: f.Schema.Life == schema.LifePersist}
		}
		what := "field"
		if s.RPC != nil {
			// The RPC's argument signature covers type changes.
			what = "argument"
		}
		retired := l.assign(what, s.Spec, items, ls.Fields, ls.Retired)
		live := make([]lockEntry, len(items))
		for i, f := range s.Fields {
			f.Schema.ID = items[i].id
			live[i] = lockEntry{Name: f.Name, ID: f.Schema.ID, Type: items[i].typ, Deprecated: f.Schema.Deprecated}
		}
		slices.SortFunc(live, func(a, b lockEntry) int { return cmpID(a.ID, b.ID) })
		nf.Structs[s.Spec] = &lockStruct{Fields: live, Retired: retired}
	}
	// RPCs, once the argument structs have their field IDs.
	for _, s := range p.Structs {
		if o := old.Structs[s.Spec]; len(s.RPCs) > 0 || o != nil && len(o.RPCs)+len(o.RetiredRPCs) > 0 {
			l.assignRPCs(s, o, nf.Structs[s.Spec])
		}
	}
	// Removed structs keep their IDs, all retired.
	for name, o := range old.Structs {
		if nf.Structs[name] != nil {
			continue
		}
		r := slices.Concat(o.Retired, o.Fields)
		for i := range r {
			r[i].Deprecated = false
		}
		slices.SortFunc(r, func(a, b lockEntry) int { return cmpID(a.ID, b.ID) })
		rr := slices.Concat(o.RetiredRPCs, o.RPCs)
		slices.SortFunc(rr, func(a, b lockRPC) int { return cmpID(a.ID, b.ID) })
		nf.Structs[name] = &lockStruct{Fields: []lockEntry{}, Retired: r, RetiredRPCs: rr}
	}

	p.lockData = nf.marshal()
	p.LockChanged = !bytes.Equal(p.lockData, oldData)
	if exists && p.LockChanged {
		p.LockChanges = diffLock(old, nf, l.renames)
	}
	return nil
}

// assignRPCs assigns the IDs of the RPCs of s against o, its old lock
// entry or nil, and records them in ls, its new one.
func (l *loader) assignRPCs(s *Struct, o, ls *lockStruct) {
	if o == nil {
		o = &lockStruct{}
	}
	items := make([]*idItem, len(s.RPCs))
	for i, r := range s.RPCs {
		items[i] = &idItem{name: r.Name, explicit: l.decls[r.Args.Type.Obj()].rpcID, typ: r.Dir.String() + " " + rpcArgs(r), pos: r.Pos}
	}
	retired := l.assign("RPC", s.Spec, items, rpcEntries(o.RPCs), rpcEntries(o.RetiredRPCs))
	byID := map[uint32]lockRPC{}
	for _, e := range slices.Concat(o.RPCs, o.RetiredRPCs) {
		byID[e.ID] = e
	}
	for i, r := range s.RPCs {
		r.Schema.ID = items[i].id
		n := rpcOf(lockEntry{Name: r.Name, ID: r.Schema.ID, Type: items[i].typ})
		ls.RPCs = append(ls.RPCs, n)
		e, ok := byID[n.ID]
		if !ok || e.Name != n.Name {
			continue
		}
		if e.Dir != n.Dir {
			l.refuse(r.Pos, "RPC %s of %s changed direction from %s to %s; clients built with the schema in %s disagree about who calls it and would be refused. Declare a new RPC with another name instead",
				r.Name, s.Spec, e.Dir, n.Dir, LockFile)
		} else if e.Args != n.Args {
			l.refuse(r.Args.Pos, "RPC %s of %s changed its arguments from %s to %s; clients built with the schema in %s would %s the old arguments. Declare a new RPC with another name instead",
				r.Name, s.Spec, e.Args, n.Args, LockFile, map[string]string{"client": "send", "server": "expect"}[e.Dir])
		}
	}
	slices.SortFunc(ls.RPCs, func(a, b lockRPC) int { return cmpID(a.ID, b.ID) })
	for _, e := range retired {
		ls.RetiredRPCs = append(ls.RetiredRPCs, rpcOf(e))
	}
}

// rpcArgs is the argument signature of r that the lock records: the
// arguments that are sent, in field ID order, as a Go parameter list of
// schema types, "(x float32, y float32 q(0.25))".
func rpcArgs(r *RPC) string {
	fields := slices.Clone(r.Args.Fields)
	slices.SortFunc(fields, func(a, b *Field) int { return cmpID(a.Schema.ID, b.Schema.ID) })
	var parts []string
	for _, f := range fields {
		if !f.Schema.Deprecated {
			parts = append(parts, f.Name+" "+f.Schema.Type.String())
		}
	}
	return "(" + strings.Join(parts, ", ") + ")"
}

// diffLock describes the changes from old to nf. renames maps
// "struct.field" to the old name of each field renamed with was=.
func diffLock(old, nf *lockFile, renames map[string]string) []string {
	var out []string
	add := func(format string, args ...any) { out = append(out, fmt.Sprintf(format, args...)) }
	for name, id := range nf.Classes {
		if oid, ok := old.Classes[name]; !ok {
			add("new class %s (id %d)", name, id)
		} else if oid != id {
			add("class %s: id %d changed to %d", name, oid, id)
		}
	}
	retiredClasses := map[uint32]bool{}
	for _, e := range nf.RetiredClasses {
		retiredClasses[e.ID] = true
	}
	gone := func(retired bool) string {
		if retired {
			return "retired"
		}
		return "reused"
	}
	for name, id := range old.Classes {
		if _, ok := nf.Classes[name]; !ok {
			add("class %s removed (id %d %s)", name, id, gone(retiredClasses[id]))
		}
	}
	for sname, s := range nf.Structs {
		o := old.Structs[sname]
		if o == nil {
			o = &lockStruct{}
		}
		oldByName := map[string]lockEntry{}
		oldByID := map[uint32]lockEntry{}
		for _, e := range o.Fields {
			oldByName[e.Name] = e
			oldByID[e.ID] = e
		}
		newNames := map[string]bool{}
		renamed := map[string]bool{}
		for _, e := range s.Fields {
			newNames[e.Name] = true
			oe, ok := oldByName[e.Name]
			if r, re := oldByID[e.ID]; !ok && re && renames[sname+"."+e.Name] == r.Name {
				add("%s: field %s renamed to %s (id %d)", sname, r.Name, e.Name, e.ID)
				renamed[r.Name] = true
				oe, ok = r, true
			}
			switch {
			case !ok:
				add("%s: new field %s (id %d)", sname, e.Name, e.ID)
				continue
			case oe.ID != e.ID:
				add("%s.%s: id %d changed to %d", sname, e.Name, oe.ID, e.ID)
			}
			if oe.Type != e.Type {
				add("%s.%s: type %s changed to %s", sname, e.Name, oe.Type, e.Type)
			}
			if oe.Deprecated != e.Deprecated {
				if e.Deprecated {
					add("%s.%s: deprecated", sname, e.Name)
				} else {
					add("%s.%s: no longer deprecated", sname, e.Name)
				}
			}
		}
		retired := map[uint32]bool{}
		for _, e := range s.Retired {
			retired[e.ID] = true
		}
		for _, e := range o.Fields {
			if !newNames[e.Name] && !renamed[e.Name] {
				add("%s: field %s removed (id %d %s)", sname, e.Name, e.ID, gone(retired[e.ID]))
			}
		}

		oldRPCs := map[string]lockRPC{}
		for _, r := range o.RPCs {
			oldRPCs[r.Name] = r
		}
		newRPCs := map[string]bool{}
		for _, r := range s.RPCs {
			newRPCs[r.Name] = true
			or, ok := oldRPCs[r.Name]
			if !ok {
				add("%s: new RPC %s (id %d)", sname, r.Name, r.ID)
				continue
			}
			if or.ID != r.ID {
				add("%s.%s: RPC id %d changed to %d", sname, r.Name, or.ID, r.ID)
			}
			if or.Dir != r.Dir {
				add("%s.%s: RPC direction %s changed to %s", sname, r.Name, or.Dir, r.Dir)
			}
			if or.Args != r.Args {
				add("%s.%s: RPC arguments %s changed to %s", sname, r.Name, or.Args, r.Args)
			}
		}
		retiredRPCs := map[uint32]bool{}
		for _, r := range s.RetiredRPCs {
			retiredRPCs[r.ID] = true
		}
		for _, r := range o.RPCs {
			if !newRPCs[r.Name] {
				add("%s: RPC %s removed (id %d %s)", sname, r.Name, r.ID, gone(retiredRPCs[r.ID]))
			}
		}
	}
	if len(out) == 0 {
		add("formatting or retired entries")
	}
	sort.Strings(out)
	return out
}

// WriteLock writes the lock file if it changed. Call it only after the
// generated code was written successfully, so that the lock and the code
// agree.
func (p *Package) WriteLock() error {
	if !p.LockChanged {
		return nil
	}
	tmp, err := os.CreateTemp(filepath.Dir(p.LockPath), ".replica.lock.*.tmp")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(p.lockData); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Chmod(0o644); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), p.LockPath); err != nil {
		return err
	}
	p.LockChanged = false
	p.LockChanges = nil
	return nil
}

// LockData returns the content WriteLock writes: the lock file for the
// loaded state.
func (p *Package) LockData() []byte { return slices.Clone(p.lockData) }
