package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/redis/go-redis/v9"

	"github.com/replicago/replica/internal/persistschema"
	"github.com/replicago/replica/sqlitestore"
	"github.com/replicago/replica/state"
	"github.com/replicago/replica/store"
)

// TestStoreDump writes players to an SQLite file and dumps them as
// JSON, fields named by the stored descriptor.
func TestStoreDump(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "game.db")
	st, err := sqlitestore.Open(ctx, sqlitestore.Config{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	codec := store.NewCodec(persistschema.Schema())
	tr := state.NewTracker(persistschema.Schema())
	w, _ := store.NewWriter(store.WriterConfig{Store: st, Codec: codec})
	w.Begin(9)
	for i, name := range []string{"bob", "alice"} {
		p, _ := persistschema.SpawnPlayer(tr)
		p.SetGold(int32(100 * (i + 1)))
		p.SetLevel(7)
		p.SetX(3) // not persist
		for _, k := range []uint8{30, 5, 1, 200} {
			it := persistschema.NewItem()
			it.SetKind(12 + uint16(k))
			it.SetCount(-2)
			p.Inv().Add(k, it)
		}
		w.Put(name, p.Entity())
	}
	w.End()
	if err := w.Close(ctx); err != nil {
		t.Fatal(err)
	}
	st.Close()

	st2, err := openStore(ctx, "sqlite", path, "")
	if err != nil {
		t.Fatal(err)
	}
	defer st2.Close()
	var out bytes.Buffer
	if err := dump(ctx, st2, "", false, &out); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	hash := codec.Hash().String()
	want := []string{
		`{"key":"alice","class":"Player","class_id":1,"tick":9,"schema":"` + hash + `","fields":{"gold":200,"level":7,"inv":{"1":{"kind":13,"count":-2},"5":{"kind":17,"count":-2},"30":{"kind":42,"count":-2},"200":{"kind":212,"count":-2}}}}`,
		`{"key":"bob","class":"Player","class_id":1,"tick":9,"schema":"` + hash + `","fields":{"gold":100,"level":7,"inv":{"1":{"kind":13,"count":-2},"5":{"kind":17,"count":-2},"30":{"kind":42,"count":-2},"200":{"kind":212,"count":-2}}}}`,
	}
	if len(lines) != 2 || lines[0] != want[0] || lines[1] != want[1] {
		t.Fatalf("dump:\n%s\nwant\n%s", out.String(), strings.Join(want, "\n"))
	}
	out.Reset()
	if err := dump(ctx, st2, "bob", true, &out); err != nil {
		t.Fatal(err)
	}
	var v map[string]any
	if err := json.Unmarshal(out.Bytes(), &v); err != nil || v["key"] != "bob" || !strings.Contains(out.String(), "\n  ") {
		t.Fatalf("dump -key bob -pretty: %v\n%s", err, out.String())
	}
	if err := dump(ctx, st2, "carol", false, &out); err == nil {
		t.Fatal("dump of a missing key succeeded")
	}
	if err := runDump([]string{"-store", "sqlite", "-dsn", filepath.Join(t.TempDir(), "missing.db")}); err == nil {
		t.Fatal("dump of a missing database file succeeded")
	}
}

// TestStoreDumpMistakes: a dump of a database that is not a store, or with
// a mistyped -table, fails and adds no table to it; a damaged document is
// reported without hiding the others.
func TestStoreDumpMistakes(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "game.db")
	st, err := sqlitestore.Open(ctx, sqlitestore.Config{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	codec := store.NewCodec(persistschema.Schema())
	tr := state.NewTracker(persistschema.Schema())
	p, _ := persistschema.SpawnPlayer(tr)
	p.SetGold(5)
	good := codec.Document("good", 3, p.Entity())
	bad := store.Document{Key: "bad", Class: 1, Schema: good.Schema, Data: []byte{0xff, 0xfe}}
	if err := st.Write(ctx, &store.Batch{Puts: []store.Document{bad, good}}); err != nil {
		t.Fatal(err)
	}
	st.Close()

	junk := filepath.Join(t.TempDir(), "notes.txt")
	if err := os.WriteFile(junk, bytes.Repeat([]byte("not a database\n"), 100), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"-dsn", path, "-table", "typo"},
		{"-dsn", junk},
	} {
		if err := runDump(args); err == nil || !strings.Contains(err.Error(), "no table") && !strings.Contains(err.Error(), "not a database") {
			t.Errorf("%q: %v, want an error naming the mistake", args, err)
		}
	}
	if err := checkTables(ctx, "sqlite", path, "typo"); err == nil || !strings.Contains(err.Error(), "has no table typo_docs") {
		t.Errorf("checkTables -table typo: %v", err)
	}
	if err := runDump([]string{"-dsn", path, "-table", "a;b"}); err == nil || !strings.Contains(err.Error(), "want letters, digits and _") {
		t.Errorf("-table a;b: %v, want the store's rule", err)
	}
	if err := checkTables(ctx, "sqlite", path, ""); err != nil {
		t.Errorf("checkTables of the store: %v", err)
	}
	if err := checkTables(ctx, "sqlite", path, "typo"); err == nil {
		t.Error("the failed dump created the typo tables")
	}

	st2, err := openStore(ctx, "sqlite", path, "")
	if err != nil {
		t.Fatal(err)
	}
	defer st2.Close()
	var out bytes.Buffer
	err = dump(ctx, st2, "", false, &out)
	if err == nil || !strings.Contains(err.Error(), "1 documents could not be read") {
		t.Errorf("dump with a damaged document: %v", err)
	}
	if !strings.HasPrefix(out.String(), `{"key":"good"`) || strings.Count(out.String(), "\n") != 1 {
		t.Errorf("dump with a damaged document printed:\n%s", out.String())
	}
	if err := dump(ctx, st2, "bad", false, &out); err == nil || !strings.Contains(err.Error(), `document "bad"`) {
		t.Errorf("dump -key bad: %v", err)
	}
}

// TestBenchPersist runs the persist scenario briefly against SQLite: the
// store must end up equal to the world.
func TestBenchPersist(t *testing.T) {
	res, err := benchPersist("sqlite", t.TempDir(), 500*time.Millisecond, 100*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if !res.Verified {
		t.Fatalf("not verified: %s", res.VerifyError)
	}
	if res.Ticks != 10 || res.ChangedEntities == 0 || res.Flushes == 0 || res.EntitiesWritten == 0 {
		t.Fatalf("result %+v", res)
	}
}

// TestStoreDumpPostgresNoTables: a dump with a -table prefix the database
// does not hold fails, names neither the password nor the DSN, and creates
// nothing.
func TestStoreDumpPostgresNoTables(t *testing.T) {
	if os.Getenv("REPLICA_SKIP_SERVICES") != "" {
		t.Skip("REPLICA_SKIP_SERVICES is set: no PostgreSQL")
	}
	dsn := os.Getenv("REPLICA_PG_DSN")
	if dsn == "" {
		dsn = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"
	}
	ctx := context.Background()
	table := fmt.Sprintf("dumpcheck%d", time.Now().UnixNano())
	err := runDump([]string{"-store", "postgres", "-dsn", dsn, "-table", table})
	if err == nil || !strings.Contains(err.Error(), "has no table "+table+"_docs") || strings.Contains(err.Error(), dsn) {
		t.Fatalf("dump of a missing prefix: %v", err)
	}
	c, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	var created bool
	if err := c.QueryRow(ctx, `SELECT to_regclass($1) IS NOT NULL OR to_regclass($2) IS NOT NULL`, table+"_docs", table+"_schemas").Scan(&created); err != nil {
		t.Fatal(err)
	}
	if created {
		c.Exec(ctx, `DROP TABLE IF EXISTS `+table+`_docs, `+table+`_schemas`)
		t.Fatal("the failed dump created the store's tables")
	}
}

// TestStoreDumpRedisPrefix: a dump of a Redis prefix that holds no
// document fails, with a hint when the prefix lacks its colon, instead of
// printing nothing; the right prefix dumps.
func TestStoreDumpRedisPrefix(t *testing.T) {
	if os.Getenv("REPLICA_SKIP_SERVICES") != "" {
		t.Skip("REPLICA_SKIP_SERVICES is set: no Redis")
	}
	ctx := context.Background()
	prefix := fmt.Sprintf("dumpcheck%d", time.Now().UnixNano())
	st, err := openStore(ctx, "redis", "", prefix+":")
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	codec := store.NewCodec(persistschema.Schema())
	p, _ := persistschema.SpawnPlayer(state.NewTracker(persistschema.Schema()))
	if err := st.Write(ctx, &store.Batch{Puts: []store.Document{codec.Document("p", 1, p.Entity())}}); err != nil {
		t.Fatal(err)
	}
	defer func() { // the test's keys, the store's index and schemas with them
		c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379"})
		defer c.Close()
		if keys, err := c.Keys(ctx, prefix+":*").Result(); err == nil && len(keys) > 0 {
			c.Del(ctx, keys...)
		}
	}()
	if err := runDump([]string{"-store", "redis", "-table", prefix}); err == nil || !strings.Contains(err.Error(), "no document under the prefix") || !strings.Contains(err.Error(), "-table "+prefix+":?") {
		t.Errorf("dump of the prefix without its colon: %v", err)
	}
	if err := checkTables(ctx, "redis", "", prefix+":"); err != nil {
		t.Errorf("the store's prefix: %v", err)
	}
}
