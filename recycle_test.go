package replica_test

import (
	"math/rand/v2"
	"testing"

	"github.com/replicago/replica"
	"github.com/replicago/replica/state"
)

// TestArenaReuse checks the reuse of the buffers the clients' messages
// are carved from: with every client reading, the server carves each tick
// from the same few chunks; while one client leaves its messages in its
// connection, nothing is reused (the server makes new chunks), and that
// client, reading again, gets every tick intact.
func TestArenaReuse(t *testing.T) {
	sc := aoiSchema(t)
	w := newWorld(t, 0, replica.Config{Schema: sc, LagMessages: 1 << 20, LagBytes: 1 << 30, Budget: -1})
	defer w.close()
	// A client holds one received tick, so that one that stops applying
	// leaves the next ones in its connection.
	w.buffer = 1
	w.aoi = true
	for range 2 {
		w.join(t, sc)
	}
	zone, err := w.srv.NewSpace(replica.SpaceConfig{Name: "zone", Radius: 2000})
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(7, 8))
	var ents []*state.Entity
	for range 300 {
		e, err := w.srv.Tracker().Spawn(sc.Classes[0])
		if err != nil {
			t.Fatal(err)
		}
		setPos(e, r.Float32()*1000, r.Float32()*1000)
		w.srv.SetSpace(e, zone)
		ents = append(ents, e)
	}
	for _, c := range w.conns {
		w.srv.View(c, zone)
		w.srv.SetViewpoint(c, 500, 500)
	}
	move := func() {
		for _, e := range ents {
			x, y := posOf(e)
			setPos(e, float32(x+r.Float64()-0.5), float32(y+r.Float64()-0.5))
		}
	}
	// Every client sees the 300 entities move: about 2 KB a client and
	// tick, a 64 KiB chunk every 16 ticks without reuse.
	for range 10 {
		move()
		w.tick(t)
	}
	made := w.srv.ArenaChunksForTest()
	for range 100 {
		move()
		w.tick(t)
	}
	if n := w.srv.ArenaChunksForTest() - made; n > 2 {
		t.Fatalf("%d chunks made in 100 ticks with every client reading", n)
	}
	// Client 1 stops applying: its connection holds what it is sent.
	made = w.srv.ArenaChunksForTest()
	for range 100 {
		move()
		w.srv.Tick()
		waitTick(t, w.clients[0], w.srv.TickNumber())
	}
	if n := w.srv.ArenaChunksForTest() - made; n < 3 {
		t.Fatalf("%d chunks made in 100 ticks with a client holding its messages: chunks reused", n)
	}
	waitTick(t, w.clients[1], w.srv.TickNumber())
	for i := range w.clients {
		if err := w.check(i); err != nil {
			t.Fatalf("client %d: %v", i, err)
		}
	}
}
