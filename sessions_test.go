package replica_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/replicago/replica"
	"github.com/replicago/replica/auth"
	"github.com/replicago/replica/client"
	"github.com/replicago/replica/internal/demo"
	"github.com/replicago/replica/transport"
)

// dupRig is a server whose OnJoin hands the user's bot to the joining
// session, spawning it on the first join, and whose OnLeave logs leaves.
type dupRig struct {
	srv    *replica.Server
	net    *transport.MemNetwork
	ln     transport.Listener
	bots   map[string]demo.Bot
	events []string
}

func newDupRig(t *testing.T, policy func(old, new *replica.Conn) replica.SessionPolicy) *dupRig {
	r := &dupRig{net: transport.NewMemNetwork(), bots: map[string]demo.Bot{}}
	srv, err := replica.NewServer(replica.Config{Schema: demo.Schema(), Auth: auth.Anonymous{}, OnDuplicate: policy,
		OnJoin: func(c *replica.Conn) {
			r.events = append(r.events, fmt.Sprint("join ", c.Session()))
			b, ok := r.bots[c.UserID()]
			if !ok {
				b, _ = demo.SpawnBot(r.srv.Tracker())
				b.SetName(c.UserID())
				r.bots[c.UserID()] = b
			} else if o := r.srv.Owner(b.Entity()); o != nil {
				r.events = append(r.events, fmt.Sprint("taken from ", o.Session()))
			}
			r.srv.SetOwner(b.Entity(), c)
		},
		OnLeave: func(c *replica.Conn) { r.events = append(r.events, fmt.Sprint("leave ", c.Session())) },
	})
	if err != nil {
		t.Fatal(err)
	}
	r.srv = srv
	if r.ln, err = r.net.Listen("server", transport.Config{}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	go srv.Serve(ctx, r.ln)
	t.Cleanup(func() { cancel(); srv.Close() })
	return r
}

func (r *dupRig) dial(user string) (*client.Conn, error) {
	return client.Dial(context.Background(), r.net.Dialer(transport.Config{}), r.ln.Addr().String(), demo.Schema(),
		client.DialConfig{Token: []byte(user)})
}

// settle ticks until the server has n sessions and every given client has
// applied the last tick.
func (r *dupRig) settle(t *testing.T, n int, clients ...*client.Conn) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for len(r.srv.Conns()) != n {
		if ctx.Err() != nil {
			t.Fatalf("the server has %d sessions, want %d", len(r.srv.Conns()), n)
		}
		r.srv.Tick()
		time.Sleep(time.Millisecond)
	}
	r.srv.Tick()
	for _, c := range clients {
		for c.LastTick() < r.srv.TickNumber() {
			if _, err := c.Wait(ctx); err != nil {
				t.Fatalf("waiting for tick %d: %v", r.srv.TickNumber(), err)
			}
		}
	}
}

// ownsBot reports whether c's replica says it owns exactly one entity: its
// user's bot.
func ownsBot(c *client.Conn) bool {
	owned := c.Replica().Owned(nil)
	b, ok := demo.BotViewOf(firstOr(owned))
	return len(owned) == 1 && ok && b.Name() == c.UserID()
}

func firstOr[T any](s []T) T {
	var zero T
	if len(s) == 0 {
		return zero
	}
	return s[0]
}

// TestDuplicateSessionReplaces: by default a second session of a user
// closes the first with CloseReplaced; the first leaves before the second
// joins, and the second owns the user's bot.
func TestDuplicateSessionReplaces(t *testing.T) {
	r := newDupRig(t, nil)
	first, err := r.dial("alice")
	if err != nil {
		t.Fatal(err)
	}
	bob, err := r.dial("bob")
	if err != nil {
		t.Fatal(err)
	}
	r.settle(t, 2, first, bob)
	if !ownsBot(first) || !ownsBot(bob) {
		t.Fatal("each client should own its user's bot")
	}
	r.events = nil
	second, err := r.dial("alice")
	if err != nil {
		t.Fatal(err)
	}
	r.settle(t, 2, second)
	select {
	case <-first.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the replaced session is still open")
	}
	if code, _, byPeer := first.CloseInfo(); code != transport.CloseReplaced || !byPeer {
		t.Fatalf("the replaced session closed with %v (by peer %v), want %v", code, byPeer, transport.CloseReplaced)
	}
	if want := []string{"leave 1", "join 3"}; fmt.Sprint(r.events) != fmt.Sprint(want) {
		t.Fatalf("events %v, want %v", r.events, want)
	}
	if !ownsBot(second) {
		t.Fatal("the new session does not own alice's bot")
	}
	if r.srv.Owner(r.bots["alice"].Entity()) != r.srv.Conns()[1] {
		t.Fatal("the server did not hand alice's bot to the new session")
	}
}

// TestDuplicateSessionRefuseNew: the policy may keep the old session and
// refuse the new one, which learns why.
func TestDuplicateSessionRefuseNew(t *testing.T) {
	var seen [2]uint64
	r := newDupRig(t, func(old, new *replica.Conn) replica.SessionPolicy {
		seen = [2]uint64{old.Session(), new.Session()}
		return replica.RefuseNew
	})
	first, err := r.dial("alice")
	if err != nil {
		t.Fatal(err)
	}
	r.settle(t, 1, first)
	_, err = r.dial("alice")
	var refused *client.RefusedError
	if !errors.As(err, &refused) || refused.Code != transport.CloseDuplicate {
		t.Fatalf("second dial: %v, want a refusal with %v", err, transport.CloseDuplicate)
	}
	if seen != [2]uint64{1, 2} {
		t.Fatalf("OnDuplicate saw sessions %v, want [1 2]", seen)
	}
	r.settle(t, 1, first)
	if !ownsBot(first) {
		t.Fatal("the first session lost its bot")
	}
	// Once the first leaves, the user may connect again.
	first.Close()
	r.settle(t, 0)
	again, err := r.dial("alice")
	if err != nil {
		t.Fatalf("dial after the first session left: %v", err)
	}
	r.settle(t, 1, again)
	if !ownsBot(again) {
		t.Fatal("the new session does not own alice's bot")
	}
}

// TestDuplicateSessionAllowBoth: both sessions stay.
func TestDuplicateSessionAllowBoth(t *testing.T) {
	r := newDupRig(t, func(old, new *replica.Conn) replica.SessionPolicy { return replica.AllowBoth })
	first, err := r.dial("alice")
	if err != nil {
		t.Fatal(err)
	}
	r.settle(t, 1, first)
	second, err := r.dial("alice")
	if err != nil {
		t.Fatal(err)
	}
	r.settle(t, 2, first, second)
	if len(first.Replica().Owned(nil)) != 0 || !ownsBot(second) {
		t.Fatal("the bot should have moved to the second session, and the first should know it lost it")
	}
}
