package replica_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/replicago/replica"
	"github.com/replicago/replica/auth"
	"github.com/replicago/replica/client"
	"github.com/replicago/replica/internal/demo"
	"github.com/replicago/replica/transport"
)

// storm is a server over the in-memory transport whose OnJoin gives every
// client but "watcher" a bot it owns, with an owner-only score and an others-only bounty
// of its own, so that a client shown the wrong partition of a bot is seen.
type storm struct {
	t       *testing.T
	srv     *replica.Server
	ln      transport.Listener
	dialer  transport.Dialer
	bots    map[string]demo.Bot // by user
	clients []*client.Conn
}

func newStorm(t *testing.T, cfg replica.Config) *storm {
	t.Helper()
	nw := transport.NewMemNetwork()
	ln, err := nw.Listen("", transport.Config{})
	if err != nil {
		t.Fatal(err)
	}
	st := &storm{t: t, ln: ln, dialer: nw.Dialer(transport.Config{}), bots: map[string]demo.Bot{}}
	cfg.Schema = demo.Schema()
	cfg.OnJoin = func(c *replica.Conn) {
		if c.UserID() == "watcher" {
			return // owns nothing
		}
		b, err := demo.SpawnBot(st.srv.Tracker())
		if err != nil {
			t.Error(err)
			return
		}
		n := int16(len(st.bots) + 1)
		b.SetName(c.UserID())
		b.SetHp(100 + n)
		b.SetScore(int32(1000 + n))
		b.SetBounty(2000 + n)
		st.srv.SetOwner(b.Entity(), c)
		st.bots[c.UserID()] = b
	}
	cfg.Auth = auth.Anonymous{}
	if st.srv, err = replica.NewServer(cfg); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	go st.srv.Serve(ctx, ln)
	t.Cleanup(func() { cancel(); st.srv.Close() })
	return st
}

// handshake dials n clients, one after the other, and waits until the
// server holds all of them for the next tick, without ticking.
func (st *storm) handshake(n int) {
	st.t.Helper()
	base := len(st.clients)
	for i := range n {
		c, err := client.Dial(context.Background(), st.dialer, st.ln.Addr().String(), demo.Schema(),
			client.DialConfig{Token: []byte(fmt.Sprint("player", base+i))})
		if err != nil {
			st.t.Fatal(err)
		}
		st.t.Cleanup(func() { c.Close() })
		st.clients = append(st.clients, c)
		// The server queues a connection just after sending its WELCOME:
		// wait for it, so that they queue in order.
		for deadline := time.Now().Add(10 * time.Second); st.srv.JoiningForTest() < i+1; time.Sleep(time.Millisecond) {
			if time.Now().After(deadline) {
				st.t.Fatalf("%d of %d handshakes queued", st.srv.JoiningForTest(), i+1)
			}
		}
	}
}

// verify waits until every client has applied the last tick and checks
// that each sees exactly its view of every entity.
func (st *storm) verify() {
	st.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, c := range st.clients {
		for c.LastTick() < st.srv.TickNumber() {
			if _, err := c.Wait(ctx); err != nil {
				st.t.Fatalf("%s: %v", c.UserID(), err)
			}
		}
		if err := check(st.srv, c, st.bots[c.UserID()]); err != nil {
			st.t.Errorf("%s: %v", c.UserID(), err)
		}
	}
}

// TestJoinStormSharesFullState joins five clients in one tick, each
// owning a bot, into a world of unowned bots and the bot of a client that
// joined earlier: each must receive its own bot's owner fields and every
// other bot's others fields, from a full state encoded once for all five.
func TestJoinStormSharesFullState(t *testing.T) {
	st := newStorm(t, replica.Config{})
	for i := range 3 {
		b, err := demo.SpawnBot(st.srv.Tracker())
		if err != nil {
			t.Fatal(err)
		}
		b.SetName(fmt.Sprint("npc", i))
		b.SetScore(int32(i + 1))
		b.SetBounty(int16(i + 1))
	}
	st.handshake(1)
	st.srv.Tick()
	st.verify()

	const joiners = 5
	st.handshake(joiners)
	before := st.srv.FullEncodedForTest()
	st.srv.Tick()
	if n := len(st.srv.Conns()); n != 1+joiners {
		t.Fatalf("%d connections after the tick, want %d", n, 1+joiners)
	}
	// Nine bots: PartAll of all nine and PartOthers of the four no joiner
	// owns, once; then for each joiner the others fields of the four
	// other joiners' bots and the owner fields of its own. Encoded for
	// each joiner apart, it would be 5 × (9 + 8 + 1).
	const ents = 3 + 1 + joiners
	want := ents + (ents - joiners) + joiners*(joiners-1+1)
	if got := st.srv.FullEncodedForTest() - before; got != uint64(want) {
		t.Errorf("%d entities encoded into the full states of %d joiners, want %d", got, joiners, want)
	}
	st.verify()

	// The clients keep their views through regular ticks.
	for i, b := range st.bots {
		b.SetScore(b.Score() + 1)
		b.SetBounty(b.Bounty() + 1)
		b.SetX(float32(len(i)))
	}
	st.srv.Tick()
	st.verify()
}

// TestMaxJoinsPerTick checks that a tick admits at most MaxJoinsPerTick
// connections, the longest waiting first, and that those left join at
// the next ticks with the right state.
func TestMaxJoinsPerTick(t *testing.T) {
	st := newStorm(t, replica.Config{MaxJoinsPerTick: 2})
	st.handshake(5)
	for _, want := range []int{2, 4, 5, 5} {
		st.srv.Tick()
		if n, waiting := len(st.srv.Conns()), st.srv.JoiningForTest(); n != want || waiting != 5-want {
			t.Fatalf("tick %d: %d joined and %d waiting, want %d and %d", st.srv.TickNumber(), n, waiting, want, 5-want)
		}
	}
	for i, c := range st.srv.Conns() {
		if want := fmt.Sprint("player", i); c.UserID() != want {
			t.Errorf("connection %d is %s, want %s: first come, first served", i, c.UserID(), want)
		}
	}
	st.verify()
}

// TestResyncWithJoiners resynchronises a client that owns nothing in the
// tick that three clients owning bots join: it shares their full state,
// and receives the others fields of their bots besides.
func TestResyncWithJoiners(t *testing.T) {
	st := newStorm(t, replica.Config{LagMessages: 40, LagBytes: 1 << 30})
	var npcs []demo.Bot
	for i := range 300 {
		b, err := demo.SpawnBot(st.srv.Tracker())
		if err != nil {
			t.Fatal(err)
		}
		b.SetScore(int32(i + 1))
		b.SetBounty(int16(i + 1))
		npcs = append(npcs, b)
	}
	w, err := client.Dial(context.Background(), st.dialer, st.ln.Addr().String(), demo.Schema(),
		client.DialConfig{Token: []byte("watcher"), Buffer: 4})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	st.clients = append(st.clients, w)
	for deadline := time.Now().Add(10 * time.Second); st.srv.JoiningForTest() < 1; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the watcher's handshake was not queued")
		}
	}
	st.srv.Tick()

	// The watcher does not poll: the server pauses it.
	for tick := 0; st.srv.Stats().Paused == 0; tick++ {
		if tick > 2000 {
			t.Fatal("the server never paused the client that stopped reading")
		}
		for _, b := range npcs {
			b.SetX(float32(tick))
		}
		st.srv.Tick()
	}
	// It applies what it was sent, its backlog drains, and the next tick
	// resynchronises it, along with three joiners.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for lastSent := st.srv.TickNumber() - 1; w.LastTick() < lastSent; {
		if _, err := w.Wait(ctx); err != nil {
			t.Fatal(err)
		}
	}
	const joiners = 3
	st.handshake(joiners)
	before := st.srv.FullEncodedForTest()
	st.srv.Tick()
	if s := st.srv.Stats(); s.Resyncs != 1 || len(st.srv.Conns()) != 1+joiners {
		t.Fatalf("%d resyncs, %d connections; want the resync in the joiners' tick", s.Resyncs, len(st.srv.Conns()))
	}
	// PartAll of the 303 bots and PartOthers of the 300 no joiner owns,
	// once; for each joiner the others fields of the two other joiners'
	// bots and the owner fields of its own; for the watcher those of the
	// three joiners' bots.
	const ents = 300 + joiners
	want := ents + (ents - joiners) + joiners*(joiners-1+1) + joiners
	if got := st.srv.FullEncodedForTest() - before; got != uint64(want) {
		t.Errorf("%d entities encoded into the full states of a tick, want %d", got, want)
	}
	st.verify()
}
