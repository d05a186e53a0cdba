package demo

import (
	"context"
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

var statusRE = regexp.MustCompile(`^t=(\d+)s clients=(\d+) \(ws (\d+), quic (\d+)\) entities=(\d+) tick p50=\d+\.\d\dms p99=\d+\.\d\dms  in=\d+(\.\d)? K?B/client/s  events=\d+/s  rpc=\d+/s  verified=(ok \((\d+) clients at tick (\d+)\)|FAILED)(  \(behind: .*\))?$`)

// TestRun runs the networked demo for two seconds of ticks with six
// clients, three over WebSocket and three over QUIC: every verification
// must pass, with every client, and the clients must see the server close.
func TestRun(t *testing.T) {
	var out strings.Builder
	cfg := DefaultConfig()
	cfg.Entities, cfg.Clients, cfg.Duration = 60, 6, 2*time.Second
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
	if rep.Bytes == 0 || rep.Callbacks.Creates < 60*6 || rep.Callbacks.HP == 0 || rep.Callbacks.Targets == 0 {
		t.Errorf("bytes %d, callbacks %+v: want bytes, every client's creates, hp and target changes", rep.Bytes, rep.Callbacks)
	}
	var status []string
	for _, line := range strings.Split(out.String(), "\n") {
		if strings.HasPrefix(line, "t=") {
			status = append(status, line)
		}
	}
	if len(status) != 2 {
		t.Fatalf("%d status lines, want 2", len(status))
	}
	for i, line := range status {
		m := statusRE.FindStringSubmatch(line)
		if m == nil {
			t.Fatalf("status line %q does not match %v", line, statusRE)
		}
		if m[1] != strconv.Itoa(i+1) || !strings.HasPrefix(m[7], "ok") || m[9] != strconv.Itoa(20*(i+1)) {
			t.Errorf("status line %q: want t=%ds, verified ok at tick %d", line, i+1, 20*(i+1))
		}
	}
	// Joining takes well under a second, even under the race detector.
	if want := "clients=6 (ws 3, quic 3) entities=60 "; !strings.Contains(status[1], want) {
		t.Errorf("last status line %q lacks %q", status[1], want)
	}
	for _, want := range []string{
		"replica demo: 60 bots in a 1000×1000 arena (54 NPCs and one per client), 6 clients (3 WebSocket, 3 QUIC), 20 Hz",
		"listening on ws://127.0.0.1:",
		"stopped (duration reached) after 2s: 40 ticks",
		"verified ok (3 checks)",
		"6 joined (3 WebSocket, 3 QUIC); 6 closed by the server: going away",
		"call\ntheir bot's emote RPC once a second",
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
		"replica demo: 20 bots in a 1000×1000 arena (17 NPCs and one per client), 3 clients (2 WebSocket, 1 QUIC), 20 Hz, seed 1, until interrupted",
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
	conns   map[string]*replica.Conn // by user
	clients map[string]*client.Conn
	players map[string]*player // their callback counters
}

func newArena(t *testing.T, npcs int, seed uint64) *arena {
	t.Helper()
	a := &arena{t: t, nw: transport.NewMemNetwork(), conns: map[string]*replica.Conn{},
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
	if a.w, err = newWorld(a.srv, seed, npcs); err != nil {
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
	p := &player{name: name}
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

// tick runs one tick and waits until every joined client has applied it.
func (a *arena) tick() {
	a.t.Helper()
	a.w.step()
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

// verify compares every client with the server and checks the world's
// bookkeeping.
func (a *arena) verify() {
	a.t.Helper()
	ents := a.srv.Tracker().AppendEntities(nil)
	for name, c := range a.clients {
		conn := a.conns[name]
		if p := a.players[name]; p.badRef != "" {
			a.t.Fatalf("client %s: %s", name, p.badRef)
		}
		err := verifyView(ents, func(e *state.Entity) bool { return a.srv.Owner(e) == conn }, c.Replica())
		if err != nil {
			a.t.Fatalf("after tick %d, client %s: %v", a.srv.TickNumber(), name, err)
		}
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
	}
}

// TestArena ticks the arena by hand with clients that join, leave and
// join late, and checks every client after every tick: bots die and
// respawn, inventories change, a leaving client's bot goes and no
// reference to it dangles, and clients see it all through their
// callbacks.
func TestArena(t *testing.T) {
	a := newArena(t, 40, 1)
	for _, name := range []string{"ann", "bob", "cat", "dan"} {
		a.join(name)
	}
	a.verify()
	if got := a.srv.Tracker().Len(); got != 44 {
		t.Fatalf("%d bots, want 40 NPCs and 4 players", got)
	}
	for range 60 {
		a.tick()
		a.verify()
	}
	// bob leaves: the server sees it at a tick, its bot goes at the next.
	a.clients["bob"].Close()
	delete(a.clients, "bob")
	for a.w.stats.Leaves == 0 {
		if a.srv.TickNumber() > 200 {
			t.Fatal("the server never saw bob leave")
		}
		a.tick()
		a.verify()
	}
	if got := a.srv.Tracker().Len(); got != 43 {
		t.Fatalf("%d bots after bob left, want 43", got)
	}
	a.join("eve")
	for range 60 {
		a.tick()
		a.verify()
	}
	st := a.w.stats
	t.Logf("%+v", st)
	if st.Joins != 5 || st.Leaves != 1 || a.srv.Tracker().Len() != 44 {
		t.Errorf("%d joins, %d leaves, %d bots; want 5, 1 and 44", st.Joins, st.Leaves, a.srv.Tracker().Len())
	}
	if st.Destroyed == 0 || st.Spawned != 40+st.Joins+st.Destroyed {
		t.Errorf("%d destroyed, %d spawned: want some bots to die and each to respawn", st.Destroyed, st.Spawned)
	}
	if st.BagAdds == 0 || st.BagUpdates == 0 || st.BagRemoves == 0 {
		t.Errorf("bags: %d adds, %d updates, %d removes; want each", st.BagAdds, st.BagUpdates, st.BagRemoves)
	}
	// ann was there from the start: it saw every death and bob leave.
	ann := a.players["ann"].ev.load()
	if ann.Destroys != int64(st.Destroyed+st.Leaves) {
		t.Errorf("ann saw %d destroys, want %d deaths and %d leave", ann.Destroys, st.Destroyed, st.Leaves)
	}
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
}

// TestVerifyCatchesDivergence checks that verifyView reports a client
// that missed a change and a client that was sent a field it may not see.
func TestVerifyCatchesDivergence(t *testing.T) {
	a := newArena(t, 10, 1)
	a.join("ann")
	a.join("bob")
	a.verify()
	tr := a.srv.Tracker()
	owned := func(c *replica.Conn) func(*state.Entity) bool {
		return func(e *state.Entity) bool { return a.srv.Owner(e) == c }
	}

	b := a.w.slots[5].b
	b.SetHp(b.Hp() - 1) // not sent
	err := verifyView(tr.AppendEntities(nil), owned(a.conns["ann"]), a.clients["ann"].Replica())
	if err == nil || !strings.Contains(err.Error(), "field hp: the client has") {
		t.Fatalf("missed change: verifyView = %v, want a difference in field hp", err)
	}

	// Sending ann the shared PartOthers segment while her own bot's
	// bounty changed leaks the bounty to her.
	var mine Bot
	for _, sl := range a.w.slots {
		if sl.owner == a.conns["ann"] {
			mine = sl.b
		}
	}
	mine.SetBounty(3)
	cs := tr.Commit() // by hand, not through the server
	var enc codec.Encoder
	all := enc.Delta(nil, cs, codec.PartAll, nil)
	others := enc.Delta(nil, cs, codec.PartOthers, nil)
	if err := a.clients["ann"].Replica().Apply(all, others); err != nil {
		t.Fatal(err)
	}
	err = verifyView(tr.AppendEntities(nil), owned(a.conns["ann"]), a.clients["ann"].Replica())
	if err == nil || !strings.Contains(err.Error(), "field bounty (vis=others) leaked") {
		t.Fatalf("leak: verifyView = %v, want ann's bounty reported as leaked", err)
	}
}

// TestDeterministic checks that a seed fixes the arena's run.
func TestDeterministic(t *testing.T) {
	run := func(seed uint64) (Stats, []*state.Entity) {
		srv, err := replica.NewServer(replica.Config{Schema: Schema(), Auth: auth.Anonymous{}})
		if err != nil {
			t.Fatal(err)
		}
		w, err := newWorld(srv, seed, 60)
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
