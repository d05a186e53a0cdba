package gen

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

func TestGoName(t *testing.T) {
	for in, want := range map[string]string{
		"hp": "Hp", "baseInfo": "BaseInfo", "base_info": "BaseInfo", "expire_ts": "ExpireTs",
		"user_id": "UserId", "userID": "UserID", "user_ID": "UserID", "_x": "X", "a__b_": "AB",
		"pos_2d": "Pos2d", "_": "", "__": "",
	} {
		if got := goName(in); got != want {
			t.Errorf("goName(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestSnakeCaseNames generates a package whose specs are snake_case, as
// ported from C++ or Lua: the Go names drop the underscores, the schema and
// the lock keep the names as declared, and the result compiles.
func TestSnakeCaseNames(t *testing.T) {
	dir := tempModule(t, map[string]string{"spec.go": `package fixture

//replica:class
type player_state struct {
	base_info base_info
	expire_ts int64
	user_id   uint32
	inv       map[uint32]inv_item ` + "`replica:\"bag\"`" + `
	tags_list []string
}

type base_info struct {
	level int32
}

type inv_item struct {
	item_count int32
}
`, "use.go": `package fixture

func use(p PlayerState) int64 {
	p.SetExpireTs(3)
	p.BaseInfo().SetLevel(2)
	p.SetUserId(7)
	it := NewInvItem()
	it.SetItemCount(4)
	p.Inv().Add(1, it)
	var _ PlayerStateTagsListList = p.TagsList()
	return p.ExpireTs() + int64(p.BaseInfo().Level())
}
`})
	p := load(t, Config{Dir: dir})
	var methods, names []string
	for _, f := range p.Classes[0].Fields {
		methods = append(methods, f.Method)
		names = append(names, f.Schema.Name)
	}
	if got := strings.Join(methods, " "); got != "BaseInfo ExpireTs UserId Inv TagsList" {
		t.Errorf("methods = %s", got)
	}
	if got := strings.Join(names, " "); got != "base_info expire_ts user_id inv tags_list" {
		t.Errorf("schema names = %s", got)
	}
	if c := p.Classes[0]; c.Name != "PlayerState" || c.Schema.Name != "PlayerState" {
		t.Errorf("class %s generates %s (schema %s)", c.Spec, c.Name, c.Schema.Name)
	}
	lock := string(p.LockData())
	for _, s := range []string{`"player_state": 1`, `"name": "base_info"`, `"name": "expire_ts"`, `"name": "item_count"`} {
		if !strings.Contains(lock, s) {
			t.Errorf("lock lacks %s:\n%s", s, lock)
		}
	}
	src, err := p.Generate()
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{
		"func (p PlayerState) SetExpireTs(x int64)",
		"func (v BaseInfo) Level() int32",
		"func OnPlayerStateBaseInfoLevelChange(",
		"func OnPlayerStateExpireTsChange(",
		"func (v InvItem) SetItemCount(x int32)",
		"type PlayerStateInvBag struct",
		`Name: "base_info"`,
	} {
		if !strings.Contains(string(src), s) {
			t.Errorf("generated code lacks %q", s)
		}
	}
	for _, line := range strings.Split(string(src), "\n") {
		if strings.HasPrefix(line, "func ") && strings.Contains(strings.SplitN(line, "(", 3)[1], "_") {
			t.Errorf("generated name with an underscore: %s", line)
		}
	}
	if err := p.Write(false); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("go", "vet", ".")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("generated package does not compile: %v\n%s", err, out)
	}
}

// TestNameClashes covers the names that collide once underscores are
// dropped, and field accessors that collide with other generated methods.
func TestNameClashes(t *testing.T) {
	dir := tempModule(t, map[string]string{"spec.go": `package fixture

//replica:class
type player struct {
	base_info int32
	baseInfo  int32
	valid     bool
	entity    int32
	x         int32
	set_x     int32
	stats     base_stats
	more      baseStats
	clone     int32
}

type base_stats struct {
	clone int32
	id    int32
}

type baseStats struct {
	n int32
}
`})
	_, err := Load(Config{Dir: dir})
	checkErrors(t, err, []want{
		{"snake and camel", "spec.go", 6, "fields base_info and baseInfo of player both generate the method BaseInfo"},
		{"Valid", "spec.go", 7, "field valid would generate the getter Valid, a method every generated Player has"},
		{"Entity", "spec.go", 8, "field entity would generate the getter Entity"},
		{"setter", "spec.go", 10, "the getter SetX of field set_x is also the setter of field x of player"},
		{"Clone", "spec.go", 17, "field clone would generate the getter Clone, a method every generated BaseStats has"},
		{"types", "spec.go", 21, "and baseStats both generate the type BaseStats"},
	})
}
