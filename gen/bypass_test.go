package gen

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestBypassDoesNotCompile generates a spec package in a scratch module and
// checks that code outside it can change entities only through setters that
// record the change: every way around them is a compile error.
func TestBypassDoesNotCompile(t *testing.T) {
	dir := tempModule(t, map[string]string{})
	files := map[string]string{
		"game/game.go": `package game

//replica:class
type player struct {
	hp   int16
	tags []string
	pos  vec
	inv  map[uint32]item ` + "`replica:\"bag\"`" + `
}

type vec struct{ x, y float32 }

type item struct{ count int32 }
`,
		"ok/ok.go": `package ok

import (
	"example.com/fixture/game"
	"github.com/replicago/replica/state"
)

func Use(tr *state.Tracker) {
	p, _ := game.SpawnPlayer(tr)
	p.SetHp(3)
	p.Tags().Push("a")
	p.Pos().SetX(1)
	p.Inv().Add(1, game.NewItem()).SetCount(2)
}
`,
		"bad/bad.go": `package bad

import (
	"example.com/fixture/game"
	"github.com/replicago/replica/state"
)

func Bypass(p game.Player, tags game.PlayerTagsList, it game.Item, r *state.Record) {
	p.e = nil
	_ = game.player{}
	tags.l = state.ListHandle{}
	it.h = state.Handle{}
	r.num[0] = 1
	p.Entity().Record.obj = nil
}
`,
	}
	for name, src := range files {
		path := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	p, err := Load(Config{Dir: filepath.Join(dir, "game")})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Write(false); err != nil {
		t.Fatal(err)
	}
	build := func(pkg string) (string, error) {
		cmd := exec.Command("go", "build", "./"+pkg)
		cmd.Dir = dir
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	if out, err := build("ok"); err != nil {
		t.Fatalf("legitimate use does not compile: %v\n%s", err, out)
	}
	out, err := build("bad")
	if err == nil {
		t.Fatal("code that bypasses tracking compiled")
	}
	for _, want := range []string{
		"p.e undefined",
		"undefined: game.player",
		"tags.l undefined",
		"it.h undefined",
		"r.num undefined",
		"Record.obj undefined",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("build output lacks %q:\n%s", want, out)
		}
	}
}
