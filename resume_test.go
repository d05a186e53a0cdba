package replica_test

import (
	"context"
	"maps"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/replicago/replica"
	"github.com/replicago/replica/codec"
	"github.com/replicago/replica/internal/demo"
	"github.com/replicago/replica/session"
	"github.com/replicago/replica/state"
	"github.com/replicago/replica/transport"
)

// TestResumeProperty drops clients at random and reconnects them some
// ticks later, while entities of every field kind (nested structs,
// lists, maps, bags) spawn, die, change and change owners: the catch-up
// tick leaves each resumed client's replica equal to what it may see, and
// its ownership callbacks consistent, as the full state would.
func TestResumeProperty(t *testing.T) {
	var catchUps, fulls uint64
	defer func() { checkCatchUps(t, catchUps, fulls) }()
	rapid.Check(t, func(rt *rapid.T) {
		w := newOwnWorld(rt, 3)
		defer w.close()
		pick := func() *state.Entity {
			ents := w.srv.Tracker().AppendEntities(nil)
			if len(ents) == 0 {
				return nil
			}
			return ents[rapid.IntRange(0, len(ents)-1).Draw(rt, "entity")]
		}
		present := func() int {
			i := rapid.IntRange(0, len(w.conns)-1).Draw(rt, "client")
			if i < len(w.away) && w.away[i] {
				return -1
			}
			return i
		}
		owner := func() *replica.Conn {
			if i := present(); i >= 0 && rapid.IntRange(0, 3).Draw(rt, "owned") > 0 {
				return w.conns[i]
			}
			return nil
		}
		resumed := 0
		actions := worldActions(w, pick, owner)
		maps.Copy(actions, map[string]func(*rapid.T){
			"drop": func(rt *rapid.T) {
				if i := present(); i >= 0 {
					w.drop(i)
				}
			},
			"reconnect": func(rt *rapid.T) {
				i := rapid.IntRange(0, len(w.conns)-1).Draw(rt, "client")
				if i < len(w.away) && w.away[i] {
					if w.reconnect(rt, i) {
						resumed++
					}
				}
			},
		})
		rt.Repeat(actions)
		for i := range w.away {
			if w.away[i] && w.reconnect(rt, i) {
				resumed++
			}
		}
		w.tick(rt)
		st := w.srv.Stats()
		catchUps, fulls = catchUps+st.Resumes, fulls+st.ResumeFallbacks
		if uint64(resumed) != st.Resumes+st.ResumeFallbacks {
			rt.Fatalf("%d sessions resumed, the server sent %d catch-ups and %d full states", resumed, st.Resumes, st.ResumeFallbacks)
		}
	})
}

// TestResumeAOIProperty is TestResumeProperty in an AOI space with levels
// of detail: while a client is away, units move in and out of its view
// and across its bands, and change owners; its catch-up tick destroys,
// creates, raises and lowers levels and fills what it newly sees.
func TestResumeAOIProperty(t *testing.T) {
	var catchUps, fulls uint64
	defer func() { checkCatchUps(t, catchUps, fulls) }()
	rapid.Check(t, func(rt *rapid.T) {
		sc := aoiSchema(rt, true)
		cfg := replica.Config{Schema: sc}
		// A resumed session views the field from where the old one did,
		// from the tick it joins in: its catch-up is of that view.
		var m *aoiModel
		var field *replica.Space
		// Budgets from none to a few entities a tick: a client may leave
		// with changes held back, which its catch-up must bring.
		budget := rapid.SampledFrom([]int{-1, 2000, 300}).Draw(rt, "budget")
		cfg.OnJoin = func(c *replica.Conn) {
			if budget >= 0 {
				if err := c.Server().SetBudget(c, budget); err != nil {
					rt.Fatal(err)
				}
			}
			if m == nil {
				return
			}
			for i := range m.view {
				if c.UserID() == m.w.clients[i].UserID() {
					if err := m.w.srv.View(c, field); err != nil {
						rt.Fatal(err)
					}
					if err := m.w.srv.SetViewpoint(c, m.px[i], m.py[i]); err != nil {
						rt.Fatal(err)
					}
				}
			}
		}
		w := newWorld(rt, 2, cfg)
		defer w.close()
		w.budgeted = budget >= 0
		var coord func(string) float32
		m, field, coord = fieldModel(rt, w)
		n := len(w.conns)
		away := func(i int) bool { return i < len(w.away) && w.away[i] }
		var units []*state.Entity
		spawn := func() {
			e, err := w.srv.Tracker().Spawn(sc.Classes[0])
			if err != nil {
				rt.Fatal(err)
			}
			setPos(e, coord("x"), coord("y"))
			if err := w.srv.SetSpace(e, field); err != nil {
				rt.Fatal(err)
			}
			m.space[e] = 1
			units = append(units, e)
		}
		for range rapid.IntRange(1, 6).Draw(rt, "units") {
			spawn()
		}
		resumed := 0
		for range rapid.IntRange(5, 40).Draw(rt, "ticks") {
			for _, e := range units {
				if !e.Valid() {
					continue
				}
				switch rapid.IntRange(0, 7).Draw(rt, "act") {
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
						if i := rapid.IntRange(-1, n-1).Draw(rt, "owner"); i >= 0 && !away(i) {
							c = w.conns[i]
						}
						w.srv.SetOwner(e, c)
					}
				case 5:
					if rapid.IntRange(0, 5).Draw(rt, "die") == 0 {
						w.srv.Tracker().Destroy(e)
					}
				}
			}
			if rapid.IntRange(0, 3).Draw(rt, "spawn") == 0 {
				spawn()
			}
			i := rapid.IntRange(0, n-1).Draw(rt, "client")
			switch rapid.IntRange(0, 3).Draw(rt, "clientAct") {
			case 0:
				if !away(i) {
					w.drop(i)
				}
			case 1:
				if away(i) {
					m.pairs[i], m.levels[i] = map[*state.Entity]bool{}, map[*state.Entity]int{}
					if w.reconnect(rt, i) {
						resumed++
					}
					m.settle()
				}
			case 2:
				if !away(i) {
					x, y := coord("vx"), coord("vy")
					if err := w.srv.SetViewpoint(w.conns[i], float64(x), float64(y)); err != nil {
						rt.Fatal(err)
					}
					m.px[i], m.py[i] = float64(x), float64(y)
				}
			}
			w.tick(rt)
			m.settle()
		}
		for i := range n {
			if away(i) {
				m.pairs[i], m.levels[i] = map[*state.Entity]bool{}, map[*state.Entity]int{}
				if w.reconnect(rt, i) {
					resumed++
				}
				m.settle()
			}
		}
		st := w.srv.Stats()
		catchUps, fulls = catchUps+st.Resumes, fulls+st.ResumeFallbacks
		if uint64(resumed) != st.Resumes+st.ResumeFallbacks {
			rt.Fatalf("%d sessions resumed, the server sent %d catch-ups and %d full states", resumed, st.Resumes, st.ResumeFallbacks)
		}
	})
}

// checkCatchUps fails a property test whose runs never sent a catch-up:
// it would have checked only the full state.
func checkCatchUps(t *testing.T, catchUps, fulls uint64) {
	t.Logf("%d catch-ups, %d full states to resumed sessions", catchUps, fulls)
	if catchUps == 0 && !t.Failed() {
		t.Error("no resumed session got a catch-up")
	}
}

// rawSession handshakes by hand as user (an anonymous token), asking to
// resume with r if set, and returns the connection and the WELCOME.
func rawSession(t testing.TB, r *rig, user string, res *session.Resume) (transport.Conn, *session.Welcome) {
	t.Helper()
	tc := rawConn(t, r)
	tc.Send(session.AppendHello(nil, &session.Hello{Version: session.ProtocolVersion, Descriptor: demo.Schema().AppendDescriptor(nil),
		Token: []byte(user), Limits: codec.Limits{}.WithDefaults(), Resume: res}))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	msg, err := tc.Receive(ctx)
	if err != nil {
		t.Fatal(err)
	}
	m, err := session.Parse(msg)
	w, ok := m.(*session.Welcome)
	if err != nil || !ok {
		t.Fatalf("handshake: %T %v", m, err)
	}
	return tc, w
}

// TestResumeRefused: a ticket resumes only a session of the same user,
// within the window, once; anything else gets a new session with the full
// state, never a refusal. A server with ResumeWindow < 0 hands out no
// tickets.
func TestResumeRefused(t *testing.T) {
	r := memRig(t, replica.Config{TickRate: 20, ResumeWindow: 200 * time.Millisecond}) // 4 ticks
	tc, w := rawSession(t, r, "ana", nil)
	if w.Ticket.IsZero() || w.Resumed {
		t.Fatalf("WELCOME: ticket %v, resumed %v", w.Ticket, w.Resumed)
	}
	r.tickUntilJoined(1)
	tc.Close(transport.CloseNetworkError, "gone")
	r.srv.Tick()
	res := &session.Resume{Ticket: w.Ticket, Tick: r.srv.TickNumber()}
	if _, w2 := rawSession(t, r, "bob", res); w2.Resumed {
		t.Error("bob resumed ana's session")
	}
	if _, w2 := rawSession(t, r, "ana", &session.Resume{Ticket: w.Ticket, Tick: r.srv.TickNumber() + 5}); w2.Resumed {
		t.Error("resumed from a tick the server has not reached")
	}
	if _, w2 := rawSession(t, r, "ana", &session.Resume{Ticket: session.Ticket{1, 2}}); w2.Resumed {
		t.Error("an unknown ticket resumed a session")
	}
	tc2, w2 := rawSession(t, r, "ana", res)
	if !w2.Resumed || w2.Ticket == w.Ticket {
		t.Fatalf("ana's own ticket: resumed %v, new ticket %v (old %v)", w2.Resumed, w2.Ticket, w.Ticket)
	}
	if _, w3 := rawSession(t, r, "ana", res); w3.Resumed {
		t.Error("a ticket resumed a second session")
	}
	// Past the window.
	r.tickUntilJoined(1)
	tc2.Close(transport.CloseNetworkError, "gone")
	for range 6 {
		r.srv.Tick()
	}
	if _, w4 := rawSession(t, r, "ana", &session.Resume{Ticket: w2.Ticket, Tick: r.srv.TickNumber()}); w4.Resumed {
		t.Error("resumed past the window")
	}

	off := memRig(t, replica.Config{ResumeWindow: -1})
	if _, w := rawSession(t, off, "ana", nil); !w.Ticket.IsZero() {
		t.Errorf("ResumeWindow < 0: ticket %v", w.Ticket)
	}
}

// TestResumeFallback: when the catch-up would be larger than the full
// state (a small world where most of what the client held changed), the
// server sends RESYNC and the full state, and the client ends equal to
// the server's view.
func TestResumeFallback(t *testing.T) {
	r := memRig(t, replica.Config{})
	c := r.dial("p")
	r.tickUntilJoined(1)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	sync := func() { t.Helper(); r.sync(c) }
	var npcs []demo.Bot
	for range 3 {
		b, _ := demo.SpawnBot(r.srv.Tracker())
		npcs = append(npcs, b)
	}
	sync()
	for _, sc := range r.srv.Conns() {
		sc.Close(transport.CloseNetworkError, "test drop")
	}
	r.srv.Tick()
	for _, b := range npcs {
		r.srv.Tracker().Destroy(b.Entity())
	}
	demo.SpawnBot(r.srv.Tracker())
	r.srv.Tick()
	if err := c.Reconnect(ctx); err != nil {
		t.Fatal(err)
	}
	r.tickUntilJoined(1)
	sync()
	st := r.srv.Stats()
	t.Logf("catch-ups %d, full states %d", st.Resumes, st.ResumeFallbacks)
	if !c.Resumed() || st.Resumes != 0 || st.ResumeFallbacks != 1 {
		t.Fatalf("resumed %v; %d catch-ups, %d full states", c.Resumed(), st.Resumes, st.ResumeFallbacks)
	}
	if err := check(r.srv, c, r.ownBot(c)); err != nil {
		t.Fatal(err)
	}
}

// TestResumeLies: a resume block that declares entities the client does
// not hold, or holds at other levels and owners, costs the server nothing
// but the catch-up: the session goes on (the client's own decoder would
// refuse the tick), the server keeps ticking, and an honest client is
// served as before.
func TestResumeLies(t *testing.T) {
	r := memRig(t, replica.Config{})
	honest := r.dial("honest")
	tc, w := rawSession(t, r, "liar", nil)
	r.tickUntilJoined(2)
	for range 5 {
		demo.SpawnBot(r.srv.Tracker())
	}
	r.srv.Tick()
	tc.Close(transport.CloseNetworkError, "gone")
	r.srv.Tick()
	var held []session.Held
	for slot := range uint32(40) {
		held = append(held, session.Held{ID: slot | (slot%3)<<24, Level: uint8(slot % 5), Owned: slot%2 == 0})
	}
	tc2, w2 := rawSession(t, r, "liar", &session.Resume{Ticket: w.Ticket, Tick: 1, Held: held})
	if !w2.Resumed {
		t.Fatal("not resumed")
	}
	r.tickUntilJoined(2)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	msg, err := tc2.Receive(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if m, err := session.Parse(msg); err != nil {
		t.Fatalf("after a lying resume: %T %v", m, err)
	}
	for range 3 {
		r.srv.Tick()
	}
	for honest.LastTick() != r.srv.TickNumber() {
		if _, err := honest.Wait(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if err := check(r.srv, honest, r.bots[r.srv.Conns()[0]]); err != nil {
		t.Fatal(err)
	}
}

// FuzzResume resumes sessions declaring arbitrary replicas (entities that
// exist or not, any generation, level and ownership), against a world
// with changes, ownership and a reused slot: the server never panics,
// answers with a well-formed TICK, and keeps serving.
func FuzzResume(f *testing.F) {
	f.Add([]byte{0, 1, 0, 1, 1, 0, 4, 0, 2, 3, 2, 1}, uint8(1))
	f.Add([]byte{}, uint8(0))
	f.Add([]byte{255, 255, 255, 255}, uint8(200))
	r := memRig(f, replica.Config{})
	for range 6 {
		b, _ := demo.SpawnBot(r.srv.Tracker())
		b.SetHp(5)
	}
	tc, w := rawSession(f, r, "fuzz", nil)
	r.tickUntilJoined(1)
	f.Fuzz(func(t *testing.T, held []byte, back uint8) {
		tc.Close(transport.CloseNetworkError, "gone")
		ents := r.srv.Tracker().AppendEntities(nil)
		r.srv.Tracker().Destroy(ents[len(ents)-1])
		r.srv.Tick()
		b, _ := demo.SpawnBot(r.srv.Tracker()) // reuses a slot freed earlier
		b.SetHp(int16(back))
		r.srv.SetOwner(ents[0], nil)
		r.srv.Tick()
		var hs []session.Held
		slot := -1
		for i := 0; i+2 < len(held); i += 3 {
			slot += 1 + int(held[i]%8)
			hs = append(hs, session.Held{ID: uint32(held[i+1]%4)<<24 | uint32(slot), Level: held[i+2] % 5, Owned: held[i+2]&8 != 0})
		}
		tick := r.srv.TickNumber() - min(uint64(back), r.srv.TickNumber())
		var w2 *session.Welcome
		tc, w2 = rawSession(t, r, "fuzz", &session.Resume{Ticket: w.Ticket, Tick: tick, Held: hs})
		w = w2
		for len(r.srv.Conns()) < 1 {
			r.srv.Tick()
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		for {
			msg, err := tc.Receive(ctx)
			if err != nil {
				t.Fatal(err)
			}
			m, err := session.Parse(msg)
			if err != nil {
				t.Fatal(err)
			}
			if _, ok := m.(*session.Tick); ok {
				break
			}
		}
	})
}
