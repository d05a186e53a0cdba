package gen

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/replicago/replica/schema"
)

// tempModule writes a module that uses this repository through a replace
// directive, with the given files in its root package, and returns its
// directory.
func tempModule(t *testing.T, files map[string]string) string {
	t.Helper()
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	sum, err := os.ReadFile(filepath.Join(root, "go.sum"))
	if err != nil {
		t.Fatal(err)
	}
	// The fixture uses the root's go directive: the go command wants a
	// dependency's go version not to exceed the main module's.
	mod, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	goLine := "go 1.26"
	for _, line := range strings.Split(string(mod), "\n") {
		if strings.HasPrefix(line, "go ") {
			goLine = line
		}
	}
	files["go.mod"] = "module example.com/fixture\n\n" + goLine + "\n\nrequire github.com/replicago/replica v0.0.0\n\nreplace github.com/replicago/replica => " + root + "\n"
	files["go.sum"] = string(sum)
	writeFiles(t, dir, files)
	return dir
}

func writeFiles(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func readLockFile(t *testing.T, p *Package) *lockFile {
	t.Helper()
	var lf lockFile
	if err := json.Unmarshal(p.LockData(), &lf); err != nil {
		t.Fatal(err)
	}
	return &lf
}

// ids renders the IDs of a struct's fields and retired fields.
func ids(lf *lockFile, spec string) string {
	s := lf.Structs[spec]
	if s == nil {
		return "<none>"
	}
	var b strings.Builder
	for _, e := range s.Fields {
		fmt.Fprintf(&b, "%s=%d ", e.Name, e.ID)
	}
	b.WriteString("|")
	for _, e := range s.Retired {
		fmt.Fprintf(&b, " %s=%d", e.Name, e.ID)
	}
	return b.String()
}

// TestLockEvolution walks a package through three versions and checks that
// IDs stay stable, removed IDs are never reused and Check mode notices
// every change.
func TestLockEvolution(t *testing.T) {
	const header = "package fixture\n\nimport \"github.com/replicago/replica\"\n\n"
	dir := tempModule(t, map[string]string{"spec.go": header + `
//replica:class
type player struct {
	hp    int16
	mana  int32
	pos   vec
	angle float32 ` + "`replica:\"quant=0.25\"`" + `
}

//replica:class
type npc struct {
	target replica.Ref
}

type vec struct {
	x, y float32
}
`})
	// v1: a fresh package.
	p := load(t, Config{Dir: dir})
	lf := readLockFile(t, p)
	if got := fmt.Sprint(lf.Classes, " ", ids(lf, "player"), " ", ids(lf, "vec")); got != "map[npc:2 player:1] hp=1 mana=2 pos=3 angle=4 | x=1 y=2 |" {
		t.Errorf("v1: %s", got)
	}
	if !p.LockChanged || len(p.LockChanges) != 0 {
		t.Errorf("v1: LockChanged %v, LockChanges %q", p.LockChanged, p.LockChanges)
	}
	if _, err := Load(Config{Dir: dir, Check: true}); err == nil || !strings.Contains(err.Error(), "replica.lock.json is missing") {
		t.Errorf("Check without a lock file: %v", err)
	}
	if err := p.WriteLock(); err != nil {
		t.Fatal(err)
	}
	if p := load(t, Config{Dir: dir, Check: true}); p.LockChanged {
		t.Errorf("v1 reloaded: LockChanged")
	}

	// v2: remove mana and class npc, deprecate hp, add fields and a class.
	writeFiles(t, dir, map[string]string{"spec.go": header + `
//replica:class
type player struct {
	hp      int16 ` + "`replica:\"deprecated\"`" + `
	pos     vec
	angle   float32 ` + "`replica:\"quant=0.25\"`" + `
	stamina int32
}

//replica:class
type door struct {
	open   bool
	opener replica.Ref
}

type vec struct {
	x, y, z float32
}
`})
	_, err := Load(Config{Dir: dir, Check: true})
	for _, change := range []string{
		"replica.lock.json is out of date",
		"class npc removed (id 2 retired)",
		"new class door (id 3)",
		"player.hp: deprecated",
		"player: field mana removed (id 2 retired)",
		"player: new field stamina (id 5)",
		"vec: new field z (id 3)",
		"npc: field target removed (id 1 retired)",
	} {
		if err == nil || !strings.Contains(err.Error(), change) {
			t.Errorf("v2 Check: want %q in %v", change, err)
		}
	}
	p = load(t, Config{Dir: dir})
	lf = readLockFile(t, p)
	if got := fmt.Sprint(lf.Classes, lf.RetiredClasses, " ", ids(lf, "player"), " ", ids(lf, "npc")); got != "map[door:3 player:1] [{npc 2  false}] hp=1 pos=3 angle=4 stamina=5 | mana=2 | target=1" {
		t.Errorf("v2: %s", got)
	}
	if f := lf.Structs["player"].Fields[0]; !f.Deprecated {
		t.Errorf("v2: hp not deprecated in the lock")
	}
	if err := p.WriteLock(); err != nil {
		t.Fatal(err)
	}

	// v3: mana and npc come back and get their old IDs; a new field does
	// not reuse a retired ID.
	v3 := header + `
//replica:class
type player struct {
	hp      int16 ` + "`replica:\"deprecated\"`" + `
	pos     vec
	angle   float32 ` + "`replica:\"quant=0.25\"`" + `
	stamina int32
	mana    int32
	focus   uint8
}

//replica:class
type door struct {
	open   bool
	opener replica.Ref
}

//replica:class
type npc struct {
	target replica.Ref
}

type vec struct {
	x, y, z float32
}
`
	writeFiles(t, dir, map[string]string{"spec.go": v3})
	p = load(t, Config{Dir: dir})
	lf = readLockFile(t, p)
	if got := fmt.Sprint(lf.Classes, lf.RetiredClasses, " ", ids(lf, "player"), " ", ids(lf, "npc")); got != "map[door:3 npc:2 player:1] [] hp=1 mana=2 pos=3 angle=4 stamina=5 focus=6 | target=1 |" {
		t.Errorf("v3: %s", got)
	}
	if err := p.WriteLock(); err != nil {
		t.Fatal(err)
	}

	// v4: a kind change is refused, and accepted with Force.
	writeFiles(t, dir, map[string]string{"spec.go": strings.Replace(v3, "stamina int32", "stamina int64", 1)})
	_, err = Load(Config{Dir: dir})
	checkErrors(t, err, []want{{"type change", "spec.go", 11, "field stamina of player changed type from int32 to int64"}})
	p = load(t, Config{Dir: dir, Force: true})
	if got := fmt.Sprint(p.LockChanges); got != "[player.stamina: type int32 changed to int64]" {
		t.Errorf("v4 forced: LockChanges = %s", got)
	}

	// v5: a changed quantization is a type change too: clients apply
	// deltas to the codes they store.
	writeFiles(t, dir, map[string]string{"spec.go": strings.Replace(v3, "quant=0.25", "quant=0.5", 1)})
	_, err = Load(Config{Dir: dir})
	checkErrors(t, err, []want{{"quant change", "spec.go", 10, "field angle of player changed type from float32 q(0.25) to float32 q(0.5)"}})

	// v6: a saved field's type change says what -force cannot mend.
	writeFiles(t, dir, map[string]string{"spec.go": strings.Replace(v3, "stamina int32", "stamina int64 `replica:\"life=persist\"`", 1)})
	_, err = Load(Config{Dir: dir})
	checkErrors(t, err, []want{{"saved field's type change", "spec.go", 11, "The field is saved (life=persist): every stored document holding it was written as int32 and would fail to load"}})
}

// TestLarge loads a class with 1,000 fields and a chain of structs nested
// 8 levels deep.
func TestLarge(t *testing.T) {
	var b strings.Builder
	b.WriteString("package fixture\n\n//replica:class\ntype big struct {\n")
	for i := range 1000 {
		fmt.Fprintf(&b, "\tf%04d int32\n", i)
	}
	b.WriteString("}\n\n//replica:class\ntype deep struct {\n\troot n1\n}\n")
	for i := 1; i <= 8; i++ {
		fmt.Fprintf(&b, "\ntype n%d struct {\n\tv%d float32 `replica:\"quant=1/64\"`\n", i, i)
		if i < 8 {
			fmt.Fprintf(&b, "\tnext n%d\n", i+1)
		}
		b.WriteString("}\n")
	}
	dir := tempModule(t, map[string]string{"spec.go": b.String()})
	start := time.Now()
	p := load(t, Config{Dir: dir})
	t.Logf("loaded in %v", time.Since(start))
	big := p.Schema.Class(1)
	if big == nil || big.Name != "Big" || len(big.Fields) != 1000 || big.NumSlots != 1000 || big.Field(1000).Name != "f0999" {
		t.Fatalf("big = %+v", big)
	}
	deep := p.Schema.Class(2)
	if deep == nil || deep.NumSlots != 8 || deep.Leaves != 8 {
		t.Fatalf("deep = %+v", deep)
	}
	if l := deep.Leaf(7); len(l.Path) != 9 || l.Field.Name != "v8" || l.Field.Type.Kind != schema.Float32 {
		t.Errorf("deepest leaf = %+v", l)
	}
	if len(p.Structs) != 10 {
		t.Errorf("%d structs, want 10", len(p.Structs))
	}
}

// TestLoadMisc covers stale generated files under another name, syntax
// errors, a package without classes and a missing directory.
func TestLoadMisc(t *testing.T) {
	dir := tempModule(t, map[string]string{
		"spec.go": "package fixture\n\n//replica:class\ntype thing struct {\n\tn int32\n}\n",
		// Generated by an older replicagen under another name, and broken.
		"old_gen.go": GeneratedMarker + "\n\npackage fixture\n\nfunc (t *Thing) N() int32 { return undefined }\n",
		"user.go":    "package fixture\n\nfunc use(t *Thing) int32 { return t.N() + t.Missing() }\n",
	})
	p := load(t, Config{Dir: dir})
	if len(p.GeneratedFiles) != 1 || filepath.Base(p.GeneratedFiles[0]) != "old_gen.go" || filepath.Base(p.OutFile) != "fixture_replica.go" {
		t.Errorf("GeneratedFiles = %q, OutFile = %s", p.GeneratedFiles, p.OutFile)
	}
	if len(p.Classes) != 1 || p.Classes[0].Name != "Thing" || p.Classes[0].Schema.ID != 1 {
		t.Errorf("Classes = %+v", p.Classes)
	}

	writeFiles(t, dir, map[string]string{"user.go": "package fixture\n\nfunc use( {\n"})
	_, err := Load(Config{Dir: dir})
	var list ErrorList
	if !errors.As(err, &list) || len(list) == 0 {
		t.Fatalf("syntax error: got %v", err)
	}
	for _, e := range list {
		if filepath.Base(e.Pos.Filename) != "user.go" || e.Pos.Line != 3 || e.Msg == "" {
			t.Errorf("syntax error: got %v", e)
		}
	}

	if err := os.Remove(filepath.Join(dir, "user.go")); err != nil {
		t.Fatal(err)
	}
	writeFiles(t, dir, map[string]string{"spec.go": "package fixture\n\ntype thing struct {\n\tn int32\n}\n"})
	_, err = Load(Config{Dir: dir})
	if !errors.As(err, &list) || len(list) != 1 || !strings.Contains(list[0].Msg, "package fixture has no entity classes") {
		t.Errorf("no classes: %v", err)
	}

	if _, err := Load(Config{Dir: filepath.Join(dir, "nope")}); err == nil || errors.As(err, &list) {
		t.Errorf("missing directory: %v", err)
	}
}
