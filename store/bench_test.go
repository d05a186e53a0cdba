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
	return ps, keys
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
