// Package storetest is the conformance suite of store.Store
// implementations, in the manner of testing/slogtest:
//
//	func TestConformance(t *testing.T) {
//		storetest.Run(t, func(t *testing.T) store.Store { return openFreshStore(t) })
//	}
//
// The factory returns a new, empty store each call, isolated from every
// other (a fresh table or key prefix), so that packages testing against
// one database server in parallel do not collide. The suite closes the
// stores it is given.
package storetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/replicago/replica/schema"
	"github.com/replicago/replica/state"
	"github.com/replicago/replica/store"
)

// Run runs the conformance suite against the stores newStore returns.
func Run(t *testing.T, newStore func(t *testing.T) store.Store) {
	tests := []struct {
		name string
		fn   func(t *testing.T, s store.Store)
	}{
		{"RoundTrip", testRoundTrip},
		{"NotFound", testNotFound},
		{"Overwrite", testOverwrite},
		{"Delete", testDelete},
		{"BatchAtomicity", testAtomicity},
		{"Scan", testScan},
		{"ConcurrentReaders", testConcurrent},
		{"Large", testLarge},
		{"Evolution", testEvolution},
		{"Close", testClose},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := newStore(t)
			defer s.Close()
			tc.fn(t, s)
		})
	}
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return c
}

func doc(key string, tick uint64, data string) store.Document {
	return store.Document{Key: key, Class: uint32(len(key)), Tick: tick, Schema: store.HashDescriptor([]byte("s")), Data: []byte(data)}
}

func write(t *testing.T, s store.Store, b *store.Batch) {
	t.Helper()
	if err := s.Write(ctx(t), b); err != nil {
		t.Fatalf("Write: %v", err)
	}
}

func mustLoad(t *testing.T, s store.Store, want store.Document) {
	t.Helper()
	got, err := s.Load(ctx(t), want.Key)
	if err != nil {
		t.Fatalf("Load(%q): %v", want.Key, err)
	}
	if !equal(got, want) {
		t.Fatalf("Load(%q) = %s, want %s", want.Key, show(got), show(want))
	}
}

func mustMiss(t *testing.T, s store.Store, key string) {
	t.Helper()
	if d, err := s.Load(ctx(t), key); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("Load(%q) = %s, %v; want ErrNotFound", key, show(d), err)
	}
}

func equal(a, b store.Document) bool {
	return a.Key == b.Key && a.Class == b.Class && a.Tick == b.Tick && a.Schema == b.Schema && bytes.Equal(a.Data, b.Data)
}

func show(d store.Document) string {
	data := string(d.Data)
	if len(data) > 40 {
		data = data[:40] + "…"
	}
	return fmt.Sprintf("{%q class %d tick %d schema %s data %q (%d bytes)}", d.Key, d.Class, d.Tick, d.Schema, data, len(d.Data))
}

func testRoundTrip(t *testing.T, s store.Store) {
	docs := []store.Document{
		doc("player-1", 10, "\x00\x01binary\xff"),
		doc("player-2", 1<<62, ""),
		doc("ключ/with spaces:and:colons", 3, "x"),
		{Key: "max", Class: 1<<32 - 1, Tick: 1<<64 - 1, Schema: store.SchemaHash{0xff, 1, 2}, Data: []byte{0}},
	}
	write(t, s, &store.Batch{Puts: docs})
	for _, d := range docs {
		mustLoad(t, s, d)
	}
	// The loaded data is the caller's.
	d, _ := s.Load(ctx(t), "player-1")
	d.Data[0] = 'Z'
	mustLoad(t, s, docs[0])
}

func testNotFound(t *testing.T, s store.Store) {
	mustMiss(t, s, "nobody")
	write(t, s, &store.Batch{Puts: []store.Document{doc("somebody", 1, "a")}})
	mustMiss(t, s, "nobody")
	mustMiss(t, s, "somebod")
	mustMiss(t, s, "somebody2")
	if _, err := s.Schema(ctx(t), store.HashDescriptor([]byte("none"))); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("Schema of an unknown hash: %v, want ErrNotFound", err)
	}
}

func testOverwrite(t *testing.T, s store.Store) {
	for i := range 5 {
		write(t, s, &store.Batch{Puts: []store.Document{doc("p", uint64(i), strings.Repeat("v", 5-i))}})
		mustLoad(t, s, doc("p", uint64(i), strings.Repeat("v", 5-i)))
	}
}

func testDelete(t *testing.T, s store.Store) {
	write(t, s, &store.Batch{Puts: []store.Document{doc("a", 1, "a"), doc("b", 1, "b"), doc("c", 1, "c")}})
	write(t, s, &store.Batch{Deletes: []string{"a", "never-stored"}})
	mustMiss(t, s, "a")
	mustLoad(t, s, doc("b", 1, "b"))
	// Deletions come before the documents of the same batch.
	write(t, s, &store.Batch{Deletes: []string{"b", "c"}, Puts: []store.Document{doc("b", 2, "b2")}})
	mustLoad(t, s, doc("b", 2, "b2"))
	mustMiss(t, s, "c")
	var keys []string
	if err := s.Scan(ctx(t), func(d store.Document) error { keys = append(keys, d.Key); return nil }); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(keys, []string{"b"}) {
		t.Fatalf("Scan after deletions: %q, want [b]", keys)
	}
}

func testAtomicity(t *testing.T, s store.Store) {
	write(t, s, &store.Batch{Puts: []store.Document{doc("keep", 1, "old")}})
	bad := []store.Batch{
		{Deletes: []string{"keep"}, Puts: []store.Document{doc("n1", 2, "x"), doc("keep", 2, "new"), doc("", 2, "bad key")}},
		{Deletes: []string{"keep"}, Puts: []store.Document{doc("n1", 2, "x"), doc("n2", 2, "y"), doc("n1", 3, "twice")}},
		{Deletes: []string{"keep", "bad\x00key"}, Puts: []store.Document{doc("n1", 2, "x")}},
		{Puts: []store.Document{doc("n1", 2, "x"), doc(strings.Repeat("k", store.MaxKeyLen+1), 2, "long key")}},
		{Puts: []store.Document{doc("n1", 2, "x"), doc("bad utf8 \xff", 2, "x")}},
		{Schemas: []store.SchemaRecord{{Hash: store.HashDescriptor([]byte("a")), Descriptor: []byte("b")}}, Puts: []store.Document{doc("n1", 2, "x")}},
	}
	for i := range bad {
		if err := s.Write(ctx(t), &bad[i]); !errors.Is(err, store.ErrInvalid) {
			t.Fatalf("invalid batch %d: Write = %v, want ErrInvalid", i, err)
		}
	}
	// A canceled context fails the batch, whole.
	c, cancel := context.WithCancel(context.Background())
	cancel()
	if err := s.Write(c, &store.Batch{Deletes: []string{"keep"}, Puts: []store.Document{doc("n1", 2, "x")}}); err == nil {
		t.Fatal("Write with a canceled context succeeded")
	}
	mustLoad(t, s, doc("keep", 1, "old"))
	mustMiss(t, s, "n1")
	mustMiss(t, s, "n2")
	var n int
	if err := s.Scan(ctx(t), func(store.Document) error { n++; return nil }); err != nil || n != 1 {
		t.Fatalf("Scan after failed batches: %d documents, %v; want 1", n, err)
	}
	if _, err := s.Schema(ctx(t), store.HashDescriptor([]byte("a"))); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("a failed batch stored its schema: %v", err)
	}
}

func testScan(t *testing.T, s store.Store) {
	r := rand.New(rand.NewPCG(1, 2))
	want := map[string]store.Document{}
	var b store.Batch
	for i := range 300 {
		k := fmt.Sprintf("p-%d-%x", r.IntN(1000), i)
		if i%50 == 0 {
			k = "ü-" + k // multi-byte keys sort by bytes
		}
		d := doc(k, uint64(i), strconv.Itoa(i))
		want[k] = d
		b.Puts = append(b.Puts, d)
	}
	write(t, s, &b)
	var keys []string
	err := s.Scan(ctx(t), func(d store.Document) error {
		if w, ok := want[d.Key]; !ok || !equal(d, w) {
			return fmt.Errorf("Scan gave %s", show(d))
		}
		keys = append(keys, d.Key)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(keys) != len(want) || !slices.IsSorted(keys) || len(slices.Compact(slices.Clone(keys))) != len(keys) {
		t.Fatalf("Scan gave %d keys (sorted %v), want each of %d once, in order", len(keys), slices.IsSorted(keys), len(want))
	}
	stop := errors.New("stop")
	n := 0
	if err := s.Scan(ctx(t), func(store.Document) error { n++; return stop }); err != stop || n != 1 {
		t.Fatalf("Scan stopped by its callback: %v after %d calls, want the callback's error after 1", err, n)
	}
}

func testConcurrent(t *testing.T, s store.Store) {
	const rounds = 60
	write(t, s, &store.Batch{Puts: []store.Document{doc("x", 0, "0"), doc("y", 0, "0")}})
	var wg sync.WaitGroup
	done := make(chan struct{})
	errs := make(chan error, 8)
	for r := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-done:
					return
				default:
				}
				k := "x"
				if r%2 == 1 {
					k = "y"
				}
				d, err := s.Load(context.Background(), k)
				if err == nil && string(d.Data) != strconv.FormatUint(d.Tick, 10)+strings.Repeat("-", int(d.Tick%7)) {
					err = fmt.Errorf("torn document %s", show(d))
				}
				if err == nil && r == 3 {
					err = s.Scan(context.Background(), func(store.Document) error { return nil })
				}
				if err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	for i := uint64(1); i <= rounds; i++ {
		data := strconv.FormatUint(i, 10) + strings.Repeat("-", int(i%7))
		write(t, s, &store.Batch{Puts: []store.Document{doc("x", i, data), doc("y", i, data)}})
	}
	close(done)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	last := strconv.FormatUint(rounds, 10) + strings.Repeat("-", rounds%7)
	mustLoad(t, s, doc("x", rounds, last))
	mustLoad(t, s, doc("y", rounds, last))
}

func testLarge(t *testing.T, s store.Store) {
	big := make([]byte, 4<<20)
	for i := range big {
		big[i] = byte(i * 7)
	}
	d := store.Document{Key: "big", Class: 1, Tick: 1, Data: big}
	var b store.Batch
	b.Puts = append(b.Puts, d)
	for i := range 2000 {
		b.Puts = append(b.Puts, doc(fmt.Sprintf("many-%04d", i), uint64(i), strings.Repeat("m", i%300)))
	}
	write(t, s, &b)
	mustLoad(t, s, d)
	mustLoad(t, s, b.Puts[1500])
	n := 0
	if err := s.Scan(ctx(t), func(store.Document) error { n++; return nil }); err != nil || n != 2001 {
		t.Fatalf("Scan: %d documents, %v; want 2001", n, err)
	}
}

// testEvolution writes a document with a version 1 schema and reads it
// with version 2, which appended a field and deprecated another; the
// descriptor stored with it names its fields without the game's code.
func testEvolution(t *testing.T, s store.Store) {
	item := func() *schema.Struct {
		return &schema.Struct{Name: "item", Fields: []*schema.Field{
			{ID: 1, Name: "kind", Type: schema.Type{Kind: schema.Uint16}},
			{ID: 2, Name: "count", Type: schema.Type{Kind: schema.Int16}},
		}}
	}
	v1 := &schema.Struct{Name: "player", Class: true, ID: 2, Fields: []*schema.Field{
		{ID: 1, Name: "gold", Type: schema.Type{Kind: schema.Int32}, Life: schema.LifePersist},
		{ID: 2, Name: "title", Type: schema.Type{Kind: schema.String}, Life: schema.LifePersist},
		{ID: 3, Name: "inv", Type: schema.Type{Kind: schema.Bag, Key: schema.Uint8, Struct: item()}, Life: schema.LifePersist},
		{ID: 4, Name: "x", Type: schema.Type{Kind: schema.Float32}},
	}}
	v2 := &schema.Struct{Name: "player", Class: true, ID: 2, Fields: []*schema.Field{
		{ID: 1, Name: "gold", Type: schema.Type{Kind: schema.Int64}, Life: schema.LifePersist}, // widened
		{ID: 2, Name: "title", Type: schema.Type{Kind: schema.String}, Life: schema.LifePersist, Deprecated: true},
		{ID: 3, Name: "inv", Type: schema.Type{Kind: schema.Bag, Key: schema.Uint8, Struct: item()}, Life: schema.LifePersist},
		{ID: 4, Name: "x", Type: schema.Type{Kind: schema.Float32}},
		{ID: 5, Name: "level", Type: schema.Type{Kind: schema.Uint8}, Life: schema.LifePersist},
	}}
	s1, err := schema.New(v1)
	if err != nil {
		t.Fatal(err)
	}
	s2, err := schema.New(v2)
	if err != nil {
		t.Fatal(err)
	}
	c1, c2 := store.NewCodec(s1), store.NewCodec(s2)

	e, _ := state.NewTracker(s1).Spawn(v1)
	e.SetNum(0, 1495)
	e.Handle().SetStr(1, "the bold")
	it := state.NewValue(v1.Fields[2].Type.Struct)
	it.SetNum(0, 17)
	it.SetNum(1, uint64(1<<64-3)) // -3
	e.Handle().Bag(2).Add(1, it)
	e.SetNum(3, 0x40490fdb) // x: not persist
	write(t, s, &store.Batch{Schemas: []store.SchemaRecord{c1.SchemaRecord()}, Puts: []store.Document{c1.Document("player-7", 99, e)}})

	got, err := s.Load(ctx(t), "player-7")
	if err != nil {
		t.Fatal(err)
	}
	e2, _ := state.NewTracker(s2).Spawn(v2)
	if err := c2.Restore(e2, got); err != nil {
		t.Fatalf("restoring a v1 document with v2: %v", err)
	}
	item2 := e2.Bag(v2.Fields[2].Obj).Get(1)
	switch {
	case int64(e2.Num(v2.Fields[0].Num)) != 1495:
		t.Errorf("gold = %d, want 1495", int64(e2.Num(v2.Fields[0].Num)))
	case e2.Num(v2.Fields[4].Num) != 0:
		t.Errorf("appended level = %d, want 0", e2.Num(v2.Fields[4].Num))
	case e2.Num(v2.Fields[3].Num) != 0:
		t.Errorf("x, not persist, = %#x, want 0", e2.Num(v2.Fields[3].Num))
	case item2 == nil || item2.Num(item2.Type().Fields[0].Num) != 17 || int16(item2.Num(item2.Type().Fields[1].Num)) != -3:
		t.Errorf("inventory item 1 not restored")
	}

	desc, err := s.Schema(ctx(t), got.Schema)
	if err != nil {
		t.Fatalf("Schema(%s): %v", got.Schema, err)
	}
	ds, err := schema.DecodeDescriptor(desc)
	if err != nil {
		t.Fatal(err)
	}
	js, err := store.AppendJSON(nil, got, ds)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"key":"player-7","class":"player","class_id":2,"tick":99,"schema":"` + c1.Hash().String() +
		`","fields":{"gold":1495,"title":"the bold","inv":{"1":{"kind":17,"count":-3}}}}`
	if string(js) != want {
		t.Errorf("JSON dump:\n%s\nwant\n%s", js, want)
	}
	// Storing the same schema again is harmless.
	write(t, s, &store.Batch{Schemas: []store.SchemaRecord{c1.SchemaRecord(), c2.SchemaRecord()}})
	if d, err := s.Schema(ctx(t), c1.Hash()); err != nil || !bytes.Equal(d, desc) {
		t.Fatalf("Schema after a second store: %v", err)
	}
}

func testClose(t *testing.T, s store.Store) {
	write(t, s, &store.Batch{Puts: []store.Document{doc("a", 1, "a")}})
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if _, err := s.Load(ctx(t), "a"); !errors.Is(err, store.ErrClosed) {
		t.Errorf("Load after Close: %v, want ErrClosed", err)
	}
	if err := s.Write(ctx(t), &store.Batch{Puts: []store.Document{doc("b", 1, "b")}}); !errors.Is(err, store.ErrClosed) {
		t.Errorf("Write after Close: %v, want ErrClosed", err)
	}
	if err := s.Scan(ctx(t), func(store.Document) error { return nil }); !errors.Is(err, store.ErrClosed) {
		t.Errorf("Scan after Close: %v, want ErrClosed", err)
	}
	if _, err := s.Schema(ctx(t), store.SchemaHash{}); !errors.Is(err, store.ErrClosed) {
		t.Errorf("Schema after Close: %v, want ErrClosed", err)
	}
	if err := s.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}
