package gen

import (
	"errors"
	"fmt"
	"go/token"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/replicago/replica/schema"
)

func TestParseTag(t *testing.T) {
	for _, c := range []struct {
		tag  string
		want string // tag fields as formatted below, or an error phrase
	}{
		{``, "vis=all life=session chan=reliable"},
		{`json:"x"`, "vis=all life=session chan=reliable"},
		{`replica:""`, "vis=all life=session chan=reliable"},
		{`replica:"-"`, "skip"},
		{`replica:"id=7, vis=owner ,life=persist,chan=unreliable,deprecated"`, "id=7 vis=owner life=persist chan=unreliable deprecated"},
		{`replica:"vis=server,life=scene"`, "vis=server life=scene chan=reliable"},
		{`replica:"vis=others,life=process"`, "vis=others life=process chan=reliable"},
		{`replica:"vis=all,life=session,chan=reliable"`, "vis=all life=session chan=reliable"},
		{`replica:"bag"`, "vis=all life=session chan=reliable bag"},
		{`replica:"quant=1/64"`, "vis=all life=session chan=reliable q=0.015625 key=quant"},
		{`replica:"min=-5,quant=0.5,max=5"`, "vis=all life=session chan=reliable q=0.5 min=-5 max=5 key=min"},
		{`replica:"bits=12,min=0,max=1"`, "vis=all life=session chan=reliable bits=12 min=0 max=1 key=bits"},
		{`replica:"id=4294967295"`, "id=4294967295 vis=all life=session chan=reliable"},
		{`replica:"id=4294967296"`, "bad id=4294967296 in replica tag: want a whole number from 1 to 4294967295"},
		{`replica:"id=-1"`, "bad id=-1"},
		{`replica:"id"`, `replica tag key "id" needs a value`},
		{`replica:"id="`, `replica tag key "id" needs a value`},
		{`replica:"life=forever"`, "bad life=forever in replica tag: want scene, process, session or persist"},
		{`replica:"chan=udp"`, "bad chan=udp in replica tag: want reliable or unreliable"},
		{`replica:"quant=0"`, "bad quant=0 in replica tag: want a positive step such as 0.25 or 1/64"},
		{`replica:"quant=-1"`, "bad quant=-1"},
		{`replica:"quant=1/0"`, "bad quant=1/0"},
		{`replica:"quant=a/b"`, "bad quant=a/b"},
		{`replica:"min=x"`, "bad min=x in replica tag: want a number"},
		{`replica:"max=Inf"`, "bad max=Inf"},
		{`replica:"lod=-1"`, "bad lod=-1 in replica tag: want a distance such as 50"},
		{`replica:"lod=0"`, "bad lod=0"},
		{`replica:"lod=Inf"`, "bad lod=Inf"},
		{`replica:"bits=33"`, "bad bits=33 in replica tag: want a whole number from 1 to 32"},
		{`replica:"bag=yes"`, `replica tag flag "bag" takes no value`},
		{`replica:"deprecated=true"`, `replica tag flag "deprecated" takes no value`},
		{`replica:"id=1,,vis=all"`, "has an empty item"},
		{`replica:"ID=1"`, `unknown replica tag key "ID"; the keys are id, was, vis, life, chan, pos, lod, quant, min, max, bits, bag and deprecated`},
		{`replica:"bag,bag"`, `replica tag key "bag" is given twice`},
		{`replica:id=1`, "malformed struct tag `replica:id=1`"},
		{`replcia:"vis=owner"`, `struct tag key "replcia" looks like a misspelt replica`},
		{`json:"x" Replica:"vis=owner"`, `struct tag key "Replica" looks like a misspelt replica`},
		{`json:"x" repica:"vis=owner"`, `struct tag key "repica" looks like a misspelt replica`},
		{`replicas:"vis=owner"`, `struct tag key "replicas" looks like a misspelt replica`},
		{`json:"x" yaml:"y"`, "vis=all life=session chan=reliable"},
	} {
		tg, errs := parseTag(c.tag)
		var got string
		if len(errs) > 0 {
			got = strings.Join(errs, "; ")
			if !strings.Contains(got, c.want) {
				t.Errorf("parseTag(%s): errors %q, want %q", c.tag, got, c.want)
			}
			continue
		}
		got = formatTag(tg)
		if got != c.want {
			t.Errorf("parseTag(%s) = %q, want %q", c.tag, got, c.want)
		}
	}
}

func formatTag(tg *tag) string {
	if tg.skip {
		return "skip"
	}
	var parts []string
	add := func(format string, args ...any) { parts = append(parts, fmt.Sprintf(format, args...)) }
	if tg.id != 0 {
		add("id=%d", tg.id)
	}
	add("vis=%v life=%v chan=%v", tg.vis, tg.life, tg.ch)
	if tg.bag {
		add("bag")
	}
	if tg.deprecated {
		add("deprecated")
	}
	if tg.step != 0 {
		add("q=%g", tg.step)
	}
	if tg.bits != 0 {
		add("bits=%d", tg.bits)
	}
	if tg.hasMin {
		add("min=%g", tg.min)
	}
	if tg.hasMax {
		add("max=%g", tg.max)
	}
	if tg.quantKey != "" {
		add("key=%s", tg.quantKey)
	}
	return strings.Join(parts, " ")
}

func TestErrorFormat(t *testing.T) {
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		err  *Error
		want string
	}{
		{&Error{Pos: token.Position{Filename: filepath.Join(wd, "testdata", "x.go"), Line: 3, Column: 7}, Msg: "bad"}, "testdata/x.go:3:7: bad"},
		{&Error{Pos: token.Position{Filename: filepath.Join(wd, "x.go"), Line: 3}, Msg: "bad"}, "x.go:3: bad"},
		{&Error{Pos: token.Position{Filename: "/" + LockFile}, Msg: "bad"}, "/" + LockFile + ": bad"},
		{&Error{Msg: "bad"}, "bad"},
	} {
		if got := c.err.Error(); got != filepath.FromSlash(c.want) {
			t.Errorf("Error() = %q, want %q", got, c.want)
		}
	}
	list := ErrorList{
		{Pos: token.Position{Filename: "b.go", Line: 1}, Msg: "m"},
		{Pos: token.Position{Filename: "a.go", Line: 9}, Msg: "m"},
		{Pos: token.Position{Filename: "a.go", Line: 2}, Msg: "m"},
		{Pos: token.Position{Filename: "a.go", Line: 2}, Msg: "m"},
	}.sort()
	if got := list.Error(); got != "a.go:2: m\na.go:9: m\nb.go:1: m" {
		t.Errorf("sorted list = %q", got)
	}
	var e *Error
	if !errors.As(error(list), &e) || e.Pos.Line != 2 {
		t.Errorf("errors.As(ErrorList, *Error) = %v", e)
	}
	if got := parsePos("/a/b.go:12:5"); got.Filename != "/a/b.go" || got.Line != 12 || got.Column != 5 {
		t.Errorf("parsePos = %+v", got)
	}
}

func TestReadLockErrors(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct {
		content, want string
		line          int
	}{
		{"{\n  \"version\": 1,\n  \"classes\": {\"a\": 1,}\n}\n", "is not valid JSON", 3},
		{`{"version": 2}`, "has version 2, but this replicagen reads version 1", 0},
		{`{"version": 1, "classes": "x"}`, "is malformed", 1},
		{`{"version": 1, "classes": {"a": 1, "b": 1}}`, "classes a and b both have id 1", 0},
		{`{"version": 1, "structs": {"s": {"fields": [{"name": "x", "id": 1, "type": "int8"}], "retired": [{"name": "y", "id": 1, "type": "int8"}]}}}`,
			"struct s records id 1 for both x and y", 0},
		{`{"version": 1, "structs": {"s": {"fields": [{"name": "x", "id": 0, "type": "int8"}]}}}`, "without a name or id", 0},
	} {
		path := filepath.Join(dir, LockFile)
		if err := os.WriteFile(path, []byte(c.content), 0o644); err != nil {
			t.Fatal(err)
		}
		_, _, _, err := readLock(path)
		var list ErrorList
		if !errors.As(err, &list) || len(list) != 1 || !strings.Contains(list[0].Msg, c.want) || list[0].Pos.Line != c.line {
			t.Errorf("readLock(%s) = %v, want %q at line %d", c.content, err, c.want, c.line)
		}
	}
	lf, data, exists, err := readLock(filepath.Join(dir, "missing.json"))
	if err != nil || exists || data != nil || len(lf.Classes) != 0 {
		t.Errorf("missing lock: %v %v %v %v", lf, data, exists, err)
	}
}

func TestKindSig(t *testing.T) {
	f := schema.Type{Kind: schema.Float32, Quant: schema.Quant{Step: 0.25, Min: -1, Bits: 3, Bounded: true}}
	m := schema.Type{Kind: schema.Map, Key: schema.String, Elem: &f}
	if got := kindSig(m.String()); got != "map<string,float32>" {
		t.Errorf("kindSig(%s) = %s", m.String(), got)
	}
}

func TestUpperFirst(t *testing.T) {
	for in, want := range map[string]string{"hp": "Hp", "HP": "HP", "x": "X", "éclat": "Éclat"} {
		if got := upperFirst(in); got != want {
			t.Errorf("upperFirst(%q) = %q, want %q", in, got, want)
		}
	}
}
