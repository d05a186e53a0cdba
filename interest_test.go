package replica_test

import (
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/replicago/replica"
	"github.com/replicago/replica/schema"
	"github.com/replicago/replica/state"
)

// aoiSchema has a class with a position (Unit: every partition) and one
// without (Flag). With lod, Unit has level-of-detail bands: gear (all)
// within 25 and emote (others) within 12 (lodBands).
func aoiSchema(t tb, lod ...bool) *schema.Schema {
	f := func(id uint32, name string, k schema.Kind, vis schema.Visibility, pos schema.Axis) *schema.Field {
		return &schema.Field{ID: id, Name: name, Type: schema.Type{Kind: k}, Vis: vis, Pos: pos}
	}
	unit := &schema.Struct{Name: "Unit", Class: true, ID: 1, Fields: []*schema.Field{
		f(1, "x", schema.Float32, schema.VisAll, schema.AxisX),
		f(2, "y", schema.Float32, schema.VisAll, schema.AxisY),
		f(3, "hp", schema.Int16, schema.VisAll, 0),
		f(4, "gold", schema.Int32, schema.VisOwner, 0),
		f(5, "mood", schema.Uint8, schema.VisOthers, 0),
		f(6, "name", schema.String, schema.VisAll, 0),
	}}
	if len(lod) > 0 && lod[0] {
		gear, emote := f(7, "gear", schema.Int32, schema.VisAll, 0), f(8, "emote", schema.Uint8, schema.VisOthers, 0)
		gear.LOD, emote.LOD = lodBands[0], lodBands[1]
		unit.Fields = append(unit.Fields, gear, emote)
	}
	flag := &schema.Struct{Name: "Flag", Class: true, ID: 2, Fields: []*schema.Field{
		f(1, "score", schema.Int32, schema.VisAll, 0),
		f(2, "secret", schema.Int32, schema.VisOwner, 0),
	}}
	s, err := schema.New(unit, flag)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// lodBands are the distances of aoiSchema's bands with lod.
var lodBands = []float64{25, 12}

func setPos(e *state.Entity, x, y float32) {
	e.SetNum(0, uint64(math.Float32bits(x)))
	e.SetNum(1, uint64(math.Float32bits(y)))
}

func posOf(e *state.Entity) (float64, float64) {
	return float64(math.Float32frombits(uint32(e.Num(e.Class().Leaf(0).Num)))),
		float64(math.Float32frombits(uint32(e.Num(e.Class().Leaf(1).Num))))
}

// aoiModel is the interest rules restated from scratch: what each client
// sees after a tick, from the game's calls and the entities' positions,
// with no incremental state but last tick's pairs (for hysteresis).
type aoiModel struct {
	w       *ownWorld
	spaces  []*replica.Space
	cfgs    []replica.SpaceConfig
	groups  []*replica.Group
	space   map[*state.Entity]int // -1: none
	radius  map[*state.Entity]float64
	always  map[*state.Entity]bool
	egroups map[*state.Entity][]int
	view    []int // per client; -1: none
	fixed   []bool
	px, py  []float64
	follow  []*state.Entity
	cgroups [][]int
	pairs   []map[*state.Entity]bool // what each client saw beyond its room last tick
	levels  []map[*state.Entity]int  // the level of detail each client held each entity at last tick
}

func (m *aoiModel) room(sp int) bool { return sp >= 0 && m.cfgs[sp].Radius == 0 }

// point returns client i's viewpoint.
func (m *aoiModel) point(i int) (x, y float64, ok bool) {
	if m.fixed[i] {
		return m.px[i], m.py[i], true
	}
	f := m.follow[i]
	if f == nil || !f.Valid() || m.space[f] != m.view[i] || f.Class().Name != "Unit" {
		return 0, 0, false
	}
	x, y = posOf(f)
	return x, y, true
}

// sees reports whether client i sees e, and whether through a pair.
func (m *aoiModel) sees(i int, e *state.Entity) (vis, pair bool) {
	sp := m.space[e]
	if m.room(sp) && sp == m.view[i] {
		return true, false
	}
	if m.always[e] || m.w.srv.Owner(e) == m.w.conns[i] {
		return true, true
	}
	for _, g := range m.egroups[e] {
		if slices.Contains(m.cgroups[i], g) {
			return true, true
		}
	}
	if sp < 0 || sp != m.view[i] {
		return false, false
	}
	if e.Class().Name != "Unit" {
		return true, true
	}
	px, py, ok := m.point(i)
	if !ok {
		return false, false
	}
	r := m.radius[e]
	if r == 0 {
		r = m.cfgs[sp].Radius
	}
	if m.pairs[i][e] {
		r += m.cfgs[sp].Hysteresis
	}
	ex, ey := posOf(e)
	dx, dy := px-ex, py-ey
	if m.cfgs[sp].Metric == replica.Square {
		return math.Abs(dx) <= r && math.Abs(dy) <= r, true
	}
	return dx*dx+dy*dy <= r*r, true
}

// level returns the level of detail client i holds e at, −1 for every
// band: e's bands within reach of i's viewpoint, with the hysteresis for
// the bands it held last tick, when it sees a unit of its AOI space it
// does not own.
func (m *aoiModel) level(i int, e *state.Entity) int {
	bands := e.Class().Bands()
	vis, pair := m.sees(i, e)
	sp := m.space[e]
	if len(bands) == 0 || !vis || !pair || sp < 0 || sp != m.view[i] || m.room(sp) || m.w.srv.Owner(e) == m.w.conns[i] {
		return -1
	}
	px, py, ok := m.point(i)
	if !ok {
		return -1
	}
	ex, ey := posOf(e)
	dx, dy := px-ex, py-ey
	old, held := m.levels[i][e]
	if !m.pairs[i][e] {
		held = false // it enters: no hysteresis
	}
	level := 0
	for b, d := range bands {
		if held && (old < 0 || old > b) {
			d += m.cfgs[sp].Hysteresis
		}
		if m.cfgs[sp].Metric == replica.Square && (math.Abs(dx) > d || math.Abs(dy) > d) ||
			m.cfgs[sp].Metric != replica.Square && dx*dx+dy*dy > d*d {
			break
		}
		level++
	}
	return level
}

// settle records this tick's pairs and levels, for the next tick's
// hysteresis.
func (m *aoiModel) settle() {
	ents := m.w.srv.Tracker().AppendEntities(nil)
	next := make([]map[*state.Entity]bool, len(m.pairs))
	levels := make([]map[*state.Entity]int, len(m.pairs))
	for i := range m.pairs {
		next[i], levels[i] = map[*state.Entity]bool{}, map[*state.Entity]int{}
		for _, e := range ents {
			if vis, pair := m.sees(i, e); vis && pair {
				levels[i][e] = m.level(i, e)
			}
		}
		for _, e := range ents {
			if vis, pair := m.sees(i, e); vis && pair {
				next[i][e] = true
			}
		}
	}
	m.pairs, m.levels = next, levels
}

// TestInterestProperty drives an AOI world at random: units that move,
// teleport, change radius, space and owner, spawn and die; clients that
// switch spaces, view from fixed points or from the entities they follow
// (by default their first owned unit), join groups; entities made always
// relevant or added to groups. After every tick each client's replica
// holds exactly the entities the rules say it sees, with the fields it
// may see of each, and knows which it owns.
func TestInterestProperty(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		lod := rapid.Bool().Draw(rt, "lod")
		sc := aoiSchema(rt, lod)
		w := newWorld(rt, 3, replica.Config{Schema: sc})
		defer w.close()
		m := &aoiModel{w: w, space: map[*state.Entity]int{}, radius: map[*state.Entity]float64{},
			always: map[*state.Entity]bool{}, egroups: map[*state.Entity][]int{}}
		if lod {
			w.level = m.level
		}
		if budget := rapid.SampledFrom([]int{-1, 3000, 400}).Draw(rt, "budget"); budget >= 0 {
			for _, c := range w.conns {
				if err := w.srv.SetBudget(c, budget); err != nil {
					rt.Fatal(err)
				}
			}
			w.budgeted = true
		}
		m.cfgs = []replica.SpaceConfig{
			{Name: "default"},
			{Name: "field", Radius: 30, Hysteresis: 10, CellSize: 20},
			{Name: "maze", Radius: 20, Metric: replica.Square},
			{Name: "lobby"},
		}
		m.spaces = []*replica.Space{w.srv.DefaultSpace()}
		for _, cfg := range m.cfgs[1:] {
			sp, err := w.srv.NewSpace(cfg)
			if err != nil {
				rt.Fatal(err)
			}
			m.spaces = append(m.spaces, sp)
		}
		m.groups = []*replica.Group{w.srv.NewGroup("red"), w.srv.NewGroup("blue")}
		n := len(w.conns)
		m.view, m.fixed, m.px, m.py = make([]int, n), make([]bool, n), make([]float64, n), make([]float64, n)
		m.follow, m.cgroups, m.pairs = make([]*state.Entity, n), make([][]int, n), make([]map[*state.Entity]bool, n)
		m.levels = make([]map[*state.Entity]int, n)
		for i := range n {
			m.pairs[i], m.levels[i] = map[*state.Entity]bool{}, map[*state.Entity]int{}
		}
		w.sees = func(i int, e *state.Entity) bool { vis, _ := m.sees(i, e); return vis }

		coord := func(name string) float32 { return float32(rapid.IntRange(0, 60).Draw(rt, name)) }
		spaceIdx := func() int { return rapid.IntRange(-1, len(m.spaces)-1).Draw(rt, "space") }
		spaceOf := func(i int) *replica.Space {
			if i < 0 {
				return nil
			}
			return m.spaces[i]
		}
		pick := func() *state.Entity {
			ents := w.srv.Tracker().AppendEntities(nil)
			if len(ents) == 0 {
				return nil
			}
			return ents[rapid.IntRange(0, len(ents)-1).Draw(rt, "entity")]
		}
		client := func() int { return rapid.IntRange(0, n-1).Draw(rt, "client") }
		setOwner := func(e *state.Entity) {
			i := rapid.IntRange(-1, n-1).Draw(rt, "owner")
			var c *replica.Conn
			if i >= 0 {
				c = w.conns[i]
				if w.srv.Owner(e) != c && !m.fixed[i] && m.follow[i] == nil && e.Class().Name == "Unit" {
					m.follow[i] = e // a client follows the first unit it is given
				}
			}
			w.srv.SetOwner(e, c)
		}
		if lod {
			for i := range n {
				x, y := coord("x"), coord("y")
				if err := w.srv.View(w.conns[i], m.spaces[1]); err != nil {
					rt.Fatal(err)
				}
				if err := w.srv.SetViewpoint(w.conns[i], float64(x), float64(y)); err != nil {
					rt.Fatal(err)
				}
				m.view[i], m.fixed[i], m.px[i], m.py[i] = 1, true, float64(x), float64(y)
			}
		}
		actions := map[string]func(*rapid.T){
			"spawn": func(rt *rapid.T) {
				cl := sc.Classes[rapid.IntRange(0, 1).Draw(rt, "class")]
				e, err := w.srv.Tracker().Spawn(cl)
				if err != nil {
					rt.Fatal(err)
				}
				if cl.Name == "Unit" {
					setPos(e, coord("x"), coord("y"))
					e.SetNum(2, uint64(rapid.IntRange(0, 5).Draw(rt, "hp")))
				}
				m.space[e] = 0
				if lod {
					// Levels of detail need units and viewers in an AOI
					// space: start them in the field.
					if err := w.srv.SetSpace(e, m.spaces[1]); err != nil {
						rt.Fatal(err)
					}
					m.space[e] = 1
				}
				if rapid.Bool().Draw(rt, "placed") {
					sp := spaceIdx()
					if err := w.srv.SetSpace(e, spaceOf(sp)); err != nil {
						rt.Fatal(err)
					}
					m.space[e] = sp
				}
				if rapid.Bool().Draw(rt, "owned") {
					setOwner(e)
				}
			},
			"destroy": func(rt *rapid.T) {
				if e := pick(); e != nil {
					w.srv.Tracker().Destroy(e)
					for i := range m.follow {
						if m.follow[i] == e {
							m.follow[i] = nil
						}
					}
				}
			},
			"move": func(rt *rapid.T) {
				if e := pick(); e != nil && e.Class().Name == "Unit" {
					x, y := posOf(e)
					dx, dy := rapid.IntRange(-8, 8).Draw(rt, "dx"), rapid.IntRange(-8, 8).Draw(rt, "dy")
					setPos(e, float32(x)+float32(dx), float32(y)+float32(dy))
				}
			},
			"teleport": func(rt *rapid.T) {
				if e := pick(); e != nil && e.Class().Name == "Unit" {
					setPos(e, coord("x"), coord("y"))
				}
			},
			"write": func(rt *rapid.T) {
				if e := pick(); e != nil {
					if e.Class().Name == "Unit" {
						hi := 4
						if lod {
							hi = 7 // gear and emote too; leaf 5 is the name
						}
						leaf := rapid.IntRange(2, hi).Draw(rt, "leaf")
						if leaf == 5 {
							leaf = 2
						}
						e.SetNum(leaf, uint64(rapid.IntRange(0, 9).Draw(rt, "v")))
					} else {
						e.SetNum(rapid.IntRange(0, 1).Draw(rt, "leaf"), uint64(rapid.IntRange(0, 9).Draw(rt, "v")))
					}
				}
			},
			"radius": func(rt *rapid.T) {
				if e := pick(); e != nil {
					r := float64(rapid.SampledFrom([]int{0, 5, 25, 60}).Draw(rt, "radius"))
					if err := w.srv.SetRadius(e, r); err != nil {
						rt.Fatal(err)
					}
					m.radius[e] = r
				}
			},
			"setSpace": func(rt *rapid.T) {
				if e := pick(); e != nil {
					sp := spaceIdx()
					if err := w.srv.SetSpace(e, spaceOf(sp)); err != nil {
						rt.Fatal(err)
					}
					m.space[e] = sp
				}
			},
			"setOwner": func(rt *rapid.T) {
				if e := pick(); e != nil {
					setOwner(e)
				}
			},
			"always": func(rt *rapid.T) {
				if e := pick(); e != nil {
					a := rapid.Bool().Draw(rt, "always")
					if err := w.srv.SetAlwaysRelevant(e, a); err != nil {
						rt.Fatal(err)
					}
					m.always[e] = a
				}
			},
			"groupEntity": func(rt *rapid.T) {
				if e := pick(); e != nil {
					g := rapid.IntRange(0, 1).Draw(rt, "group")
					if slices.Contains(m.egroups[e], g) {
						m.groups[g].RemoveEntity(e)
						m.egroups[e] = slices.DeleteFunc(m.egroups[e], func(x int) bool { return x == g })
					} else {
						if err := m.groups[g].AddEntity(e); err != nil {
							rt.Fatal(err)
						}
						m.egroups[e] = append(m.egroups[e], g)
					}
				}
			},
			"groupConn": func(rt *rapid.T) {
				i, g := client(), rapid.IntRange(0, 1).Draw(rt, "group")
				if slices.Contains(m.cgroups[i], g) {
					m.groups[g].RemoveConn(w.conns[i])
					m.cgroups[i] = slices.DeleteFunc(m.cgroups[i], func(x int) bool { return x == g })
				} else {
					m.groups[g].AddConn(w.conns[i])
					m.cgroups[i] = append(m.cgroups[i], g)
				}
			},
			"view": func(rt *rapid.T) {
				i, sp := client(), spaceIdx()
				if err := w.srv.View(w.conns[i], spaceOf(sp)); err != nil {
					rt.Fatal(err)
				}
				m.view[i] = sp
			},
			"viewpoint": func(rt *rapid.T) {
				i := client()
				x, y := coord("x"), coord("y")
				if err := w.srv.SetViewpoint(w.conns[i], float64(x), float64(y)); err != nil {
					rt.Fatal(err)
				}
				m.fixed[i], m.px[i], m.py[i], m.follow[i] = true, float64(x), float64(y), nil
			},
			"follow": func(rt *rapid.T) {
				if e := pick(); e != nil && e.Class().Name == "Unit" {
					i := client()
					if err := w.srv.Follow(w.conns[i], e); err != nil {
						rt.Fatal(err)
					}
					m.fixed[i], m.follow[i] = false, e
				}
			},
			"tick": func(rt *rapid.T) {
				w.tick(rt)
				m.settle()
				if err := w.srv.CheckGridForTest(); err != nil {
					rt.Fatal(err)
				}
			},
		}
		if lod {
			// Levels change as units and viewpoints move: more of those,
			// and of writes to the banded fields.
			for _, a := range []string{"move", "teleport", "write", "viewpoint", "tick"} {
				for k := range 3 {
					actions[fmt.Sprint(a, k)] = actions[a]
				}
			}
		}
		rt.Repeat(actions)
		w.tick(rt)
	})
}

// TestInterestViewpointMoves checks the evaluation of a viewpoint's move
// alone (evalMove), which passes over the pairs far from every boundary,
// against a brute-force evaluation of every pair after every tick:
// clients follow avatars that take small steps (and now and then a
// leap), or now and then view from a point of their own, other units
// move or stand still, radii change, some units are always relevant
// (seen from afar, at the level of detail of their distance), in a space
// with or without hysteresis, by either metric, with level-of-detail
// bands.
func TestInterestViewpointMoves(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		sc := aoiSchema(rt, true)
		w := newWorld(rt, 3, replica.Config{Schema: sc})
		defer w.close()
		w.aoi = true
		cfg := replica.SpaceConfig{Name: "zone",
			Radius:     float64(rapid.IntRange(8, 40).Draw(rt, "radius")),
			Hysteresis: float64(rapid.SampledFrom([]int{0, 3, 10}).Draw(rt, "hysteresis")),
			Metric:     rapid.SampledFrom([]replica.Metric{replica.Euclidean, replica.Square}).Draw(rt, "metric"),
			CellSize:   float64(rapid.IntRange(0, 30).Draw(rt, "cell")),
		}
		zone, err := w.srv.NewSpace(cfg)
		if err != nil {
			rt.Fatal(err)
		}
		tr := w.srv.Tracker()
		coord := func(name string) float32 { return float32(rapid.IntRange(0, 80).Draw(rt, name)) / 2 }
		var units []*state.Entity
		radius := map[*state.Entity]float64{}
		always := map[*state.Entity]bool{} // seen from anywhere, at the level of detail of its distance
		for i := range rapid.IntRange(3, 24).Draw(rt, "units") {
			e, err := tr.Spawn(sc.Classes[0])
			if err != nil {
				rt.Fatal(err)
			}
			setPos(e, coord("x"), coord("y"))
			if err := w.srv.SetSpace(e, zone); err != nil {
				rt.Fatal(err)
			}
			units = append(units, e)
			if rapid.IntRange(0, 5).Draw(rt, "always") == 0 {
				if err := w.srv.SetAlwaysRelevant(e, true); err != nil {
					rt.Fatal(err)
				}
				always[e] = true
			}
			if i < len(w.conns) {
				if err := w.srv.View(w.conns[i], zone); err != nil {
					rt.Fatal(err)
				}
				if err := w.srv.Follow(w.conns[i], e); err != nil {
					rt.Fatal(err)
				}
			}
		}
		w.tick(rt)
		// The model: each pair seen or not, and its level, evaluated
		// for every pair from the positions after each tick.
		within := func(dx, dy, r float64) bool {
			if cfg.Metric == replica.Square {
				return math.Abs(dx) <= r && math.Abs(dy) <= r
			}
			return dx*dx+dy*dy <= r*r
		}
		// Each client's fixed viewpoint, if it has one instead of its avatar.
		fixed := make([]*[2]float64, len(w.conns))
		seen := make([]map[*state.Entity]int, len(w.conns)) // level + 1, 0 for not seen
		for i := range seen {
			seen[i] = map[*state.Entity]int{}
		}
		settle := func() {
			for i := range w.conns {
				px, py := posOf(units[i])
				if fixed[i] != nil {
					px, py = fixed[i][0], fixed[i][1]
				}
				for _, e := range units {
					x, y := posOf(e)
					dx, dy := px-x, py-y
					old, had := seen[i][e], seen[i][e] > 0
					r := cfg.Radius
					if radius[e] > 0 {
						r = radius[e]
					}
					if had {
						r += cfg.Hysteresis
					}
					if !within(dx, dy, r) && !always[e] {
						delete(seen[i], e)
						continue
					}
					level := 0
					for b, d := range lodBands {
						if had && old-1 > b {
							d += cfg.Hysteresis
						}
						if !within(dx, dy, d) {
							break
						}
						level++
					}
					seen[i][e] = level + 1
				}
			}
		}
		check := func() {
			for i, c := range w.conns {
				got := w.srv.PairLevelsForTest(c)
				want := map[state.ID]int{}
				for e, l := range seen[i] {
					want[e.ID()] = l - 1
				}
				if !maps.Equal(got, want) {
					rt.Fatalf("tick %d, client %d: pairs and levels %v, want %v", w.srv.TickNumber(), i, got, want)
				}
			}
		}
		settle()
		check()
		for range rapid.IntRange(1, 30).Draw(rt, "ticks") {
			for _, e := range units {
				switch rapid.IntRange(0, 9).Draw(rt, "act") {
				case 0, 1, 2: // stand still
				case 3:
					setPos(e, coord("x"), coord("y"))
				case 4:
					r := float64(rapid.SampledFrom([]int{0, 6, 15, 50}).Draw(rt, "r"))
					if err := w.srv.SetRadius(e, r); err != nil {
						rt.Fatal(err)
					}
					radius[e] = r
				default:
					x, y := posOf(e)
					step := func(name string) float64 { return float64(rapid.IntRange(-6, 6).Draw(rt, name)) / 2 }
					setPos(e, float32(min(60, max(-20, x+step("dx")))), float32(min(60, max(-20, y+step("dy")))))
				}
			}
			for i, c := range w.conns {
				switch rapid.IntRange(0, 9).Draw(rt, "view") {
				case 0:
					p := [2]float64{float64(coord("px")), float64(coord("py"))}
					if err := w.srv.SetViewpoint(c, p[0], p[1]); err != nil {
						rt.Fatal(err)
					}
					fixed[i] = &p
				case 1:
					if err := w.srv.Follow(c, units[i]); err != nil {
						rt.Fatal(err)
					}
					fixed[i] = nil
				}
			}
			w.tick(rt)
			settle()
			check()
		}
	})
}

// sees reports whether client i's replica holds e.
func (w *ownWorld) has(i int, e *state.Entity) bool {
	return w.clients[i].Replica().Entity(e.ID()) != nil
}

// TestInterestHysteresis moves a unit around the edge of a client's view:
// it enters within the radius, stays until it is past the radius plus the
// hysteresis, and comes back only within the radius again.
func TestInterestHysteresis(t *testing.T) {
	w := newWorld(t, 1, replica.Config{Schema: aoiSchema(t)})
	defer w.close()
	w.aoi = true
	zone, err := w.srv.NewSpace(replica.SpaceConfig{Name: "zone", Radius: 10, Hysteresis: 5})
	if err != nil {
		t.Fatal(err)
	}
	c := w.conns[0]
	if err := w.srv.View(c, zone); err != nil {
		t.Fatal(err)
	}
	if err := w.srv.SetViewpoint(c, 0, 0); err != nil {
		t.Fatal(err)
	}
	u, _ := w.srv.Tracker().Spawn(w.srv.Tracker().Schema().Classes[0])
	if err := w.srv.SetSpace(u, zone); err != nil {
		t.Fatal(err)
	}
	for _, step := range []struct {
		x    float32
		sees bool
	}{{8, true}, {12, true}, {14.9, true}, {16, false}, {12, false}, {10, true}, {-14, true}, {0, true}, {30, false}} {
		setPos(u, step.x, 0)
		w.tick(t)
		if got := w.has(0, u); got != step.sees {
			t.Fatalf("at x = %v the client sees the unit: %v, want %v", step.x, got, step.sees)
		}
		x, err := w.srv.Explain(c, u)
		if err != nil {
			t.Fatal(err)
		}
		if x.Sees != step.sees || x.Distance != math.Abs(float64(step.x)) {
			t.Fatalf("at x = %v: Explain says %+v", step.x, x)
		}
		if kept := step.sees && math.Abs(float64(step.x)) > 10; x.Kept != kept || kept && x.Radius != 15 {
			t.Fatalf("at x = %v: Explain says kept %v radius %v: %s", step.x, x.Kept, x.Radius, x.Reason)
		}
	}
}

// TestInterestGroupsAndRooms: a unit in another space is seen by the
// members of its group and by nobody else; an always-relevant flag by
// everyone; a room's entities by its viewers only.
func TestInterestGroupsAndRooms(t *testing.T) {
	sc := aoiSchema(t)
	w := newWorld(t, 3, replica.Config{Schema: sc})
	defer w.close()
	w.aoi = true
	far, _ := w.srv.NewSpace(replica.SpaceConfig{Name: "far", Radius: 5})
	lobby, _ := w.srv.NewSpace(replica.SpaceConfig{Name: "lobby"})
	tr := w.srv.Tracker()
	scout, _ := tr.Spawn(sc.Classes[0])
	setPos(scout, 1000, 1000)
	w.srv.SetSpace(scout, far)
	flag, _ := tr.Spawn(sc.Classes[1])
	w.srv.SetSpace(flag, lobby)
	game, _ := tr.Spawn(sc.Classes[1])
	w.srv.SetSpace(game, nil)
	w.srv.SetAlwaysRelevant(game, true)
	red := w.srv.NewGroup("red")
	red.AddEntity(scout)
	red.AddConn(w.conns[1])
	w.srv.View(w.conns[2], lobby)
	w.tick(t)
	want := [][3]bool{{false, false, true}, {true, false, true}, {false, true, true}}
	for i, row := range want {
		for j, e := range []*state.Entity{scout, flag, game} {
			if w.has(i, e) != row[j] {
				t.Fatalf("client %d sees entity %d: %v, want %v", i, j, w.has(i, e), row[j])
			}
		}
	}
	x, _ := w.srv.Explain(w.conns[1], scout, "hp")
	if !x.Sees || x.Group != "red" || x.Field != "hp" {
		t.Fatalf("Explain(member, scout, hp) = %+v", x)
	}
	x, _ = w.srv.Explain(w.conns[0], scout)
	if x.Sees || x.Space != "far" || x.ViewSpace != "default" {
		t.Fatalf("Explain(outsider, scout) = %+v", x)
	}
	x, _ = w.srv.Explain(w.conns[2], flag, "secret")
	if x.Sees || !x.Room || x.Visibility != schema.VisOwner {
		t.Fatalf("Explain(viewer, flag, secret) = %+v", x)
	}
	// Leaving the group, the room and the flag: gone from those clients.
	red.RemoveConn(w.conns[1])
	w.srv.View(w.conns[2], w.srv.DefaultSpace())
	w.srv.SetAlwaysRelevant(game, false)
	w.tick(t)
	for i := range 3 {
		for _, e := range []*state.Entity{scout, flag, game} {
			if w.has(i, e) {
				t.Fatalf("client %d still sees %#x", i, uint32(e.ID()))
			}
		}
	}
}

// TestInterestLateJoin: in an AOI zone, a client that joins gets as its
// first state its own avatar and what lies within reach of it, nothing
// else; its avatar (which it follows, owning it) moving brings the rest.
func TestInterestLateJoin(t *testing.T) {
	sc := aoiSchema(t)
	var zone *replica.Space
	var avatars []*state.Entity
	w := newWorld(t, 0, replica.Config{Schema: sc, OnJoin: func(c *replica.Conn) {
		srv := c.Server()
		a, _ := srv.Tracker().Spawn(sc.Classes[0])
		setPos(a, 0, 0)
		srv.SetSpace(a, zone)
		srv.SetOwner(a, c)
		srv.View(c, zone)
		avatars = append(avatars, a)
	}})
	defer w.close()
	w.aoi = true
	zone, _ = w.srv.NewSpace(replica.SpaceConfig{Name: "zone", Radius: 20})
	near, _ := w.srv.Tracker().Spawn(sc.Classes[0])
	setPos(near, 10, 10)
	w.srv.SetSpace(near, zone)
	distant, _ := w.srv.Tracker().Spawn(sc.Classes[0])
	setPos(distant, 100, 0)
	w.srv.SetSpace(distant, zone)
	w.tick(t)
	w.join(t, sc)
	if !w.has(0, avatars[0]) || !w.has(0, near) || w.has(0, distant) {
		t.Fatalf("first state: avatar %v near %v distant %v", w.has(0, avatars[0]), w.has(0, near), w.has(0, distant))
	}
	if !w.clients[0].Replica().Entity(avatars[0].ID()).Owned() {
		t.Fatal("the joiner does not know it owns its avatar")
	}
	setPos(avatars[0], 90, 0)
	w.tick(t)
	if !w.has(0, avatars[0]) || w.has(0, near) || !w.has(0, distant) {
		t.Fatalf("after moving: avatar %v near %v distant %v", w.has(0, avatars[0]), w.has(0, near), w.has(0, distant))
	}
}

// TestInterestFollowNext: a client whose avatar is destroyed and which is
// given a new one in the same tick, before the tick ends, follows the new
// one (the old one is gone, though the tick has not yet dropped it).
func TestInterestFollowNext(t *testing.T) {
	sc := aoiSchema(t)
	w := newWorld(t, 1, replica.Config{Schema: sc})
	defer w.close()
	w.aoi = true
	zone, _ := w.srv.NewSpace(replica.SpaceConfig{Name: "zone", Radius: 20})
	w.srv.View(w.conns[0], zone)
	unit := func(x, y float32) *state.Entity {
		e, _ := w.srv.Tracker().Spawn(sc.Classes[0])
		setPos(e, x, y)
		w.srv.SetSpace(e, zone)
		return e
	}
	old, near := unit(0, 0), unit(100, 10)
	w.srv.SetOwner(old, w.conns[0])
	w.tick(t)
	if w.has(0, near) {
		t.Fatal("sees the unit 100 away from its avatar")
	}
	w.srv.Tracker().Destroy(old)
	avatar := unit(100, 0)
	w.srv.SetOwner(avatar, w.conns[0])
	w.tick(t)
	if !w.has(0, avatar) || !w.has(0, near) {
		t.Fatalf("new avatar %v, the unit 10 away from it %v: the client does not follow its new avatar", w.has(0, avatar), w.has(0, near))
	}
}

// TestInterestErrors: every bad input gets a typed error.
func TestInterestErrors(t *testing.T) {
	sc := aoiSchema(t)
	w := newWorld(t, 1, replica.Config{Schema: sc})
	defer w.close()
	w.aoi = true
	other := newWorld(t, 1, replica.Config{Schema: sc})
	defer other.close()
	foreign, _ := other.srv.NewSpace(replica.SpaceConfig{Name: "elsewhere"})
	flag, _ := w.srv.Tracker().Spawn(sc.Classes[1])
	gone, _ := w.srv.Tracker().Spawn(sc.Classes[0])
	w.tick(t)
	w.srv.Tracker().Destroy(gone)
	w.tick(t)
	c := w.conns[0]
	for _, tc := range []struct {
		name string
		err  error
		want error
	}{
		{"space of a nil entity", w.srv.SetSpace(nil, nil), replica.ErrUnknownEntity},
		{"space of a destroyed entity", w.srv.SetSpace(gone, nil), replica.ErrUnknownEntity},
		{"foreign space", w.srv.SetSpace(flag, foreign), replica.ErrUnknownSpace},
		{"view a foreign space", w.srv.View(c, foreign), replica.ErrUnknownSpace},
		{"negative radius", w.srv.SetRadius(flag, -1), replica.ErrBadRadius},
		{"NaN radius", w.srv.SetRadius(flag, math.NaN()), replica.ErrBadRadius},
		{"follow a class without a position", w.srv.Follow(c, flag), replica.ErrNoPosition},
		{"always of a destroyed entity", w.srv.SetAlwaysRelevant(gone, true), replica.ErrUnknownEntity},
		{"group of a nil entity", w.srv.NewGroup("g").AddEntity(nil), replica.ErrUnknownEntity},
	} {
		if !errors.Is(tc.err, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, tc.err, tc.want)
		}
	}
	if _, err := w.srv.NewSpace(replica.SpaceConfig{Radius: -3}); !errors.Is(err, replica.ErrBadRadius) {
		t.Errorf("NewSpace with a negative radius: %v", err)
	}
	if _, err := w.srv.NewSpace(replica.SpaceConfig{Radius: math.Inf(1)}); !errors.Is(err, replica.ErrBadRadius) {
		t.Errorf("NewSpace with an infinite radius: %v", err)
	}
	if _, err := w.srv.NewSpace(replica.SpaceConfig{Radius: 3, Metric: 7}); !errors.Is(err, replica.ErrUnknownMetric) {
		t.Errorf("NewSpace with metric 7: %v", err)
	}
	if err := w.srv.SetViewpoint(c, math.NaN(), 0); !errors.Is(err, replica.ErrBadViewpoint) {
		t.Errorf("SetViewpoint(NaN): %v", err)
	}
	if _, err := w.srv.Explain(c, gone); !errors.Is(err, replica.ErrUnknownEntity) {
		t.Errorf("Explain of a destroyed entity: %v", err)
	}
	for _, path := range [][]string{{"nope"}, {""}, {"score", "x"}, {"score", ""}} {
		if _, err := w.srv.Explain(c, flag, path...); !errors.Is(err, replica.ErrUnknownField) {
			t.Errorf("Explain of field %q, which the class does not have: %v", path, err)
		}
	}
	if err := w.srv.View(other.conns[0], nil); !errors.Is(err, replica.ErrConnGone) {
		t.Errorf("View of another server's connection: %v", err)
	}
	// A connection that left can no longer be placed.
	w.clients[0].Close()
	for len(w.srv.Conns()) > 0 {
		w.srv.Tick()
		time.Sleep(time.Millisecond)
	}
	if err := w.srv.View(c, nil); !errors.Is(err, replica.ErrConnGone) {
		t.Errorf("View of a connection that left: %v", err)
	}
	if err := w.srv.SetViewpoint(c, 1, 1); !errors.Is(err, replica.ErrConnGone) {
		t.Errorf("SetViewpoint of a connection that left: %v", err)
	}
	// It sees nothing, not even what is always relevant.
	w.srv.SetAlwaysRelevant(flag, true)
	if x, err := w.srv.Explain(c, flag); !errors.Is(err, replica.ErrConnGone) {
		t.Errorf("Explain for a connection that left: %v (%s)", err, x.Reason)
	}
	w.srv.NewGroup("late").AddConn(c) // nothing
	w.srv.Tick()
}

// TestInterestViewpointAcrossSpaces: a fixed viewpoint set before the
// client views a space is the one it views that space from.
func TestInterestViewpointAcrossSpaces(t *testing.T) {
	sc := aoiSchema(t)
	w := newWorld(t, 1, replica.Config{Schema: sc})
	defer w.close()
	w.aoi = true
	zone, _ := w.srv.NewSpace(replica.SpaceConfig{Name: "zone", Radius: 10})
	u, _ := w.srv.Tracker().Spawn(sc.Classes[0])
	setPos(u, 100, 100)
	w.srv.SetSpace(u, zone)
	if err := w.srv.SetViewpoint(w.conns[0], 95, 100); err != nil {
		t.Fatal(err)
	}
	w.srv.View(w.conns[0], zone)
	w.tick(t)
	if !w.has(0, u) {
		x, _ := w.srv.Explain(w.conns[0], u)
		t.Fatalf("the unit 5 units from the viewpoint is not seen: %s", x.Reason)
	}
}

// TestInterestPredicate: Config.Interest hides a unit within range (a
// stealthed one, hp 0 here) until the game reveals it and calls
// Reconsider; ownership overrides it.
func TestInterestPredicate(t *testing.T) {
	sc := aoiSchema(t)
	stealthed := func(e *state.Entity) bool { return e.Class().Name == "Unit" && e.Num(e.Class().Leaf(2).Num) == 0 }
	w := newWorld(t, 2, replica.Config{Schema: sc, Interest: func(c *replica.Conn, e *state.Entity) bool { return !stealthed(e) }})
	defer w.close()
	w.aoi = true
	zone, _ := w.srv.NewSpace(replica.SpaceConfig{Name: "zone", Radius: 50})
	u, _ := w.srv.Tracker().Spawn(sc.Classes[0]) // hp 0: stealthed
	w.srv.SetSpace(u, zone)
	w.srv.SetOwner(u, w.conns[1])
	for _, c := range w.conns {
		w.srv.View(c, zone)
		w.srv.SetViewpoint(c, 10, 0)
	}
	w.tick(t)
	if w.has(0, u) || !w.has(1, u) {
		t.Fatalf("stealthed: stranger sees it %v (want false), owner %v (want true)", w.has(0, u), w.has(1, u))
	}
	if x, _ := w.srv.Explain(w.conns[0], u); x.Sees || !strings.Contains(x.Reason, "Config.Interest") {
		t.Fatalf("Explain: %+v", x)
	}
	u.SetNum(2, 5) // revealed
	w.tick(t)
	if w.has(0, u) {
		t.Fatal("revealed without Reconsider: the server re-evaluates only on what it tracks")
	}
	w.srv.Reconsider(u)
	w.tick(t)
	if !w.has(0, u) {
		t.Fatal("revealed and reconsidered, still unseen")
	}
}

// TestInterestLODProperty drives units with level-of-detail bands around
// viewers in an AOI space for many ticks: units move, teleport, change
// their banded fields and owners; viewers move and follow units. After
// every tick each client holds each entity at the level the rules give,
// with exactly the fields of its bands (the others zero), which
// TestInterestProperty's shorter runs reach less often.
func TestInterestLODProperty(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		sc := aoiSchema(rt, true)
		w := newWorld(rt, 2, replica.Config{Schema: sc})
		defer w.close()
		// Budgets from none to a few entities a tick: what is held
		// back is checked apart (ownWorld.budgeted).
		budget := rapid.SampledFrom([]int{-1, 2000, 300}).Draw(rt, "budget")
		for _, c := range w.conns {
			if err := w.srv.SetBudget(c, budget); err != nil {
				rt.Fatal(err)
			}
		}
		w.budgeted = budget >= 0
		m, sp, coord := fieldModel(rt, w)
		n := len(w.conns)
		var units []*state.Entity
		for range rapid.IntRange(1, 6).Draw(rt, "units") {
			e, err := w.srv.Tracker().Spawn(sc.Classes[0])
			if err != nil {
				rt.Fatal(err)
			}
			setPos(e, coord("x"), coord("y"))
			if err := w.srv.SetSpace(e, sp); err != nil {
				rt.Fatal(err)
			}
			m.space[e] = 1
			units = append(units, e)
		}
		for range rapid.IntRange(5, 40).Draw(rt, "ticks") {
			for _, e := range units {
				switch rapid.IntRange(0, 6).Draw(rt, "act") {
				case 0, 1:
					x, y := posOf(e)
					setPos(e, float32(x)+float32(rapid.IntRange(-9, 9).Draw(rt, "dx")), float32(y)+float32(rapid.IntRange(-9, 9).Draw(rt, "dy")))
				case 2:
					setPos(e, coord("x"), coord("y"))
				case 3:
					e.SetNum(rapid.SampledFrom([]int{2, 6, 7}).Draw(rt, "leaf"), uint64(rapid.IntRange(0, 9).Draw(rt, "v")))
				case 4:
					if rapid.IntRange(0, 4).Draw(rt, "own") == 0 {
						var c *replica.Conn
						if i := rapid.IntRange(-1, n-1).Draw(rt, "owner"); i >= 0 {
							c = w.conns[i]
						}
						w.srv.SetOwner(e, c)
					}
				}
			}
			if rapid.Bool().Draw(rt, "moveView") {
				i := rapid.IntRange(0, n-1).Draw(rt, "client")
				if rapid.IntRange(0, 3).Draw(rt, "follow") == 0 {
					e := units[rapid.IntRange(0, len(units)-1).Draw(rt, "unit")]
					if err := w.srv.Follow(w.conns[i], e); err != nil {
						rt.Fatal(err)
					}
					m.fixed[i], m.follow[i] = false, e
				} else {
					x, y := coord("vx"), coord("vy")
					if err := w.srv.SetViewpoint(w.conns[i], float64(x), float64(y)); err != nil {
						rt.Fatal(err)
					}
					m.fixed[i], m.px[i], m.py[i], m.follow[i] = true, float64(x), float64(y), nil
				}
			}
			w.tick(rt)
			m.settle()
		}
	})
}

// fieldModel returns the model of an AOI world of w's clients, with
// levels of detail: the default room and a field (radius 30, hysteresis
// 4, cells of 16), every client viewing the field from a point drawn at
// random; the field, and the drawer of coordinates (0 to 50).
func fieldModel(rt *rapid.T, w *ownWorld) (*aoiModel, *replica.Space, func(string) float32) {
	m := &aoiModel{w: w, space: map[*state.Entity]int{}, radius: map[*state.Entity]float64{},
		always: map[*state.Entity]bool{}, egroups: map[*state.Entity][]int{}}
	w.level = m.level
	m.cfgs = []replica.SpaceConfig{{Name: "default"}, {Name: "field", Radius: 30, Hysteresis: 4, CellSize: 16}}
	sp, err := w.srv.NewSpace(m.cfgs[1])
	if err != nil {
		rt.Fatal(err)
	}
	m.spaces = []*replica.Space{w.srv.DefaultSpace(), sp}
	n := len(w.conns)
	m.view, m.fixed, m.px, m.py = make([]int, n), make([]bool, n), make([]float64, n), make([]float64, n)
	m.follow, m.cgroups, m.pairs = make([]*state.Entity, n), make([][]int, n), make([]map[*state.Entity]bool, n)
	m.levels = make([]map[*state.Entity]int, n)
	w.sees = func(i int, e *state.Entity) bool { vis, _ := m.sees(i, e); return vis }
	coord := func(name string) float32 { return float32(rapid.IntRange(0, 50).Draw(rt, name)) }
	for i := range n {
		m.pairs[i], m.levels[i] = map[*state.Entity]bool{}, map[*state.Entity]int{}
		x, y := coord("vx"), coord("vy")
		if err := w.srv.View(w.conns[i], sp); err != nil {
			rt.Fatal(err)
		}
		if err := w.srv.SetViewpoint(w.conns[i], float64(x), float64(y)); err != nil {
			rt.Fatal(err)
		}
		m.view[i], m.fixed[i], m.px[i], m.py[i] = 1, true, float64(x), float64(y)
	}
	return m, sp, coord
}

// TestInterestRespawnFollows: a client whose followed unit dies and
// respawns far away in the same tick views from the new unit, whichever
// of the destroy and the new ownership comes first.
func TestInterestRespawnFollows(t *testing.T) {
	for _, destroyFirst := range []bool{true, false} {
		w, zone := zoneWorld(t, replica.Config{Schema: aoiSchema(t)}, 10)
		w.aoi = true
		c := w.conns[0]
		unit := func(x float32) *state.Entity { return spawnAt(t, w, zone, x) }
		avatar, near := unit(0), unit(5)
		far := unit(100)
		w.srv.SetOwner(avatar, c)
		w.tick(t)
		if !w.has(0, near) || w.has(0, far) {
			t.Fatalf("before: sees near %v, far %v", w.has(0, near), w.has(0, far))
		}
		if destroyFirst {
			w.srv.Tracker().Destroy(avatar)
		}
		respawn := unit(103)
		w.srv.SetOwner(respawn, c)
		if !destroyFirst {
			w.srv.Tracker().Destroy(avatar)
		}
		w.tick(t)
		if w.has(0, near) || !w.has(0, far) || !w.has(0, respawn) {
			t.Fatalf("destroy first %v: after the respawn, sees near %v, far %v, its new unit %v", destroyFirst, w.has(0, near), w.has(0, far), w.has(0, respawn))
		}
		w.close()
	}
}
