package replica_test

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"

	"pgregory.net/rapid"

	"github.com/replicago/replica"
	"github.com/replicago/replica/schema"
	"github.com/replicago/replica/state"
)

// TestInterestMisuse drives the interest API of a server with three honest
// clients and one that may leave, over the in-memory transport, with
// random calls that mix valid use with misuse: entities that are nil,
// destroyed (in an earlier tick or this one), spawned this tick (and
// placed, followed, owned and destroyed within it), or another server's
// (with the same IDs as this one's); connections that are nil, have
// left, or are another server's; spaces that are nil, another server's,
// or made without NewSpace, and new ones of any configuration; groups of
// another server or made without NewGroup; radii, priorities, budgets,
// viewpoints and positions that are negative, zero, NaN, infinite or
// huge; Explain with unknown, empty and nested field paths; and the calls
// a game may make in OnLeave, during Close and after it. The draws favour
// valid use (live entities, the clients, the AOI zone), so that the world
// misused has units seen by distance, followed and moved.
//
// After every call: no panic; an error is one of the package's typed
// errors (errors.Is), its message names the problem (it contains the
// sentinel's), and it is returned exactly when an argument is bad; a
// call that fails changes nothing the API shows (spaces, views, owners,
// Explain of every pair). After every tick: each honest client is still
// connected and its replica holds exactly what Sees says it sees, the
// grid is consistent, and Sees agrees with Explain, which evaluates the
// rules from scratch.
//
// Decisions where misuse is not an error:
//   - A connection that has closed but not yet been reaped (its OnLeave
//     has not run) is still the server's: calls on it succeed, and what
//     they did goes with it when the tick reaps it. The game cannot know
//     it has gone before OnLeave.
//   - Positions are the game's fields, not arguments: a NaN or infinite
//     position is no error, it is a place no viewpoint is within reach of
//     (as a viewpoint following such an entity is within reach of none).
//   - A budget of any size is valid (negative: none; zero: one entity a
//     tick, the first, whatever its size), as is any finite priority > 0,
//     radius ≥ 0 and viewpoint, however large.
//   - Group.RemoveEntity, AddConn and RemoveConn return nothing: with an
//     argument that is not the group's server's they do nothing.
//   - A nil *Group, like a nil *Server, panics; a zero Group, like a
//     zero Space, is refused with the typed error of its argument.
//   - Sees answers as of the last tick sent: an entity destroyed in this
//     tick may still be seen (its clients hold it until the tick).
func TestInterestMisuse(t *testing.T) {
	sc := aoiSchema(t)
	other := newWorld(t, 1, replica.Config{Schema: sc})
	defer other.close()
	// The other server's entities take the first slots, as this one's
	// do: IDs collide.
	var foreign []*state.Entity
	for i := range 8 {
		e, err := other.srv.Tracker().Spawn(sc.Classes[i%2])
		if err != nil {
			t.Fatal(err)
		}
		foreign = append(foreign, e)
	}
	other.tick(t)
	other.srv.Tracker().Destroy(foreign[7])
	other.tick(t)
	foreignZone, err := other.srv.NewSpace(replica.SpaceConfig{Name: "elsewhere", Radius: 10})
	if err != nil {
		t.Fatal(err)
	}
	foreignSpaces := []*replica.Space{other.srv.DefaultSpace(), foreignZone, {}}
	foreignGroup := other.srv.NewGroup("theirs")

	rapid.Check(t, func(rt *rapid.T) {
		var m *misuse
		w := newWorld(rt, 4, replica.Config{Schema: sc, OnLeave: func(c *replica.Conn) {
			if m != nil {
				m.onLeave(c)
			}
		}})
		defer func() {
			m = nil // Close's OnLeave, when the check has failed, checks nothing
			w.close()
		}()
		w.aoi, w.budgeted = true, true
		m = &misuse{rt: rt, w: w, sc: sc, foreign: foreign, foreignSpaces: foreignSpaces,
			foreignConn: other.conns[0], foreignGroup: foreignGroup, otherSrv: other.srv,
			destroyed: map[*state.Entity]uint64{}, followed: map[*replica.Conn]*state.Entity{}}
		// The AOI spaces first: rapid draws them more often.
		for _, cfg := range []replica.SpaceConfig{
			{Name: "zone", Radius: 15, Hysteresis: 4, CellSize: 16}, // radii over 16 are wide
			{Name: "maze", Radius: 15, Metric: replica.Square},
			{Name: "lobby"},
		} {
			sp, err := w.srv.NewSpace(cfg)
			if err != nil {
				rt.Fatal(err)
			}
			m.spaces = append(m.spaces, sp)
		}
		m.spaces = slices.Insert(m.spaces, 2, w.srv.DefaultSpace())
		m.groups = []*replica.Group{w.srv.NewGroup("red"), w.srv.NewGroup("blue")}
		// Each client views a space of this server's, mostly the zone,
		// from a point of its own until it follows.
		for _, c := range w.conns {
			sp := m.spaces[0]
			if rapid.IntRange(0, 3).Draw(rt, "elsewhere") == 3 {
				sp = m.spaces[rapid.IntRange(0, len(m.spaces)-1).Draw(rt, "view")]
			}
			m.call("View", func() error { return w.srv.View(c, sp) })
			x, y := float64(rapid.IntRange(0, 40).Draw(rt, "x")), float64(rapid.IntRange(0, 40).Draw(rt, "y"))
			m.call("SetViewpoint", func() error { return w.srv.SetViewpoint(c, x, y) })
		}
		actions := m.actions()
		for range rapid.IntRange(1, 12).Draw(rt, "rounds") {
			m.run(actions, rapid.IntRange(1, 60).Draw(rt, "steps"))
			m.tick()
		}
		if rapid.Bool().Draw(rt, "close") {
			m.closeAndMisuse()
		}
	})
}

// misuse is TestInterestMisuse's world and what it draws from.
type misuse struct {
	rt            *rapid.T
	w             *ownWorld
	sc            *schema.Schema
	spaces        []*replica.Space // this server's
	groups        []*replica.Group
	ents          []*state.Entity                 // every entity this server spawned, live or destroyed
	destroyed     map[*state.Entity]uint64        // the destroyed ones: the last tick sent before
	followed      map[*replica.Conn]*state.Entity // what each client was last made to follow
	foreign       []*state.Entity                 // another server's, one of them destroyed
	foreignSpaces []*replica.Space
	foreignConn   *replica.Conn
	foreignGroup  *replica.Group
	otherSrv      *replica.Server
}

// The clients: 0 to 2 are honest, 3 may leave.
const (
	honestClients = 3
	leaver        = 3
)

// live reports whether e is a live entity of srv.
func live(srv *replica.Server, e *state.Entity) bool {
	return e != nil && srv.Tracker().Entity(e.ID()) == e
}

// joined reports whether c is a connection of the server that has not
// left: it is among Conns until the tick that reaps it runs OnLeave.
func (m *misuse) joined(c *replica.Conn) bool {
	return c != nil && slices.Contains(m.w.srv.Conns(), c)
}

// entity draws an entity: mostly a live one, else one destroyed, nil or
// another server's. (rapid draws small numbers more often, and shrinks
// toward them: the live entities come first.)
func (m *misuse) entity() *state.Entity {
	switch k := rapid.IntRange(0, 19).Draw(m.rt, "entityKind"); {
	case k < 14:
		if ents := m.w.srv.Tracker().AppendEntities(nil); len(ents) > 0 {
			return ents[rapid.IntRange(0, len(ents)-1).Draw(m.rt, "liveEntity")]
		}
		return nil
	case k < 17:
		if len(m.ents) > 0 {
			return m.ents[rapid.IntRange(0, len(m.ents)-1).Draw(m.rt, "anyEntity")]
		}
		return nil
	case k < 19:
		return m.foreign[rapid.IntRange(0, len(m.foreign)-1).Draw(m.rt, "foreign")]
	default:
		return nil
	}
}

// conn draws a connection: mostly a client's, else nil or another
// server's.
func (m *misuse) conn() *replica.Conn {
	n := len(m.w.conns)
	switch i := rapid.IntRange(0, 2*n+1).Draw(m.rt, "conn"); {
	case i < 2*n:
		return m.w.conns[i%n]
	case i == 2*n:
		return nil
	default:
		return m.foreignConn
	}
}

// space draws a space: mostly one of this server's, else nil, another
// server's or a zero one.
func (m *misuse) space() *replica.Space {
	all := append(append(slices.Clone(m.spaces), m.spaces...), nil)
	all = append(all, m.foreignSpaces...)
	return all[rapid.IntRange(0, len(all)-1).Draw(m.rt, "space")]
}

// group draws a group: this server's, another server's or a zero one.
func (m *misuse) group() *replica.Group {
	all := append(slices.Clone(m.groups), m.foreignGroup, &replica.Group{})
	return all[rapid.IntRange(0, len(all)-1).Draw(m.rt, "group")]
}

// number draws a float: as often an ordinary one, from 0 to 40, as an
// extreme one.
func number(rt *rapid.T, name string) float64 {
	if rapid.IntRange(0, 1).Draw(rt, name+"Extreme") == 0 {
		return float64(rapid.IntRange(0, 40).Draw(rt, name))
	}
	return rapid.SampledFrom([]float64{math.NaN(), math.Inf(1), math.Inf(-1), -1, math.Copysign(0, -1),
		1e300, -1e300, math.MaxFloat64, math.SmallestNonzeroFloat64, math.MaxFloat32, 1 << 40, -40}).Draw(rt, name)
}

// coord draws a coordinate of a position: mostly an ordinary one, from 0
// to 40, else one a viewpoint is never within reach of (NaN, infinite)
// or one far away.
func coord(rt *rapid.T, name string) float32 {
	if rapid.IntRange(0, 2).Draw(rt, name+"Extreme") < 2 {
		return float32(rapid.IntRange(0, 40).Draw(rt, name))
	}
	return rapid.SampledFrom([]float32{float32(math.NaN()), float32(math.Inf(1)), float32(math.Inf(-1)),
		math.MaxFloat32, -math.MaxFloat32, 1e30, -1}).Draw(rt, name)
}

func finite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }

// entityErr is the error a call of this server's must return for e.
func (m *misuse) entityErr(e *state.Entity) error {
	if !live(m.w.srv, e) {
		return replica.ErrUnknownEntity
	}
	return nil
}

// connErr is the error a call must return for c.
func (m *misuse) connErr(c *replica.Conn) error {
	if !m.joined(c) {
		return replica.ErrConnGone
	}
	return nil
}

// ownerErr is the error SetOwner must return for c: nil gives the
// entity to nobody.
func (m *misuse) ownerErr(c *replica.Conn) error {
	if c == nil {
		return nil
	}
	return m.connErr(c)
}

// spaceErr is the error a call must return for sp.
func (m *misuse) spaceErr(sp *replica.Space) error {
	if sp != nil && !slices.Contains(m.spaces, sp) {
		return replica.ErrUnknownSpace
	}
	return nil
}

// snapshot is what the API shows of the world: each entity's space and
// owner, each client's view, and Explain of every pair.
func (m *misuse) snapshot() string {
	var b strings.Builder
	srv := m.w.srv
	ents := srv.Tracker().AppendEntities(nil)
	for _, e := range ents {
		fmt.Fprintf(&b, "%#x: space %p owner %p\n", uint32(e.ID()), srv.SpaceOf(e), srv.Owner(e))
	}
	for i, c := range m.w.conns {
		fmt.Fprintf(&b, "client %d views %p\n", i, srv.ViewOf(c))
		for _, e := range ents {
			x, err := srv.Explain(c, e)
			fmt.Fprintf(&b, "client %d, %#x: %+v %v\n", i, uint32(e.ID()), x, err)
		}
	}
	return b.String()
}

// call makes a call of the API that must fail with one of wants (nil
// ones dropped), or succeed if there is none. A call that fails must
// change nothing.
func (m *misuse) call(what string, f func() error, wants ...error) {
	if !slices.ContainsFunc(wants, func(err error) bool { return err != nil }) {
		m.check(what, f())
		return
	}
	before := m.snapshot()
	m.check(what, f(), wants...)
	m.unchanged(what, before)
}

// noop makes a call of the API that returns nothing and must change
// nothing.
func (m *misuse) noop(what string, f func()) {
	before := m.snapshot()
	f()
	m.unchanged(what, before)
}

// unchanged checks that the world is as snapshot before a call showed it.
func (m *misuse) unchanged(what, before string) {
	if after := m.snapshot(); after != before {
		m.rt.Fatalf("%s changed the world:\nbefore:\n%safter:\n%s", what, before, after)
	}
}

// check checks err against wants, as call does.
func (m *misuse) check(what string, err error, wants ...error) {
	wants = slices.DeleteFunc(wants, func(err error) bool { return err == nil })
	if len(wants) == 0 {
		if err != nil {
			m.rt.Fatalf("%s: %v, want success", what, err)
		}
		return
	}
	if err == nil {
		m.rt.Fatalf("%s succeeded, want one of %v", what, wants)
	}
	for _, want := range wants {
		if errors.Is(err, want) {
			if !strings.Contains(err.Error(), want.Error()) {
				m.rt.Fatalf("%s: %q does not say %q", what, err, want)
			}
			return
		}
	}
	m.rt.Fatalf("%s: %v (%T), want one of %v", what, err, err, wants)
}

// fieldPaths are field paths for Explain, valid for one class or the
// other, or for neither.
var fieldPaths = [][]string{nil, {"hp"}, {"x"}, {"gold"}, {"mood"}, {"score"}, {"secret"},
	{""}, {"nope"}, {"hp", "x"}, {"hp.x"}, {"hp", ""}, {"", "hp"}, {"name", "first"}, {"."}, {"HP"}}

func (m *misuse) actions() map[string]func(*rapid.T) {
	srv := m.w.srv
	tr := srv.Tracker()
	return map[string]func(*rapid.T){
		"spawn": func(rt *rapid.T) {
			e, err := tr.Spawn(m.sc.Classes[rapid.IntRange(0, 1).Draw(rt, "class")])
			if err != nil {
				rt.Fatal(err)
			}
			m.ents = append(m.ents, e)
			if e.Class().Name == "Unit" {
				setPos(e, float32(rapid.IntRange(0, 40).Draw(rt, "x")), float32(rapid.IntRange(0, 40).Draw(rt, "y")))
			}
			// Mostly in the zone, where distance decides, in its spawn
			// tick.
			switch rapid.IntRange(0, 3).Draw(rt, "place") {
			case 0, 1:
				m.call("SetSpace of a new entity", func() error { return srv.SetSpace(e, m.spaces[0]) })
			case 2:
				sp := m.space()
				m.call("SetSpace of a new entity", func() error { return srv.SetSpace(e, sp) }, m.spaceErr(sp))
			}
		},
		"ephemeral": func(rt *rapid.T) {
			// A unit that lives for part of a tick: placed, followed,
			// owned, shown, then destroyed before the tick ends.
			e, err := tr.Spawn(m.sc.Classes[0])
			if err != nil {
				rt.Fatal(err)
			}
			m.ents = append(m.ents, e)
			setPos(e, coord(rt, "x"), coord(rt, "y"))
			m.call("SetSpace", func() error { return srv.SetSpace(e, m.spaces[0]) })
			c := m.conn()
			m.call("Follow", func() error { return srv.Follow(c, e) }, m.connErr(c))
			if rapid.Bool().Draw(rt, "owned") {
				c := m.conn()
				m.call("SetOwner", func() error { return srv.SetOwner(e, c) }, m.ownerErr(c))
			}
			if rapid.Bool().Draw(rt, "always") {
				m.call("SetAlwaysRelevant", func() error { return srv.SetAlwaysRelevant(e, true) })
			}
			m.destroyed[e] = srv.TickNumber()
			tr.Destroy(e)
		},
		"destroy": func(rt *rapid.T) {
			e := m.entity()
			if live(srv, e) {
				m.destroyed[e] = srv.TickNumber()
			}
			tr.Destroy(e) // nothing for one not live in this tracker
		},
		"move": func(rt *rapid.T) {
			if e := m.entity(); live(srv, e) && e.Class().Name == "Unit" {
				setPos(e, coord(rt, "x"), coord(rt, "y"))
			}
		},
		"moveFollowed": func(rt *rapid.T) {
			// What a client views from, moved anywhere: its viewpoint
			// goes with it.
			if e := m.followed[m.conn()]; live(srv, e) {
				setPos(e, coord(rt, "x"), coord(rt, "y"))
			}
		},
		"step": func(rt *rapid.T) {
			if e := m.entity(); live(srv, e) && e.Class().Name == "Unit" {
				x, y := posOf(e)
				setPos(e, float32(x)+float32(rapid.IntRange(-6, 6).Draw(rt, "dx")), float32(y)+float32(rapid.IntRange(-6, 6).Draw(rt, "dy")))
			}
		},
		"newSpace": func(rt *rapid.T) {
			// A space of any configuration: one that is refused must be
			// for a bad number; one that is made is used from now on.
			cfg := replica.SpaceConfig{Name: "new", Radius: number(rt, "radius"), Hysteresis: number(rt, "hysteresis"),
				CellSize: number(rt, "cellSize"), Metric: replica.Metric(rapid.IntRange(0, 3).Draw(rt, "metric"))}
			var badRadius, badMetric error
			for _, v := range []float64{cfg.Radius, cfg.Hysteresis, cfg.CellSize} {
				if !(v >= 0) || !finite(v) {
					badRadius = replica.ErrBadRadius
				}
			}
			if cfg.Metric > replica.Square {
				badMetric = replica.ErrUnknownMetric
			}
			sp, err := srv.NewSpace(cfg)
			m.check(fmt.Sprintf("NewSpace(%+v)", cfg), err, badRadius, badMetric)
			if err == nil {
				m.spaces = append(m.spaces, sp)
			}
		},
		"setSpace": func(rt *rapid.T) {
			e, sp := m.entity(), m.space()
			m.call("SetSpace", func() error { return srv.SetSpace(e, sp) }, m.entityErr(e), m.spaceErr(sp))
		},
		"view": func(rt *rapid.T) {
			c, sp := m.conn(), m.space()
			m.call("View", func() error { return srv.View(c, sp) }, m.connErr(c), m.spaceErr(sp))
		},
		"viewpoint": func(rt *rapid.T) {
			c, x, y := m.conn(), number(rt, "x"), number(rt, "y")
			var bad error
			if !finite(x) || !finite(y) {
				bad = replica.ErrBadViewpoint
			}
			m.call(fmt.Sprintf("SetViewpoint(%v, %v)", x, y), func() error { return srv.SetViewpoint(c, x, y) }, m.connErr(c), bad)
		},
		"follow": func(rt *rapid.T) {
			c, e := m.conn(), m.entity()
			var noPos error
			if e != nil && e.Class().Name != "Unit" {
				noPos = replica.ErrNoPosition
			}
			m.call("Follow", func() error { return srv.Follow(c, e) }, m.connErr(c), m.entityErr(e), noPos)
			if m.connErr(c) == nil && m.entityErr(e) == nil && noPos == nil {
				m.followed[c] = e
			}
		},
		"radius": func(rt *rapid.T) {
			e, r := m.entity(), number(rt, "radius")
			var bad error
			if !(r >= 0) || !finite(r) {
				bad = replica.ErrBadRadius
			}
			m.call(fmt.Sprintf("SetRadius(%v)", r), func() error { return srv.SetRadius(e, r) }, m.entityErr(e), bad)
		},
		"priority": func(rt *rapid.T) {
			e, p := m.entity(), number(rt, "priority")
			var bad error
			if !(p > 0) || !finite(p) {
				bad = replica.ErrBadPriority
			}
			m.call(fmt.Sprintf("SetPriority(%v)", p), func() error { return srv.SetPriority(e, p) }, m.entityErr(e), bad)
		},
		"budget": func(rt *rapid.T) {
			c := m.conn()
			n := rapid.SampledFrom([]int{-1, 0, 1, 300, 4000, 1 << 20, math.MaxInt, math.MinInt}).Draw(rt, "budget")
			m.call(fmt.Sprintf("SetBudget(%d)", n), func() error { return srv.SetBudget(c, n) }, m.connErr(c))
		},
		"always": func(rt *rapid.T) {
			e, a := m.entity(), rapid.Bool().Draw(rt, "always")
			m.call("SetAlwaysRelevant", func() error { return srv.SetAlwaysRelevant(e, a) }, m.entityErr(e))
		},
		"reconsider": func(rt *rapid.T) {
			e := m.entity()
			m.call("Reconsider", func() error { return srv.Reconsider(e) }, m.entityErr(e))
		},
		"owner": func(rt *rapid.T) {
			e, c := m.entity(), m.conn()
			m.call("SetOwner", func() error { return srv.SetOwner(e, c) }, m.entityErr(e), m.ownerErr(c))
		},
		"groupEntity": func(rt *rapid.T) {
			g, e := m.group(), m.entity()
			if rapid.Bool().Draw(rt, "add") {
				// A group's entities are its own server's; a zero
				// group's server is none.
				var want error
				switch {
				case g == m.foreignGroup && live(m.otherSrv, e):
					return // valid there: the other world, never ticked, is left alone
				case !slices.Contains(m.groups, g) || !live(srv, e):
					want = replica.ErrUnknownEntity
				}
				m.call("AddEntity", func() error { return g.AddEntity(e) }, want)
				return
			}
			if !slices.Contains(m.groups, g) || !live(srv, e) {
				m.noop("RemoveEntity", func() { g.RemoveEntity(e) })
				return
			}
			g.RemoveEntity(e)
		},
		"groupConn": func(rt *rapid.T) {
			g, c := m.group(), m.conn()
			add := rapid.Bool().Draw(rt, "add")
			if !slices.Contains(m.groups, g) || !m.joined(c) {
				m.noop("AddConn or RemoveConn", func() {
					if add {
						g.AddConn(c)
					} else {
						g.RemoveConn(c)
					}
				})
				return
			}
			if add {
				g.AddConn(c)
			} else {
				g.RemoveConn(c)
			}
		},
		"explain": func(rt *rapid.T) {
			c, e := m.conn(), m.entity()
			path := fieldPaths[rapid.IntRange(0, len(fieldPaths)-1).Draw(rt, "path")]
			var badField error
			if path != nil && (e == nil || e.Class().FieldPath(strings.Join(path, ".")) == nil) {
				badField = replica.ErrUnknownField
			}
			var x replica.Explanation
			m.call(fmt.Sprintf("Explain(%q)", path), func() (err error) { x, err = srv.Explain(c, e, path...); return err },
				m.entityErr(e), m.connErr(c), badField)
			if x.Reason == "" && m.entityErr(e) == nil && m.connErr(c) == nil && badField == nil {
				rt.Fatalf("Explain(%q): no reason", path)
			}
		},
		"sees": func(rt *rapid.T) {
			// Sees answers as of the last tick sent: an entity destroyed
			// since may be seen still (its client has it until the tick).
			c, e := m.conn(), m.entity()
			at, dying := m.destroyed[e]
			dying = dying && at == srv.TickNumber()
			if srv.Sees(c, e) && (m.entityErr(e) != nil && !dying || m.connErr(c) != nil) {
				rt.Fatalf("Sees(%p, %p) is true (entity destroyed after tick %d: %v)", c, e, at, dying)
			}
			if o := srv.Owner(e); o != nil && m.entityErr(e) != nil {
				rt.Fatalf("an entity not of this server's world is owned by %s", o.UserID())
			}
			if sp := srv.SpaceOf(e); sp != nil && m.entityErr(e) != nil && !dying {
				rt.Fatalf("an entity not of this server's world is in space %s", sp.Name())
			}
			if sp := srv.ViewOf(c); sp != nil && m.connErr(c) != nil {
				rt.Fatalf("a connection not of this server, or gone, views %s", sp.Name())
			}
		},
		"leave": func(rt *rapid.T) {
			if len(m.w.away) <= leaver || !m.w.away[leaver] {
				m.w.drop(leaver)
			}
		},
		"tick": func(rt *rapid.T) { m.tick() },
	}
}

// misusePlan lists the actions to draw from, those that make a world
// worth misusing (entities spawned, placed, moved and followed, clients
// viewing spaces, ticks) first and several times: rapid draws small
// numbers more often.
var misusePlan = []string{
	"spawn", "step", "follow", "moveFollowed", "tick", "spawn", "step", "setSpace", "ephemeral", "viewpoint",
	"owner", "follow", "tick", "move", "view", "radius", "newSpace", "explain", "sees", "always", "groupEntity", "groupConn",
	"destroy", "priority", "budget", "reconsider", "leave",
}

// run makes steps actions drawn from misusePlan.
func (m *misuse) run(actions map[string]func(*rapid.T), steps int) {
	for range steps {
		n := misusePlan[rapid.IntRange(0, len(misusePlan)-1).Draw(m.rt, "action")]
		actions[n](m.rt)
	}
}

// onLeave makes the calls a game may make in OnLeave: c has left, and is
// refused as an owner, a viewer, a group member.
func (m *misuse) onLeave(c *replica.Conn) {
	srv := m.w.srv
	e := m.entity()
	if live(srv, e) {
		m.check("SetOwner in OnLeave", srv.SetOwner(e, c), replica.ErrConnGone)
		if srv.Owner(e) == c {
			m.rt.Fatalf("OnLeave: %s still owns %#x", c.UserID(), uint32(e.ID()))
		}
		_, err := srv.Explain(c, e)
		m.check("Explain in OnLeave", err, replica.ErrConnGone)
		m.check("Follow in OnLeave", srv.Follow(c, e), replica.ErrConnGone, replica.ErrNoPosition)
	}
	m.check("View in OnLeave", srv.View(c, srv.DefaultSpace()), replica.ErrConnGone)
	m.check("SetViewpoint in OnLeave", srv.SetViewpoint(c, 1, 2), replica.ErrConnGone)
	m.check("SetBudget in OnLeave", srv.SetBudget(c, 100), replica.ErrConnGone)
	m.groups[0].AddConn(c)
	if sp := srv.ViewOf(c); sp != nil {
		m.rt.Fatalf("OnLeave: %s views %s", c.UserID(), sp.Name())
	}
}

// tick ticks the server and checks the clients: the honest ones are
// connected and hold what Sees says (ownWorld.tick); the grid is
// consistent; Sees agrees with Explain.
func (m *misuse) tick() {
	w, srv := m.w, m.w.srv
	w.tick(m.rt)
	for i := range honestClients {
		if !m.joined(w.conns[i]) {
			m.rt.Fatalf("tick %d: honest client %d was dropped", srv.TickNumber(), i)
		}
	}
	if err := srv.CheckGridForTest(); err != nil {
		m.rt.Fatal(err)
	}
	srv.InterestStats()
	for i, c := range w.conns {
		if !m.joined(c) {
			continue
		}
		for _, e := range srv.Tracker().AppendEntities(nil) {
			x, err := srv.Explain(c, e)
			if err != nil {
				m.rt.Fatalf("tick %d: Explain(client %d, %#x): %v", srv.TickNumber(), i, uint32(e.ID()), err)
			}
			if sees := srv.Sees(c, e); sees != x.Sees {
				m.rt.Fatalf("tick %d: client %d sees %#x: %v, Explain says %v (%s)", srv.TickNumber(), i, uint32(e.ID()), sees, x.Sees, x.Reason)
			}
		}
	}
}

// closeAndMisuse closes the server, its OnLeave making the calls onLeave
// makes, then calls the API and ticks: every connection has left.
func (m *misuse) closeAndMisuse() {
	srv := m.w.srv
	if err := srv.Close(); err != nil {
		m.rt.Fatal(err)
	}
	actions := m.actions()
	delete(actions, "tick")
	delete(actions, "leave")
	names := make([]string, 0, len(actions))
	for name := range actions {
		names = append(names, name)
	}
	slices.Sort(names)
	for range rapid.IntRange(0, 20).Draw(m.rt, "afterClose") {
		actions[rapid.SampledFrom(names).Draw(m.rt, "action")](m.rt)
	}
	srv.Tick()
	if err := srv.CheckGridForTest(); err != nil {
		m.rt.Fatal(err)
	}
	if n := len(srv.Conns()); n != 0 {
		m.rt.Fatalf("%d connections after Close", n)
	}
}

// TestInterestMisuseDestroyedThisTick: an entity destroyed in the current
// tick, whose interest state the tick has not dropped yet, is refused
// like one destroyed earlier (the calls used to succeed).
func TestInterestMisuseDestroyedThisTick(t *testing.T) {
	sc := aoiSchema(t)
	w, zone := zoneWorld(t, replica.Config{Schema: sc}, 10)
	defer w.close()
	w.aoi = true
	c, g := w.conns[0], w.srv.NewGroup("g")
	for _, old := range []bool{true, false} { // spawned in an earlier tick, or in this one
		e := spawnAt(t, w, zone, 3)
		if old {
			w.tick(t)
		}
		w.srv.Tracker().Destroy(e)
		for name, err := range map[string]error{
			"SetSpace":          w.srv.SetSpace(e, nil),
			"SetRadius":         w.srv.SetRadius(e, 5),
			"SetPriority":       w.srv.SetPriority(e, 2),
			"SetAlwaysRelevant": w.srv.SetAlwaysRelevant(e, true),
			"Follow":            w.srv.Follow(c, e),
			"Reconsider":        w.srv.Reconsider(e),
			"AddEntity":         g.AddEntity(e),
		} {
			if !errors.Is(err, replica.ErrUnknownEntity) {
				t.Errorf("spawned before this tick %v: %s of an entity destroyed in this tick: %v", old, name, err)
			}
		}
		if _, err := w.srv.Explain(c, e); !errors.Is(err, replica.ErrUnknownEntity) {
			t.Errorf("spawned before this tick %v: Explain of an entity destroyed in this tick: %v", old, err)
		}
		w.tick(t)
	}
}

// TestInterestMisuseExplainNew: Explain of an entity spawned in this tick
// explains it by the rules as they stand (it used to be ErrUnknownEntity,
// for a live entity), in the space the tick creates it in.
func TestInterestMisuseExplainNew(t *testing.T) {
	sc := aoiSchema(t)
	w, zone := zoneWorld(t, replica.Config{Schema: sc}, 10)
	defer w.close()
	w.aoi = true
	c := w.conns[0]
	flag, _ := w.srv.Tracker().Spawn(sc.Classes[1])
	x, err := w.srv.Explain(c, flag, "score")
	if err != nil || x.Space != "default" || x.Sees {
		t.Errorf("Explain of a flag spawned in this tick, for a client viewing the zone: %+v, %v; want it in the default room, unseen", x, err)
	}
	w.srv.SetOwner(flag, c)
	if x, err := w.srv.Explain(c, flag); err != nil || !x.Sees || !x.Owner {
		t.Errorf("Explain of a flag spawned and given to the client in this tick: %+v, %v", x, err)
	}
	unit := spawnAt(t, w, zone, 100)
	if x, err := w.srv.Explain(c, unit); err != nil || x.Space != "zone" {
		t.Errorf("Explain of a unit spawned in the zone in this tick: %+v, %v", x, err)
	}
	w.tick(t)
}

// TestInterestMisuseZeroGroup: a Group not made by NewGroup belongs to no
// server: AddEntity refuses every entity, RemoveEntity does nothing (both
// used to panic).
func TestInterestMisuseZeroGroup(t *testing.T) {
	sc := aoiSchema(t)
	w := newWorld(t, 1, replica.Config{Schema: sc})
	defer w.close()
	e, _ := w.srv.Tracker().Spawn(sc.Classes[0])
	var g replica.Group
	if err := g.AddEntity(e); !errors.Is(err, replica.ErrUnknownEntity) {
		t.Errorf("AddEntity to a zero Group: %v", err)
	}
	g.RemoveEntity(e)
	g.AddConn(w.conns[0])
	g.RemoveConn(w.conns[0])
	w.tick(t)
}

// TestInterestMisuseClose: Close has the clients leave as a tick would:
// in OnLeave, a connection owns nothing and is refused as an owner, a
// viewer and to Explain, and so it is after Close (all of which used to
// succeed, leaving an owner that would never be released).
func TestInterestMisuseClose(t *testing.T) {
	sc := aoiSchema(t)
	var e *state.Entity
	var errs []error
	var owned []bool
	w := newWorld(t, 2, replica.Config{Schema: sc, OnLeave: func(c *replica.Conn) {
		srv := c.Server()
		owned = append(owned, srv.Owner(e) == c)
		_, err := srv.Explain(c, e)
		errs = append(errs, srv.SetOwner(e, c), srv.View(c, srv.DefaultSpace()), srv.Follow(c, e), err)
	}})
	defer w.close()
	e, _ = w.srv.Tracker().Spawn(sc.Classes[0])
	w.srv.SetOwner(e, w.conns[0])
	w.tick(t)
	if err := w.srv.Close(); err != nil {
		t.Fatal(err)
	}
	if len(owned) != 2 || owned[0] || owned[1] {
		t.Errorf("OnLeave in Close: the leaving connection owns the entity it owned: %v", owned)
	}
	for i, err := range errs {
		if !errors.Is(err, replica.ErrConnGone) {
			t.Errorf("call %d in OnLeave in Close: %v, want ErrConnGone", i, err)
		}
	}
	for _, c := range w.conns {
		if err := w.srv.SetOwner(e, c); !errors.Is(err, replica.ErrConnGone) {
			t.Errorf("SetOwner after Close: %v", err)
		}
		if err := w.srv.View(c, nil); !errors.Is(err, replica.ErrConnGone) {
			t.Errorf("View after Close: %v", err)
		}
	}
	if n := len(w.srv.Conns()); n != 0 {
		t.Errorf("%d connections after Close", n)
	}
	w.srv.Tick()
}

// TestInterestNaNViewpoint: a client that follows a unit moved to a NaN
// position has a viewpoint no entity is within reach of: it stops seeing
// what it saw by distance (it used to keep all of it: the evaluation of a
// viewpoint's move took the NaN distance it moved for a small one).
func TestInterestNaNViewpoint(t *testing.T) {
	w, zone := zoneWorld(t, replica.Config{Schema: aoiSchema(t)}, 10) // cells of 10: units of radius 10 are in them
	defer w.close()
	w.aoi = true
	c := w.conns[0]
	avatar, near := spawnAt(t, w, zone, 0), spawnAt(t, w, zone, 5)
	if err := w.srv.Follow(c, avatar); err != nil {
		t.Fatal(err)
	}
	w.tick(t)
	for _, step := range []struct {
		x    float32
		sees bool
	}{{float32(math.NaN()), false}, {1, true}, {float32(math.Inf(1)), false}, {2, true}} {
		setPos(avatar, step.x, 0)
		w.tick(t)
		x, _ := w.srv.Explain(c, near)
		if w.has(0, near) != step.sees || x.Sees != step.sees {
			t.Errorf("avatar at x = %v: the client has the unit 5 away %v, Explain says %v (%s); want %v", step.x, w.has(0, near), x.Sees, x.Reason, step.sees)
		}
	}
}

// TestInterestFollowEphemeral: a client that follows a unit spawned and
// destroyed within one tick has no viewpoint at the tick's end, and sees
// nothing from where that unit was (it used to keep the units evaluated
// before the ephemeral one was dropped, from its viewpoint).
func TestInterestFollowEphemeral(t *testing.T) {
	w, zone := zoneWorld(t, replica.Config{Schema: aoiSchema(t)}, 10)
	defer w.close()
	w.aoi = true
	c := w.conns[0]
	if err := w.srv.SetViewpoint(c, 100, 100); err != nil {
		t.Fatal(err)
	}
	near := spawnAt(t, w, zone, 5) // evaluated in the tick before the ephemeral unit
	ephemeral := spawnAt(t, w, zone, 0)
	if err := w.srv.Follow(c, ephemeral); err != nil {
		t.Fatal(err)
	}
	w.srv.Tracker().Destroy(ephemeral)
	w.tick(t)
	if x, _ := w.srv.Explain(c, near); w.has(0, near) || x.Sees {
		t.Errorf("the client sees a unit 5 away from where a unit it followed was for part of a tick: has it %v, Explain says %v (%s)", w.has(0, near), x.Sees, x.Reason)
	}
}

// TestInterestHugeRadius: entities of radii near the largest float, or at
// infinite or huge positions, are seen as Explain says (Euclidean radii
// over 1e154 squared to +Inf and took in infinite distances; a viewpoint
// 1e38 from such an entity could round into reach from a cell the grid's
// bounds left out), and never hang the tick (a range of cells around an
// infinite position and an infinite reach was inverted, and nearSparse
// looped through every int32).
func TestInterestHugeRadius(t *testing.T) {
	sc := aoiSchema(t)
	w := newWorld(t, 1, replica.Config{Schema: sc})
	defer w.close()
	w.aoi = true
	c := w.conns[0]
	for _, hyst := range []float64{4, math.MaxFloat64} {
		zone, err := w.srv.NewSpace(replica.SpaceConfig{Name: "zone", Radius: 15, Hysteresis: hyst, CellSize: 16})
		if err != nil {
			t.Fatal(err)
		}
		w.srv.View(c, zone)
		w.srv.SetViewpoint(c, 0, -1)
		// A cell of the sparse part of the grid, which the inverted
		// range looped over.
		far := spawnAt(t, w, zone, 1e30)
		w.tick(t)
		for _, u := range []struct {
			x, y   float32
			radius float64
			sees   bool
		}{
			{0, float32(math.Inf(1)), 1e300, false},
			{float32(math.Inf(-1)), 0, math.MaxFloat64, false},
			{37, math.MaxFloat32, math.MaxFloat32, true}, // 1 over the radius: lost in rounding
		} {
			e := spawnAt(t, w, zone, u.x)
			setPos(e, u.x, u.y)
			if err := w.srv.SetRadius(e, u.radius); err != nil {
				t.Fatal(err)
			}
			w.tick(t)
			x, _ := w.srv.Explain(c, e)
			if x.Sees != w.srv.Sees(c, e) || x.Sees != u.sees {
				t.Errorf("hysteresis %v: unit at (%v, %v) of radius %v: Sees %v, Explain %v (%s); want %v",
					hyst, u.x, u.y, u.radius, w.srv.Sees(c, e), x.Sees, x.Reason, u.sees)
			}
		}
		w.srv.Tracker().Destroy(far)
		w.tick(t)
	}
}
