package replica_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/replicago/replica"
	"github.com/replicago/replica/auth"
	"github.com/replicago/replica/client"
	"github.com/replicago/replica/codec"
	"github.com/replicago/replica/internal/persistschema"
	"github.com/replicago/replica/schema"
	"github.com/replicago/replica/state"
	"github.com/replicago/replica/store"
	"github.com/replicago/replica/store/storetest"
	"github.com/replicago/replica/transport"
)

// persistServer returns a server of sc saving to st, flushing only when
// asked (or closed) unless interval is set.
func persistServer(t testing.TB, sc *schema.Schema, st store.Store, interval time.Duration) *replica.Server {
	t.Helper()
	if interval == 0 {
		interval = time.Hour
	}
	srv, err := replica.NewServer(replica.Config{Schema: sc, Auth: auth.Anonymous{}, Store: st,
		StoreWriter: store.WriterConfig{FlushInterval: interval, RetryMin: time.Millisecond, RetryMax: 10 * time.Millisecond}})
	if err != nil {
		t.Fatal(err)
	}
	return srv
}

func TestPersistLifetimesRoundTrip(t *testing.T) {
	sc := lifeSchema(t)
	st := storetest.NewMemory()
	srv := persistServer(t, sc, st, 0)
	hero, err := srv.Tracker().Spawn(sc.Classes[0])
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Bind(hero, "hero:1"); err != nil {
		t.Fatal(err)
	}
	fillHero(hero, 5)
	srv.Tick()
	// Changes after the bind: the nested struct, a bag item, and a field
	// of every other lifetime.
	lv := heroLeaves(sc.Classes[0])
	hero.Handle().SetNum(lv["stats.xp"], 3500)
	hero.Handle().SetNum(lv["pid"], 99)
	hero.Handle().SetNum(lv["zone"], 8)
	srv.Tick()
	if err := srv.Close(); err != nil {
		t.Fatal(err)
	}

	doc, err := st.Load(context.Background(), "hero:1")
	if err != nil {
		t.Fatal(err)
	}
	if doc.Tick != 2 || doc.Class != 1 {
		t.Errorf("document at tick %d of class %d, want tick 2 of class 1", doc.Tick, doc.Class)
	}
	rec, err := store.NewCodec(sc).Decode(doc)
	if err != nil {
		t.Fatal(err)
	}
	// Only persist fields are in the document: process, scene and session
	// fields decode as zero.
	c := sc.Classes[0]
	for name, i := range lv {
		life := c.Field(c.Leaf(i).Path[0]).Life
		if zero := rec.IsZero(c.Leaf(i)); zero != (life != schema.LifePersist) {
			t.Errorf("stored %s (life %v): zero %v", name, life, zero)
		}
	}

	// A restarted server loads the hero: persist fields as saved, every
	// other field at its default.
	srv2 := persistServer(t, sc, st, 0)
	defer srv2.Close()
	e, err := srv2.Load(context.Background(), c, "hero:1")
	if err != nil {
		t.Fatal(err)
	}
	wantZero(t, e, schema.LifeSession, schema.LifeScene, schema.LifeProcess)
	want := store.NewCodec(sc).AppendEntity(nil, hero)
	if got := store.NewCodec(sc).AppendEntity(nil, e); string(got) != string(want) {
		t.Errorf("loaded persist state differs from the saved one")
	}
}

func TestPersistValuesAndDestroy(t *testing.T) {
	sc := persistschema.Schema()
	st := storetest.NewMemory()
	srv := persistServer(t, sc, st, 0)
	p, _ := persistschema.SpawnPlayer(srv.Tracker())
	p.SetGold(10)
	if err := srv.Bind(p.Entity(), "p1"); err != nil {
		t.Fatal(err)
	}
	srv.Tick()
	for i := range uint8(40) {
		it := persistschema.NewItem()
		it.SetKind(uint16(i))
		it.SetCount(int16(i) * 2)
		p.Inv().Add(i+1, it)
	}
	srv.Tick()
	p.SetGold(77)
	p.SetLevel(3)
	p.Inv().Remove(5)
	if it, ok := p.Inv().Get(6); ok {
		it.SetCount(-1)
	}
	p.SetHp(50) // session: not saved
	// Logout: destroyed in the tick of its last changes; they are saved,
	// and the document stays.
	srv.Tracker().Destroy(p.Entity())
	srv.Tick()
	if err := srv.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n := srv.Stats().Persist.Pending; n != 0 {
		t.Errorf("%d pending after Flush", n)
	}
	e, err := srv.Load(context.Background(), sc.Class(1), "p1")
	if err != nil {
		t.Fatal(err)
	}
	q, _ := persistschema.PlayerOf(e)
	if q.Gold() != 77 || q.Level() != 3 || q.Hp() != 0 || q.Inv().Len() != 39 {
		t.Errorf("loaded gold %d level %d hp %d items %d, want 77 3 0 39", q.Gold(), q.Level(), q.Hp(), q.Inv().Len())
	}
	if _, ok := q.Inv().Get(5); ok {
		t.Error("removed item 5 came back")
	}
	if it, ok := q.Inv().Get(6); !ok || it.Count() != -1 || it.Kind() != 5 {
		t.Errorf("item 6: %v kind %d count %d, want kind 5 count -1", ok, it.Kind(), it.Count())
	}
	// Loaded, it is bound again: a second Load of the key is refused while
	// it lives.
	if err := srv.Bind(e, "p1"); err != nil {
		t.Errorf("binding again to its own key: %v", err)
	}
	other, _ := persistschema.SpawnPlayer(srv.Tracker())
	if err := srv.Bind(other.Entity(), "p1"); err == nil {
		t.Error("a key bound to two live entities")
	}
	// Delete drops the document.
	if err := srv.Delete("p1"); err != nil {
		t.Fatal(err)
	}
	srv.Tick()
	if err := srv.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Load(context.Background(), "p1"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("after Delete: %v, want ErrNotFound", err)
	}
}

func TestPersistLoadErrors(t *testing.T) {
	sc := lifeSchema(t)
	st := storetest.NewMemory()
	srv := persistServer(t, sc, st, 0)
	defer srv.Close()
	ctx := context.Background()
	c := sc.Classes[0]
	if _, err := srv.Load(ctx, c, "nobody"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("missing key: %v, want ErrNotFound", err)
	}
	codec := store.NewCodec(sc)
	bad := store.Document{Key: "bad", Class: 1, Tick: 1, Schema: codec.Hash(), Data: []byte{0xff, 0xff, 0xff}}
	other := store.Document{Key: "other", Class: 7, Tick: 1, Schema: codec.Hash(), Data: []byte{0}}
	// A field whose kind changed: gold (ID 8) stored as a string.
	kind := store.Document{Key: "kind", Class: 1, Tick: 1, Schema: codec.Hash(), Data: []byte{1, 8, byte(schema.String), 1, 'x'}}
	if err := st.Write(ctx, &store.Batch{Puts: []store.Document{bad, other, kind}}); err != nil {
		t.Fatal(err)
	}
	if _, err := srv.Load(ctx, c, "bad"); !errors.Is(err, store.ErrMalformed) {
		t.Errorf("damaged document: %v, want ErrMalformed", err)
	}
	if _, err := srv.Load(ctx, c, "other"); !errors.Is(err, store.ErrIncompatible) {
		t.Errorf("document of another class: %v, want ErrIncompatible", err)
	}
	var de *store.DecodeError
	if _, err := srv.Load(ctx, c, "kind"); !errors.Is(err, store.ErrIncompatible) || !errors.As(err, &de) {
		t.Errorf("field of another kind: %v, want a DecodeError wrapping ErrIncompatible", err)
	}
	if n := srv.Tracker().Len(); n != 0 {
		t.Errorf("%d entities spawned by failed loads", n)
	}
	e, _ := srv.Tracker().Spawn(c)
	if err := srv.Save(ctx, e); !errors.Is(err, replica.ErrNotBound) {
		t.Errorf("Save of an unbound entity: %v, want ErrNotBound", err)
	}
	if err := srv.Bind(e, ""); err == nil {
		t.Error("Bind accepted an empty key")
	}
	if err := srv.Bind(e, "e"); err != nil {
		t.Fatal(err)
	}
	// A class not in the schema is refused before the read: not found
	// would pass for a new player.
	if _, err := srv.Load(ctx, nil, "nobody"); !errors.Is(err, store.ErrUnknownClass) {
		t.Errorf("Load of a nil class: %v, want ErrUnknownClass", err)
	}
	// A nil entity is not bound, whatever the slots of the bound ones.
	if err := srv.Save(ctx, nil); !errors.Is(err, replica.ErrNotBound) {
		t.Errorf("Save(nil): %v, want ErrNotBound", err)
	}
	if err := srv.SaveAsync(e, nil)(ctx); !errors.Is(err, replica.ErrNotBound) {
		t.Errorf("SaveAsync(e, nil): %v, want ErrNotBound", err)
	}
	noStore, err := replica.NewServer(replica.Config{Schema: sc, Auth: auth.Anonymous{}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := noStore.Load(ctx, c, "x"); err == nil {
		t.Error("Load without a store")
	}
}

func TestPersistSaveIsDurable(t *testing.T) {
	sc := persistschema.Schema()
	st := storetest.NewMemory()
	srv := persistServer(t, sc, st, 0)
	defer srv.Close()
	a, _ := persistschema.SpawnPlayer(srv.Tracker())
	b, _ := persistschema.SpawnPlayer(srv.Tracker())
	srv.Bind(a.Entity(), "a")
	srv.Bind(b.Entity(), "b")
	srv.Tick()
	srv.Tick()
	// A trade in tick 3: both saved, by one write, before the tick ends.
	a.SetGold(-5)
	b.SetGold(5)
	writes := st.Writes()
	if err := srv.Save(context.Background(), a.Entity(), b.Entity()); err != nil {
		t.Fatal(err)
	}
	if n := st.Writes() - writes; n != 1 {
		t.Errorf("Save took %d writes, want 1", n)
	}
	for key, gold := range map[string]int32{"a": -5, "b": 5} {
		doc, err := st.Load(context.Background(), key)
		if err != nil {
			t.Fatal(err)
		}
		if p := storedPlayer(t, doc); p.Gold() != gold || doc.Tick != 3 {
			t.Errorf("%s: gold %d at tick %d, want %d at 3", key, p.Gold(), doc.Tick, gold)
		}
	}
	// SaveAsync: captured now, waited for elsewhere.
	a.SetGold(1)
	wait := srv.SaveAsync(a.Entity())
	a.SetGold(2) // after the capture
	if err := wait(context.Background()); err != nil {
		t.Fatal(err)
	}
	e, err := srv.Load(context.Background(), sc.Class(1), "a")
	if err == nil {
		t.Error("a second live entity loaded under a bound key")
		_ = e
	}
	doc, _ := st.Load(context.Background(), "a")
	if p := storedPlayer(t, doc); p.Gold() != 1 {
		t.Errorf("SaveAsync stored gold %d, want 1 (as captured)", p.Gold())
	}
}

// storedPlayer restores doc into a player of a tracker of its own.
func storedPlayer(t *testing.T, doc store.Document) persistschema.Player {
	t.Helper()
	tr := state.NewTracker(persistschema.Schema())
	p, _ := persistschema.SpawnPlayer(tr)
	if err := store.NewCodec(persistschema.Schema()).Restore(p.Entity(), doc); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestPersistCloseFlushes(t *testing.T) {
	sc := persistschema.Schema()
	st := storetest.NewMemory()
	srv := persistServer(t, sc, st, 0) // never flushes by itself
	p, _ := persistschema.SpawnPlayer(srv.Tracker())
	srv.Bind(p.Entity(), "p")
	for i := range 5 {
		p.SetGold(int32(i))
		srv.Tick()
	}
	if st.Writes() != 0 {
		t.Fatalf("%d writes before Close with an hour's flush interval", st.Writes())
	}
	if err := srv.Close(); err != nil {
		t.Fatal(err)
	}
	doc, err := st.Load(context.Background(), "p")
	if err != nil {
		t.Fatal(err)
	}
	if doc.Tick != 5 {
		t.Errorf("stored tick %d, want 5", doc.Tick)
	}
}

// TestPersistCloseSavesLastChanges: what changes after the last tick (as
// in OnLeave, which Close runs for every client) is saved by Close too:
// values, a new binding, a deletion.
func TestPersistCloseSavesLastChanges(t *testing.T) {
	sc := persistschema.Schema()
	st := storetest.NewMemory()
	srv := persistServer(t, sc, st, 0)
	p, _ := persistschema.SpawnPlayer(srv.Tracker())
	gone, _ := persistschema.SpawnPlayer(srv.Tracker())
	srv.Bind(p.Entity(), "p")
	srv.Bind(gone.Entity(), "gone")
	p.SetGold(1)
	srv.Tick()
	p.SetGold(2)
	q, _ := persistschema.SpawnPlayer(srv.Tracker())
	q.SetGold(3)
	if err := srv.Bind(q.Entity(), "q"); err != nil {
		t.Fatal(err)
	}
	if err := srv.Delete("gone"); err != nil {
		t.Fatal(err)
	}
	if err := srv.Close(); err != nil {
		t.Fatal(err)
	}
	if err := srv.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	for key, want := range map[string]int32{"p": 2, "q": 3} {
		doc, err := st.Load(context.Background(), key)
		if err != nil {
			t.Fatalf("%s: %v", key, err)
		}
		other := persistServer(t, sc, storetest.NewMemory(), 0)
		e, err := other.Restore(p.Entity().Class(), doc)
		if err != nil {
			t.Fatal(err)
		}
		if got, _ := persistschema.PlayerOf(e); got.Gold() != want {
			t.Errorf("%s: stored gold %d, want %d", key, got.Gold(), want)
		}
	}
	if _, err := st.Load(context.Background(), "gone"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("deleted before Close: Load = %v, want ErrNotFound", err)
	}
}

// TestPersistWithoutStore: the persistence methods of a server without a
// store return ErrNoStore.
func TestPersistWithoutStore(t *testing.T) {
	sc := persistschema.Schema()
	srv, err := replica.NewServer(replica.Config{Schema: sc, Auth: auth.Anonymous{}})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	p, _ := persistschema.SpawnPlayer(srv.Tracker())
	ctx := context.Background()
	_, lerr := srv.Load(ctx, p.Entity().Class(), "p")
	_, rerr := srv.Restore(p.Entity().Class(), store.Document{})
	for name, err := range map[string]error{
		"Bind": srv.Bind(p.Entity(), "p"), "Delete": srv.Delete("p"), "Load": lerr, "Restore": rerr,
		"Save": srv.Save(ctx, p.Entity()), "SaveAsync": srv.SaveAsync(p.Entity())(ctx),
	} {
		if !errors.Is(err, replica.ErrNoStore) {
			t.Errorf("%s = %v, want ErrNoStore", name, err)
		}
	}
}

// flaky is a Store whose writes fail while down.
type flaky struct {
	*storetest.Memory
	down atomic.Bool
}

func (f *flaky) Write(ctx context.Context, b *store.Batch) error {
	if f.down.Load() {
		return errors.New("connection refused")
	}
	return f.Memory.Write(ctx, b)
}

func TestPersistDownDatabase(t *testing.T) {
	sc := persistschema.Schema()
	st := &flaky{Memory: storetest.NewMemory()}
	st.down.Store(true)
	var logged syncBuffer
	srv, err := replica.NewServer(replica.Config{Schema: sc, Auth: auth.Anonymous{}, Store: st,
		Logger: slog.New(slog.NewTextHandler(&logged, nil)),
		StoreWriter: store.WriterConfig{FlushInterval: time.Millisecond, MaxBacklog: 3,
			RetryMin: time.Millisecond, RetryMax: 5 * time.Millisecond, Logger: slog.New(slog.DiscardHandler)}})
	if err != nil {
		t.Fatal(err)
	}
	var ps []persistschema.Player
	for i := range 5 {
		p, _ := persistschema.SpawnPlayer(srv.Tracker())
		srv.Bind(p.Entity(), string(rune('a'+i)))
		ps = append(ps, p)
	}
	srv.Tick()
	// The ticks go on while the database is down; the backlog is reported.
	deadline := time.Now().Add(time.Minute)
	for srv.Stats().Persist.Failures == 0 {
		if time.Now().After(deadline) {
			t.Fatal("no failed flush reported")
		}
		for _, p := range ps {
			p.SetGold(p.Gold() + 1)
		}
		srv.Tick()
		time.Sleep(time.Millisecond)
	}
	stats := srv.Stats().Persist
	if stats.Pending != 5 || stats.OverBacklog == 0 || stats.LastError == nil {
		t.Errorf("down: pending %d, over backlog %d, last error %v; want 5, > 0, an error",
			stats.Pending, stats.OverBacklog, stats.LastError)
	}
	if !strings.Contains(logged.String(), "level=ERROR msg=\"replica: persistence backlog over its bound") {
		t.Errorf("no error logged for the backlog; the log:\n%s", logged.String())
	}
	// Back up: the backlog drains by itself, nothing lost.
	// The backlog is written once nothing waits or is being written;
	// the success clears the last error.
	st.down.Store(false)
	for p := srv.Stats().Persist; p.Pending+p.Writing != 0; p = srv.Stats().Persist {
		if time.Now().After(deadline) {
			t.Fatalf("backlog not written after the database came back: pending %d, writing %d", p.Pending, p.Writing)
		}
		time.Sleep(time.Millisecond)
	}
	if err := srv.Stats().Persist.LastError; err != nil {
		t.Errorf("last error %v after recovery", err)
	}
	if err := srv.Close(); err != nil {
		t.Fatal(err)
	}
	for i, p := range ps {
		srv2 := persistServer(t, sc, st, 0)
		e, err := srv2.Load(context.Background(), sc.Class(1), string(rune('a'+i)))
		if err != nil {
			t.Fatal(err)
		}
		if q, _ := persistschema.PlayerOf(e); q.Gold() != p.Gold() {
			t.Errorf("player %d: gold %d, want %d", i, q.Gold(), p.Gold())
		}
		srv2.Close()
	}
}

// syncBuffer is a bytes.Buffer for a logger.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// BenchmarkPersistTick measures what the write-behind costs the tick
// goroutine: 1,000 bound players of which 100 change their gold and one
// bag item per tick (the flush runs on the Writer's goroutine). The metric
// ns/changed is the tick's cost over that of the same tick without a store,
// per changed entity.
func BenchmarkPersistTick(b *testing.B) {
	sc := persistschema.Schema()
	run := func(b *testing.B, st store.Store) {
		srv, err := replica.NewServer(replica.Config{Schema: sc, Auth: auth.Anonymous{}, Store: st,
			StoreWriter: store.WriterConfig{FlushInterval: 50 * time.Millisecond}})
		if err != nil {
			b.Fatal(err)
		}
		defer srv.Close()
		var ps []persistschema.Player
		for i := range 1000 {
			p, _ := persistschema.SpawnPlayer(srv.Tracker())
			for k := range uint8(40) {
				it := persistschema.NewItem()
				it.SetKind(uint16(k))
				p.Inv().Add(k+1, it)
			}
			if st != nil {
				srv.Bind(p.Entity(), "player:"+string(rune('A'+i%26))+string(rune('a'+i/26)))
			}
			ps = append(ps, p)
		}
		srv.Tick()
		b.ResetTimer()
		for n := range b.N {
			for i := range 100 {
				p := ps[(n*100+i)%len(ps)]
				p.SetGold(int32(n))
				if it, ok := p.Inv().Get(uint8(n%40 + 1)); ok {
					it.SetCount(int16(n))
				}
			}
			srv.Tick()
		}
		b.StopTimer()
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/100, "ns/changed")
	}
	b.Run("nostore", func(b *testing.B) { run(b, nil) })
	b.Run("store", func(b *testing.B) { run(b, &nullStore{storetest.NewMemory()}) })
}

// nullStore is a Memory store whose writes store nothing: the benchmark
// measures the tick, not the store.
type nullStore struct{ *storetest.Memory }

func (nullStore) Write(context.Context, *store.Batch) error { return nil }

func TestExportImportLeavesProcessFields(t *testing.T) {
	sc := lifeSchema(t)
	a, err := replica.NewServer(replica.Config{Schema: sc, Auth: auth.Anonymous{}})
	if err != nil {
		t.Fatal(err)
	}
	hero, _ := a.Tracker().Spawn(sc.Classes[0])
	fillHero(hero, 5)
	a.Tick()
	data, err := a.Export(hero)
	if err != nil {
		t.Fatal(err)
	}
	// Another server, another process: every field but the process ones.
	b, err := replica.NewServer(replica.Config{Schema: sc, Auth: auth.Anonymous{}})
	if err != nil {
		t.Fatal(err)
	}
	e, err := b.Import(data)
	if err != nil {
		t.Fatal(err)
	}
	wantZero(t, e, schema.LifeProcess)
	again, err := b.Export(e)
	if err != nil {
		t.Fatal(err)
	}
	if string(again) != string(data) {
		t.Error("the imported entity exports differently")
	}

	for name, bad := range map[string][]byte{
		"empty":     nil,
		"magic":     append([]byte("RPX2"), data[4:]...),
		"truncated": data[:len(data)-3],
		"class":     append(append([]byte{}, data[:20]...), append([]byte{9}, data[21:]...)...),
	} {
		n := b.Tracker().Len()
		_, err := b.Import(bad)
		if !errors.Is(err, replica.ErrExport) && !errors.Is(err, store.ErrMalformed) && !errors.Is(err, store.ErrUnknownClass) {
			t.Errorf("%s: %v, want a typed error", name, err)
		}
		if b.Tracker().Len() != n {
			t.Errorf("%s: a failed import spawned an entity", name)
		}
	}
	// A header cut short says so, not that there is no header.
	if _, err := b.Import([]byte("RPX1garbage")); !errors.Is(err, replica.ErrExport) || !strings.Contains(err.Error(), "cut within the header") {
		t.Errorf("RPX1garbage: %v", err)
	}
}

// FuzzImport feeds Server.Import arbitrary bytes: a typed error or an
// entity that exports back to an equal state, never a panic. (It compared
// the bytes of two exports until the fuzzer found a bag of two items that
// exported in two orders.)
func FuzzImport(f *testing.F) {
	sc := lifeSchema(f)
	srv, err := replica.NewServer(replica.Config{Schema: sc, Auth: auth.Anonymous{}})
	if err != nil {
		f.Fatal(err)
	}
	hero, _ := srv.Tracker().Spawn(sc.Classes[0])
	fillHero(hero, 5)
	data, _ := srv.Export(hero)
	f.Add(data)
	f.Add([]byte("RPX1"))
	f.Fuzz(func(t *testing.T, b []byte) {
		e, err := srv.Import(b)
		if err != nil {
			if !errors.Is(err, replica.ErrExport) && !errors.Is(err, store.ErrMalformed) &&
				!errors.Is(err, store.ErrIncompatible) && !errors.Is(err, store.ErrUnknownClass) &&
				!errors.Is(err, state.ErrTooLarge) {
				t.Fatalf("untyped error: %v", err)
			}
			return
		}
		out, err := srv.Export(e)
		if err != nil {
			t.Fatal(err)
		}
		e2, err := srv.Import(out)
		if err != nil {
			t.Fatalf("re-import: %v", err)
		}
		// The same state; not the same bytes, as a bag's items are
		// written in the bag's own order (docs/persistence.md), which
		// differs from one bag to another of the same items.
		if !e2.Record.Equal(&e.Record) {
			t.Fatal("an imported entity's export imports to another state")
		}
		srv.Tracker().Destroy(e)
		srv.Tracker().Destroy(e2)
		srv.Tick()
	})
}

// TestPersistRunThenShutdown checks that the changes of Run's last ticks
// are written by the Shutdown after it (Run itself writes nothing at its
// end: the clients would wait for the database before their goodbye).
func TestPersistRunThenShutdown(t *testing.T) {
	sc := persistschema.Schema()
	st := storetest.NewMemory()
	srv := persistServer(t, sc, st, 0) // never flushes by itself
	p, _ := persistschema.SpawnPlayer(srv.Tracker())
	srv.Bind(p.Entity(), "p")
	ctx, cancel := context.WithCancel(context.Background())
	var last int32
	err := srv.Run(ctx, func(tick uint64) {
		last = int32(tick)
		p.SetGold(last)
		if tick == 5 {
			cancel()
		}
	})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Run: %v", err)
	}
	if err := srv.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := srv.Bind(p.Entity(), "q"); !errors.Is(err, replica.ErrServerClosed) {
		t.Errorf("Bind after Shutdown: %v, want ErrServerClosed", err)
	}
	doc, err := st.Load(context.Background(), "p")
	if err != nil {
		t.Fatal(err)
	}
	if got := storedPlayer(t, doc).Gold(); got != last {
		t.Errorf("stored gold %d after Shutdown, want %d", got, last)
	}
}

// TestPersistShutdownDatabaseDown checks that Shutdown with the database
// down tells the clients at once and waits for the database no longer
// than its context allows (not the Writer's WriteTimeout of a minute),
// returning the error of the changes left unsaved.
func TestPersistShutdownDatabaseDown(t *testing.T) {
	sc := persistschema.Schema()
	st := &flaky{Memory: storetest.NewMemory()}
	srv, ln, nw := memServer(t, replica.Config{Schema: sc, Store: st,
		StoreWriter: store.WriterConfig{FlushInterval: time.Hour, WriteTimeout: time.Minute,
			RetryMin: time.Millisecond, RetryMax: 5 * time.Millisecond, Logger: slog.New(slog.DiscardHandler)}}, nil)
	c, err := client.Dial(context.Background(), nw.Dialer(transport.Config{}), ln.Addr().String(), sc, client.DialConfig{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	tickUntilJoined(t, srv, 1)
	p, _ := persistschema.SpawnPlayer(srv.Tracker())
	srv.Bind(p.Entity(), "p")
	p.SetGold(7)
	srv.Tick()
	st.down.Store(true)
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	err = srv.Shutdown(ctx)
	if took := time.Since(start); took > 30*time.Second {
		t.Errorf("Shutdown took %v with the database down, bounded by a context of 200 ms", took)
	}
	if err == nil {
		t.Error("Shutdown with the change unsaved returned no error")
	}
	select {
	case <-c.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the client was not told")
	}
	if code, reason, _ := c.CloseInfo(); code != transport.CloseGoingAway || reason != "server shutting down" {
		t.Errorf("the client closed with %s %q", code, reason)
	}
}

// TestRestoreRefusesValuesOverLimits: a stored document or an exported
// state holding a value over the server's ClientLimits is refused with
// state.ErrTooLarge, nothing spawned, rather than restored without the
// value (which the next save would then lose for good).
func TestRestoreRefusesValuesOverLimits(t *testing.T) {
	sc := lifeSchema(t)
	st := storetest.NewMemory()
	a := persistServer(t, sc, st, 0)
	defer a.Close()
	hero, _ := a.Tracker().Spawn(sc.Classes[0])
	fillHero(hero, 5)
	inv := hero.Handle().Bag(heroLeaves(sc.Classes[0])["inv"])
	inv.Add(10, inv.Get(9))
	inv.Add(11, inv.Get(9)) // 3 items in the persist bag
	if err := a.Bind(hero, "hero"); err != nil {
		t.Fatal(err)
	}
	a.Tick()
	if err := a.Save(context.Background(), hero); err != nil {
		t.Fatal(err)
	}
	data, err := a.Export(hero)
	if err != nil {
		t.Fatal(err)
	}
	doc, err := st.Load(context.Background(), "hero")
	if err != nil {
		t.Fatal(err)
	}

	for _, max := range []int{2, 3} {
		b, err := replica.NewServer(replica.Config{Schema: sc, Auth: auth.Anonymous{}, Store: st,
			ClientLimits: codec.Limits{MaxContainerLen: max}})
		if err != nil {
			t.Fatal(err)
		}
		imported, ierr := b.Import(data)
		loaded, lerr := b.Load(context.Background(), sc.Classes[0], "hero")
		if max == 3 {
			if ierr != nil || lerr != nil {
				t.Fatalf("within the limit: Import %v, Load %v", ierr, lerr)
			}
			if n := imported.Handle().Bag(heroLeaves(sc.Classes[0])["inv"]).Bag().Len(); n != 3 {
				t.Errorf("imported inv holds %d items, want 3", n)
			}
			if n := loaded.Handle().Bag(heroLeaves(sc.Classes[0])["inv"]).Bag().Len(); n != 3 {
				t.Errorf("loaded inv holds %d items, want 3", n)
			}
		} else {
			if !errors.Is(ierr, state.ErrTooLarge) || !errors.Is(lerr, state.ErrTooLarge) {
				t.Fatalf("over the limit: Import %v, Load %v, want state.ErrTooLarge", ierr, lerr)
			}
			if imported != nil || loaded != nil || b.Tracker().Len() != 0 {
				t.Errorf("a refused restore left %d entities", b.Tracker().Len())
			}
		}
		b.Close() // saves the entity loaded within the limit, as a tick would
		if got, err := st.Load(context.Background(), "hero"); max == 2 && (err != nil || !bytes.Equal(got.Data, doc.Data)) {
			t.Errorf("limit %d: a refused load changed the stored document (%v)", max, err)
		}
	}
}
