package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/replicago/replica/internal/persistschema"
	"github.com/replicago/replica/state"
	"github.com/replicago/replica/store"
	"github.com/replicago/replica/store/storetest"
)

// players spawns n players of the persistence benchmark with W2's
// inventory of 40 items.
func players(b *testing.B, n int) ([]persistschema.Player, []string) {
	ps, keys, _ := playersOf(b, n)
	return ps, keys
}

func playersOf(b *testing.B, n int) ([]persistschema.Player, []string, *state.Tracker) {
	tr := state.NewTracker(persistschema.Schema())
	ps := make([]persistschema.Player, n)
	keys := make([]string, n)
	for i := range ps {
		p, err := persistschema.SpawnPlayer(tr)
		if err != nil {
			b.Fatal(err)
		}
		p.SetGold(1000)
		p.SetLevel(uint8(1 + i%60))
		for k := 1; k <= 40; k++ {
			it := persistschema.NewItem()
			it.SetKind(uint16(1 + (i*k)%500))
			it.SetCount(int16(1 + k))
			p.Inv().Add(uint8(k), it)
		}
		ps[i], keys[i] = p, "player-"+string(rune('a'+i%26))+itoa(i)
	}
	tr.Commit()
	return ps, keys, tr
}

func itoa(i int) string {
	var b []byte
	for {
		b = append([]byte{byte('0' + i%10)}, b...)
		if i /= 10; i == 0 {
			return string(b)
		}
	}
}

// BenchmarkWriterTick is the cost on the tick goroutine per changed
// entity: encoding a player's persist fields (gold, level, a 40-item bag)
// and handing it to the Writer, in ticks of 75 changed players as in W2.
func BenchmarkWriterTick(b *testing.B) {
	ps, keys := players(b, 500)
	codec := store.NewCodec(persistschema.Schema())
	wr, err := store.NewWriter(store.WriterConfig{Store: storetest.NewMemory(), Codec: codec, FlushInterval: 50 * time.Millisecond, Logger: quiet()})
	if err != nil {
		b.Fatal(err)
	}
	defer wr.Close(context.Background())
	const perTick = 75
	b.ReportAllocs()
	b.ResetTimer()
	tick := uint64(0)
	for i := 0; i < b.N; {
		tick++
		wr.Begin(tick)
		for j := 0; j < perTick && i < b.N; j, i = j+1, i+1 {
			k := (i * 7) % len(ps)
			wr.Put(keys[k], ps[k].Entity())
		}
		wr.End()
	}
}

// BenchmarkEncodePlayer is the document encoding alone.
func BenchmarkEncodePlayer(b *testing.B) {
	ps, _ := players(b, 1)
	enc := store.NewCodec(persistschema.Schema()).NewEncoder()
	var buf []byte
	b.ReportAllocs()
	for b.Loop() {
		buf = enc.AppendEntity(buf[:0], ps[0].Entity())
	}
	b.ReportMetric(float64(len(buf)), "bytes/doc")
}

// BenchmarkRestorePlayer is loading a player at login.
func BenchmarkRestorePlayer(b *testing.B) {
	ps, _ := players(b, 1)
	codec := store.NewCodec(persistschema.Schema())
	doc := codec.Document("p", 1, ps[0].Entity())
	tr := state.NewTracker(persistschema.Schema())
	b.ReportAllocs()
	for b.Loop() {
		p, _ := persistschema.SpawnPlayer(tr)
		if err := codec.Restore(p.Entity(), doc); err != nil {
			b.Fatal(err)
		}
		tr.Destroy(p.Entity())
		tr.Commit()
	}
}

// BenchmarkWriterTickPatches is the tick goroutine's cost per changed
// entity in W2's pattern, as a server runs the hook: per tick 25 players
// gain gold and 50 have one inventory item's count changed; the tick's
// changeset is scanned, and the changed players are handed over as
// patches (the Writer holds every player already). Reported as
// ns/changed-entity; the game's own setters and Commit are not counted.
func BenchmarkWriterTickPatches(b *testing.B) {
	ps, keys, track := playersOf(b, 500)
	codec := store.NewCodec(persistschema.Schema())
	wr, err := store.NewWriter(store.WriterConfig{Store: storetest.NewMemory(), Codec: codec, FlushInterval: 50 * time.Millisecond, Logger: quiet()})
	if err != nil {
		b.Fatal(err)
	}
	defer wr.Close(context.Background())
	keyOf := map[state.ID]string{}
	for i, p := range ps {
		keyOf[p.ID()] = keys[i]
	}
	wr.Begin(0)
	for _, p := range ps {
		wr.Put(keyOf[p.ID()], p.Entity())
	}
	wr.End()
	var busy time.Duration
	changed := 0
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		for j := 0; j < 25; j++ {
			p := ps[(i*31+j*7)%len(ps)]
			p.SetGold(p.Gold() + 1)
		}
		for j := 0; j < 50; j++ {
			p := ps[(i*17+j*11)%len(ps)]
			it, _ := p.Inv().Get(uint8(1 + (i+j)%40))
			it.SetCount(it.Count() + 1)
		}
		cs := track.Commit()
		t0 := time.Now()
		wr.Begin(cs.Tick)
		for _, c := range cs.Changes {
			if codec.Changed(c) {
				wr.PutChange(keyOf[c.Entity.ID()], c)
				changed++
			}
		}
		wr.End()
		busy += time.Since(t0)
	}
	b.ReportMetric(float64(busy.Nanoseconds())/float64(changed), "ns/changed-entity")
}
