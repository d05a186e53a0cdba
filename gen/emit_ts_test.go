package gen

import (
	"bytes"
	"encoding/base64"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// TestGenerateTS checks the TypeScript output for the golden fixture:
// deterministic, the descriptor embedded is the schema's, every leaf
// reference names the leaf at its index, and getters, callbacks and RPC
// stubs have their typed signatures.
func TestGenerateTS(t *testing.T) {
	p := load(t, Config{Dir: "testdata/golden", Check: true})
	src, err := p.GenerateTS(TSOptions{})
	if err != nil {
		t.Fatal(err)
	}
	again, err := load(t, Config{Dir: "testdata/golden", Check: true}).GenerateTS(TSOptions{})
	if err != nil || !bytes.Equal(src, again) {
		t.Fatalf("two runs differ (err %v)", err)
	}
	out := string(src)
	if !strings.HasPrefix(out, GeneratedMarker+"\n") || !strings.Contains(out, `from "@replicago/replica";`) {
		t.Errorf("missing the generated marker or the runtime import")
	}
	m := regexp.MustCompile(`export const DESCRIPTOR = "([^"]*)";`).FindStringSubmatch(out)
	if m == nil {
		t.Fatal("no descriptor")
	}
	if desc, err := base64.StdEncoding.DecodeString(m[1]); err != nil || !bytes.Equal(desc, p.Schema.AppendDescriptor(nil)) {
		t.Errorf("the embedded descriptor is not the schema's (%v)", err)
	}
	// Every leafRef(S$, i, "name") names leaf i of S.
	byName := map[string]*Struct{}
	for _, s := range p.Structs {
		byName[s.Name] = s
	}
	refs := regexp.MustCompile(`leafRef\((\w+)\$, (\d+), "([^"]*)"\)`).FindAllStringSubmatch(out, -1)
	if len(refs) == 0 {
		t.Fatal("no leaf references")
	}
	for _, r := range refs {
		s := byName[r[1]]
		i, _ := strconv.Atoi(r[2])
		if s == nil || i >= s.Schema.Leaves || leafNames(s.Schema)[i] != r[3] {
			t.Errorf("leafRef(%s, %s, %q) does not name that leaf", r[1], r[2], r[3])
		}
	}
	for _, want := range []string{
		"export class Hero extends StructView {",
		"static readonly classId = ",
		"get owned(): boolean {\n\t\treturn this.entity.owned;\n\t}",
		"get hp(): number {",
		"get avatar(): Uint8Array {",
		"get pos(): Vec {",
		"get path(): TypedList<Vec> {",
		"get scores(): TypedMap<string, number> {",
		"get inv(): TypedMap<number, Item> {",
		"static onHpChange(r: Replica, fn: (p: Hero, old: number, now: number) => void): Unregister {",
		"static onInvChange(r: Replica, fn: (p: Hero, ev: TypedBagEvent<number, Item>) => void): Unregister {",
		"static onLevel(r: Replica, fn: (p: Hero, old: number, now: number) => void): Unregister {",
		"fire(conn: Connection, x: number, y: number, weapon: number, label: string, target: number): void {",
		`conn.callRPC(this.entity, 6, { "x": x, "y": y, "weapon": weapon, "label": label, "target": target });`,
		"aim(conn: Connection, args: AimArgs): void {",
		"export interface AimArgs {",
		"static onHit(conn: Connection, fn: (p: Hero, damage: number, from: number, fx: Uint8Array) => void): Unregister {",
		"static onTaunt(conn: Connection, fn: (p: Hero) => void): Unregister {",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("missing %q", want)
		}
	}
}

// TestGenerateTSServerOnly: a server-only field of a class has no getter
// and no callback.
func TestGenerateTSServerOnly(t *testing.T) {
	p := load(t, Config{Dir: "testdata/ok", Check: true})
	src, err := p.GenerateTS(TSOptions{Import: "./runtime.js"})
	if err != nil {
		t.Fatal(err)
	}
	out := string(src)
	if strings.Contains(out, "get gold(") || strings.Contains(out, "onGoldChange") {
		t.Errorf("server-only field gold has a getter or callback")
	}
	if !strings.Contains(out, "get hp(): number") || !strings.Contains(out, `from "./runtime.js";`) {
		t.Errorf("missing player.hp's getter or the -tsimport module")
	}
	if strings.Contains(out, "get old(") {
		t.Errorf("deprecated field old has a getter")
	}
}

// TestGenerateTSClashes: names the TypeScript classes cannot hold are
// refused with the field's position.
func TestGenerateTSClashes(t *testing.T) {
	for _, c := range []struct{ spec, want string }{
		{"//replica:class\ntype unit struct {\n\ttoString int32\n}\n", "getter toString, which every generated class has"},
		{"//replica:class\ntype unit struct {\n\thp int32\n}\n\n//replica:rpc unit server\ntype level struct{}\n", "Unit.onLevel both for every class and for RPC level"},
		{"//replica:class\ntype unit struct {\n\towned bool\n}\n", "Unit.owned both for every class and for field owned"},
	} {
		dir := tempModule(t, map[string]string{"spec.go": "package fixture\n\n" + c.spec})
		p, err := Load(Config{Dir: dir})
		if err != nil {
			t.Fatalf("Load: %v", err)
		}
		_, err = p.GenerateTS(TSOptions{})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: GenerateTS: %v, want %q", c.spec, err, c.want)
		}
	}
}

// TestGenerateTSGolden compares the TypeScript file of the golden fixture
// with the committed testdata/golden/golden_replica.ts (rerun with -update
// after reviewing), which ts/test/generated.test.ts type-checks and runs:
// its RPC stubs included.
func TestGenerateTSGolden(t *testing.T) {
	p := load(t, Config{Dir: "testdata/golden", Check: true})
	got, err := p.GenerateTS(TSOptions{})
	if err != nil {
		t.Fatal(err)
	}
	golden := filepath.Join("testdata", "golden", "golden_replica.ts")
	if *update {
		if err := os.WriteFile(golden, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("generated TypeScript differs from %s (rerun with -update after reviewing)", golden)
	}
}

// TestWriteTSDir: with TSOptions.Dir (replicagen -tsout) the TypeScript
// file goes into that directory, relative to the package's, and nowhere
// else; no directory is created; check mode checks the file there.
func TestWriteTSDir(t *testing.T) {
	dir := tempModule(t, map[string]string{})
	pkg := filepath.Join(dir, "game")
	for _, d := range []string{pkg, filepath.Join(dir, "web", "src")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	writeFiles(t, pkg, map[string]string{"spec.go": "package game\n\n//replica:class\ntype unit struct {\n\thp int32\n}\n"})
	p, err := Load(Config{Dir: pkg})
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	opts := TSOptions{Dir: "../web/src"}
	want := filepath.Join(dir, "web", "src", "game_replica.ts")
	if got := p.TSFile(opts); got != want {
		t.Errorf("TSFile = %s, want %s", got, want)
	}
	if err := p.WriteTS(true, opts); err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("check before writing: %v, want out of date: %s", err, want)
	}
	if err := p.WriteTS(false, opts); err != nil {
		t.Fatal(err)
	}
	src, err := os.ReadFile(want)
	if err != nil || !strings.Contains(string(src), `from "@replicago/replica";`) {
		t.Fatalf("no generated file in the -tsout directory (%v)", err)
	}
	if _, err := os.Stat(filepath.Join(pkg, "game_replica.ts")); !os.IsNotExist(err) {
		t.Errorf("a TypeScript file in the package directory too (%v)", err)
	}
	if err := p.WriteTS(true, opts); err != nil {
		t.Errorf("check after writing: %v", err)
	}
	if err := os.WriteFile(want, append(src, '\n'), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := p.WriteTS(true, opts); err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("check of a changed file: %v, want out of date: %s", err, want)
	}
	// A directory that does not exist is not created.
	missing := TSOptions{Dir: "../client"}
	if err := p.WriteTS(false, missing); err == nil || !strings.Contains(err.Error(), "is not a directory") {
		t.Errorf("WriteTS into a missing directory: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "client")); !os.IsNotExist(err) {
		t.Errorf("the missing directory was created (%v)", err)
	}
	// Absolute directories are taken as they are.
	if got := p.TSFile(TSOptions{Dir: filepath.Join(dir, "web")}); got != filepath.Join(dir, "web", "game_replica.ts") {
		t.Errorf("TSFile with an absolute directory = %s", got)
	}
}
