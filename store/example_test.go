package store_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/replicago/replica/schema"
	"github.com/replicago/replica/state"
	"github.com/replicago/replica/store"
	"github.com/replicago/replica/store/storetest"
)

// A player saved by a Writer behind the tick, dumped as JSON, and loaded
// back at the next login.
func Example() {
	// What replicagen generates from
	//	type player struct {
	//		x    float32
	//		gold int32 `replica:"life=persist"`
	//	}
	player := &schema.Struct{Name: "player", Class: true, ID: 1, Fields: []*schema.Field{
		{ID: 1, Name: "x", Type: schema.Type{Kind: schema.Float32}},
		{ID: 2, Name: "gold", Type: schema.Type{Kind: schema.Int32}, Life: schema.LifePersist},
	}}
	s, _ := schema.New(player)
	codec := store.NewCodec(s)
	st := storetest.NewMemory() // sqlitestore.Open, pgstore.Open, redisstore.Open
	ctx := context.Background()

	tr := state.NewTracker(s)
	e, _ := tr.Spawn(player)
	w, _ := store.NewWriter(store.WriterConfig{Store: st, Codec: codec})
	for tick := uint64(1); tick <= 3; tick++ {
		e.SetNum(1, uint64(100*tick)) // game code: p.SetGold(…)
		cs := tr.Commit()
		w.Begin(cs.Tick)
		for _, c := range cs.Changes {
			if codec.Changed(c) {
				w.PutChange("player-7", c)
			}
		}
		w.End()
	}
	w.Close(ctx) // writes what is pending

	doc, _ := st.Load(ctx, "player-7")
	desc, _ := st.Schema(ctx, doc.Schema)
	ds, _ := schema.DecodeDescriptor(desc)
	js, _ := store.AppendJSON(nil, doc, ds)
	fmt.Println(string(js))

	// The next login.
	e2, _ := state.NewTracker(s).Spawn(player)
	if err := codec.Restore(e2, doc); err != nil {
		panic(err)
	}
	fmt.Println("gold:", int32(e2.Num(player.Field(2).Num)))
	_, err := st.Load(ctx, "player-8")
	fmt.Println("new player:", errors.Is(err, store.ErrNotFound))
	// Output:
	// {"key":"player-7","class":"player","class_id":1,"tick":3,"schema":"cc167c61012e27cabab98fc08233c1e2","fields":{"gold":300}}
	// gold: 300
	// new player: true
}
