package gen

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/replicago/replica/schema"
)

// TestCallbackFuncs checks that every leaf a client can see, of every class
// of the ok fixture, gets exactly one typed callback, at the right leaf
// index, and that server-only leaves get none.
func TestCallbackFuncs(t *testing.T) {
	p := load(t, Config{Dir: "testdata/ok", Check: true})
	for _, c := range p.Classes {
		cbs := callbackFuncs(c)
		if cbs[0].name != "On"+c.Name+"Create" || cbs[1].name != "On"+c.Name+"Destroy" || cbs[2].name != "On"+c.Name+"Ownership" {
			t.Errorf("%s: first callbacks %s, %s, %s", c.Name, cbs[0].name, cbs[1].name, cbs[2].name)
		}
		leaves := cbs[3:]
		visible := 0
		for i := 0; i < c.Schema.Leaves; i++ {
			if c.Schema.Leaf(i).Vis != schema.VisServer {
				visible++
			}
		}
		if len(leaves) != visible {
			t.Fatalf("%s: %d leaf callbacks for %d client-visible leaves of %d", c.Name, len(leaves), visible, c.Schema.Leaves)
		}
		// Callbacks follow the declaration order, leaves the field IDs.
		seen := make([]bool, c.Schema.Leaves)
		for _, cb := range leaves {
			if cb.leaf < 0 || cb.leaf >= len(seen) || seen[cb.leaf] || c.Schema.Leaf(cb.leaf).Field != cb.f.Schema {
				t.Errorf("%s: callback %s has leaf %d, a duplicate or not field %s", c.Name, cb.name, cb.leaf, cb.f.Name)
				continue
			}
			seen[cb.leaf] = true
		}
	}
	var names []string
	for _, cb := range callbackFuncs(p.Classes[0]) {
		names = append(names, cb.name)
	}
	if got, want := strings.Join(names, " "), "OnProjectileCreate OnProjectileDestroy OnProjectileOwnership OnProjectileOwnerChange "+
		"OnProjectilePosXChange OnProjectilePosYChange OnProjectilePosZChange "+
		"OnProjectileVelXChange OnProjectileVelYChange OnProjectileVelZChange"; got != want {
		t.Errorf("projectile callbacks:\n got %s\nwant %s", got, want)
	}
	byName := map[string]callbackFunc{}
	for _, cb := range callbackFuncs(p.Classes[1]) {
		byName[cb.name] = cb
		if cb.name == "OnPlayerGoldChange" {
			t.Errorf("server-only field gold got a callback")
		}
	}
	for name, path := range map[string]string{
		"OnPlayerHpChange":                 "hp",
		"OnPlayerBodyStatsResistIceChange": "body.stats.resist.ice",
		"OnPlayerInvChange":                "inv",
		"OnPlayerByNameChange":             "byName",
	} {
		if cb, ok := byName[name]; !ok || cb.path != path {
			t.Errorf("%s: %+v, want path %s", name, cb, path)
		}
	}
	if _, ok := byName["OnPlayerOldChange"]; ok {
		t.Errorf("deprecated field old got a callback")
	}
	if _, ok := byName["OnPlayerBodyChange"]; ok {
		t.Errorf("nested struct field body got a callback of its own")
	}
}

// TestCallbackClashes checks that clashes of typed callback names with
// each other, with generated types and with the package's declarations
// are reported.
func TestCallbackClashes(t *testing.T) {
	dir := tempModule(t, map[string]string{"spec.go": `package fixture

//replica:class
type player struct {
	bodyX int32
	body  vec
}

type vec struct {
	x float32
}

//replica:class
type onPlayerCreate struct {
	n int32
}

//replica:class
type tower struct {
	hp int16
}

func OnTowerHpChange() {}
`})
	p := load(t, Config{Dir: dir})
	_, err := p.Generate()
	checkErrors(t, err, []want{
		{"nested path", "spec.go", 10, "replicagen generates OnPlayerBodyXChange both for field player.bodyX and for field player.body.x"},
		{"type", "spec.go", 14, "replicagen generates the type OnPlayerCreate for onPlayerCreate and the function OnPlayerCreate for class player"},
		{"declared", "spec.go", 19, "replicagen generates OnTowerHpChange for tower, but the package already declares OnTowerHpChange"},
	})
}

// TestTypedCallbacks generates the ok fixture into a module with a test
// that drives every kind of typed callback through a server, the encoder
// and a client replica, and runs it. The callbacks get views, and read
// through them the client's entity: nested structs, lists of structs, maps
// and bags.
func TestTypedCallbacks(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs a test module")
	}
	p := load(t, Config{Dir: "testdata/ok", Check: true})
	src, err := p.Generate()
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]string{"ok_replica.go": string(src), "typed_test.go": typedTest}
	for _, name := range []string{"ok.go", "user.go"} {
		b, err := os.ReadFile(filepath.Join("testdata", "ok", name))
		if err != nil {
			t.Fatal(err)
		}
		files[name] = string(b)
	}
	dir := tempModule(t, files)
	for _, args := range [][]string{{"vet", "."}, {"test", "-count=1", "."}} {
		cmd := exec.Command("go", args...)
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
}

const typedTest = `package ok

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/replicago/replica"
	"github.com/replicago/replica/client"
	"github.com/replicago/replica/codec"
	"github.com/replicago/replica/state"
)

func TestTyped(t *testing.T) {
	tr := state.NewTracker(Schema())
	var enc codec.Encoder
	r, err := client.New(Schema(), client.Config{})
	if err != nil {
		t.Fatal(err)
	}
	var log []string
	add := func(format string, args ...any) { log = append(log, fmt.Sprintf(format, args...)) }
	tick := func(want ...string) {
		t.Helper()
		cs := tr.Commit()
		if err := r.Apply(enc.Delta(nil, cs, codec.PartAll, nil), enc.Delta(nil, cs, codec.PartOwner, nil)); err != nil {
			t.Fatal(err)
		}
		got := log
		log = nil
		// The order follows the wire, which groups entities by class.
		slices.Sort(got)
		slices.Sort(want)
		if !slices.Equal(got, want) {
			t.Errorf("got:\n\t%s\nwant:\n\t%s", strings.Join(got, "\n\t"), strings.Join(want, "\n\t"))
		}
	}
	item := func(it ItemView) string {
		if !it.Valid() {
			return "-"
		}
		var tags []string
		for _, s := range it.Tags().All() {
			tags = append(tags, s)
		}
		return fmt.Sprintf("{kind %d count %d tags %v}", it.Kind(), it.Count(), tags)
	}

	OnPlayerCreate(r, func(p PlayerView) {
		if _, ok := PlayerOf(p.Entity()); ok {
			t.Error("PlayerOf accepts an entity of a client replica")
		}
		if v, ok := PlayerViewOf(p.Entity()); !ok || v != p {
			t.Error("PlayerViewOf refuses an entity of a client replica")
		}
		add("create %d hp %d", p.ID(), p.Hp())
	})
	OnPlayerDestroy(r, func(p PlayerView) { add("destroy %d", p.ID()) })
	OnPlayerAliveChange(r, func(p PlayerView, old, new bool) { add("alive %v -> %v", old, new) })
	OnPlayerHpChange(r, func(p PlayerView, old, new int16) { add("hp %d -> %d (reads %d)", old, new, p.Hp()) })
	OnPlayerXChange(r, func(p PlayerView, old, new float32) { add("x %g -> %g", old, new) })
	OnPlayerHeightChange(r, func(p PlayerView, old, new float64) { add("height %g -> %g", old, new) })
	OnPlayerWeightChange(r, func(p PlayerView, old, new float64) { add("weight %g -> %g", old, new) })
	OnPlayerNameChange(r, func(p PlayerView, old, new string) { add("name %q -> %q", old, new) })
	OnPlayerAvatarChange(r, func(p PlayerView, old, new []byte) { add("avatar %v -> %v", old, new) })
	OnPlayerTeamChange(r, func(p PlayerView, old, new Team) { add("team %d -> %d", old, new) })
	OnPlayerScoreChange(r, func(p PlayerView, old, new Score) { add("score %d -> %d", old, new) })
	OnPlayerTargetChange(r, func(p PlayerView, old, new replica.Ref) {
		pr, ok := ProjectileViewOf(r.Resolve(new))
		add("target %d -> %d (projectile %v, owner %d)", old, new, ok, pr.Owner())
	})
	OnPlayerAimChange(r, func(p PlayerView, old, new Target) { add("aim %d -> %d", old, new) })
	// Nested structs read through nested views.
	OnPlayerBodyPosXChange(r, func(p PlayerView, old, new float32) {
		add("body.pos.x %g -> %g (reads %g)", old, new, p.Body().Pos().X())
	})
	OnPlayerBodyStatsResistIceChange(r, func(p PlayerView, old, new uint8) {
		add("body.stats.resist.ice %d -> %d (reads %d)", old, new, p.Body().Stats().Resist().Ice())
	})
	OnPlayerBuffsChange(r, func(p PlayerView, ev client.ListChange[BuffView]) {
		buff := func(b BuffView) string {
			if !b.Valid() {
				return "-"
			}
			return fmt.Sprintf("{kind %d until %d}", b.Kind(), b.Until())
		}
		// The list of the view, after the tick.
		var all []string
		for _, b := range p.Buffs().All() {
			all = append(all, buff(b))
		}
		add("buffs %v [%d] %s -> %s (reads %v)", ev.Kind, ev.Index, buff(ev.Old), buff(ev.New), all)
	})
	OnPlayerPathChange(r, func(p PlayerView, ev client.ListChange[float32]) { add("path %v [%d] %g -> %g", ev.Kind, ev.Index, ev.Old, ev.New) })
	OnPlayerTagsChange(r, func(p PlayerView, ev client.ListChange[string]) { add("tags %v [%d] %q -> %q", ev.Kind, ev.Index, ev.Old, ev.New) })
	OnPlayerCdsChange(r, func(p PlayerView, ev client.MapChange[string, float32]) {
		v, ok := p.Cds().Get(ev.Key)
		add("cds %v [%s] %g -> %g (reads %g %v, %d entries)", ev.Kind, ev.Key, ev.Old, ev.New, v, ok, p.Cds().Len())
	})
	OnPlayerScoresChange(r, func(p PlayerView, ev client.MapChange[Team, int32]) { add("scores %v [%d] %d -> %d", ev.Kind, ev.Key, ev.Old, ev.New) })
	OnPlayerInvChange(r, func(p PlayerView, ev client.BagChange[uint32, ItemView]) {
		now, _ := p.Inv().Get(ev.Key)
		add("inv %v [%d] leaf %d %s -> %s (reads %s)", ev.Kind, ev.Key, ev.ItemLeaf, item(ev.Old), item(ev.New), item(now))
	})
	OnPlayerByNameChange(r, func(p PlayerView, ev client.MapChange[string, ItemView]) {
		now, _ := p.ByName().Get(ev.Key)
		add("byName %v [%s] %s -> %s (reads %s)", ev.Kind, ev.Key, item(ev.Old), item(ev.New), item(now))
	})
	cancel := OnProjectileVelXChange(r, func(p ProjectileView, old, new float32) { add("vel.x %g -> %g", old, new) })
	OnProjectileCreate(r, func(p ProjectileView) { add("create projectile %d", p.ID()) })

	pl, _ := SpawnPlayer(tr)
	pr, _ := SpawnProjectile(tr)
	pr.SetOwner(replica.Ref(pl.ID()))
	pr.Vel().SetX(2)
	pl.SetAlive(true)
	pl.SetHp(50)
	pl.SetX(10)
	pl.SetHeight(1.8)
	pl.SetWeight(-2.5)
	pl.SetName("bob")
	pl.SetAvatar([]byte{1, 2})
	pl.SetTeam(3)
	pl.SetScore(-7)
	pl.SetTarget(replica.Ref(pr.ID()))
	pl.SetAim(Target(pr.ID()))
	pl.Body().Pos().SetX(1.5)
	pl.Body().Stats().Resist().SetIce(9)
	b := NewBuff()
	b.SetKind(4)
	b.SetUntil(-9)
	pl.Buffs().Push(b)
	pl.Path().Push(0.5)
	pl.Tags().Push("a")
	pl.Tags().Push("b")
	pl.Cds().Put("fire", 1.125)
	pl.Scores().Put(Team(2), -1)
	it := NewItem()
	it.SetKind(1)
	it.SetCount(3)
	it.Tags().Push("new")
	pl.Inv().Add(7, it)
	pl.ByName().Put("sword", it)
	tick(
		"create 1 hp 50",
		"aim 0 -> 2",
		"alive false -> true",
		"avatar [] -> [1 2]",
		"body.pos.x 0 -> 1.5 (reads 1.5)",
		"body.stats.resist.ice 0 -> 9 (reads 9)",
		"buffs added [0] - -> {kind 4 until -9} (reads [{kind 4 until -9}])",
		"byName added [sword] - -> {kind 1 count 3 tags [new]} (reads {kind 1 count 3 tags [new]})",
		"cds added [fire] 0 -> 1.125 (reads 1.125 true, 1 entries)",
		"create projectile 2",
		"height 0 -> 1.8",
		"hp 0 -> 50 (reads 50)",
		"inv added [7] leaf -1 - -> {kind 1 count 3 tags [new]} (reads {kind 1 count 3 tags [new]})",
		` + "`name \"\" -> \"bob\"`" + `,
		"path added [0] 0 -> 0.5",
		"score 0 -> -7",
		"scores added [2] 0 -> -1",
		` + "`tags added [0] \"\" -> \"a\"`" + `,
		` + "`tags added [1] \"\" -> \"b\"`" + `,
		"target 0 -> 2 (projectile true, owner 1)",
		"team 0 -> 3",
		"vel.x 0 -> 2",
		"weight 0 -> -2.5",
		// x is bounded from -1024: a new player starts there.
		"x -1024 -> 10",
	)

	inv, _ := pl.Inv().Get(7)
	inv.SetCount(4)
	inv.Tags().Push("x")
	pl.Tags().Set(0, "z")
	pl.Cds().Put("fire", 2)
	pl.Scores().Delete(Team(2))
	pl.SetHp(40)
	cancel()
	pr.Vel().SetX(3)
	pl.Body().Pos().SetX(-3)
	tick(
		"body.pos.x 1.5 -> -3 (reads -3)",
		"cds changed [fire] 1.125 -> 2 (reads 2 true, 1 entries)",
		"hp 50 -> 40 (reads 40)",
		// Old is the item with the changed field as it was; for a
		// container field, which events carry no old value of, none.
		"inv changed [7] leaf 0 {kind 1 count 3 tags [new x]} -> {kind 1 count 4 tags [new x]} (reads {kind 1 count 4 tags [new x]})",
		"inv changed [7] leaf 2 - -> {kind 1 count 4 tags [new x]} (reads {kind 1 count 4 tags [new x]})",
		"scores removed [2] -1 -> 0",
		` + "`tags changed [0] \"a\" -> \"z\"`" + `,
	)

	repl := NewItem()
	repl.SetKind(2)
	pl.Inv().Add(7, repl)
	pl.Inv().Add(8, repl)
	pl.Buffs().Remove(0)
	pl.Path().Push(-1)
	tick(
		"buffs removed [0] {kind 4 until -9} -> - (reads [])",
		"inv added [8] leaf -1 - -> {kind 2 count 0 tags []} (reads {kind 2 count 0 tags []})",
		"inv changed [7] leaf -1 {kind 1 count 4 tags [new x]} -> {kind 2 count 0 tags []} (reads {kind 2 count 0 tags []})",
		"path added [1] 0 -> -1",
	)

	pl.Inv().Remove(8)
	pl.ByName().Delete("sword")
	tr.Destroy(pr.Entity())
	tick(
		"byName removed [sword] {kind 1 count 3 tags [new]} -> - (reads -)",
		"inv removed [8] leaf -1 {kind 2 count 0 tags []} -> - (reads -)",
	)
	tr.Destroy(pl.Entity())
	tick("destroy 1")
}
`
