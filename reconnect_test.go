package replica_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/replicago/replica"
	"github.com/replicago/replica/auth"
	"github.com/replicago/replica/client"
	"github.com/replicago/replica/internal/demo"
	"github.com/replicago/replica/transport"
)

// TestReconnect drops a client's connection and reconnects it to a server
// that does not resume sessions: the replica keeps its callbacks, reports
// every entity destroyed once, receives the full state of the new session
// and ends equal to the server's view. In virtual time
// (testing/synctest): its waits do not depend on the machine's load.
func TestReconnect(t *testing.T) { synctest.Test(t, reconnect) }

func reconnect(t *testing.T) {
	r := memRig(t, replica.Config{ResumeWindow: -1})
	c := r.dial("p")
	r.tickUntilJoined(1)
	for range 3 { // a few NPCs besides the client's own bot
		b, _ := demo.SpawnBot(r.srv.Tracker())
		b.SetHp(7)
	}
	var created, destroyed int
	demo.OnBotCreate(c.Replica(), func(demo.BotView) { created++ })
	demo.OnBotDestroy(c.Replica(), func(demo.BotView) { destroyed++ })

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	sync := func() { t.Helper(); r.sync(c) }
	sync()
	// The client's own bot arrives in a tick applied after the callbacks
	// were registered, so it is a create too.
	if c.Replica().Len() != 4 || created != 4 {
		t.Fatalf("before: %d entities, %d creates", c.Replica().Len(), created)
	}

	// The server drops the client (as a network failure would).
	for _, sc := range r.srv.Conns() {
		sc.Close(4, "test drop")
	}
	r.srv.Tick() // reaps the closed connection
	if err := c.Reconnect(ctx); err != nil {
		t.Fatal(err)
	}
	if destroyed != 4 || c.Replica().Len() != 0 {
		t.Fatalf("after reset: %d destroyed, %d entities left", destroyed, c.Replica().Len())
	}
	r.tickUntilJoined(1) // the new session joins and gets a new bot
	sync()
	if err := check(r.srv, c, r.ownBot(c)); err != nil {
		t.Fatal(err)
	}
	if created != 4+c.Replica().Len() {
		t.Fatalf("%d creates in all, want %d", created, 4+c.Replica().Len())
	}
}

// TestReconnectResumes drops a client's connection, changes the world
// while it is away, and reconnects it: the session resumes, the replica is
// not reset, and its callbacks report only what changed meanwhile (one
// bot hurt, one gone, one new, and the new session's own bot).
func TestReconnectResumes(t *testing.T) { synctest.Test(t, reconnectResumes) }

func reconnectResumes(t *testing.T) {
	r := memRig(t, replica.Config{})
	c := r.dial("p")
	r.tickUntilJoined(1)
	// Enough bots that a catch-up of a few changes is smaller than the
	// full state (else the server sends the full state).
	var npcs []demo.Bot
	for i := range 20 {
		b, _ := demo.SpawnBot(r.srv.Tracker())
		b.SetHp(7)
		b.SetName(fmt.Sprint("npc", i))
		npcs = append(npcs, b)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	sync := func() { t.Helper(); r.sync(c) }
	sync()
	var created, destroyed int
	var hurt []string
	demo.OnBotCreate(c.Replica(), func(demo.BotView) { created++ })
	demo.OnBotDestroy(c.Replica(), func(demo.BotView) { destroyed++ })
	demo.OnBotHpChange(c.Replica(), func(b demo.BotView, _, _ int16) { hurt = append(hurt, b.Name()) })

	for _, sc := range r.srv.Conns() {
		sc.Close(transport.CloseNetworkError, "test drop")
	}
	r.srv.Tick() // reaps the closed connection
	npcs[0].SetHp(3)
	r.srv.Tick()
	r.srv.Tracker().Destroy(npcs[1].Entity())
	r.srv.Tick()
	b, _ := demo.SpawnBot(r.srv.Tracker())
	b.SetHp(9)
	r.srv.Tick()
	if err := c.Reconnect(ctx); err != nil {
		t.Fatal(err)
	}
	if !c.Resumed() || c.Replica().Len() != 21 {
		t.Fatalf("after reconnecting: resumed %v, %d entities (want the 21 it held)", c.Resumed(), c.Replica().Len())
	}
	r.tickUntilJoined(1)
	if sc := r.srv.Conns()[0]; !sc.Resumed() {
		t.Fatal("the server's Conn does not report the resume")
	}
	sync()
	if st := r.srv.Stats(); st.Resumes != 1 || st.ResumeFallbacks != 0 {
		t.Fatalf("%d catch-ups, %d full states, want one catch-up", st.Resumes, st.ResumeFallbacks)
	}
	if err := check(r.srv, c, r.ownBot(c)); err != nil {
		t.Fatal(err)
	}
	// Created: the new bot and the new session's own bot; destroyed:
	// npcs[1]; hp: npcs[0]'s change, and the two new bots' initial values
	// (a create reports its values as changes from zero).
	slices.Sort(hurt)
	if created != 2 || destroyed != 1 || !slices.Equal(hurt, []string{"", "npc0", "p"}) {
		t.Fatalf("callbacks: %d created, %d destroyed, hp changes of %q; want 2, 1, [\"\" npc0 p]", created, destroyed, hurt)
	}
}

// TestReconnectRefreshesToken: a reconnect after the first token expired
// is refused, unless DialConfig.Refresh supplies a fresh one.
func TestReconnectRefreshesToken(t *testing.T) {
	now := time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC)
	h := &auth.HMAC{Keys: [][]byte{[]byte("reconnect test key, 32 bytes ok")}, Now: func() time.Time { return now }}
	issue := func() []byte {
		tok, err := h.Issue(auth.Identity{UserID: "p", Expires: now.Add(time.Minute)})
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	r := memRig(t, replica.Config{Auth: h})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, refresh := range []bool{false, true} {
		cfg := client.DialConfig{Token: issue()}
		if refresh {
			cfg.Refresh = func(context.Context) ([]byte, error) { return issue(), nil }
		}
		c, err := client.Dial(ctx, r.dialer, r.ln.Addr().String(), demo.Schema(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		now = now.Add(time.Hour) // the first token has expired
		err = c.Reconnect(ctx)
		if refresh && err != nil {
			t.Fatalf("reconnect with a refreshed token: %v", err)
		}
		if !refresh && !client.ErrRefused(err) {
			t.Fatalf("reconnect with the expired token: %v, want a refusal", err)
		}
		c.Close()
	}
}
