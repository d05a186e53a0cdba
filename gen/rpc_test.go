package gen

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/replicago/replica/schema"
)

func TestRPCErrors(t *testing.T) {
	_, err := Load(Config{Dir: "testdata/badrpc"})
	checkErrors(t, err, []want{
		{"args struct as field", "spec.go", 7, "field wrap: shout is the argument struct of RPC shout on player and cannot also be a field type"},
		{"args struct as list element", "spec.go", 8, "field list: shout is the argument struct of RPC shout on player"},
		{"unknown class", "spec.go", 20, "//replica:rpc names class ghost, but the package declares no type ghost"},
		{"generated class name", "spec.go", 23, "Player is the generated type; name the class by its spec type, player"},
		{"not a class", "spec.go", 26, "but stats is not an entity class; mark it with //replica:class"},
		{"bad direction", "spec.go", 29, `bad direction "both" in //replica:rpc: want client`},
		{"no direction", "spec.go", 32, "//replica:rpc needs the class and the direction"},
		{"bad id", "spec.go", 35, "bad id=x in //replica:rpc"},
		{"class and rpc", "spec.go", 39, "dual is marked both //replica:class and //replica:rpc"},
		{"rpc twice", "spec.go", 43, "//replica:rpc is given twice for twice; an RPC is named after its argument struct"},
		{"vis on argument", "spec.go", 49, "field vol: vis= means nothing on an argument of RPC shout"},
		{"life on argument", "spec.go", 50, "field pitch: life= means nothing on an argument of RPC shout"},
		{"chan on argument", "spec.go", 50, "field pitch: chan= means nothing on an argument of RPC shout"},
		{"field rules apply", "spec.go", 51, "field n: unsupported type int"},
		{"duplicate rpc id", "spec.go", 58, "RPCs build and razed of tower both have id 4; every RPC of a class needs its own id"},
		{"exported", "spec.go", 64, "spec type Sneak must be unexported"},
		{"not a struct", "spec.go", 67, "//replica:rpc marks level, which is not declared as a struct type"},
		{"directive with space", "spec.go", 69, "write the directive as //replica:rpc, with no space after //"},
	})
}

// rpcSpec is a package with a class, two RPCs in each direction and a
// nested struct, for the tests below.
const rpcSpec = `package fixture

import "github.com/replicago/replica"

//replica:class
type player struct {
	hp int16
}

type vec struct{ x, y float32 }

//replica:rpc player client
type fire struct {
	x, y   float32 ` + "`replica:\"quant=1/64\"`" + `
	weapon uint8
	old    int8 ` + "`replica:\"deprecated\"`" + `
}

//replica:rpc player client
type aim struct {
	at   vec
	tags []string
}

//replica:rpc player server
type hit struct {
	damage int16
	by     replica.Ref
}

//replica:rpc player server
type ping struct{}
`

func TestRPCModel(t *testing.T) {
	dir := tempModule(t, map[string]string{"spec.go": rpcSpec})
	p := load(t, Config{Dir: dir})
	var specs []string
	for _, s := range p.Structs {
		specs = append(specs, s.Spec)
	}
	if got := strings.Join(specs, " "); got != "aim fire hit ping player vec" {
		t.Errorf("Structs = %s", got)
	}
	pl := p.Classes[0]
	var got []string
	for _, r := range pl.RPCs {
		got = append(got, fmt.Sprintf("%s %s %v %d %s pos=%v", r.Name, r.Method, r.Dir, r.Schema.ID, r.Args.Spec, r.Args.RPC == r && r.Class == pl && r.Pos.Line > 0))
	}
	if want := "fire Fire client 1 fire pos=true|aim Aim client 2 aim pos=true|hit Hit server 3 hit pos=true|ping Ping server 4 ping pos=true"; strings.Join(got, "|") != want {
		t.Errorf("RPCs:\n got %s\nwant %s", strings.Join(got, "|"), want)
	}
	// The schema has the RPCs, laid out with their argument structs.
	c := p.Schema.Class(1)
	fire := c.RPC(1)
	if fire == nil || fire.Name != "fire" || fire.Dir != schema.ClientToServer || fire.Args.Name != "Fire" || fire.Args.NumSlots != 3 {
		t.Fatalf("schema RPC 1 = %+v", fire)
	}
	if f := fire.Args.Field(1); f.Type.Quant.Step != 1.0/64 || f.Num>>3 != 0 {
		t.Errorf("fire.x = %+v", f)
	}
	if hit := c.RPC(3); hit == nil || hit.Dir != schema.ServerToClient || hit.Args.Field(2).Type.Kind != schema.Ref {
		t.Errorf("schema RPC 3 = %+v", hit)
	}
	// Positional: scalars only, deprecated arguments left out.
	byName := map[string]*RPC{}
	for _, r := range pl.RPCs {
		byName[r.Name] = r
	}
	var params []string
	for _, f := range byName["fire"].Params() {
		params = append(params, f.Name)
	}
	if !byName["fire"].Positional() || strings.Join(params, " ") != "x y weapon" {
		t.Errorf("fire params = %v", params)
	}
	if byName["aim"].Positional() || byName["aim"].Params() != nil {
		t.Errorf("aim takes a nested struct: not positional")
	}
	if !byName["ping"].Positional() || len(byName["ping"].Params()) != 0 {
		t.Errorf("ping has no arguments: positional, none")
	}

	// The lock records the RPCs in the class's entry, and the argument
	// structs as structs.
	lock := string(p.LockData())
	for _, line := range []string{
		`"rpcs": [`,
		`{"name": "fire", "id": 1, "dir": "client", "args": "(x float32 q(0.015625), y float32 q(0.015625), weapon uint8)"}`,
		`{"name": "aim", "id": 2, "dir": "client", "args": "(at Vec, tags list<string>)"}`,
		`{"name": "hit", "id": 3, "dir": "server", "args": "(damage int16, by ref)"}`,
		`{"name": "ping", "id": 4, "dir": "server", "args": "()"}`,
		`{"name": "old", "id": 4, "type": "int8", "deprecated": true}`,
	} {
		if !strings.Contains(lock, line) {
			t.Errorf("lock lacks %s:\n%s", line, lock)
		}
	}
}

// rpcIDs renders the RPCs and retired RPCs of a class in the lock.
func rpcIDs(lf *lockFile, spec string) string {
	s := lf.Structs[spec]
	if s == nil {
		return "<none>"
	}
	var b strings.Builder
	for _, r := range s.RPCs {
		fmt.Fprintf(&b, "%s=%d ", r.Name, r.ID)
	}
	b.WriteString("|")
	for _, r := range s.RetiredRPCs {
		fmt.Fprintf(&b, " %s=%d", r.Name, r.ID)
	}
	return b.String()
}

// TestRPCLockEvolution walks RPCs through versions of a package: IDs stay
// stable, removed RPCs are retired and come back with their IDs, and
// incompatible changes are refused unless forced.
func TestRPCLockEvolution(t *testing.T) {
	dir := tempModule(t, map[string]string{"spec.go": rpcSpec})
	p := load(t, Config{Dir: dir})
	if err := p.WriteLock(); err != nil {
		t.Fatal(err)
	}
	edit := func(pairs ...string) string {
		return strings.NewReplacer(pairs...).Replace(rpcSpec)
	}

	// v2: remove aim, add shout; shout does not reuse aim's ID.
	writeFiles(t, dir, map[string]string{"spec.go": edit(
		"//replica:rpc player client\ntype aim struct", "type aim struct",
		"type ping struct{}", "type ping struct{}\n\n//replica:rpc player server\ntype shout struct{ text string }\n",
	)})
	_, err := Load(Config{Dir: dir, Check: true})
	for _, change := range []string{
		"player: RPC aim removed (id 2 retired)",
		"player: new RPC shout (id 5)",
		"aim: field at removed (id 1 retired)",
		"shout: new field text (id 1)",
	} {
		if err == nil || !strings.Contains(err.Error(), change) {
			t.Errorf("v2 Check: want %q in %v", change, err)
		}
	}
	p = load(t, Config{Dir: dir})
	lf := readLockFile(t, p)
	if got := rpcIDs(lf, "player"); got != "fire=1 hit=3 ping=4 shout=5 | aim=2" {
		t.Errorf("v2: %s", got)
	}
	if r := lf.Structs["player"].RetiredRPCs; len(r) != 1 || r[0] != (lockRPC{"aim", 2, "client", "(at Vec, tags list<string>)"}) {
		t.Errorf("v2 retired = %+v", r)
	}
	if err := p.WriteLock(); err != nil {
		t.Fatal(err)
	}
	// An explicit id may not take aim's retired ID.
	writeFiles(t, dir, map[string]string{"spec.go": edit(
		"//replica:rpc player client\ntype aim struct", "type aim struct",
		"type ping struct{}", "type ping struct{}\n\n//replica:rpc player server id=2\ntype shout struct{ text string }\n",
	)})
	_, err = Load(Config{Dir: dir})
	checkErrors(t, err, []want{{"retired id reused", "spec.go", 33, "id=2 of RPC shout was used by the removed RPC aim (see replica.lock.json)"}})

	// v3: aim comes back and gets its ID back.
	v3 := edit("type ping struct{}", "type ping struct{}\n\n//replica:rpc player server\ntype shout struct{ text string }\n")
	writeFiles(t, dir, map[string]string{"spec.go": v3})
	p = load(t, Config{Dir: dir})
	if got := rpcIDs(readLockFile(t, p), "player"); got != "fire=1 aim=2 hit=3 ping=4 shout=5 |" {
		t.Errorf("v3: %s", got)
	}
	if err := p.WriteLock(); err != nil {
		t.Fatal(err)
	}
	// Refused changes, each alone, then all at once with Force.
	for _, c := range []struct {
		name   string
		pairs  []string
		line   string // text that starts at the line of the error
		phrase string
	}{
		{"direction", []string{"//replica:rpc player server\ntype hit", "//replica:rpc player client\ntype hit"},
			"//replica:rpc player client\ntype hit", "RPC hit of player changed direction from server to client"},
		{"added argument", []string{"weapon uint8", "weapon uint8\n\tammo  uint8"},
			"type fire", "RPC fire of player changed its arguments from (x float32 q(0.015625), y float32 q(0.015625), weapon uint8) to (x float32 q(0.015625), y float32 q(0.015625), weapon uint8, ammo uint8)"},
		{"deprecated argument", []string{"damage int16", "damage int16 `replica:\"deprecated\"`"},
			"type hit", "RPC hit of player changed its arguments from (damage int16, by ref) to (by ref)"},
		{"quantization", []string{"quant=1/64", "quant=1/32"},
			"type fire", "changed its arguments from (x float32 q(0.015625)"},
		{"live id reused", []string{"//replica:rpc player server\ntype shout", "//replica:rpc player server id=1\ntype shout"},
			"//replica:rpc player server id=1", "id=1 of RPC shout belongs to RPC fire"},
		{"id changed", []string{"//replica:rpc player server\ntype shout", "//replica:rpc player server id=9\ntype shout"},
			"//replica:rpc player server id=9", "RPC shout has id 5 in replica.lock.json; id=9 would change it"},
	} {
		t.Run(c.name, func(t *testing.T) {
			src := strings.NewReplacer(c.pairs...).Replace(v3)
			if src == v3 {
				t.Fatal("the edit changes nothing")
			}
			writeFiles(t, dir, map[string]string{"spec.go": src})
			_, err := Load(Config{Dir: dir})
			i := strings.Index(src, c.line)
			if i < 0 {
				t.Fatalf("no %q in the source", c.line)
			}
			n := strings.Count(src[:i], "\n") + 1
			checkErrors(t, err, []want{{c.name, "spec.go", n, c.phrase}})
			if err != nil && !strings.Contains(err.Error(), "-force") {
				t.Errorf("the refusal should mention -force: %v", err)
			}
			p := load(t, Config{Dir: dir, Force: true})
			if !p.LockChanged {
				t.Errorf("forced: the lock does not change")
			}
		})
	}

	// A removed class keeps its RPC IDs, retired.
	writeFiles(t, dir, map[string]string{"spec.go": "package fixture\n\n//replica:class\ntype door struct{ open bool }\n"})
	p = load(t, Config{Dir: dir})
	lf = readLockFile(t, p)
	if got := rpcIDs(lf, "player"); got != "| fire=1 aim=2 hit=3 ping=4 shout=5" {
		t.Errorf("removed class: %s", got)
	}
	if err := p.WriteLock(); err != nil {
		t.Fatal(err)
	}
	// And gets them back when it returns.
	writeFiles(t, dir, map[string]string{"spec.go": v3})
	p = load(t, Config{Dir: dir})
	if got := rpcIDs(readLockFile(t, p), "player"); got != "fire=1 aim=2 hit=3 ping=4 shout=5 |" {
		t.Errorf("class back: %s", got)
	}
}

func TestRPCReadLockErrors(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct{ content, want string }{
		{`{"version": 1, "structs": {"p": {"fields": [], "rpcs": [{"name": "a", "id": 1, "dir": "client", "args": "()"}], "retiredRpcs": [{"name": "b", "id": 1, "dir": "client", "args": "()"}]}}}`,
			"struct p records RPC id 1 for both a and b"},
		{`{"version": 1, "structs": {"p": {"fields": [], "rpcs": [{"name": "a", "id": 1, "dir": "up", "args": "()"}]}}}`,
			`RPC a of p has direction "up"`},
		{`{"version": 1, "structs": {"p": {"fields": [], "rpcs": [{"name": "a", "id": 0, "dir": "client", "args": "()"}]}}}`,
			"struct p has an RPC without a name or id"},
		{`{"version": 1, "structs": {"p": {"fields": [], "rpcs": [{"name": "a", "id": 1, "dir": "client", "args": "()"}, {"name": "a", "id": 2, "dir": "server", "args": "()"}]}}}`,
			"struct p records RPC a twice"},
	} {
		path := filepath.Join(dir, LockFile)
		if err := os.WriteFile(path, []byte(c.content), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, _, _, err := readLock(path); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("readLock(%s) = %v, want %q", c.content, err, c.want)
		}
	}
	// A lock without RPCs reads as before, and RPC IDs of fields and RPCs
	// are separate: an RPC and a field may share an ID.
	path := filepath.Join(dir, LockFile)
	content := `{"version": 1, "structs": {"p": {"fields": [{"name": "hp", "id": 1, "type": "int16"}], "rpcs": [{"name": "a", "id": 1, "dir": "client", "args": "()"}]}}}`
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	if lf, _, _, err := readLock(path); err != nil || len(lf.Structs["p"].RPCs) != 1 {
		t.Errorf("readLock: %v", err)
	}
}

// TestRPCClashes checks that generated RPC names that clash with other
// generated names, with declarations of the package or with user methods
// are reported.
func TestRPCClashes(t *testing.T) {
	dir := tempModule(t, map[string]string{"spec.go": `package fixture

//replica:class
type player struct {
	hp int16
	x  float32
}

//replica:rpc player client
type hp struct{}

//replica:rpc player client
type setX struct{}

//replica:rpc player server
type create struct{}

//replica:rpc player server
type hpChange struct{}

//replica:rpc player client
type valid struct{}

//replica:rpc player server
type taunt struct{}

//replica:rpc player client
type dance struct{}

func (p PlayerView) Dance() {}

func SendPlayerTaunt() {}

// The RPC method is on PlayerView, which has no setters.
func (p Player) Jump() {}

//replica:rpc player client
type jump struct{}
`})
	p := load(t, Config{Dir: dir})
	_, err := p.Generate()
	checkErrors(t, err, []want{
		{"field getter", "spec.go", 9, "RPC hp would generate the method PlayerView.Hp, named like an accessor replicagen generates for field hp"},
		{"field setter", "spec.go", 12, "RPC setX would generate the method PlayerView.SetX, named like an accessor replicagen generates for field x"},
		{"create callback", "spec.go", 15, "replicagen generates the function OnPlayerCreate for RPC create of player and the function OnPlayerCreate for class player"},
		{"change callback", "spec.go", 18, "replicagen generates the function OnPlayerHpChange for RPC hpChange of player and the function OnPlayerHpChange for field player.hp"},
		{"reserved method", "spec.go", 21, "RPC valid would generate the method PlayerView.Valid, which replicagen also generates for every class view"},
		{"declared", "spec.go", 25, "replicagen generates SendPlayerTaunt for taunt, but the package already declares SendPlayerTaunt"},
		{"user method", "spec.go", 30, "method PlayerView.Dance clashes with the method replicagen generates to call RPC dance of player"},
	})
}
