package w2

import (
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
)

func f32(v float32) string { return strconv.FormatFloat(float64(v), 'g', -1, 32) }

// TestCheckValues checks the values `node w2.mjs` prints after its 20
// warm-up and 200 measured ticks (W2.md states the same ones):
//
//	{"ticks":220,"entity0":["1446.9379","70.95578","3.0986946",42,1495,20,2,2],
//	 "entity4999":["494.89438","655.21826","3.5826893",2], ...}
func TestCheckValues(t *testing.T) {
	w := NewWorld(DefaultConfig())
	for i := 0; i < 220; i++ {
		w.Step()
	}
	if w.Tick != 220 {
		t.Fatalf("Tick = %d, want 220", w.Tick)
	}
	for _, c := range []struct {
		name      string
		got, want string
	}{
		{"x[0]", f32(w.X[0]), "1446.9379"},
		{"y[0]", f32(w.Y[0]), "70.95578"},
		{"angle[0]", f32(w.Angle[0]), "3.0986946"},
		{"hp[0]", fmt.Sprint(w.HP[0]), "42"},
		{"gold[0]", fmt.Sprint(w.Gold[0]), "1495"},
		{"armor[0]", fmt.Sprint(w.Gear[0].Armor), "20"},
		{"emote[0]", fmt.Sprint(w.Emote[0]), "2"},
		{"inv[0][key 1].count", fmt.Sprint(w.Inv[0][0].Count), "2"},
		{"x[4999]", f32(w.X[4999]), "494.89438"},
		{"y[4999]", f32(w.Y[4999]), "655.21826"},
		{"angle[4999]", f32(w.Angle[4999]), "3.5826893"},
		{"hp[4999]", fmt.Sprint(w.HP[4999]), "2"},
		{"name[0]", w.Name[0], "player-0"},
		{"name[499]", w.Name[499], "player-499"},
		{"name[500]", w.Name[500], "npc-500"},
		{"name[4999]", w.Name[4999], "npc-4999"},
	} {
		if c.got != c.want {
			t.Errorf("%s = %s, want %s", c.name, c.got, c.want)
		}
	}
}

// The reference's visibility statistics. `node w2.mjs` prints
// "visible_per_client":41.26 and "near_players_per_client":2.23, means
// rounded with toFixed(2) over 500 samples: after ticks 21, 41, ..., 201
// (its loop index t = 20, 40, ..., 200), for clients 0, 10, ..., 490. The
// exact totals were obtained by repeating that loop in node (the stats line
// of testdata/golden.txt, see gen_golden.mjs): 20628 visible entities and
// 1113 near players, the client's own avatar included in both.
const (
	refVisible = 20628
	refNear    = 1113
	refSamples = 500
)

func TestReferenceStats(t *testing.T) {
	w := NewWorld(DefaultConfig())
	var views []View
	vis, near, samples := 0, 0, 0
	for tick := 0; tick < 220; tick++ {
		w.Step()
		if tick < 20 || tick%20 != 0 {
			continue
		}
		views = w.Views(views)
		for c := 0; c < 500; c += 10 {
			nv, nn := 0, 0
			for e := 0; e < 5000; e++ {
				if w.Sees(c, e) {
					nv++
					if e < 500 && w.SeesNear(c, e) {
						nn++
					}
				}
			}
			if len(views[c].Visible) != nv || len(views[c].Near) != nn {
				t.Errorf("tick %d client %d: Views has %d visible, %d near; Sees/SeesNear %d, %d",
					w.Tick, c, len(views[c].Visible), len(views[c].Near), nv, nn)
			}
			vis += nv
			near += nn
			samples++
		}
	}
	if vis != refVisible || near != refNear || samples != refSamples {
		t.Errorf("totals = %d visible, %d near over %d samples, want %d, %d, %d",
			vis, near, samples, refVisible, refNear, refSamples)
	}
	meanVis, meanNear := float64(vis)/float64(samples), float64(near)/float64(samples)
	if got := strconv.FormatFloat(meanVis, 'f', 2, 64); got != "41.26" {
		t.Errorf("mean visible per client = %s, want 41.26", got)
	}
	if got := strconv.FormatFloat(meanNear, 'f', 2, 64); got != "2.23" {
		t.Errorf("mean near players per client = %s, want 2.23", got)
	}
	t.Logf("mean per client: %v visible entities, %v near players (own avatar included)", meanVis, meanNear)
}

func TestConstants(t *testing.T) {
	w := NewWorld(DefaultConfig())
	if w.maxXY != 1999.999 {
		t.Errorf("maxXY = %v, want 1999.999", w.maxXY)
	}
	var bosses []int
	for e := range w.X {
		if w.IsBoss(e) {
			bosses = append(bosses, e)
			if r := w.Radius(e); r != 300 {
				t.Errorf("Radius(%d) = %v, want 300", e, r)
			}
		} else if r := w.Radius(e); r != 100 {
			t.Errorf("Radius(%d) = %v, want 100", e, r)
		}
	}
	if len(bosses) != 45 || bosses[0] != 500 || bosses[44] != 4900 {
		t.Errorf("bosses = %v, want 500, 600, ..., 4900", bosses)
	}
	for p := range w.Inv {
		if len(w.Inv[p]) != 40 || cap(w.Inv[p]) != 40 {
			t.Fatalf("inv[%d] has len %d, cap %d, want 40", p, len(w.Inv[p]), cap(w.Inv[p]))
		}
	}
}

func TestVisibilityRules(t *testing.T) {
	w := NewWorld(DefaultConfig())
	// Place client 0 at the origin and probe the radii exactly.
	w.X[0], w.Y[0] = 0, 0
	for _, c := range []struct {
		e              int
		x, y           float32
		sees, seesNear bool
		comment        string
	}{
		{1, 30, 40, true, true, "player at 50"},
		{1, 30, 40.001, true, false, "player just beyond 50"},
		{1, 60, 80, true, false, "player at 100"},
		{1, 60, 80.001, false, false, "player just beyond 100"},
		{501, 100, 0, true, false, "NPC at 100"},
		{501, 100.0001, 0, false, false, "NPC just beyond 100"},
		{600, 180, 240, true, false, "boss at 300"},
		{600, 180, 240.001, false, false, "boss just beyond 300"},
		{0, 0, 0, true, true, "own avatar"},
	} {
		if c.e != 0 {
			w.X[c.e], w.Y[c.e] = c.x, c.y
		}
		if got := w.Sees(0, c.e); got != c.sees {
			t.Errorf("%s: Sees = %v, want %v", c.comment, got, c.sees)
		}
		if got := w.SeesNear(0, c.e); got != c.seesNear {
			t.Errorf("%s: SeesNear = %v, want %v", c.comment, got, c.seesNear)
		}
	}
	// The own avatar is seen whatever the radius.
	cfg := DefaultConfig()
	cfg.Radius, cfg.NearLOD = -1, -1
	w = NewWorld(cfg)
	if !w.Sees(7, 7) || !w.SeesNear(7, 7) || w.Sees(7, 8) || w.SeesNear(7, 8) {
		t.Errorf("with negative radii: Sees(7,7)=%v SeesNear(7,7)=%v Sees(7,8)=%v SeesNear(7,8)=%v",
			w.Sees(7, 7), w.SeesNear(7, 7), w.Sees(7, 8), w.SeesNear(7, 8))
	}
}

// snapshot is a deep copy of a World's fields.
type snapshot struct {
	x, y, angle []float32
	hp          []int16
	level       []uint8
	gold        []int32
	inv         []Item // flattened
	gear        []Gear
	emote       []uint8
}

func snap(w *World) snapshot {
	return snapshot{slices.Clone(w.X), slices.Clone(w.Y), slices.Clone(w.Angle), slices.Clone(w.HP),
		slices.Clone(w.Level), slices.Clone(w.Gold), slices.Concat(w.Inv...), slices.Clone(w.Gear), slices.Clone(w.Emote)}
}

// TestChangesCoverState checks that every field a Step changes is listed in
// the Changes it returns, and that the lists have the configured lengths and
// no duplicates.
func TestChangesCoverState(t *testing.T) {
	cfg := DefaultConfig()
	w := NewWorld(cfg)
	for tick := 1; tick <= 50; tick++ {
		before := snap(w)
		ch := w.Step()
		after := snap(w)
		set := func(ids []int) map[int]bool {
			m := map[int]bool{}
			for _, id := range ids {
				if m[id] {
					t.Fatalf("tick %d: id %d listed twice in %v", tick, id, ids)
				}
				m[id] = true
			}
			return m
		}
		moved, hp, gold, armor, emote := set(ch.Moved), set(ch.HP), set(ch.Gold), set(ch.Armor), set(ch.Emote)
		inv := map[InvChange]bool{}
		for _, c := range ch.Inv {
			inv[c] = true
		}
		if len(moved) != cfg.MoveN || len(hp) != cfg.HPN || len(inv) != cfg.InvN || len(gold) != cfg.GoldN ||
			len(armor) != cfg.GearN || len(emote) != cfg.EmoteN {
			t.Fatalf("tick %d: change counts %d %d %d %d %d %d", tick,
				len(moved), len(hp), len(inv), len(gold), len(armor), len(emote))
		}
		for e := range w.X {
			if (before.x[e] != after.x[e] || before.y[e] != after.y[e] || before.angle[e] != after.angle[e]) && !moved[e] {
				t.Errorf("tick %d: entity %d moved unlisted", tick, e)
			}
			if before.hp[e] != after.hp[e] && !hp[e] {
				t.Errorf("tick %d: entity %d hp changed unlisted", tick, e)
			}
			if before.level[e] != after.level[e] {
				t.Errorf("tick %d: entity %d level changed", tick, e)
			}
		}
		for p := range w.Gold {
			if before.gold[p] != after.gold[p] && !gold[p] {
				t.Errorf("tick %d: player %d gold changed unlisted", tick, p)
			}
			g0, g1 := before.gear[p], after.gear[p]
			if g0.Helm != g1.Helm || g0.Weapon != g1.Weapon || g0.Armor != g1.Armor && !armor[p] {
				t.Errorf("tick %d: player %d gear %+v -> %+v", tick, p, g0, g1)
			}
			if before.emote[p] != after.emote[p] && !emote[p] {
				t.Errorf("tick %d: player %d emote changed unlisted", tick, p)
			}
			for k := 1; k <= cfg.InvSize; k++ {
				i0, i1 := before.inv[p*cfg.InvSize+k-1], after.inv[p*cfg.InvSize+k-1]
				if i0.Kind != i1.Kind || i0.Count != i1.Count && !inv[InvChange{p, k}] {
					t.Errorf("tick %d: player %d item %d %+v -> %+v", tick, p, k, i0, i1)
				}
			}
		}
	}
}

// stateHash is FNV-1a 64 over the little-endian bytes of the state, in the
// order gen_golden.mjs describes; it computes the same over the reference's
// arrays.
func stateHash(w *World) string {
	var b []byte
	for _, a := range [][]float32{w.X, w.Y, w.Angle} {
		for _, v := range a {
			b = binary.LittleEndian.AppendUint32(b, math.Float32bits(v))
		}
	}
	for _, v := range w.HP {
		b = binary.LittleEndian.AppendUint16(b, uint16(v))
	}
	b = append(b, w.Level...)
	for _, v := range w.Gold {
		b = binary.LittleEndian.AppendUint32(b, uint32(v))
	}
	for _, g := range w.Gear {
		b = binary.LittleEndian.AppendUint16(b, g.Helm)
		b = binary.LittleEndian.AppendUint16(b, g.Armor)
		b = binary.LittleEndian.AppendUint16(b, g.Weapon)
	}
	b = append(b, w.Emote...)
	for _, inv := range w.Inv {
		for _, it := range inv {
			b = binary.LittleEndian.AppendUint16(b, it.Kind)
			b = binary.LittleEndian.AppendUint16(b, uint16(it.Count))
		}
	}
	h := fnv.New64a()
	h.Write(b)
	return fmt.Sprintf("%016x", h.Sum64())
}

// viewHash is FNV-1a 64 over v's visible ids and then its near ids, each a
// little-endian uint32, as gen_golden.mjs computes it.
func viewHash(v View) string {
	var b []byte
	for _, id := range slices.Concat(v.Visible, v.Near) {
		b = binary.LittleEndian.AppendUint32(b, uint32(id))
	}
	h := fnv.New64a()
	h.Write(b)
	return fmt.Sprintf("%016x", h.Sum64())
}

func ints(ids []int) string {
	s := make([]string, len(ids))
	for i, id := range ids {
		s[i] = strconv.Itoa(id)
	}
	return strings.Join(s, " ")
}

// TestGolden replays testdata/golden.txt, produced from the reference
// generator by testdata/gen_golden.mjs (see there for the line format).
func TestGolden(t *testing.T) {
	data, err := os.ReadFile("testdata/golden.txt")
	if err != nil {
		t.Fatal(err)
	}
	var lines [][]string
	for _, l := range strings.Split(string(data), "\n") {
		if f := strings.Fields(l); len(f) > 0 {
			lines = append(lines, f)
		}
	}

	// Replay the world once, recording what the golden file may ask about.
	w := NewWorld(DefaultConfig())
	hashes := map[int]string{0: stateHash(w)}
	changes := map[string]string{}
	for tick := 1; tick <= 220; tick++ {
		ch := w.Step()
		if tick == 1 || tick == 220 {
			inv := make([]string, len(ch.Inv))
			for i, c := range ch.Inv {
				inv[i] = fmt.Sprintf("%d:%d", c.Player, c.Key)
			}
			n := " " + strconv.Itoa(tick)
			changes["moved"+n] = ints(ch.Moved)
			changes["hp"+n] = ints(ch.HP)
			changes["inv"+n] = strings.Join(inv, " ")
			changes["gold"+n] = ints(ch.Gold)
			changes["armor"+n] = ints(ch.Armor)
			changes["emote"+n] = ints(ch.Emote)
		}
		hashes[tick] = stateHash(w)
	}
	views := w.Views(nil)

	kinds := map[string]int{}
	for _, f := range lines {
		kinds[f[0]]++
		if len(f) < 2 {
			t.Fatalf("short golden line %q", f)
		}
		switch f[0] {
		case "tick":
			n, _ := strconv.Atoi(f[1])
			if got, ok := hashes[n]; !ok || got != f[2] {
				t.Errorf("state hash after tick %d = %s, want %s", n, got, f[2])
			}
		case "moved", "hp", "inv", "gold", "armor", "emote":
			key := f[0] + " " + f[1]
			if got, want := changes[key], strings.Join(f[2:], " "); got != want {
				t.Errorf("%s changes = %s, want %s", key, got, want)
			}
		case "view":
			c, _ := strconv.Atoi(f[1])
			if c >= len(views) || len(f) != 5 {
				t.Fatalf("bad view line %q", f)
			}
			v := views[c]
			if got := fmt.Sprintf("%d %d %s", len(v.Visible), len(v.Near), viewHash(v)); got != strings.Join(f[2:], " ") {
				t.Errorf("client %d view at tick 220: %s, want %s", c, got, strings.Join(f[2:], " "))
			}
		case "stats":
			if got, want := fmt.Sprint(refVisible, refNear, refSamples), strings.Join(f[1:], " "); got != want {
				t.Errorf("reference stats in the test = %s, golden %s", got, want)
			}
		default:
			t.Fatalf("unknown golden line %q", f)
		}
	}
	if kinds["tick"] != 7 || kinds["moved"] != 2 || kinds["hp"] != 2 || kinds["inv"] != 2 || kinds["gold"] != 2 ||
		kinds["armor"] != 2 || kinds["emote"] != 2 || kinds["view"] != 500 || kinds["stats"] != 1 {
		t.Errorf("golden file incomplete: %v", kinds)
	}
}

// TestViewsReuse checks that Views resizes and reuses its argument and,
// once grown, does not allocate.
func TestViewsReuse(t *testing.T) {
	w := NewWorld(DefaultConfig())
	views := w.Views(make([]View, 3, 10))
	if len(views) != 500 {
		t.Fatalf("len(Views) = %d, want 500", len(views))
	}
	want := make([]View, len(views))
	for c, v := range views {
		want[c] = View{slices.Clone(v.Visible), slices.Clone(v.Near)}
	}
	if n := testing.AllocsPerRun(3, func() { views = w.Views(views) }); n != 0 {
		t.Errorf("Views allocates %v times per call on reuse, want 0", n)
	}
	for c := range views {
		if !slices.Equal(views[c].Visible, want[c].Visible) || !slices.Equal(views[c].Near, want[c].Near) {
			t.Fatalf("client %d: reused view %v differs from %v", c, views[c], want[c])
		}
	}
}

func TestStepAllocs(t *testing.T) {
	w := NewWorld(DefaultConfig())
	for i := 0; i < 10; i++ {
		w.Step()
	}
	if n := testing.AllocsPerRun(1000, func() { w.Step() }); n != 0 {
		t.Errorf("Step allocates %v times per call, want 0", n)
	}
}

func BenchmarkStep(b *testing.B) {
	w := NewWorld(DefaultConfig())
	b.ReportAllocs()
	for b.Loop() {
		w.Step()
	}
}

func BenchmarkViews(b *testing.B) {
	w := NewWorld(DefaultConfig())
	views := w.Views(nil)
	b.ReportAllocs()
	for b.Loop() {
		views = w.Views(views)
	}
}
