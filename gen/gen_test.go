package gen

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/replicago/replica/schema"
)

var update = flag.Bool("update", false, "rewrite golden files")

// load loads a fixture and fails the test on error.
func load(t *testing.T, cfg Config) *Package {
	t.Helper()
	p, err := Load(cfg)
	if err != nil {
		t.Fatalf("Load(%s): %v", cfg.Dir, err)
	}
	return p
}

// want is an expected user error: file base name, line and a phrase of the
// message.
type want struct {
	name   string // subtest name
	file   string
	line   int
	phrase string
}

// checkErrors asserts that err is an ErrorList with exactly the wanted
// errors, one subtest per error.
func checkErrors(t *testing.T, err error, wants []want) {
	t.Helper()
	var list ErrorList
	if !errors.As(err, &list) {
		t.Fatalf("got error %v (%T), want an ErrorList", err, err)
	}
	used := make([]bool, len(list))
	for _, w := range wants {
		t.Run(w.name, func(t *testing.T) {
			for i, e := range list {
				if filepath.Base(e.Pos.Filename) == w.file && e.Pos.Line == w.line && strings.Contains(e.Msg, w.phrase) {
					used[i] = true
					return
				}
			}
			t.Errorf("no error at %s:%d containing %q; got:\n%v", w.file, w.line, w.phrase, list)
		})
	}
	for i, e := range list {
		if !used[i] {
			t.Errorf("unexpected error: %v", e)
		}
	}
}

func TestOK(t *testing.T) {
	golden := filepath.Join("testdata", "ok", LockFile)
	// Assign IDs from scratch (as if there were no lock file) and compare
	// the lock with the committed one.
	p := load(t, Config{Dir: "testdata/ok", lockFile: filepath.Join(t.TempDir(), "none.json")})
	if !p.LockChanged || len(p.LockChanges) != 0 {
		t.Errorf("new lock: LockChanged = %v, LockChanges = %q; want true, none", p.LockChanged, p.LockChanges)
	}
	if *update {
		if err := os.WriteFile(golden, p.LockData(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if want, err := os.ReadFile(golden); err != nil {
		t.Fatal(err)
	} else if got := p.LockData(); !bytes.Equal(got, want) {
		t.Errorf("lock file differs from %s (rerun with -update):\n%s", golden, got)
	}
	checkOK(t, p)

	// Against the committed lock: nothing changes and Check passes.
	p = load(t, Config{Dir: "testdata/ok", Check: true})
	if p.LockChanged {
		t.Errorf("LockChanged with the committed lock: %q", p.LockChanges)
	}
	if err := p.WriteLock(); err != nil {
		t.Errorf("WriteLock of an unchanged lock: %v", err)
	}
	checkOK(t, p)
}

func checkOK(t *testing.T, p *Package) {
	t.Helper()
	abs, _ := filepath.Abs("testdata/ok")
	if p.Name != "ok" || p.ImportPath != "github.com/replicago/replica/gen/testdata/ok" || p.Dir != abs {
		t.Errorf("package = %s %s %s", p.Name, p.ImportPath, p.Dir)
	}
	if p.OutFile != filepath.Join(abs, "ok_replica.go") || len(p.GeneratedFiles) != 1 || p.GeneratedFiles[0] != p.OutFile {
		t.Errorf("OutFile = %s, GeneratedFiles = %q", p.OutFile, p.GeneratedFiles)
	}
	var specs []string
	structs := map[string]*Struct{}
	for _, s := range p.Structs {
		specs = append(specs, s.Spec)
		structs[s.Spec] = s
	}
	if got, want := strings.Join(specs, " "), "body buff item player projectile resist stats vec"; got != want {
		t.Fatalf("Structs = %s, want %s", got, want)
	}
	if len(p.Classes) != 2 || p.Classes[0].Spec != "projectile" || p.Classes[1].Spec != "player" {
		t.Fatalf("Classes = %v", p.Classes)
	}
	if p.Schema.Class(7) != structs["projectile"].Schema || p.Schema.Class(8) != structs["player"].Schema {
		t.Errorf("schema classes: projectile should be 7 (explicit), player 8")
	}

	pl := structs["player"]
	if pl.Name != "Player" || !pl.Class() || pl.Doc != "player is a controllable character.\n" || pl.Pos.Line != 23 {
		t.Errorf("player: Name %q Class %v Doc %q Line %d", pl.Name, pl.Class(), pl.Doc, pl.Pos.Line)
	}
	if _, ok := pl.UserMethods["Heal"]; !ok || len(pl.UserMethods) != 2 {
		t.Errorf("player UserMethods = %v, want Heal and String", pl.UserMethods)
	}
	if pl.Type.Obj().Name() != "player" {
		t.Errorf("player Type = %v", pl.Type)
	}

	// Every field of player, in declaration order.
	type fw struct {
		name, method, typ string
		id                uint32
		vis               schema.Visibility
		life              schema.Lifetime
		ch                schema.Channel
		dep               bool
		goType, keyGoType string
		sub               string
	}
	all, own, oth, srv := schema.VisAll, schema.VisOwner, schema.VisOthers, schema.VisServer
	ses, per := schema.LifeSession, schema.LifePersist
	rel, unr := schema.Reliable, schema.Unreliable
	fields := []fw{
		{"alive", "Alive", "bool", 41, all, ses, rel, false, "bool", "", ""},
		{"level", "Level", "int8", 42, all, ses, rel, false, "int8", "", ""},
		{"hp", "Hp", "int16", 43, own, per, rel, false, "int16", "", ""},
		{"xp", "Xp", "int32", 44, all, per, rel, false, "int32", "", ""},
		{"gold", "Gold", "int64", 45, srv, per, rel, false, "int64", "", ""},
		{"mood", "Mood", "uint8", 46, all, ses, rel, false, "uint8", "", ""},
		{"rank", "Rank", "uint16", 47, oth, ses, rel, false, "uint16", "", ""},
		{"flags", "Flags", "uint32", 48, all, ses, rel, false, "uint32", "", ""},
		{"uid", "Uid", "uint64", 40, all, ses, rel, false, "uint64", "", ""},
		{"angle", "Angle", "float32 q(0.015625)", 49, all, schema.LifeScene, unr, false, "float32", "", ""},
		{"x", "X", "float32 q(0.25,-1024,14)", 50, all, ses, unr, false, "float32", "", ""},
		{"y", "Y", "float32 q(0.25,-1024,14)", 51, all, ses, unr, false, "float32", "", ""},
		{"speed", "Speed", "float32 q(0.0392156862745098,0,8)", 52, all, ses, rel, false, "float32", "", ""},
		{"weight", "Weight", "float64", 53, all, ses, rel, false, "float64", "", ""},
		{"height", "Height", "float64 q(0.001)", 54, all, ses, rel, false, "float64", "", ""},
		{"name", "Name", "string", 55, all, ses, rel, false, "string", "", ""},
		{"avatar", "Avatar", "bytes", 56, all, schema.LifeProcess, rel, false, "[]byte", "", ""},
		{"target", "Target", "ref", 57, all, ses, rel, false, "replica.Ref", "", ""},
		{"aim", "Aim", "ref", 58, all, ses, rel, false, "Target", "", ""},
		{"team", "Team", "uint8", 59, all, ses, rel, false, "Team", "", ""},
		{"score", "Score", "int32", 60, all, ses, rel, false, "Score", "", ""},
		{"body", "Body", "Body", 61, all, ses, rel, false, "", "", "body"},
		{"buffs", "Buffs", "list<Buff>", 62, all, ses, rel, false, "", "", "buff"},
		{"path", "Path", "list<float32 q(0.5)>", 63, all, ses, rel, false, "float32", "", ""},
		{"tags", "Tags", "list<string>", 64, all, ses, rel, false, "string", "", ""},
		{"cds", "Cds", "map<string,float32 q(0.125)>", 65, all, ses, rel, false, "float32", "string", ""},
		{"scores", "Scores", "map<uint8,int32>", 66, all, ses, rel, false, "int32", "Team", ""},
		{"inv", "Inv", "bag<uint32,Item>", 67, own, ses, rel, false, "", "uint32", "item"},
		{"byName", "ByName", "map<string,Item>", 68, all, ses, rel, false, "", "string", "item"},
		{"old", "Old", "int16", 69, all, ses, rel, true, "int16", "", ""},
	}
	if len(pl.Fields) != len(fields) {
		t.Fatalf("player has %d fields, want %d", len(pl.Fields), len(fields))
	}
	for i, w := range fields {
		f := pl.Fields[i]
		sf := f.Schema
		sub := ""
		if f.Struct != nil {
			sub = f.Struct.Spec
		}
		got := fw{f.Name, f.Method, sf.Type.String(), sf.ID, sf.Vis, sf.Life, sf.Chan, sf.Deprecated, f.GoType, f.KeyGoType, sub}
		if got != w {
			t.Errorf("field %d:\n got %+v\nwant %+v", i, got, w)
		}
		if sf.Name != f.Name {
			t.Errorf("schema name %q != %q", sf.Name, f.Name)
		}
	}
	if f := pl.Fields[0]; f.Doc != "alive says whether the player can act.\n" {
		t.Errorf("alive Doc = %q", f.Doc)
	}
	if f := pl.Fields[9]; f.Doc != "angle in radians\n" {
		t.Errorf("angle Doc = %q", f.Doc)
	}
	// The bag item type and list element structs are the nested specs.
	inv := pl.Fields[27].Schema.Type
	if inv.Struct != structs["item"].Schema || inv.Key != schema.Uint32 {
		t.Errorf("inv type = %+v", inv)
	}
	if el := pl.Fields[22].Schema.Type.Elem; el.Kind != schema.Nested || el.Struct != structs["buff"].Schema {
		t.Errorf("buffs elem = %+v", el)
	}
	if q := pl.Fields[12].Schema.Type.Quant; !q.Bounded || q.Bits != 8 || q.Min != 0 || q.Max() != 10 {
		t.Errorf("speed quant = %+v", q)
	}

	// Layout: 19 numeric player fields plus body (vec 3 + stats 4), and 9
	// object fields; the deprecated field takes no slot.
	for _, c := range []struct {
		spec          string
		num, obj, lvs int
	}{
		{"player", 26, 9, 35}, {"projectile", 7, 0, 7}, {"body", 7, 0, 7}, {"stats", 4, 0, 4},
		{"resist", 2, 0, 2}, {"vec", 3, 0, 3}, {"item", 2, 1, 3}, {"buff", 2, 0, 2},
	} {
		s := structs[c.spec].Schema
		if s.NumSlots != c.num || (s.StrSlots+s.ContSlots) != c.obj || s.Leaves != c.lvs {
			t.Errorf("%s slots = %d/%d/%d, want %d/%d/%d", c.spec, s.NumSlots, (s.StrSlots + s.ContSlots), s.Leaves, c.num, c.obj, c.lvs)
		}
	}
	if f := pl.Schema.Field(40); f == nil || f.Num>>3 != 0 {
		t.Errorf("uid (lowest ID) should take the first numeric bytes: %+v", f)
	}
	if f := pl.Schema.Field(69); f == nil || f.Num != -1 || f.Obj != -1 {
		t.Errorf("deprecated old should take no slot: %+v", f)
	}
	// Three levels deep: player.body.stats.resist.ice, visible to the
	// owner only because body.stats is.
	found := false
	for i := range pl.Schema.Leaves {
		l := pl.Schema.Leaf(i)
		if fmt.Sprint(l.Path) == "[61 2 3 2]" {
			found = true
			if l.Field.Name != "ice" || l.Vis != schema.VisOwner || l.Num < 0 {
				t.Errorf("player.body.stats.resist.ice leaf = %+v", l)
			}
		}
	}
	if !found {
		t.Errorf("no leaf player.body.stats.resist.ice")
	}

	it := structs["item"]
	if it.Fields[0].Name != "kind" || it.Fields[0].Schema.ID != 2 || it.Fields[1].Schema.ID != 1 || it.Fields[2].Schema.ID != 3 {
		t.Errorf("item IDs: explicit ones kept, the rest after them")
	}
	if pr := structs["projectile"]; pr.Fields[1].Schema.Vis != schema.VisOthers || pr.Fields[1].Struct != structs["vec"] {
		t.Errorf("projectile.pos = %+v", pr.Fields[1])
	}
}

func TestFieldErrors(t *testing.T) {
	_, err := Load(Config{Dir: "testdata/badfields"})
	checkErrors(t, err, []want{
		{"unsupported int", "bad.go", 15, "unsupported type int: its size depends on the platform; use a sized integer such as int32"},
		{"unsupported array", "bad.go", 16, "unsupported type [4]float32: arrays cannot be replicated"},
		{"unsupported pointer", "bad.go", 17, "unsupported type *vec: pointers cannot be replicated"},
		{"unsupported foreign struct", "bad.go", 18, "unsupported type time.Time: structs from other packages"},
		{"bad tag key", "bad.go", 19, `field key: unknown replica tag key "color"; the keys are id, was, vis`},
		{"bad tag value", "bad.go", 20, "bad vis=public in replica tag: want server, owner, others or all"},
		{"quant on int", "bad.go", 21, "quant= applies only to float32 and float64 fields and to lists and maps of them, but hpq is int16"},
		{"bits without min max", "bad.go", 22, "bits= needs both min= and max="},
		{"bag of scalars", "bad.go", 23, "bag items must be a struct type declared in this package, but the values are int32"},
		{"duplicate explicit id", "bad.go", 25, "id=9 is given to both dup1 and dup2"},
		{"duplicate method", "bad.go", 27, "fields hp and Hp of monster both generate the method Hp"},
		{"embedded field", "bad.go", 28, "embedded field vec is not supported"},
		{"class nested in class", "bad.go", 29, "entity class boss cannot be nested; use replica.Ref"},
		{"list of lists", "bad.go", 30, "a list cannot hold lists; wrap the inner list in a struct"},
		{"float map key", "bad.go", 31, "map keys must be integers or strings, but the keys are float32"},
		{"named int", "bad.go", 32, "unsupported type Count (underlying type int)"},
		{"func", "bad.go", 33, "unsupported type func(): functions cannot be replicated"},
		{"interface", "bad.go", 34, "unsupported type any: interfaces cannot be replicated"},
		{"anonymous struct", "bad.go", 35, "declare a named unexported struct type"},
		{"unresolved", "bad.go", 36, "its type Undefined does not resolve: undefined: Undefined"},
		{"list of pointers", "bad.go", 37, "unsupported type *vec"},
		{"bag with string keys", "bad.go", 38, "bag keys must be integers, but the keys are string"},
		{"bag on a list", "bad.go", 39, "bag applies only to maps of structs, but listbag is []vec"},
		{"exported nested", "bad.go", 40, "nested struct type Point must be unexported"},
		{"generated nested name", "bad.go", 41, "Vec is generated by replicagen; use the spec type vec"},
		{"generated class name", "bad.go", 42, "Boss is generated by replicagen from entity class boss, which cannot be nested"},
		{"blank field", "bad.go", 44, "blank field _ cannot be replicated"},
		{"duplicate tag key", "bad.go", 45, `replica tag key "vis" is given twice`},
		{"tag key without value", "bad.go", 46, `replica tag key "life" needs a value: life=scene, process, session or persist`},
		{"id zero", "bad.go", 47, "bad id=0 in replica tag: want a whole number from 1 to 4294967295"},
		{"unsupported uint", "bad.go", 48, "unsupported type uint"},
		{"bad axis", "bad.go", 50, "bad pos=z in replica tag: want x or y"},
		{"life in a nested struct", "bad.go", 60, "field until: life= is set on a class field and covers everything in it; buff is not a class"},
	})
}

func TestSpecErrors(t *testing.T) {
	_, err := Load(Config{Dir: "testdata/badspec"})
	checkErrors(t, err, []want{
		{"exported spec", "spec.go", 7, "spec type Enemy must be unexported: replicagen generates the exported type Enemy from it"},
		{"generated name declared", "spec.go", 12, "replicagen generates the type Door from spec door, but Door is already declared at "},
		{"inline recursion", "spec.go", 23, "struct node contains itself through node.next"},
		{"unknown directive", "spec.go", 26, "unknown directive //replica:entity"},
		{"directive with space", "spec.go", 31, "write the directive as //replica:class"},
		{"class not a struct", "spec.go", 37, "//replica:class marks level, which is not declared as a struct type"},
		{"duplicate class id", "spec.go", 45, "classes chest and barrel both have id 3"},
		{"bad class id", "spec.go", 49, "bad id=x in //replica:class"},
	})
}

func TestLockBreak(t *testing.T) {
	_, err := Load(Config{Dir: "testdata/lockbreak"})
	checkErrors(t, err, []want{
		{"id reuse of live field", "hero.go", 7, "id=1 of field health belongs to field hp in replica.lock.json"},
		{"id reuse of retired field", "hero.go", 8, "id=3 of field shield was used by the removed field mana"},
		{"type change", "hero.go", 9, "field level of hero changed type from int16 to int32"},
		{"quant change", "hero.go", 10, "field pos of hero changed type from float32 q(0.25) to float32 q(0.5)"},
		{"id change", "hero.go", 11, "field armor has id 4 in replica.lock.json; id=9 would change it"},
		{"class id reuse", "hero.go", 16, "//replica:class id=1 of class villain belongs to class monster"},
		{"retired class id reuse", "hero.go", 21, "//replica:class id=5 of class spirit was used by the removed class ghost"},
	})
	if err != nil && !strings.Contains(err.Error(), "-force") {
		t.Errorf("refusals should mention -force: %v", err)
	}

	// With Force the same package loads and the lock moves to the new state.
	p := load(t, Config{Dir: "testdata/lockbreak", Force: true})
	if !p.LockChanged {
		t.Fatal("forced load: LockChanged = false")
	}
	var lf lockFile
	if err := json.Unmarshal(p.LockData(), &lf); err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(lf.Classes, lf.RetiredClasses); got != "map[hero:2 spirit:5 villain:1] []" {
		t.Errorf("classes = %s", got)
	}
	hero := lf.Structs["hero"]
	got := fmt.Sprint(hero.Fields, hero.Retired)
	wantLock := "[{health 1 int16 false} {level 2 int32 false} {shield 3 int32 false} {pos 6 float32 q(0.5) false} {armor 9 int32 false} {speed 10 float32 false}] [{armor 4 int32 false}]"
	if got != wantLock {
		t.Errorf("forced hero lock:\n got %s\nwant %s", got, wantLock)
	}
	if m := lf.Structs["monster"]; m == nil || len(m.Fields) != 0 || fmt.Sprint(m.Retired) != "[{hp 1 int16 false}]" {
		t.Errorf("removed struct monster should keep its IDs as retired: %+v", m)
	}
	wantChanges := []string{
		"class monster removed (id 1 reused)",
		"hero.armor: id 4 changed to 9",
		"hero.level: type int16 changed to int32",
		"hero.pos: type float32 q(0.25) changed to float32 q(0.5)",
		"hero: field hp removed (id 1 reused)",
		"hero: new field health (id 1)",
		"hero: new field shield (id 3)",
		"hero: new field speed (id 10)",
		"monster: field hp removed (id 1 retired)",
		"new class spirit (id 5)",
		"new class villain (id 1)",
		"spirit: new field hp (id 1)",
		"villain: new field hp (id 1)",
	}
	if strings.Join(p.LockChanges, "\n") != strings.Join(wantChanges, "\n") {
		t.Errorf("LockChanges:\n%s", strings.Join(p.LockChanges, "\n"))
	}
}

// TestGenerateGolden compares the generated file of the golden fixture with
// the committed one (rerun with -update to accept a change).
func TestGenerateGolden(t *testing.T) {
	p := load(t, Config{Dir: "testdata/golden"})
	got, err := p.Generate()
	if err != nil {
		t.Fatal(err)
	}
	golden := filepath.Join("testdata", "golden", "golden_replica.go")
	if *update {
		if err := os.WriteFile(golden, got, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := p.WriteLock(); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("generated code differs from %s (rerun with -update after reviewing)", golden)
	}
	if p.LockChanged {
		t.Errorf("the golden fixture's lock file is out of date (rerun with -update)")
	}
	// The committed output must compile.
	if out, err := exec.Command("go", "vet", "./testdata/golden").CombinedOutput(); err != nil {
		t.Errorf("golden output does not compile: %v\n%s", err, out)
	}
}

// TestPositionErrors checks the pos= tag: a coordinate must be a number
// of a class's own fields (or of a struct nested in one), and a class
// marks one x and one y, or neither.
func TestPositionErrors(t *testing.T) {
	_, err := Load(Config{Dir: "testdata/badpos"})
	checkErrors(t, err, []want{
		{"string coordinate", "bad.go", 9, "field sign.text: pos=y needs a number"},
		{"x without y", "bad.go", 13, "class post has 1 pos=x and 0 pos=y fields"},
		{"two x", "bad.go", 18, "class pair has 2 pos=x and 1 pos=y fields: a position needs exactly one of each (a, b are declared together, so both get the tag: declare each coordinate on its own line)"},
		{"in a list element x", "bad.go", 29, "field x: pos=x is only read from a class's own fields"},
		{"in a list element y", "bad.go", 30, "field y: pos=y is only read from a class's own fields"},
	})
}

// TestPositionTags checks that a class's position, declared on a nested
// struct, reaches the schema.
func TestPositionTags(t *testing.T) {
	p := load(t, Config{Dir: "testdata/pos"})
	c := p.Schema.Classes[0]
	var axes []schema.Axis
	for i := range c.Leaves {
		axes = append(axes, c.Leaf(i).Field.Pos)
	}
	if want := []schema.Axis{schema.AxisX, schema.AxisY, schema.AxisNone}; !slices.Equal(axes, want) {
		t.Fatalf("leaf axes %v, want %v", axes, want)
	}
	out, err := p.Generate()
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(out, []byte("Pos: schema.AxisX")) || !bytes.Contains(out, []byte("Pos: schema.AxisY")) {
		t.Fatalf("generated schema does not mark the position:\n%s", out)
	}
}

// TestLODErrors checks the lod= tag: a positive distance, on a field of a
// class that reaches clients, at most schema.MaxBands distances a class.
func TestLODErrors(t *testing.T) {
	_, err := Load(Config{Dir: "testdata/badlod"})
	checkErrors(t, err, []want{
		{"no position", "bad.go", 8, "field hero.secret: lod= needs a position to measure the distance from: tag class hero's coordinates pos=x and pos=y"},
		{"server-only", "bad.go", 8, "field hero.secret: lod= on a vis=server field"},
		{"five distances", "bad.go", 14, "class hero has more than 4 distinct lod= distances"},

		{"nested struct field", "bad.go", 18, "field gear.helm: lod= applies to fields of entity classes"},
	})
}

// TestLODTags checks that lod= distances reach the schema as bands,
// farthest first, a nested field's band covering its leaves.
func TestLODTags(t *testing.T) {
	p := load(t, Config{Dir: "testdata/lod"})
	c := p.Schema.Classes[0]
	if !slices.Equal(c.Bands(), []float64{60, 20}) {
		t.Fatalf("bands %v, want [60 20]", c.Bands())
	}
	var got []string
	for i := range c.Leaves {
		l := c.Leaf(i)
		got = append(got, fmt.Sprintf("%s:%d", l.Field.Name, l.Band))
	}
	if want := "x:0 y:0 hp:0 helm:1 boots:1 emote:2 title:1"; strings.Join(got, " ") != want {
		t.Fatalf("leaf bands %s, want %s", strings.Join(got, " "), want)
	}
	out, err := p.Generate()
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(out, []byte("LOD: 60")) || !bytes.Contains(out, []byte("LOD: 20")) {
		t.Fatalf("generated schema does not carry the distances:\n%s", out)
	}
}
