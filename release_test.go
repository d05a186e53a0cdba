package replica_test

import (
	"runtime"
	"testing"
	"weak"

	"github.com/replicago/replica"
	"github.com/replicago/replica/state"
)

// TestConnReleased checks that nothing of the server keeps a connection
// that left: after it has seen entities through pairs (each entity's list
// of observers naming it after the connection that stays), been
// re-evaluated (the server's dirty views) and stood in the grid, the
// garbage collector frees its Conn, and with it whatever it held (its
// client's schema and decoder, calls it had queued).
func TestConnReleased(t *testing.T) {
	sc := aoiSchema(t)
	w := newWorld(t, 3, replica.Config{Schema: sc})
	defer w.close()
	zone, err := w.srv.NewSpace(replica.SpaceConfig{Name: "zone", Radius: 50})
	if err != nil {
		t.Fatal(err)
	}
	var ents []*state.Entity
	for i := range 20 {
		e, err := w.srv.Tracker().Spawn(sc.Classes[0])
		if err != nil {
			t.Fatal(err)
		}
		setPos(e, float32(10+i), 10)
		if err := w.srv.SetSpace(e, zone); err != nil {
			t.Fatal(err)
		}
		ents = append(ents, e)
	}
	// Client 0 stays; 1 and 2, viewing after it, are last in every
	// entity's observers.
	for i, c := range w.conns {
		if err := w.srv.View(c, zone); err != nil {
			t.Fatal(err)
		}
		if err := w.srv.SetViewpoint(c, 20+float64(i), 10); err != nil {
			t.Fatal(err)
		}
	}
	w.tick(t)
	for _, c := range w.conns {
		if n := len(ents); !w.srv.Sees(c, ents[0]) || !w.srv.Sees(c, ents[n-1]) {
			t.Fatal("a client does not see the entities around it")
		}
	}
	// Moved viewpoints: the leaving clients' views are re-evaluated (and
	// listed as dirty) in the tick before they leave.
	for i, c := range w.conns[1:] {
		if err := w.srv.SetViewpoint(c, 22+float64(i), 11); err != nil {
			t.Fatal(err)
		}
	}
	w.tick(t)

	var gone []weak.Pointer[replica.Conn]
	for _, c := range w.conns[1:] {
		gone = append(gone, weak.Make(c))
	}
	for i := 1; i < len(w.conns); i++ {
		w.drop(i)
	}
	clear(w.conns[1:]) // the test's own references
	w.conns = w.conns[:1]
	for range 3 {
		w.tick(t)
	}
	if got := len(w.srv.Conns()); got != 1 {
		t.Fatalf("%d connections joined after two left, want 1", got)
	}
	// The server keeps ticking, as a game's does, and the collector runs
	// when it will: a released Conn is freed within a few cycles.
	freed := func() bool {
		for _, p := range gone {
			if p.Value() != nil {
				return false
			}
		}
		return true
	}
	for range 5 {
		w.tick(t)
		runtime.GC()
		if freed() {
			return
		}
	}
	t.Fatal("a connection that left is still reachable from the server")
}
