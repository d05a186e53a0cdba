package demo

import (
	"context"
	"fmt"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/replicago/replica"
	"github.com/replicago/replica/auth"
	"github.com/replicago/replica/client"
	"github.com/replicago/replica/codec"
	"github.com/replicago/replica/state"
	"github.com/replicago/replica/transport"
)

var statusRE = regexp.MustCompile(`^t=(\d+)s clients=(\d+) \(ws (\d+), quic (\d+)\) entities=(\d+) visible/client=(\d+\.\d) \(min (\d+), max (\d+)\) deferred=\d+/s tick p50=\d+\.\d\dms p99=\d+\.\d\dms  in=\d+(\.\d)? K?B/client/s  events=\d+/s  rpc=\d+/s  verified=(ok \((\d+) clients at tick (\d+)\)|FAILED)(  \(behind: .*\))?$`)

// status is a parsed status line.
type status struct {
	line                 string
	t, entities          int
	mean                 float64
	min, max             int
	verified             string
	clients, checked, at int
}

// runOutput splits a run's output into its status lines, parsed, and the
// blocks of explanations under them.
func runOutput(t *testing.T, out string) (lines []status, explains [][]string) {
	t.Helper()
	atoi := func(s string) int {
		n, err := strconv.Atoi(s)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	for _, line := range strings.Split(out, "\n") {
		switch {
		case strings.HasPrefix(line, "t="):
			m := statusRE.FindStringSubmatch(line)
			if m == nil {
				t.Fatalf("status line %q does not match %v", line, statusRE)
			}
			mean, err := strconv.ParseFloat(m[6], 64)
			if err != nil {
				t.Fatal(err)
			}
			st := status{line: line, t: atoi(m[1]), clients: atoi(m[2]), entities: atoi(m[5]), mean: mean,
				min: atoi(m[7]), max: atoi(m[8]), verified: m[10]}
			if m[11] != "" {
				st.checked, st.at = atoi(m[11]), atoi(m[12])
			}
			lines = append(lines, st)
			explains = append(explains, nil)
		case strings.HasPrefix(line, "  explain ") || strings.HasPrefix(line, "    "):
			if len(explains) > 0 {
				explains[len(explains)-1] = append(explains[len(explains)-1], line)
			}
		}
	}
	return lines, explains
}

// TestRun runs the networked demo, in its default AOI mode, for two
// seconds of ticks with six clients, three over WebSocket and three over
// QUIC: every verification must pass, with every client; each client sees
// its own bot and only part of the arena; the explainer explains; and the
// clients must see the server close.
func TestRun(t *testing.T) {
	var out strings.Builder
	cfg := DefaultConfig()
	cfg.Entities, cfg.Clients, cfg.Duration, cfg.Explain = 60, 6, 2*time.Second, 3
	rep, err := Run(context.Background(), cfg, &out)
	t.Logf("output:\n%s", out.String())
	if err != nil {
		t.Fatal(err)
	}
	if rep.Joined["WebSocket"] != 3 || rep.Joined["QUIC"] != 3 {
		t.Errorf("joined %v, want 3 over each transport", rep.Joined)
	}
	// Two status lines and the final round, which compared every client.
	if rep.Ticks != 40 || rep.Checks != 3 || rep.Checked != 6 {
		t.Errorf("%d ticks, %d checks, %d clients in the last; want 40, 3 and 6", rep.Ticks, rep.Checks, rep.Checked)
	}
	if n := rep.Closed["closed by the server: going away"]; n != 6 {
		t.Errorf("clients' connections ended %v, want all 6 closed by the server (going away)", rep.Closed)
	}
	// Each client sees its own bot and, in a 2000×2000 arena with a
	// radius of 250, a few of the 59 others, never all.
	if v := rep.Visible; v.Samples < 6 || v.Min < 1 || v.Max >= 60 || v.Mean < 1 || v.Mean >= 60 {
		t.Errorf("visible bots per client %+v: want at least 6 samples, each at least 1 (its own bot) and below 60", v)
	}
	if rep.Bytes == 0 || rep.Callbacks.Creates < 6 || rep.Callbacks.Targets == 0 {
		t.Errorf("bytes %d, callbacks %+v: want bytes, every client's own bot created, target changes", rep.Bytes, rep.Callbacks)
	}
	status, explains := runOutput(t, out.String())
	if len(status) != 2 {
		t.Fatalf("%d status lines, want 2", len(status))
	}
	for i, st := range status {
		if st.t != i+1 || !strings.HasPrefix(st.verified, "ok") || st.at != 20*(i+1) {
			t.Errorf("status line %q: want t=%ds, verified ok at tick %d", st.line, i+1, 20*(i+1))
		}
		if st.checked > 0 && (st.min < 1 || st.max >= 60 || st.mean < float64(st.min) || st.mean > float64(st.max)) {
			t.Errorf("status line %q: want visible bots per client between 1 and 59, the mean between min and max", st.line)
		}
		// The first client explains its view: some bots it sees (its own
		// at least), some it does not (most of them), in the server's
		// words. Under load it may join after the first second.
		if i == 0 && slices.Equal(explains[i], []string{"  explain player-0: it has not joined"}) {
			continue
		}
		var sees, not int
		for _, l := range explains[i] {
			switch {
			case strings.HasPrefix(l, "    sees "):
				sees++
				if !strings.Contains(l, "the client owns it") && !strings.Contains(l, "within its radius 250") && !strings.Contains(l, "within the hysteresis 25") {
					t.Errorf("explanation %q: want ownership, the radius or the hysteresis", l)
				}
			case strings.HasPrefix(l, "    not  "):
				not++
				if !strings.Contains(l, "is over its radius 250") {
					t.Errorf("explanation %q: want the distance over the radius", l)
				}
			}
		}
		if len(explains[i]) == 0 || !strings.HasPrefix(explains[i][0], "  explain player-0, from its bot at (") ||
			sees+not != 3 || sees == 0 || not == 0 {
			t.Errorf("explanation after %q: want a header and 3 bots, seen and not seen; got %q", st.line, explains[i])
		}
	}
	// Joining takes well under a second, even under the race detector.
	if want := "clients=6 (ws 3, quic 3) entities=60 "; !strings.Contains(status[1].line, want) {
		t.Errorf("last status line %q lacks %q", status[1].line, want)
	}
	for _, want := range []string{
		"replica demo: 60 bots in a 2000×2000 arena (54 NPCs and one per client), 6 clients (3 WebSocket, 3 QUIC), 20 Hz",
		"Interest: AOI, each client sees the bots within 250 units of its own (hysteresis 25), about 5% of the arena.",
		"listening on ws://127.0.0.1:",
		"stopped (duration reached) after 2s: 40 ticks",
		"verified ok (3 checks)",
		"6 joined (3 WebSocket, 3 QUIC); 6 closed by the server: going away",
		"views:   AOI radius 250, hysteresis 25; bots visible per client at the checks ",
		"call\ntheir bot's emote RPC once a second",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q", want)
		}
	}
}

// TestRunRoom runs the demo in one room (-room), the behaviour before
// AOI: every client sees every bot, and every one's changes.
func TestRunRoom(t *testing.T) {
	var out strings.Builder
	cfg := DefaultConfig()
	cfg.Entities, cfg.Clients, cfg.Duration, cfg.Room = 40, 4, time.Second, true
	rep, err := Run(context.Background(), cfg, &out)
	t.Logf("output:\n%s", out.String())
	if err != nil {
		t.Fatal(err)
	}
	if rep.Ticks != 20 || rep.Checks != 2 || rep.Checked != 4 {
		t.Errorf("%d ticks, %d checks, %d clients in the last; want 20, 2 and 4", rep.Ticks, rep.Checks, rep.Checked)
	}
	if v := rep.Visible; v.Samples < 4 || v.Min != 40 || v.Max != 40 {
		t.Errorf("visible bots per client %+v: want every client to see all 40, every time", v)
	}
	if rep.Callbacks.Creates < 40*4 || rep.Callbacks.HP == 0 {
		t.Errorf("callbacks %+v: want every client's creates of every bot, and hp changes", rep.Callbacks)
	}
	status, _ := runOutput(t, out.String())
	if len(status) != 1 || !strings.HasPrefix(status[0].verified, "ok") {
		t.Fatalf("status lines %+v, want one, verified", status)
	}
	if st := status[0]; st.checked > 0 && (st.min != 40 || st.max != 40) {
		t.Errorf("status line %q: want visible/client=40.0 (min 40, max 40)", st.line)
	}
	for _, want := range []string{
		"Interest: one room (-room), every client sees every bot.",
		"views:   one room; bots visible per client at the checks 40.0 (min 40, max 40);",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q", want)
		}
	}
}

// TestRunInterrupted checks that a run interrupted at once stops cleanly
// with a verified summary.
func TestRunInterrupted(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	var out strings.Builder
	cfg := DefaultConfig()
	cfg.Entities, cfg.Clients = 20, 3
	if _, err := Run(ctx, cfg, &out); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"replica demo: 20 bots in a 2000×2000 arena (17 NPCs and one per client), 3 clients (2 WebSocket, 1 QUIC), 20 Hz, seed 1, until interrupted",
		"stopped (interrupted) after 0s: 0 ticks",
		"verified ok (1 check)",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
}

func TestConfigValidate(t *testing.T) {
	if err := DefaultConfig().Validate(); err != nil {
		t.Fatalf("default config: %v", err)
	}
	// A room has no radius; the edges of the ranges are valid.
	for _, c := range []Config{
		{Entities: 1, Clients: 1, Hz: 1, WSAddr: ":0", QUICAddr: ":0", Room: true},
		{Entities: 1, Clients: 1, Hz: 1, WSAddr: ":0", QUICAddr: ":0", Radius: MaxRadius, Explain: MaxExplain},
		{Entities: 1, Clients: 1, Hz: 1, WSAddr: ":0", QUICAddr: ":0", Radius: 0.5},
	} {
		if err := c.Validate(); err != nil {
			t.Errorf("%+v: %v", c, err)
		}
	}
	for _, tc := range []struct {
		change func(*Config)
		want   string
	}{
		{func(c *Config) { c.Clients, c.Entities = 60, 50 }, "need at least as many entities as clients"},
		{func(c *Config) { c.Entities = 0 }, "-entities must be at least 1"},
		{func(c *Config) { c.Entities = MaxEntities + 1 }, "-entities must be at most"},
		{func(c *Config) { c.Clients = 0 }, "-clients must be at least 1"},
		{func(c *Config) { c.Clients, c.Entities = MaxClients+1, 2000 }, "-clients must be at most 1000"},
		{func(c *Config) { c.Entities, c.Clients = MaxEntities, 50 }, "-entities × -clients must be at most"},
		{func(c *Config) { c.Hz = 0 }, "-hz must be between 1 and"},
		{func(c *Config) { c.Hz = MaxHz + 1 }, "-hz must be between 1 and"},
		{func(c *Config) { c.Duration = -time.Second }, "-duration must not be negative"},
		{func(c *Config) { c.WSAddr = "8080" }, "-ws-addr must be host:port"},
		{func(c *Config) { c.QUICAddr = "" }, "-quic-addr must be host:port"},
		{func(c *Config) { c.Radius = 0 }, "-radius must be more than 0 and at most 2000 (the arena's side), got 0"},
		{func(c *Config) { c.Radius = -5 }, "-radius must be more than 0"},
		{func(c *Config) { c.Radius = 2000.5 }, "-radius must be more than 0 and at most 2000 (the arena's side), got 2000.5"},
		{func(c *Config) { c.Radius = math.NaN() }, "-radius must be more than 0 and at most 2000 (the arena's side), got NaN"},
		{func(c *Config) { c.Radius = math.Inf(1) }, "-radius must be more than 0"},
		{func(c *Config) { c.Explain = -1 }, "-explain must be between 0 and 20, got -1"},
		{func(c *Config) { c.Explain, c.Room = 21, true }, "-explain must be between 0 and 20, got 21"},
	} {
		c := DefaultConfig()
		tc.change(&c)
		err := c.Validate()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: Validate = %v, want %q", c, err, tc.want)
		}
		if _, err := Run(context.Background(), c, &strings.Builder{}); err == nil {
			t.Errorf("%+v: Run accepted it", c)
		}
	}
}

func TestLoopback(t *testing.T) {
	for in, want := range map[string]string{
		"127.0.0.1:80": "127.0.0.1:80",
		"0.0.0.0:80":   "127.0.0.1:80",
		"[::]:80":      "[::1]:80",
		":80":          "127.0.0.1:80",
		"[::1]:80":     "[::1]:80",
	} {
		if got := loopback(in); got != want {
			t.Errorf("loopback(%q) = %q, want %q", in, got, want)
		}
	}
}

// arena is a world on a server ticked by hand, with clients on the
// in-memory transport that the test goroutine drives: no timing, no
// concurrency between the test and the clients.
type arena struct {
	t       *testing.T
	srv     *replica.Server
	w       *world
	nw      *transport.MemNetwork
	addr    string
	radius  float64                  // of the AOI space; 0: one room
	conns   map[string]*replica.Conn // by user
	clients map[string]*client.Conn
	players map[string]*player // their callback counters

	// View changes, counted by verify from one tick to the next: bots
	// alive at both that a client started or stopped seeing.
	prev            map[*replica.Conn]map[state.ID]bool // the bots each client saw at the last verify
	entered, exited int
}

// newArena makes an arena of npcs bots; radius is its AOI radius, 0 for
// one room.
func newArena(t *testing.T, npcs int, seed uint64, radius float64) *arena {
	t.Helper()
	a := &arena{t: t, nw: transport.NewMemNetwork(), radius: radius, conns: map[string]*replica.Conn{}, prev: map[*replica.Conn]map[state.ID]bool{},
		clients: map[string]*client.Conn{}, players: map[string]*player{}}
	ln, err := a.nw.Listen("", transport.Config{})
	if err != nil {
		t.Fatal(err)
	}
	a.addr = ln.Addr().String()
	a.srv, err = replica.NewServer(replica.Config{
		Schema: Schema(),
		Auth:   auth.Anonymous{},
		OnJoin: func(c *replica.Conn) {
			if err := a.w.join(c); err != nil {
				t.Error(err)
			}
			a.conns[c.UserID()] = c
		},
		OnLeave: func(c *replica.Conn) { a.w.leave(c) },
	})
	if err != nil {
		t.Fatal(err)
	}
	if a.w, err = newWorld(a.srv, seed, npcs, radius); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	go a.srv.Serve(ctx, ln)
	t.Cleanup(func() {
		cancel()
		a.srv.Close()
	})
	return a
}

// join connects a client named name and ticks until the server has
// admitted it.
func (a *arena) join(name string) {
	a.t.Helper()
	c, err := client.Dial(context.Background(), a.nw.Dialer(transport.Config{}), a.addr, Schema(), client.DialConfig{Token: []byte(name)})
	if err != nil {
		a.t.Fatal(err)
	}
	a.t.Cleanup(func() { c.Close() })
	p := &player{name: name, partial: a.radius > 0}
	p.watch(c.Replica())
	a.clients[name], a.players[name] = c, p
	for deadline := time.Now().Add(5 * time.Second); a.conns[name] == nil; {
		if time.Now().After(deadline) {
			a.t.Fatalf("%s did not join", name)
		}
		time.Sleep(time.Millisecond)
		a.tick()
	}
}

// tick runs one step of the arena and sends it.
func (a *arena) tick() {
	a.t.Helper()
	a.w.step()
	a.send()
}

// send runs one server tick and waits until every joined client has
// applied it.
func (a *arena) send() {
	a.t.Helper()
	a.srv.Tick()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for name, c := range a.clients {
		if a.conns[name] == nil {
			continue
		}
		for c.LastTick() < a.srv.TickNumber() {
			if _, err := c.Wait(ctx); err != nil {
				a.t.Fatalf("%s at tick %d: %v", name, a.srv.TickNumber(), err)
			}
		}
	}
}

// verify checks every client as the demo's rounds do (what the server
// says it sees against the arena's rule, its replica against that) and
// the world's bookkeeping.
func (a *arena) verify() {
	a.t.Helper()
	ents := a.srv.Tracker().AppendEntities(nil)
	for name, c := range a.clients {
		conn := a.conns[name]
		if p := a.players[name]; p.badRef != "" {
			a.t.Fatalf("client %s: %s", name, p.badRef)
		}
		x := serverSays(a.srv, conn)
		me, ok := a.w.botOf(conn)
		if !ok {
			a.t.Fatalf("client %s has no bot", name)
		}
		if err := checkInterest(ents, x, me, a.w.aoi); err != nil {
			a.t.Fatalf("after tick %d, client %s: interest: %v", a.srv.TickNumber(), name, err)
		}
		if err := verifyView(ents, x, c.Replica()); err != nil {
			a.t.Fatalf("after tick %d, client %s: %v", a.srv.TickNumber(), name, err)
		}
		// The replica holds what the server says: count its view changes.
		seen := map[state.ID]bool{}
		for _, e := range ents {
			seen[e.ID()] = x.sees(e)
		}
		if prev := a.prev[conn]; prev != nil {
			for id, now := range seen {
				if was, alive := prev[id]; alive && now && !was {
					a.entered++
				} else if alive && was && !now {
					a.exited++
				}
			}
		}
		a.prev[conn] = seen
	}
	w := a.w
	if len(w.slots) != len(w.byID) || len(w.slots) != w.tr.Len() {
		a.t.Fatalf("%d slots, %d in byID, %d entities", len(w.slots), len(w.byID), w.tr.Len())
	}
	for j, sl := range w.slots {
		// The server forgets a connection's ownerships when it sees it
		// leave; its bot goes at the next step.
		gone := slices.Contains(w.leaving, sl.owner) && a.srv.Owner(sl.b.Entity()) == nil
		if w.byID[sl.b.ID()] != j || a.srv.Owner(sl.b.Entity()) != sl.owner && !gone {
			a.t.Fatalf("slot %d (%s): byID %d, owner %v, want %v", j, sl.name, w.byID[sl.b.ID()], a.srv.Owner(sl.b.Entity()), sl.owner)
		}
		if want := a.w.space; a.srv.SpaceOf(sl.b.Entity()) != want && want != nil {
			a.t.Fatalf("slot %d (%s) is not in the arena's space", j, sl.name)
		}
	}
}

// slotOf returns the slot of the bot the client named name owns.
func (a *arena) slotOf(name string) int {
	a.t.Helper()
	for j, sl := range a.w.slots {
		if sl.owner != nil && sl.owner == a.conns[name] {
			return j
		}
	}
	a.t.Fatalf("%s has no bot", name)
	return -1
}

// TestArena ticks the arena by hand, in one room and in an AOI space, with
// clients that join, leave and join late, and checks every client after
// every tick: bots die and respawn, inventories change, a leaving
// client's bot goes and no reference to it dangles, and clients see it
// all through their callbacks; in AOI mode bots come into and go out of
// each client's view, and a client holds exactly the bots the server says
// it sees, which are those around its own.
func TestArena(t *testing.T) {
	for _, radius := range []float64{0, 400} {
		t.Run(fmt.Sprintf("radius=%g", radius), func(t *testing.T) { testArena(t, radius) })
	}
}

func testArena(t *testing.T, radius float64) {
	a := newArena(t, 40, 1, radius)
	for _, name := range []string{"ann", "bob", "cat", "dan"} {
		a.join(name)
	}
	a.verify()
	if got := a.srv.Tracker().Len(); got != 44 {
		t.Fatalf("%d bots, want 40 NPCs and 4 players", got)
	}
	visible := func() (minSeen, maxSeen int) {
		minSeen = math.MaxInt
		for _, c := range a.clients {
			minSeen, maxSeen = min(minSeen, c.Replica().Len()), max(maxSeen, c.Replica().Len())
		}
		return minSeen, maxSeen
	}
	var partly bool // some client saw some bots and not others
	for range 100 {
		a.tick()
		a.verify()
		lo, hi := visible()
		partly = partly || lo < 44 && hi > 1
	}
	// bob leaves: the server sees it at a tick, its bot goes at the next.
	a.clients["bob"].Close()
	delete(a.clients, "bob")
	for a.w.stats.Leaves == 0 {
		if a.srv.TickNumber() > 300 {
			t.Fatal("the server never saw bob leave")
		}
		a.tick()
		a.verify()
	}
	if got := a.srv.Tracker().Len(); got != 43 {
		t.Fatalf("%d bots after bob left, want 43", got)
	}
	a.join("eve")
	for range 100 {
		a.tick()
		a.verify()
	}
	st := a.w.stats
	t.Logf("%+v; %d came into view, %d went out of view", st, a.entered, a.exited)
	if st.Joins != 5 || st.Leaves != 1 || a.srv.Tracker().Len() != 44 {
		t.Errorf("%d joins, %d leaves, %d bots; want 5, 1 and 44", st.Joins, st.Leaves, a.srv.Tracker().Len())
	}
	if st.Destroyed == 0 || st.Spawned != 40+st.Joins+st.Destroyed {
		t.Errorf("%d destroyed, %d spawned: want some bots to die and each to respawn", st.Destroyed, st.Spawned)
	}
	if st.BagAdds == 0 || st.BagUpdates == 0 || st.BagRemoves == 0 {
		t.Errorf("bags: %d adds, %d updates, %d removes; want each", st.BagAdds, st.BagUpdates, st.BagRemoves)
	}
	ann := a.players["ann"].ev.load()
	if held := int64(a.clients["ann"].Replica().Len()); ann.Creates-ann.Destroys != held {
		t.Errorf("ann saw %d creates and %d destroys but holds %d bots", ann.Creates, ann.Destroys, held)
	}
	var all Callbacks
	for _, p := range a.players {
		all.add(p.ev.load())
	}
	// Inventories are owner-only: each client sees only its own bot's.
	if all.HP == 0 || all.Targets == 0 || all.ItemsAdded == 0 {
		t.Errorf("client callbacks %+v: want hp and target changes and items added", all)
	}
	if radius == 0 {
		// ann was there from the start, in the room: she saw every bot
		// all along, every death and bob leave, and no bot came into or
		// went out of view.
		if ann.Destroys != int64(st.Destroyed+st.Leaves) {
			t.Errorf("ann saw %d destroys, want %d deaths and %d leave", ann.Destroys, st.Destroyed, st.Leaves)
		}
		if lo, hi := visible(); lo != 44 || hi != 44 || a.entered != 0 || a.exited != 0 {
			t.Errorf("in a room, clients hold %d to %d bots, %d came into view and %d went out; want all 44, none and none", lo, hi, a.entered, a.exited)
		}
		return
	}
	// In AOI mode the clients see part of the arena, and it changes.
	if !partly || a.entered == 0 || a.exited == 0 {
		t.Errorf("AOI: some client saw part of the arena: %v; %d bots came into view, %d went out; want part, and some of each", partly, a.entered, a.exited)
	}
}

// TestArenaRespawnView checks that a client whose bot dies views the
// arena from its new bot, which respawns elsewhere in the same tick: it
// sees a bot placed next to the new one, not one just beyond the radius
// plus the hysteresis, and the server explains both.
func TestArenaRespawnView(t *testing.T) {
	a := newArena(t, 10, 1, 200)
	a.join("ann")
	a.tick()
	a.verify()
	j := a.slotOf("ann")
	a.w.kill(j)
	mine := a.w.slots[j].b
	near, far := a.w.slots[0].b, a.w.slots[1].b
	if near.Entity() == mine.Entity() || far.Entity() == mine.Entity() {
		t.Fatal("ann's bot is in slot 0 or 1")
	}
	// Wherever the new bot is, one bot 10 units away and one 221 away
	// (radius 200, hysteresis 20), inside the arena.
	at := func(b Bot, d float32) {
		x := mine.X() + d
		if x > worldSize {
			x = mine.X() - d
		}
		b.SetX(x)
		b.SetY(mine.Y())
	}
	at(near, 10)
	at(far, 221)
	a.send() // no step: the bots stay put
	a.verify()
	conn := a.conns["ann"]
	if !a.srv.Sees(conn, near.Entity()) || a.srv.Sees(conn, far.Entity()) || !a.srv.Sees(conn, mine.Entity()) {
		t.Fatalf("after the respawn ann sees the near bot %v, the far one %v, her own %v; want true, false, true",
			a.srv.Sees(conn, near.Entity()), a.srv.Sees(conn, far.Entity()), a.srv.Sees(conn, mine.Entity()))
	}
	for _, tc := range []struct {
		b    Bot
		want string
	}{
		{near, "distance 10 is within its radius 200"},
		{far, "distance 221 is over its radius 200"},
		{mine, "the client owns it"},
	} {
		x, err := a.srv.Explain(conn, tc.b.Entity())
		if err != nil || x.Reason != tc.want {
			t.Errorf("Explain(ann, %s) = %q, %v; want %q", tc.b.Name(), x.Reason, err, tc.want)
		}
	}
	// The demo's explainer says the same, and explains a field.
	out := explainConn(a.srv, a.w, "ann", conn, 2)
	t.Logf("explainer:\n%s", out)
	for _, want := range []string{
		fmt.Sprintf("  explain ann, from its bot at (%.1f, %.1f): it sees 2 of 11 bots\n", mine.X(), mine.Y()),
		fmt.Sprintf("    sees %s [id %d]: distance 10 is within its radius 200\n", near.Name(), near.ID()),
		fmt.Sprintf("    not  %s [id %d]: distance 221 is over its radius 200\n", far.Name(), far.ID()),
		fmt.Sprintf("    field score of %s [id %d]: field score is for the owner only, and the client does not own it (distance 10 is within its radius 200)\n", near.Name(), near.ID()),
	} {
		if !strings.Contains(out, want) {
			t.Errorf("explainer lacks %q", want)
		}
	}
}

// TestVerifyCatchesDivergence checks that verifyView reports a client
// that missed a change, a client that was sent a field it may not see, a
// client that holds a bot the server says it does not see or lacks one
// it sees, and a reference to a bot the server does not have; and that
// checkInterest reports a server that shows a client too much or too
// little.
func TestVerifyCatchesDivergence(t *testing.T) {
	a := newArena(t, 10, 1, 0)
	a.join("ann")
	a.join("bob")
	a.verify()
	tr := a.srv.Tracker()
	ann := serverSays(a.srv, a.conns["ann"])

	b := a.w.slots[5].b
	b.SetHp(b.Hp() - 1) // not sent
	err := verifyView(tr.AppendEntities(nil), ann, a.clients["ann"].Replica())
	if err == nil || !strings.Contains(err.Error(), "field hp: the client has") {
		t.Fatalf("missed change: verifyView = %v, want a difference in field hp", err)
	}

	// Sending ann the shared PartOthers segment while her own bot's
	// bounty changed leaks the bounty to her.
	mine := a.w.slots[a.slotOf("ann")].b
	mine.SetBounty(3)
	cs := tr.Commit() // by hand, not through the server
	var enc codec.Encoder
	all := enc.Delta(nil, cs, codec.PartAll, nil)
	others := enc.Delta(nil, cs, codec.PartOthers, nil)
	if err := a.clients["ann"].Replica().Apply(all, others); err != nil {
		t.Fatal(err)
	}
	err = verifyView(tr.AppendEntities(nil), ann, a.clients["ann"].Replica())
	if err == nil || !strings.Contains(err.Error(), "field bounty (vis=others) leaked") {
		t.Fatalf("leak: verifyView = %v, want ann's bounty reported as leaked", err)
	}
}

// TestVerifyCatchesWrongView checks, in AOI mode, that verification
// reports a replica that differs from what the server says the client
// sees, a server that breaks the AOI rule, and a dangling reference.
func TestVerifyCatchesWrongView(t *testing.T) {
	a := newArena(t, 30, 1, 150)
	a.join("ann")
	a.tick()
	a.verify()
	conn := a.conns["ann"]
	ents := a.srv.Tracker().AppendEntities(nil)
	rep := a.clients["ann"].Replica()
	me := a.w.slots[a.slotOf("ann")].b
	truth := serverSays(a.srv, conn)
	var seen, unseen *state.Entity // a bot ann sees besides her own, one she does not
	near := a.w.slots[0].b
	if near.Entity() == me.Entity() {
		t.Fatal("ann's bot is in slot 0")
	}
	near.SetX(me.X())
	near.SetY(me.Y())
	a.send()
	a.verify()
	for _, e := range ents {
		switch {
		case truth.sees(e) && e != me.Entity():
			seen = e
		case !truth.sees(e) && unseen == nil:
			unseen = e
		}
	}
	if seen != near.Entity() || unseen == nil {
		t.Fatalf("want ann to see the bot put on hers, and not to see some bot; sees %v, not %v", seen, unseen)
	}
	lie := func(flip *state.Entity) expect {
		x := truth
		x.sees = func(e *state.Entity) bool { return truth.sees(e) != (e == flip) }
		return x
	}
	for _, tc := range []struct {
		x    expect
		want string
	}{
		{lie(seen), fmt.Sprintf("entity %d (%q) is in the replica, but the server says the client does not see it", seen.ID(), describe(seen)[1:len(describe(seen))-1])},
		{lie(unseen), fmt.Sprintf("entity %d (%s) is missing: the server says the client sees it", unseen.ID(), describe(unseen))},
	} {
		if err := verifyView(ents, tc.x, rep); err == nil || err.Error() != tc.want {
			t.Errorf("verifyView = %v, want %q", err, tc.want)
		}
	}
	// checkInterest: a server that hides the bot on ann's, or shows one
	// beyond the radius plus the hysteresis.
	if err := checkInterest(ents, lie(seen), me, a.w.aoi); err == nil || !strings.Contains(err.Error(), "within the radius 150, and the server says the client does not see it") {
		t.Errorf("hidden: checkInterest = %v, want the bot within the radius reported", err)
	}
	if err := checkInterest(ents, lie(unseen), me, a.w.aoi); err == nil || !strings.Contains(err.Error(), "beyond the radius 150 plus the hysteresis 15, and the server says the client sees it") {
		t.Errorf("shown: checkInterest = %v, want the bot beyond the radius reported", err)
	}
	// A reference to an entity the server does not have reaches ann.
	near.SetTarget(replica.Ref(12345))
	a.send()
	err := verifyView(a.srv.Tracker().AppendEntities(nil), truth, rep)
	if err == nil || !strings.Contains(err.Error(), "field target refers to entity 12345, which the server does not have") {
		t.Errorf("dangling: verifyView = %v, want the reference reported", err)
	}
}

// TestDeterministic checks that a seed fixes the arena's run.
func TestDeterministic(t *testing.T) {
	run := func(seed uint64) (Stats, []*state.Entity) {
		srv, err := replica.NewServer(replica.Config{Schema: Schema(), Auth: auth.Anonymous{}})
		if err != nil {
			t.Fatal(err)
		}
		w, err := newWorld(srv, seed, 60, DefaultRadius)
		if err != nil {
			t.Fatal(err)
		}
		for range 60 {
			w.step()
			srv.Tick()
		}
		return w.stats, srv.Tracker().AppendEntities(nil)
	}
	sa, ea := run(7)
	sb, eb := run(7)
	if sa != sb {
		t.Fatalf("same seed, different runs:\n%+v\n%+v", sa, sb)
	}
	for i := range ea {
		if ea[i].ID() != eb[i].ID() || !ea[i].Record.Equal(&eb[i].Record) {
			t.Fatalf("entity %d differs between runs with the same seed", ea[i].ID())
		}
	}
	if sc, _ := run(8); sc == sa {
		t.Error("another seed gave the same run")
	}
}

// A client steers its own bot with the steer RPC: the bot walks to the
// goal, holds there while under control, and wanders again afterwards.
func TestArenaSteer(t *testing.T) {
	a := newArena(t, 20, 3, 0)
	steers := 0
	HandleBotSteer(a.srv, func(c *replica.Conn, b Bot, x, y float32) error {
		steers++
		return a.w.steer(c, b.ID(), x, y)
	})
	a.join("ann")
	a.tick()
	p, c := a.players["ann"], a.clients["ann"]
	if !p.mine.Valid() {
		t.Fatal("ann's client does not know its bot")
	}
	// A goal 100 units away, inside the arena: 17 to 50 ticks of walking.
	gx, gy := p.mine.X()+60, p.mine.Y()+80
	if gx > worldSize {
		gx -= 120
	}
	if gy > worldSize {
		gy -= 160
	}
	if err := p.mine.Steer(c, gx, gy); err != nil {
		t.Fatal(err)
	}
	// The call runs at the first tick after the server has read it.
	for deadline := time.Now().Add(5 * time.Second); steers == 0; {
		if time.Now().After(deadline) {
			t.Fatal("the steer call did not arrive")
		}
		time.Sleep(time.Millisecond)
		a.send()
	}
	bot := func() BotView { return BotView{c.Replica().Entity(p.mine.ID())} }
	reached := -1
	for i := range steerTicks {
		a.tick()
		if !p.mine.Valid() {
			t.Fatal("ann's bot died on the way (pick a seed where it does not)")
		}
		if math.Hypot(float64(bot().X()-gx), float64(bot().Y()-gy)) < 0.5 {
			reached = i
			break
		}
	}
	if reached < 0 {
		t.Fatalf("after %d ticks ann's bot is at (%v, %v), not at the goal", steerTicks, bot().X(), bot().Y())
	}
	// Held at the goal while under control.
	for a.w.slots[a.slotOf("ann")].steered > 1 {
		a.tick()
		if d := math.Hypot(float64(bot().X()-gx), float64(bot().Y()-gy)); d >= 0.5 {
			t.Fatalf("ann's bot left the goal while steered: %v away", d)
		}
	}
	// Then it wanders again.
	x0, y0 := bot().X(), bot().Y()
	for range 20 {
		a.tick()
	}
	if bot().X() == x0 && bot().Y() == y0 {
		t.Error("ann's bot did not move once released")
	}
	// A goal that is not a pair of numbers is refused: the bot is not
	// steered, and the call counts as rejected.
	rejected := a.srv.Stats().RPCsRejected
	for _, g := range [][2]float32{{float32(math.NaN()), 10}, {10, float32(math.Inf(1))}} {
		if err := p.mine.Steer(c, g[0], g[1]); err != nil {
			t.Fatal(err)
		}
	}
	for deadline := time.Now().Add(5 * time.Second); a.srv.Stats().RPCsRejected < rejected+2; {
		if time.Now().After(deadline) {
			t.Fatalf("%d of 2 steers to NaN or infinity rejected", a.srv.Stats().RPCsRejected-rejected)
		}
		time.Sleep(time.Millisecond)
		a.tick()
	}
	if a.w.slots[a.slotOf("ann")].steered != 0 {
		t.Error("a steer to NaN or infinity took control of the bot")
	}
	a.verify()
}
