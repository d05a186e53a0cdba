package client_test

import (
	"fmt"

	"github.com/replicago/replica/client"
	"github.com/replicago/replica/codec"
	"github.com/replicago/replica/internal/arena"
	"github.com/replicago/replica/state"
)

// A server changes entities through generated setters; each tick it
// encodes the changes once per partition, and the client applies the
// segments it receives and runs its typed callbacks.
func Example() {
	// Server.
	tr := state.NewTracker(arena.Schema())
	var enc codec.Encoder

	// Client.
	r, err := client.New(arena.Schema(), client.Config{})
	if err != nil {
		panic(err)
	}
	arena.OnUnitCreate(r, func(u arena.UnitView) {
		fmt.Printf("unit %d appears: %s, hp %d\n", u.ID(), u.Name(), u.Hp())
	})
	arena.OnUnitHpChange(r, func(u arena.UnitView, old, new int16) {
		fmt.Printf("unit %d hp %d -> %d\n", u.ID(), old, new)
	})
	arena.OnQunitXChange(r, func(q arena.QunitView, old, new float32) {
		fmt.Printf("qunit %d x %g -> %g\n", q.ID(), old, new)
	})
	arena.OnUnitDestroy(r, func(u arena.UnitView) {
		fmt.Printf("unit %d is gone\n", u.ID())
	})

	// One tick: the server commits, encodes the segments this client
	// receives (it owns none of the entities) and the client applies them.
	tick := func() {
		cs := tr.Commit()
		all := enc.Delta(nil, cs, codec.PartAll, nil)
		others := enc.Delta(nil, cs, codec.PartOthers, nil)
		if err := r.Apply(all, others); err != nil {
			panic(err)
		}
	}

	orc, _ := arena.SpawnUnit(tr)
	orc.SetName("orc")
	orc.SetHp(100)
	bolt, _ := arena.SpawnQunit(tr)
	bolt.SetX(10.5)
	tick()

	orc.SetHp(75)
	bolt.SetX(12.25)
	tick()

	tr.Destroy(orc.Entity())
	tick()
	fmt.Println("entities left:", r.Len())

	// Output:
	// unit 1 appears: orc, hp 100
	// unit 1 hp 0 -> 100
	// qunit 2 x 0 -> 10.5
	// unit 1 hp 100 -> 75
	// qunit 2 x 10.5 -> 12.25
	// unit 1 is gone
	// entities left: 1
}
