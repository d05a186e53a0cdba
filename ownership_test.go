package replica_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/replicago/replica"
	"github.com/replicago/replica/auth"
	"github.com/replicago/replica/client"
	"github.com/replicago/replica/internal/chaos"
	"github.com/replicago/replica/internal/mutate"
	v2 "github.com/replicago/replica/internal/testschema/v2"
	"github.com/replicago/replica/schema"
	"github.com/replicago/replica/state"
	"github.com/replicago/replica/transport"
)

// An ownWorld is a server on schema v2 (every field kind, owner-only and
// others-only fields among them, containers and bags) with three clients,
// over the in-memory transport, ticked by hand.
type ownWorld struct {
	srv     *replica.Server
	conns   []*replica.Conn // the server's side of each client, in join order
	clients []*client.Conn
	owned   []map[state.ID]bool // what each client's OnOwnership callbacks said
	close   func()
	// sees, if set, says which entities client i sees (interest); nil
	// for every entity.
	sees func(i int, e *state.Entity) bool
	// level, if set, is the level of detail client i must hold e at, −1
	// for every band.
	level func(i int, e *state.Entity) int
	dial  func() (*client.Conn, error)
	aoi   bool // without sees: check the entities the server says each client sees
	// lagging, if set, skips the check while a budget holds changes back:
	// replicas then lag the server by design.
	lagging bool
	// budgeted: clients may be on tight budgets. Entities the server
	// holds back for a client are checked for presence only: absent if
	// their creation is held, present if their changes are.
	budgeted bool
	// buffer is the DialConfig.Buffer of the clients dialed from now on
	// (0: the default).
	buffer int
	// token, if set, gives the connect token of the next client dialed
	// (anonymous: its user ID); otherwise "user<i>" for the i-th.
	token func() string
	// away marks the clients whose connection dropped (drop) and that
	// have not reconnected (reconnect): tick neither waits for nor checks
	// them.
	away []bool
}

// drop closes client i's connection on the server's side, as a network
// failure would.
func (w *ownWorld) drop(i int) {
	for len(w.away) <= i {
		w.away = append(w.away, false)
	}
	w.away[i] = true
	w.conns[i].Close(transport.CloseNetworkError, "dropped")
}

// reconnect reconnects client i (client.Conn.Reconnect, which resumes the
// session if the server lets it) and ticks until it has joined; conns[i]
// is then its new session. It checks the client's replica after the
// tick that joined it: the catch-up, or the full state. It reports
// whether the session resumed.
func (w *ownWorld) reconnect(t tb, i int) bool {
	c := w.clients[i]
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := c.Reconnect(ctx); err != nil {
		t.Fatalf("client %d reconnecting: %v", i, err)
	}
	for {
		w.srv.Tick()
		if j := slices.IndexFunc(w.srv.Conns(), func(sc *replica.Conn) bool { return !slices.Contains(w.conns, sc) }); j >= 0 {
			w.conns[i] = w.srv.Conns()[j]
			break
		}
		time.Sleep(time.Millisecond)
	}
	w.away[i] = false
	for c.LastTick() < w.srv.TickNumber() {
		if _, err := c.Wait(ctx); err != nil {
			t.Fatalf("client %d after reconnecting: %v", i, err)
		}
	}
	if !w.lagging {
		if err := w.check(i); err != nil {
			t.Fatalf("tick %d, client %d just reconnected (resumed %v): %v", w.srv.TickNumber(), i, c.Resumed(), err)
		}
	}
	return c.Resumed()
}

// join connects one more client and ticks until it has joined, so that
// conns[i] is clients[i]'s.
func (w *ownWorld) join(t tb, sc *schema.Schema) {
	i := len(w.clients)
	c, err := w.dial()
	if err != nil {
		t.Fatal(err)
	}
	for len(w.srv.Conns()) < i+1 {
		w.srv.Tick()
		time.Sleep(time.Millisecond)
	}
	w.conns = append(w.conns, w.srv.Conns()[i])
	w.clients = append(w.clients, c)
	owned := map[state.ID]bool{}
	w.owned = append(w.owned, owned)
	for _, cl := range sc.Classes {
		c.Replica().OnOwnership(cl, func(e *state.Entity, own bool) {
			if owned[e.ID()] == own {
				t.Errorf("client %d: OnOwnership(%#x, %v) repeats what it said", i, uint32(e.ID()), own)
			}
			owned[e.ID()] = own
		})
		c.Replica().OnDestroy(cl, func(e *state.Entity) { delete(owned, e.ID()) })
	}
	// The ticks that let it join were not waited for: wait for the last.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for c.LastTick() < w.srv.TickNumber() {
		if _, err := c.Wait(ctx); err != nil {
			t.Fatalf("client %d joining: %v", i, err)
		}
	}
}

// tb is what both *testing.T and *rapid.T offer.
type tb interface {
	Fatal(...any)
	Fatalf(string, ...any)
	Errorf(string, ...any)
}

func newOwnWorld(t tb, n int) *ownWorld {
	return newWorld(t, n, replica.Config{Schema: v2.Schema()})
}

// newWorld is newOwnWorld for any configuration (Auth is anonymous).
func newWorld(t tb, n int, cfg replica.Config) *ownWorld {
	w := &ownWorld{}
	cfg.Auth = auth.Anonymous{}
	srv, err := replica.NewServer(cfg)
	if err != nil {
		t.Fatal(err)
	}
	w.srv = srv
	net := transport.NewMemNetwork()
	ln, err := net.Listen("server", transport.Config{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	w.close = func() { cancel(); srv.Close() }
	go srv.Serve(ctx, ln)
	w.dial = func() (*client.Conn, error) {
		token := fmt.Sprintf("user%d", len(w.clients))
		if w.token != nil {
			token = w.token()
		}
		return client.Dial(ctx, net.Dialer(transport.Config{}), ln.Addr().String(), cfg.Schema,
			client.DialConfig{Token: []byte(token), Buffer: w.buffer})
	}
	for range n {
		w.join(t, cfg.Schema)
	}
	return w
}

// tick ends the server's tick and waits until every client has applied it;
// then every client's replica must equal the server's entities as that
// client may see them, and say which it owns.
func (w *ownWorld) tick(t tb) {
	w.srv.Tick()
	n := w.srv.TickNumber()
	for i, c := range w.clients {
		if i < len(w.away) && w.away[i] {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		for c.LastTick() < n {
			if _, err := c.Wait(ctx); err != nil {
				cancel()
				t.Fatalf("client %d waiting for tick %d: %v", i, n, err)
			}
		}
		cancel()
		if w.lagging {
			continue
		}
		if err := w.check(i); err != nil {
			t.Fatalf("tick %d, client %d: %v", n, i, err)
		}
	}
}

func (w *ownWorld) check(i int) error {
	conn, r := w.conns[i], w.clients[i].Replica()
	view := func(e *state.Entity) schema.Visibility {
		if w.srv.Owner(e) == conn {
			return schema.VisOwner
		}
		return schema.VisOthers
	}
	ents := w.srv.Tracker().AppendEntities(nil)
	sees := w.sees
	if sees == nil && w.aoi {
		sees = func(i int, e *state.Entity) bool { return w.srv.Sees(w.conns[i], e) }
	}
	if sees != nil {
		ents = slices.DeleteFunc(ents, func(e *state.Entity) bool { return !sees(i, e) })
	}
	rents := r.Entities(nil)
	if w.budgeted {
		held := map[state.ID]bool{}
		for _, e := range ents {
			if x, err := w.srv.Explain(conn, e); err == nil && x.Held {
				held[e.ID()] = true
				if has := r.Entity(e.ID()) != nil; has == strings.Contains(x.Reason, "creation waits") {
					return fmt.Errorf("entity %#x held back (%s), in the replica: %v", uint32(e.ID()), x.Reason, has)
				}
			}
		}
		ents = slices.DeleteFunc(ents, func(e *state.Entity) bool { return held[e.ID()] })
		rents = slices.DeleteFunc(rents, func(e *state.Entity) bool { return held[e.ID()] })
	}
	want := chaos.ServerDigest(ents, view)
	if w.level != nil {
		want = chaos.ServerDigestLevels(ents, view, func(e *state.Entity) int { return w.level(i, e) })
		for _, e := range ents {
			l := w.level(i, e)
			got, all := r.Entity(e.ID()).Level()
			if wantAll := l < 0 || l == len(e.Class().Bands()); all != wantAll || !all && got != l {
				return fmt.Errorf("entity %#x: level %d (all %v), want %d", uint32(e.ID()), got, all, l)
			}
		}
	}
	got := chaos.ReplicaDigest(rents)
	if want.Sum != got.Sum {
		for j := range min(len(want.Entities), len(got.Entities)) {
			if want.Entities[j] != got.Entities[j] {
				e := w.srv.Tracker().Entity(want.Entities[j].ID)
				return fmt.Errorf("entity %#x (view %v) differs from the server's", uint32(want.Entities[j].ID), view(e))
			}
		}
		return fmt.Errorf("%d entities, server %d", len(got.Entities), len(want.Entities))
	}
	for _, e := range ents {
		mine := w.srv.Owner(e) == conn
		if ce := r.Entity(e.ID()); ce.Owned() != mine || w.owned[i][e.ID()] != mine {
			return fmt.Errorf("entity %#x: Owned %v, callbacks say %v, server says %v", uint32(e.ID()), ce.Owned(), w.owned[i][e.ID()], mine)
		}
	}
	if n := len(r.Owned(nil)); n != countOwned(w.srv, conn, ents) {
		return fmt.Errorf("Replica.Owned lists %d entities, the server %d", n, countOwned(w.srv, conn, ents))
	}
	return nil
}

func countOwned(srv *replica.Server, c *replica.Conn, ents []*state.Entity) int {
	n := 0
	for _, e := range ents {
		if srv.Owner(e) == c {
			n++
		}
	}
	return n
}

// TestOwnershipProperty interleaves random owner changes (to any client
// or none, several in one tick, back and forth) with random writes of
// every field kind, container operations and bag item changes, spawns and
// destroys; after every tick every client's replica equals what it may
// see, and it knows which entities it owns.
func TestOwnershipProperty(t *testing.T) {
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
		owner := func() *replica.Conn {
			i := rapid.IntRange(-1, len(w.conns)-1).Draw(rt, "owner")
			if i < 0 {
				return nil
			}
			return w.conns[i]
		}
		rt.Repeat(worldActions(w, pick, owner))
		w.tick(rt)
	})
}

// worldActions are the actions of the ownership property tests: spawn
// (with writes and an owner), destroy, write every kind of field, give
// to an owner (or none), and tick. pick draws an entity, owner an owner.
func worldActions(w *ownWorld, pick func() *state.Entity, owner func() *replica.Conn) map[string]func(*rapid.T) {
	classes := v2.Schema().Classes
	return map[string]func(*rapid.T){
		"spawn": func(rt *rapid.T) {
			c := classes[rapid.IntRange(0, len(classes)-1).Draw(rt, "class")]
			e, err := w.srv.Tracker().Spawn(c)
			if err != nil {
				rt.Fatal(err)
			}
			for range rapid.IntRange(0, 4).Draw(rt, "writes") {
				mutate.Struct(rt, e.Handle(), c, 0)
			}
			w.srv.SetOwner(e, owner())
		},
		"destroy": func(rt *rapid.T) {
			if e := pick(); e != nil {
				w.srv.Tracker().Destroy(e)
			}
		},
		"write": func(rt *rapid.T) {
			if e := pick(); e != nil {
				for range rapid.IntRange(1, 6).Draw(rt, "writes") {
					mutate.Struct(rt, e.Handle(), e.Class(), 0)
				}
			}
		},
		"setOwner": func(rt *rapid.T) {
			if e := pick(); e != nil {
				w.srv.SetOwner(e, owner())
			}
		},
		"tick":  func(rt *rapid.T) { w.tick(rt) },
		"tick2": func(rt *rapid.T) { w.tick(rt) },
	}
}

// TestOwnershipTransfer follows one hero from client 0 to client 1 and
// back, across ticks and within one: the new owner gets the owner-only
// values that already exist (a number and a bag) and can then follow
// changes to them, including a change to a bag item it never saw
// created; the old owner forgets them and gets the others-only value.
func TestOwnershipTransfer(t *testing.T) {
	w := newOwnWorld(t, 2)
	defer w.close()
	h, err := v2.SpawnHero(w.srv.Tracker())
	if err != nil {
		t.Fatal(err)
	}
	h.SetI16(500) // owner only
	h.SetI8(-3)   // others only
	it := v2.NewItem()
	it.SetCount(1)
	h.Inv().Add(7, it)
	w.srv.SetOwner(h.Entity(), w.conns[0])
	w.tick(t)

	hero := func(i int) v2.HeroView {
		p, _ := v2.HeroViewOf(w.clients[i].Replica().Entity(h.ID()))
		return p
	}
	w.srv.SetOwner(h.Entity(), w.conns[1])
	h.SetI16(501) // in the same tick as the transfer
	w.tick(t)
	if p := hero(1); !p.IsOwned() || p.I16() != 501 || p.I8() != 0 || p.Inv().Len() != 1 {
		t.Fatalf("new owner: owned %v, i16 %d, i8 %d, %d items", p.IsOwned(), p.I16(), p.I8(), p.Inv().Len())
	}
	if p := hero(0); p.IsOwned() || p.I16() != 0 || p.I8() != -3 || p.Inv().Len() != 0 {
		t.Fatalf("old owner: owned %v, i16 %d, i8 %d, %d items", p.IsOwned(), p.I16(), p.I8(), p.Inv().Len())
	}
	// A later change of an item the new owner only got whole.
	item, _ := h.Inv().Get(7)
	item.SetCount(2)
	w.tick(t)
	if got, _ := hero(1).Inv().Get(7); got.Count() != 2 {
		t.Fatalf("new owner's item count %d, want 2", got.Count())
	}
	// Away and back within one tick is no change; then back across ticks.
	w.srv.SetOwner(h.Entity(), w.conns[0])
	w.srv.SetOwner(h.Entity(), w.conns[1])
	w.tick(t)
	w.srv.SetOwner(h.Entity(), w.conns[0])
	w.tick(t)
	if p := hero(0); !p.IsOwned() || p.I16() != 501 || p.I8() != 0 {
		t.Fatalf("first owner again: owned %v, i16 %d, i8 %d", p.IsOwned(), p.I16(), p.I8())
	}
	if n := len(w.owned[1]); n != 1 || w.owned[1][h.ID()] {
		t.Fatalf("client 1's callbacks: %v", w.owned[1])
	}
}

// TestLeaversReleaseOwnership drops two of four clients in one tick: the
// entities they owned belong to nobody after the tick that reaps them
// (one pass over the owners for all the leavers), the others' stay theirs,
// and the clients still connected see exactly that (w.tick checks them).
func TestLeaversReleaseOwnership(t *testing.T) {
	w := newOwnWorld(t, 4)
	defer w.close()
	heroes := make([][]*state.Entity, len(w.conns))
	for i, c := range w.conns {
		for range 2 {
			h, err := v2.SpawnHero(w.srv.Tracker())
			if err != nil {
				t.Fatal(err)
			}
			w.srv.SetOwner(h.Entity(), c)
			heroes[i] = append(heroes[i], h.Entity())
		}
	}
	w.tick(t)
	w.drop(0)
	w.drop(2)
	w.tick(t)
	for i, hs := range heroes {
		var want *replica.Conn
		if i%2 == 1 {
			want = w.conns[i]
		}
		for _, e := range hs {
			if got := w.srv.Owner(e); got != want {
				t.Errorf("client %d's hero %#x: owner %v, want %v", i, uint32(e.ID()), got, want)
			}
		}
	}
}
