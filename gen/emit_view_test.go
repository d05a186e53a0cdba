package gen

import (
	"go/types"
	"slices"
	"strings"
	"testing"

	"golang.org/x/tools/go/packages"
)

// viewSpec has fields of every kind that a view keeps or leaves out:
// server-only ones (scalar, nested, container, inside an inline struct),
// a deprecated one, and a server-only field of a struct that is also sent
// whole, which views keep. Structs that only RPC arguments or server-only
// fields hold get no view.
const viewSpec = `package fixture

//replica:class
type player struct {
	hp     int16
	secret int32 ` + "`replica:\"vis=server\"`" + `
	hidden vault ` + "`replica:\"vis=server\"`" + `
	stash  []int32 ` + "`replica:\"vis=server\"`" + `
	body   body
	inv    map[uint32]item ` + "`replica:\"bag\"`" + `
	buffs  []buff
	names  map[string]int32
	old    int16 ` + "`replica:\"deprecated\"`" + `
}

type body struct {
	pos vec
	gm  string ` + "`replica:\"vis=server\"`" + `
}

type vec struct{ x, y float32 }

type item struct {
	kind uint8
	note string ` + "`replica:\"vis=server\"`" + `
	tags []string
}

type buff struct{ n int32 }

type vault struct{ n int32 }

type target struct{ x, y float32 }

//replica:rpc player client
type fire struct {
	at   target
	tags []string
}

//replica:rpc player server
type hit struct {
	damage int16
}
`

// TestViewMethods generates viewSpec into a scratch module, type-checks it
// and checks the method sets of the generated types: views have getters
// only for the fields that reach clients, and nothing that writes; the
// server's class no longer has IsOwned.
func TestViewMethods(t *testing.T) {
	dir := tempModule(t, map[string]string{"spec.go": viewSpec})
	p := load(t, Config{Dir: dir})
	if err := p.Write(false); err != nil {
		t.Fatal(err)
	}
	pkgs, err := packages.Load(&packages.Config{Mode: packages.NeedTypes | packages.NeedTypesInfo | packages.NeedSyntax, Dir: dir}, ".")
	if err != nil {
		t.Fatal(err)
	}
	if packages.PrintErrors(pkgs) > 0 {
		t.Fatal("the generated package does not type-check")
	}
	scope := pkgs[0].Types.Scope()
	methods := func(name string) []string {
		t.Helper()
		obj, ok := scope.Lookup(name).(*types.TypeName)
		if !ok {
			t.Fatalf("no type %s", name)
		}
		var out []string
		ms := types.NewMethodSet(obj.Type())
		for i := range ms.Len() {
			out = append(out, ms.At(i).Obj().Name())
		}
		slices.Sort(out)
		return out
	}
	for name, want := range map[string]string{
		"PlayerView":          "Body Buffs Entity Fire ID Inv IsOwned Names Valid Hp",
		"BodyView":            "Pos Valid",
		"VecView":             "Valid X Y",
		"ItemView":            "Kind Note Tags Valid", // a bag item is sent whole
		"BuffView":            "N Valid",
		"PlayerInvBagView":    "All Get Len",
		"PlayerBuffsListView": "All At Len",
		"PlayerNamesMapView":  "All Get Len",
		"ItemTagsListView":    "All At Len",
		"Player":              "Body Buffs Entity Hidden ID Inv Names SetBody SetHidden SetHp SetSecret Secret Stash Valid Hp",
	} {
		w := strings.Fields(want)
		slices.Sort(w)
		if got := methods(name); !slices.Equal(got, w) {
			t.Errorf("%s has methods %v, want %v", name, got, w)
		}
	}
	// No view of what no client field holds, nor of a server-only
	// container.
	for _, name := range []string{"VaultView", "TargetView", "FireView", "HitView", "PlayerStashListView"} {
		if scope.Lookup(name) != nil {
			t.Errorf("%s is generated", name)
		}
	}
	// Every view, whatever its kind, only reads.
	writers := []string{"Set", "Push", "Insert", "Remove", "Clear", "Put", "Delete", "Add"}
	views := 0
	for _, name := range scope.Names() {
		if !strings.HasSuffix(name, "View") {
			continue
		}
		views++
		for _, m := range methods(name) {
			for _, w := range writers {
				if strings.HasPrefix(m, w) {
					t.Errorf("view %s has the method %s", name, m)
				}
			}
		}
	}
	if views != 9 {
		t.Errorf("%d view types, want 9", views)
	}
	// The client's side of RPCs and the typed callbacks take views.
	fn := func(name string) string {
		t.Helper()
		f, ok := scope.Lookup(name).(*types.Func)
		if !ok {
			t.Fatalf("no function %s", name)
		}
		return types.TypeString(f.Type(), types.RelativeTo(pkgs[0].Types))
	}
	for name, want := range map[string]string{
		"OnPlayerCreate":    "func(r *github.com/replicago/replica/client.Replica, fn func(PlayerView)) (cancel func())",
		"OnPlayerInvChange": "func(r *github.com/replicago/replica/client.Replica, fn func(p PlayerView, ev github.com/replicago/replica/client.BagChange[uint32, ItemView])) (cancel func())",
		"OnPlayerHit":       "func(c *github.com/replicago/replica/client.Conn, fn func(p PlayerView, damage int16)) (cancel func())",
		"SendPlayerHit":     "func(s *github.com/replicago/replica.Server, to github.com/replicago/replica.RPCTarget, p Player, damage int16) error",
		"HandlePlayerFire":  "func(s *github.com/replicago/replica.Server, fn func(c *github.com/replicago/replica.Conn, p Player, args Fire) error)",
	} {
		if got := fn(name); got != want {
			t.Errorf("%s:\n got %s\nwant %s", name, got, want)
		}
	}
	// No callback for what never reaches a client.
	for _, name := range []string{"OnPlayerSecretChange", "OnPlayerHiddenNChange", "OnPlayerStashChange", "OnPlayerBodyGmChange"} {
		if scope.Lookup(name) != nil {
			t.Errorf("%s is generated", name)
		}
	}
}

// TestViewClashes checks that the names of views, their Of functions and
// their container types take part in the clash checks: with spec types,
// with each other and with the package's declarations, and that user
// methods on a view clash with its getters.
func TestViewClashes(t *testing.T) {
	dir := tempModule(t, map[string]string{"spec.go": `package fixture

//replica:class
type player struct {
	hp   int16
	peer playerView
}

type playerView struct {
	n int32
}

//replica:class
type tower struct {
	hp    int16
	flags []int32
}

type TowerFlagsListView struct{}

func (t TowerView) Hp() int16 { return 0 }

//replica:class
type unit struct {
	hp int16
}

//replica:class
type unitView struct {
	hp int16
}

//replica:class
type gate struct {
	hp     int16
	secret int32 ` + "`replica:\"vis=server\"`" + `
}

func (g GateView) Secret() int32 { return 0 }
`})
	p := load(t, Config{Dir: dir})
	_, err := p.Generate()
	checkErrors(t, err, []want{
		{"spec named like a view", "spec.go", 4, "replicagen generates PlayerView both for spec playerView and for class player; rename one of them"},
		{"declared container view", "spec.go", 14, "replicagen generates TowerFlagsListView for tower, but the package already declares TowerFlagsListView"},
		{"user method on a view", "spec.go", 21, "method TowerView.Hp clashes with the accessor replicagen generates for a field of tower"},
		{"class named like a view", "spec.go", 24, "replicagen generates UnitView both for spec unitView and for class unit; rename one of them"},
		{"class named like a view: Of", "spec.go", 29, "replicagen generates UnitViewOf both for class unit and for class unitView; rename one of them"},
	})
	// GateView has no getter Secret: the user's method is no clash.
}
