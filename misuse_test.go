package replica_test

// Misuse of the server's API: nil and foreign arguments, calls in the
// wrong order. Each is a typed error (or a documented no-op), never a
// panic, and never a change to the world.

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/replicago/replica"
	"github.com/replicago/replica/auth"
	"github.com/replicago/replica/internal/demo"
	"github.com/replicago/replica/transport"
)

// connOf returns the server's connection of user.
func (r *rig) connOf(user string) *replica.Conn {
	for c := range r.bots {
		if c.UserID() == user {
			return c
		}
	}
	r.t.Fatalf("no connection of %s", user)
	return nil
}

func TestMisuseForeignAndNil(t *testing.T) {
	r, other := memRig(t, replica.Config{}), memRig(t, replica.Config{})
	r.dial("ana")
	other.dial("olga")
	r.tickUntilJoined(1)
	other.tickUntilJoined(1)
	ana, olga := r.connOf("ana"), other.connOf("olga")
	mine := r.bots[ana].Entity()
	// The other server's first entity has the same ID as this one's:
	// both trackers number from the same first slot.
	theirs := other.bots[olga].Entity()
	if theirs.ID() != mine.ID() {
		t.Fatalf("IDs %v and %v: the test needs the same ID in both worlds", theirs.ID(), mine.ID())
	}

	if err := r.srv.SetOwner(nil, ana); !errors.Is(err, replica.ErrUnknownEntity) {
		t.Errorf("SetOwner(nil entity) = %v, want ErrUnknownEntity", err)
	}
	if got := r.srv.Owner(nil); got != nil {
		t.Errorf("Owner(nil) = %v after SetOwner(nil, ana), want nil", got.UserID())
	}
	if err := r.srv.SetOwner(theirs, nil); !errors.Is(err, replica.ErrUnknownEntity) {
		t.Errorf("SetOwner(another server's entity) = %v, want ErrUnknownEntity", err)
	}
	if got := r.srv.Owner(mine); got != ana {
		t.Errorf("owner of ana's bot is %v after another server's entity was given away, want ana", got)
	}
	if got := r.srv.Owner(theirs); got != nil {
		t.Errorf("another server's entity, of the ID of ana's bot, is owned by %s", got.UserID())
	}
	if err := r.srv.SetOwner(mine, olga); !errors.Is(err, replica.ErrConnGone) {
		t.Errorf("SetOwner(e, another server's conn) = %v, want ErrConnGone", err)
	}
	if got := r.srv.Owner(mine); got != ana {
		t.Errorf("owner of ana's bot changed to another server's connection")
	}

	if _, err := r.srv.Explain(nil, mine); !errors.Is(err, replica.ErrConnGone) {
		t.Errorf("Explain(nil conn) = %v, want ErrConnGone", err)
	}
	if _, err := r.srv.Explain(olga, mine); !errors.Is(err, replica.ErrConnGone) {
		t.Errorf("Explain(another server's conn) = %v, want ErrConnGone", err)
	}
	if sp := r.srv.ViewOf(nil); sp != nil {
		t.Errorf("ViewOf(nil) = %v", sp)
	}
	if sp := r.srv.ViewOf(olga); sp != nil {
		t.Errorf("ViewOf(another server's conn) = %v", sp.Name())
	}
	if r.srv.Sees(nil, mine) || r.srv.Sees(olga, mine) {
		t.Error("Sees: a nil or foreign connection sees an entity")
	}
	g := r.srv.NewGroup("party")
	g.AddConn(nil)
	g.RemoveConn(nil)

	sp, err := r.srv.NewSpace(replica.SpaceConfig{Name: "zone", Radius: 10, Hysteresis: -5})
	if !errors.Is(err, replica.ErrBadRadius) || sp != nil {
		t.Errorf("NewSpace(Hysteresis -5) = %v, %v; want ErrBadRadius", sp, err)
	} else if want := `replica: a distance (radius, hysteresis, cell size) must be finite and not negative: space "zone": Hysteresis is -5`; err.Error() != want {
		t.Errorf("NewSpace(Hysteresis -5): %q, want %q", err, want)
	}
	r.srv.Tick()
}

// TestMisuseOwnerGone: an entity given to a connection that has left (in
// OnLeave, or later) stays unowned; it would never be released.
func TestMisuseOwnerGone(t *testing.T) {
	r := memRig(t, replica.Config{})
	c := r.dial("ana")
	r.tickUntilJoined(1)
	ana := r.connOf("ana")
	c.Close()
	for len(r.srv.Conns()) > 0 {
		r.srv.Tick()
	}
	b, err := demo.SpawnBot(r.srv.Tracker())
	if err != nil {
		t.Fatal(err)
	}
	if err := r.srv.SetOwner(b.Entity(), ana); !errors.Is(err, replica.ErrConnGone) {
		t.Fatalf("SetOwner(e, a connection that left) = %v, want ErrConnGone", err)
	}
	if got := r.srv.Owner(b.Entity()); got != nil {
		t.Fatalf("owned by %s, who has left", got.UserID())
	}
	r.srv.Tracker().Destroy(b.Entity())
	if err := r.srv.SetOwner(b.Entity(), nil); !errors.Is(err, replica.ErrUnknownEntity) {
		t.Fatalf("SetOwner(destroyed entity) = %v, want ErrUnknownEntity", err)
	}
	r.srv.Tick()
}

// TestMisuseRunAfterClose: Run on a closed server, or once update closes
// it, returns ErrServerClosed instead of ticking a closed world for ever.
func TestMisuseRunAfterClose(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv, err := replica.NewServer(replica.Config{Schema: demo.Schema(), Auth: auth.Anonymous{}})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		ticks := 0
		err = srv.Run(ctx, func(tick uint64) {
			if ticks++; ticks == 3 {
				srv.Close()
			}
		})
		if !errors.Is(err, replica.ErrServerClosed) || ticks != 3 {
			t.Fatalf("Run closed by its update: %v after %d updates, want ErrServerClosed after 3", err, ticks)
		}
		if err := srv.Close(); err != nil {
			t.Fatalf("second Close: %v", err)
		}
		if err := srv.Run(ctx, nil); !errors.Is(err, replica.ErrServerClosed) {
			t.Fatalf("Run after Close = %v, want ErrServerClosed", err)
		}
		if err := srv.Serve(ctx, nil); err == nil {
			t.Fatal("Serve with a nil listener succeeded")
		}
		nw := transport.NewMemNetwork()
		ln, _ := nw.Listen("", transport.Config{})
		if err := srv.Serve(ctx, ln); !errors.Is(err, replica.ErrServerClosed) {
			t.Fatalf("Serve after Close = %v, want ErrServerClosed", err)
		}
	})
}

// TestMisuseTickRate: a tick rate Run cannot drive is refused by NewServer
// (at 2^40 Hz the ticker's period would be zero, and Run would panic).
func TestMisuseTickRate(t *testing.T) {
	for _, rate := range []int{replica.MaxTickRate + 1, 1 << 40} {
		if _, err := replica.NewServer(replica.Config{Schema: demo.Schema(), Auth: auth.Anonymous{}, TickRate: rate}); err == nil {
			t.Errorf("NewServer with TickRate %d succeeded", rate)
		}
	}
	if _, err := replica.NewServer(replica.Config{Schema: demo.Schema(), Auth: auth.Anonymous{}, TickRate: replica.MaxTickRate}); err != nil {
		t.Errorf("TickRate %d: %v", replica.MaxTickRate, err)
	}
}
