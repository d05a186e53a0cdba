package store_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"pgregory.net/rapid"

	"github.com/replicago/replica/internal/mutate"
	v1 "github.com/replicago/replica/internal/testschema/v1"
	"github.com/replicago/replica/schema"
	"github.com/replicago/replica/state"
	"github.com/replicago/replica/store"
	"github.com/replicago/replica/store/storetest"
)

// faulty wraps a Memory store: it can fail or block writes, and checks
// every batch.
type faulty struct {
	*storetest.Memory
	mu      sync.Mutex
	fail    error
	block   chan struct{}
	batches []store.Batch
}

func (f *faulty) Write(ctx context.Context, b *store.Batch) error {
	f.mu.Lock()
	fail, block := f.fail, f.block
	f.mu.Unlock()
	if block != nil {
		select {
		case <-block:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	if fail != nil {
		return fail
	}
	f.mu.Lock()
	f.batches = append(f.batches, store.Batch{Puts: append([]store.Document(nil), b.Puts...), Deletes: append([]string(nil), b.Deletes...)})
	f.mu.Unlock()
	return f.Memory.Write(ctx, b)
}

func (f *faulty) written() []store.Batch {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]store.Batch(nil), f.batches...)
}

func (f *faulty) set(fail error, block chan struct{}) {
	f.mu.Lock()
	f.fail, f.block = fail, block
	f.mu.Unlock()
}

// world is a few entities of a class with one persist int64 field.
type world struct {
	s     *schema.Schema
	cl    *schema.Struct
	codec *store.Codec
	tr    *state.Tracker
	ents  map[string]*state.Entity
}

func newWorld(t *testing.T, keys ...string) *world {
	cl := &schema.Struct{Name: "p", Class: true, ID: 1, Fields: []*schema.Field{
		{ID: 1, Name: "v", Type: schema.Type{Kind: schema.Int64}, Life: schema.LifePersist},
	}}
	s, err := schema.New(cl)
	if err != nil {
		t.Fatal(err)
	}
	w := &world{s: s, cl: cl, codec: store.NewCodec(s), tr: state.NewTracker(s), ents: map[string]*state.Entity{}}
	for _, k := range keys {
		w.ents[k], _ = w.tr.Spawn(cl)
	}
	return w
}

// tick sets the given entities to v and hands them to the writer.
func (w *world) tick(t *testing.T, wr *store.Writer, tick uint64, v int64, keys ...string) error {
	t.Helper()
	wr.Begin(tick)
	for _, k := range keys {
		w.ents[k].SetNum(0, uint64(v))
		wr.Put(k, w.ents[k])
	}
	return wr.End()
}

// stored returns the value stored for key, or −1.
func (w *world) stored(t *testing.T, s store.Store, key string) int64 {
	t.Helper()
	d, err := s.Load(context.Background(), key)
	if errors.Is(err, store.ErrNotFound) {
		return -1
	}
	if err != nil {
		t.Fatal(err)
	}
	r, err := w.codec.Decode(d)
	if err != nil {
		t.Fatal(err)
	}
	return int64(r.Num(w.cl.Field(1).Num))
}

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func TestWriterCoalescesPerInterval(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t, "a", "b")
		st := &faulty{Memory: storetest.NewMemory()}
		wr, err := store.NewWriter(store.WriterConfig{Store: st, Codec: w.codec, FlushInterval: time.Second, Logger: quiet()})
		if err != nil {
			t.Fatal(err)
		}
		for i := uint64(1); i <= 10; i++ {
			keys := []string{"a"}
			if i == 4 {
				keys = append(keys, "b")
			}
			if err := w.tick(t, wr, i, int64(i*100), keys...); err != nil {
				t.Fatal(err)
			}
			time.Sleep(50 * time.Millisecond)
		}
		synctest.Wait()
		if n := st.Writes(); n != 0 {
			t.Fatalf("%d writes before the flush interval", n)
		}
		time.Sleep(600 * time.Millisecond)
		synctest.Wait()
		if n := st.Writes(); n != 1 {
			t.Fatalf("%d writes after one flush interval, want 1", n)
		}
		if got := st.written()[0]; len(got.Puts) != 2 {
			t.Fatalf("the flush wrote %d documents, want 2 (coalesced)", len(got.Puts))
		}
		if a, b := w.stored(t, st, "a"), w.stored(t, st, "b"); a != 1000 || b != 400 {
			t.Fatalf("stored a=%d b=%d, want 1000 and 400", a, b)
		}
		if s := wr.Stats(); s.Flushes != 1 || s.Written != 2 || s.Pending != 0 {
			t.Fatalf("stats %+v", s)
		}
		// Nothing changed: no more writes.
		time.Sleep(5 * time.Second)
		synctest.Wait()
		if n := st.Writes(); n != 1 {
			t.Fatalf("%d writes with nothing to write", n)
		}
		if err := wr.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
		// The descriptor went with the first flush.
		if _, err := st.Schema(context.Background(), w.codec.Hash()); err != nil {
			t.Fatal(err)
		}
	})
}

// TestWriterTickAtomic: entities changed together in every tick (one game
// action moving gold between them) are always stored at the same tick.
func TestWriterTickAtomic(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t, "from", "to", "other")
		st := &faulty{Memory: storetest.NewMemory()}
		wr, _ := store.NewWriter(store.WriterConfig{Store: st, Codec: w.codec, FlushInterval: 70 * time.Millisecond, Logger: quiet()})
		for i := uint64(1); i <= 200; i++ {
			keys := []string{"from", "to"}
			if i%3 == 0 {
				keys = append(keys, "other")
			}
			w.tick(t, wr, i, int64(i), keys...)
			time.Sleep(time.Duration(i%7) * 3 * time.Millisecond)
		}
		if err := wr.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
		if len(st.written()) < 10 {
			t.Fatalf("%d flushes, want many", len(st.written()))
		}
		for _, b := range st.written() {
			ticks := map[string]uint64{}
			for _, d := range b.Puts {
				ticks[d.Key] = d.Tick
			}
			if ticks["from"] != ticks["to"] {
				t.Fatalf("a flush stored from at tick %d and to at tick %d", ticks["from"], ticks["to"])
			}
		}
		if got := w.stored(t, st, "to"); got != 200 {
			t.Fatalf("final value %d, want 200", got)
		}
	})
}

// TestWriterDatabaseDown: while writes fail the tick goes on, the backlog
// is reported, and once the database is back everything is written.
func TestWriterDatabaseDown(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t, "a", "b", "c", "d")
		st := &faulty{Memory: storetest.NewMemory()}
		down := errors.New("database down")
		st.set(down, nil)
		var (
			mu       sync.Mutex
			failures int
		)
		wr, _ := store.NewWriter(store.WriterConfig{
			Store: st, Codec: w.codec, FlushInterval: 100 * time.Millisecond, MaxBacklog: 3,
			RetryMin: 50 * time.Millisecond, RetryMax: 400 * time.Millisecond, Logger: quiet(),
			OnFlush: func(fi store.FlushInfo) {
				mu.Lock()
				defer mu.Unlock()
				if fi.Err != nil {
					failures++
				}
			},
		})
		var backlogErrs int
		for i := uint64(1); i <= 100; i++ {
			keys := []string{"a", "b"}
			if i > 50 {
				keys = append(keys, "c", "d")
			}
			if err := w.tick(t, wr, i, int64(i), keys...); errors.Is(err, store.ErrBacklog) {
				backlogErrs++
			} else if err != nil {
				t.Fatal(err)
			}
			time.Sleep(50 * time.Millisecond)
		}
		synctest.Wait()
		s := wr.Stats()
		if s.Pending != 4 || s.Failures < 5 || !errors.Is(s.LastError, down) || s.OverBacklog != 50 || backlogErrs != 50 {
			t.Fatalf("stats while down: %+v, %d backlog errors", s, backlogErrs)
		}
		mu.Lock()
		f := failures
		mu.Unlock()
		if f != int(s.Failures) {
			t.Fatalf("OnFlush saw %d failures, stats %d", f, s.Failures)
		}
		c, cancel := context.WithTimeout(context.Background(), time.Second)
		if err := wr.Flush(c); !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, down) {
			t.Fatalf("Flush while down: %v", err)
		}
		cancel()
		if st.Writes() != 0 {
			t.Fatal("a write went through while the database was down")
		}
		st.set(nil, nil)
		time.Sleep(time.Second) // RetryMax and then some
		synctest.Wait()
		for _, k := range []string{"a", "b", "c", "d"} {
			if got := w.stored(t, st, k); got != 100 {
				t.Fatalf("%s stored as %d, want 100", k, got)
			}
		}
		if s := wr.Stats(); s.Pending != 0 || s.LastError != nil {
			t.Fatalf("stats after recovery: %+v", s)
		}
		if err := w.tick(t, wr, 101, 101, "a"); err != nil {
			t.Fatalf("End after recovery: %v", err)
		}
		wr.Close(context.Background())
	})
}

// TestWriterSlowDatabase: a write that hangs does not hold up the tick.
func TestWriterSlowDatabase(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t, "a")
		st := &faulty{Memory: storetest.NewMemory()}
		block := make(chan struct{})
		st.set(nil, block)
		wr, _ := store.NewWriter(store.WriterConfig{Store: st, Codec: w.codec, FlushInterval: 100 * time.Millisecond, WriteTimeout: time.Hour, Logger: quiet()})
		for i := uint64(1); i <= 100; i++ {
			w.tick(t, wr, i, int64(i), "a") // would deadlock the bubble if End waited on the write
			time.Sleep(50 * time.Millisecond)
		}
		if st.Writes() != 0 {
			t.Fatal("write finished while blocked")
		}
		st.set(nil, nil)
		close(block)
		if err := wr.Flush(context.Background()); err != nil {
			t.Fatal(err)
		}
		if got := w.stored(t, st, "a"); got != 100 {
			t.Fatalf("stored %d, want 100", got)
		}
		wr.Close(context.Background())
	})
}

func TestWriterSaveDeleteClose(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t, "a", "b", "c")
		st := &faulty{Memory: storetest.NewMemory()}
		var lags []time.Duration
		wr, _ := store.NewWriter(store.WriterConfig{Store: st, Codec: w.codec, FlushInterval: time.Hour, Logger: quiet(),
			OnFlush: func(fi store.FlushInfo) { lags = append(lags, fi.Lags...) }})
		w.tick(t, wr, 1, 5, "a", "c")
		time.Sleep(3 * time.Second)
		w.ents["b"].SetNum(0, 7)
		// Save returns once durable: everything ended before it is too.
		if err := wr.Save(context.Background(), w.codec.Document("b", 2, w.ents["b"])); err != nil {
			t.Fatal(err)
		}
		if a, b := w.stored(t, st, "a"), w.stored(t, st, "b"); a != 5 || b != 7 {
			t.Fatalf("after Save: a=%d b=%d", a, b)
		}
		if len(lags) != 3 || max(lags[0], lags[1], lags[2]) != 3*time.Second {
			t.Fatalf("lags %v, want the 3 s a and c waited", lags)
		}
		if err := wr.Save(context.Background(), store.Document{Key: ""}); !errors.Is(err, store.ErrInvalid) {
			t.Fatalf("Save of an invalid key: %v", err)
		}
		wr.Begin(3)
		wr.Delete("c")
		wr.Put("a", w.ents["a"])
		w.ents["a"].SetNum(0, 9) // after Put: not seen, Put took the state of its call
		wr.End()
		if err := wr.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
		if a, c := w.stored(t, st, "a"), w.stored(t, st, "c"); a != 5 || c != -1 {
			t.Fatalf("after Close: a=%d c=%d, want 5 and deleted", a, c)
		}
		wr.Begin(4)
		if err := wr.End(); !errors.Is(err, store.ErrClosed) {
			t.Fatalf("End after Close: %v", err)
		}
		if err := wr.Close(context.Background()); err != nil {
			t.Fatalf("second Close: %v", err)
		}
	})
}

func TestWriterCloseUnsaved(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t, "a")
		st := &faulty{Memory: storetest.NewMemory()}
		st.set(errors.New("down"), nil)
		wr, _ := store.NewWriter(store.WriterConfig{Store: st, Codec: w.codec, Logger: quiet()})
		w.tick(t, wr, 1, 1, "a")
		c, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		err := wr.Close(c)
		if err == nil || !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Close with the database down: %v", err)
		}
		if s := wr.Stats(); s.Pending != 1 {
			t.Fatalf("pending after a failed Close: %d", s.Pending)
		}
	})
}

// TestWriterPatches: random changes of every kind, saved tick after tick
// by PutChange (patches once the Writer holds an entity), flushed at
// random points, leave the store equal to the entities.
func TestWriterPatches(t *testing.T) {
	t.Run("v1", func(t *testing.T) { testWriterPatches(t, allPersist(t, v1.Schema())) })
	// A small class whose changes are mostly to its bag's items.
	item := &schema.Struct{Name: "item", Fields: []*schema.Field{
		{ID: 1, Name: "n", Type: schema.Type{Kind: schema.Int32}},
		{ID: 2, Name: "tags", Type: schema.Type{Kind: schema.List, Elem: &schema.Type{Kind: schema.String}}},
	}}
	cl := &schema.Struct{Name: "p", Class: true, ID: 1, Fields: []*schema.Field{
		{ID: 1, Name: "v", Type: schema.Type{Kind: schema.Int64}, Life: schema.LifePersist},
		{ID: 2, Name: "inv", Type: schema.Type{Kind: schema.Bag, Key: schema.Int16, Struct: item}, Life: schema.LifePersist},
		{ID: 3, Name: "x", Type: schema.Type{Kind: schema.Float32}},
	}}
	s, err := schema.New(cl)
	if err != nil {
		t.Fatal(err)
	}
	t.Run("bag", func(t *testing.T) { testWriterPatches(t, s) })
}

func testWriterPatches(t *testing.T, s *schema.Schema) {
	codec := store.NewCodec(s)
	rapid.Check(t, func(rt *rapid.T) {
		tr := state.NewTracker(s)
		st := &faulty{Memory: storetest.NewMemory()}
		wr, _ := store.NewWriter(store.WriterConfig{Store: st, Codec: codec, FlushInterval: time.Millisecond,
			RetryMin: time.Millisecond, RetryMax: time.Millisecond, Logger: quiet()})
		defer wr.Close(context.Background())
		n := rapid.IntRange(1, 3).Draw(rt, "entities")
		ents := make([]*state.Entity, n)
		key := map[state.ID]string{}
		deleted := map[*state.Entity]bool{}
		for i := range ents {
			ents[i], _ = tr.Spawn(rapid.SampledFrom(s.Classes).Draw(rt, "class"))
			key[ents[i].ID()] = fmt.Sprint("e", i)
		}
		ticks := uint64(rapid.IntRange(1, 20).Draw(rt, "ticks"))
		for tick := uint64(1); tick <= ticks; tick++ {
			for range rapid.IntRange(0, 12).Draw(rt, "changes") {
				e := rapid.SampledFrom(ents).Draw(rt, "entity")
				if rapid.IntRange(0, 19).Draw(rt, "whole") == 0 {
					// Every field at once, containers replaced whole.
					e.Handle().SetNested(0, e.Class(), mutate.Record(rt, e.Class(), 0))
					continue
				}
				mutate.Struct(rt, e.Handle(), e.Class(), 0)
			}
			cs := tr.Commit()
			wr.Begin(tick)
			for _, c := range cs.Changes {
				if codec.Changed(c) {
					wr.PutChange(key[c.Entity.ID()], c)
					deleted[c.Entity] = false
				}
			}
			switch rapid.IntRange(0, 9).Draw(rt, "forget") {
			case 0:
				e := rapid.SampledFrom(ents).Draw(rt, "forgotten")
				wr.Put(key[e.ID()], e)
				wr.Forget(key[e.ID()])
				deleted[e] = false
			case 1:
				e := rapid.SampledFrom(ents).Draw(rt, "deleted")
				wr.Delete(key[e.ID()])
				deleted[e] = true
			}
			if err := wr.End(); err != nil {
				rt.Fatal(err)
			}
			// The database fails now and then: flushes in the background
			// fail and are retried.
			if rapid.IntRange(0, 3).Draw(rt, "down") == 0 {
				st.set(errors.New("down"), nil)
			} else {
				st.set(nil, nil)
			}
			if rapid.Bool().Draw(rt, "flush") {
				c, cancel := context.WithTimeout(context.Background(), 5*time.Millisecond)
				wr.Flush(c)
				cancel()
			}
		}
		st.set(nil, nil)
		if err := wr.Flush(context.Background()); err != nil {
			rt.Fatal(err)
		}
		for _, e := range ents {
			d, err := st.Load(context.Background(), key[e.ID()])
			if deleted[e] {
				if !errors.Is(err, store.ErrNotFound) {
					rt.Fatalf("deleted %s: Load = %v", key[e.ID()], err)
				}
				continue
			}
			if err != nil {
				rt.Fatal(err)
			}
			r, err := codec.Decode(d)
			if err != nil {
				rt.Fatal(err)
			}
			want, _ := codec.Decode(codec.Document(key[e.ID()], 0, e)) // the entity's stored fields
			if !r.Equal(want) {
				rt.Fatalf("stored %s differs from the entity", key[e.ID()])
			}
		}
	})
}
