package gen

import (
	"fmt"
	"strings"
	"testing"

	"github.com/replicago/replica/state"
)

// TestRename renames fields with was= and checks that they keep their IDs,
// that the lock records the rename, and the notes and errors around it.
func TestRename(t *testing.T) {
	spec := func(fields string) map[string]string {
		return map[string]string{"spec.go": "package fixture\n\n//replica:class\ntype player struct {\n" + fields + "}\n"}
	}
	dir := tempModule(t, spec("\thp   int16\n\tmana int32\n\tname string\n"))
	p := load(t, Config{Dir: dir})
	if err := p.WriteLock(); err != nil {
		t.Fatal(err)
	}
	if got := ids(readLockFile(t, p), "player"); got != "hp=1 mana=2 name=3 |" {
		t.Fatalf("v1 lock: %s", got)
	}

	// v2: hp is renamed health, with was=.
	v2 := "\thealth int16 `replica:\"was=hp\"`\n\tmana   int32\n\tname   string\n"
	writeFiles(t, dir, spec(v2))
	p = load(t, Config{Dir: dir})
	if got := ids(readLockFile(t, p), "player"); got != "health=1 mana=2 name=3 |" {
		t.Errorf("v2 lock: %s, want health with hp's ID and nothing retired", got)
	}
	if got := fmt.Sprint(p.LockChanges); got != "[player: field hp renamed to health (id 1)]" {
		t.Errorf("v2 LockChanges = %s", got)
	}
	if len(p.Notes) != 0 {
		t.Errorf("v2 notes: %v", p.Notes)
	}
	if f := p.Classes[0].Fields[0]; f.Schema.ID != 1 || f.Schema.Name != "health" || f.Method != "Health" {
		t.Errorf("v2 health = %+v", f.Schema)
	}
	if err := p.WriteLock(); err != nil {
		t.Fatal(err)
	}
	// The tag may stay: the lock knows health now.
	p = load(t, Config{Dir: dir, Check: true})
	if p.LockChanged {
		t.Errorf("v2 again: LockChanged %q", p.LockChanges)
	}

	// v3: mana renamed energy without was=: a new ID, and a note.
	writeFiles(t, dir, spec("\thealth int16\n\tenergy int32\n\tname   string\n"))
	p = load(t, Config{Dir: dir})
	if got := ids(readLockFile(t, p), "player"); got != "health=1 name=3 energy=4 | mana=2" {
		t.Errorf("v3 lock: %s", got)
	}
	if len(p.Notes) != 1 || p.Notes[0].Pos.Line != 6 || !strings.Contains(p.Notes[0].Msg,
		"new field energy of player gets a new ID, and field mana of the same type int32 disappeared: if energy is a rename, tag it replica:\"was=mana\"") {
		t.Errorf("v3 notes: %v", p.Notes)
	}

	// Mistakes: a was= naming nothing, one naming a field that still
	// exists, and a rename that changes the type.
	writeFiles(t, dir, spec("\thealth int16\n\tenergy int32 `replica:\"was=manna\"`\n\tname   string\n\tnick   string `replica:\"was=name\"`\n"))
	_, err := Load(Config{Dir: dir})
	checkErrors(t, err, []want{
		{"unknown old name", "spec.go", 6, "field energy is tagged was=manna, but replica.lock.json records no field manna for player"},
		{"old name still there", "spec.go", 8, "field nick is tagged was=name, but field name of player still exists"},
	})
	writeFiles(t, dir, spec("\tlife int32 `replica:\"was=health\"`\n\tmana int32\n\tname string\n"))
	_, err = Load(Config{Dir: dir})
	checkErrors(t, err, []want{
		{"type change", "spec.go", 5, "field life of player changed type from int16 to int32"},
	})
	writeFiles(t, dir, spec("\tlife int16 `replica:\"was=9\"`\n"))
	_, err = Load(Config{Dir: dir})
	checkErrors(t, err, []want{{"bad name", "spec.go", 5, "bad was=9 in replica tag: want the field's previous name"}})
}

// deepSpec returns a class whose field root holds a chain of k nested
// structs, the last field, v<k>, at k+1 levels, and the line of v<k>.
func deepSpec(k int, rootTag string) (string, int) {
	var b strings.Builder
	fmt.Fprintf(&b, "package fixture\n\n//replica:class\ntype deep struct {\n\troot n1 %s\n}\n", rootTag)
	for i := 1; i <= k; i++ {
		fmt.Fprintf(&b, "\ntype n%d struct {\n\tv%d int32\n", i, i)
		if i < k {
			fmt.Fprintf(&b, "\tnext n%d\n", i+1)
		}
		b.WriteString("}\n")
	}
	return b.String(), 9 + 5*(k-1)
}

// TestDepthLimit checks that Load refuses nesting that replica.NewServer
// would refuse (state.Limits.CheckSchema with the default client limits),
// at the field, and accepts what it accepts.
func TestDepthLimit(t *testing.T) {
	src, _ := deepSpec(15, "")
	dir := tempModule(t, map[string]string{"spec.go": src})
	p := load(t, Config{Dir: dir})
	if err := (state.Limits{}).CheckSchema(p.Schema); err != nil {
		t.Errorf("16 levels: generator accepts, NewServer's check refuses: %v", err)
	}

	src, line := deepSpec(16, "")
	writeFiles(t, dir, map[string]string{"spec.go": src})
	_, err := Load(Config{Dir: dir})
	checkErrors(t, err, []want{{"17 levels", "spec.go", line,
		"field deep.root.next.next.next.next.next.next.next.next.next.next.next.next.next.next.next.v16 is 17 levels deep, over the limit of 16"}})

	// Clients never see a server-only field: no limit applies.
	src, _ = deepSpec(16, "`replica:\"vis=server\"`")
	writeFiles(t, dir, map[string]string{"spec.go": src})
	p = load(t, Config{Dir: dir})
	if err := (state.Limits{}).CheckSchema(p.Schema); err != nil {
		t.Errorf("server-only: %v", err)
	}
}

// TestLeafLimit checks that a class over schema.MaxLeaves is refused at
// its declaration.
func TestLeafLimit(t *testing.T) {
	var b strings.Builder
	b.WriteString("package fixture\n\ntype wide struct {\n")
	for i := range 257 {
		fmt.Fprintf(&b, "\tf%d int32\n", i)
	}
	b.WriteString("}\n\n//replica:class\ntype big struct {\n")
	for i := range 256 {
		fmt.Fprintf(&b, "\tw%d wide\n", i)
	}
	b.WriteString("}\n")
	dir := tempModule(t, map[string]string{"spec.go": b.String()})
	_, err := Load(Config{Dir: dir})
	checkErrors(t, err, []want{{"leaves", "spec.go", 264, "struct big flattens to 65792 fields, over the limit of 65536"}})
}
