package pgstore_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/replicago/replica/pgstore"
	"github.com/replicago/replica/store"
	"github.com/replicago/replica/store/storetest"
)

// dsn is the test database: $REPLICA_PG_DSN, or the CI machine's.
func dsn() string {
	if d := os.Getenv("REPLICA_PG_DSN"); d != "" {
		return d
	}
	return "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"
}

// open opens a store with tables of a prefix unique to this call, dropped
// when the test ends.
func open(t *testing.T, mode pgx.QueryExecMode) store.Store {
	s, _ := openTable(t, mode)
	return s
}

// openTable is open, also returning the table prefix.
func openTable(t *testing.T, mode pgx.QueryExecMode) (*pgstore.Store, string) {
	t.Helper()
	if os.Getenv("REPLICA_SKIP_SERVICES") != "" {
		t.Skip("REPLICA_SKIP_SERVICES is set: no PostgreSQL")
	}
	ctx := context.Background()
	var b [6]byte
	rand.Read(b[:])
	table := "t" + hex.EncodeToString(b[:])
	s, err := pgstore.Open(ctx, pgstore.Config{DSN: dsn(), Table: table, ExecMode: mode})
	if err != nil {
		t.Fatalf("PostgreSQL at %s (start it, or set REPLICA_PG_DSN): %v", dsn(), err)
	}
	t.Cleanup(func() {
		c, err := pgx.Connect(ctx, dsn())
		if err != nil {
			t.Errorf("dropping tables: %v", err)
			return
		}
		defer c.Close(ctx)
		if _, err := c.Exec(ctx, `DROP TABLE IF EXISTS `+table+`_docs, `+table+`_schemas`); err != nil {
			t.Errorf("dropping tables: %v", err)
		}
	})
	t.Cleanup(func() { s.Close() })
	return s, table
}

func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Store { return open(t, 0) })
}

// TestConformanceExecMode runs the suite in the mode PgBouncer's
// transaction pooling needs: no prepared statements kept.
func TestConformanceExecMode(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Store { return open(t, pgx.QueryExecModeExec) })
}

// TestOpenWaitsForWritesInFlight: a store opened while another process's
// write transaction is still in flight (here held up by a row lock; after
// a crash, a COMMIT PostgreSQL received and is still completing) returns
// only once that write has ended, so that it loads what was committed.
func TestOpenWaitsForWritesInFlight(t *testing.T) {
	for _, mode := range []pgx.QueryExecMode{0, pgx.QueryExecModeExec} {
		name := "default"
		if mode != 0 {
			name = mode.String()
		}
		t.Run(name, func(t *testing.T) { testOpenWaits(t, mode) })
	}
}

func testOpenWaits(t *testing.T, mode pgx.QueryExecMode) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	a, table := openTable(t, mode)
	doc := func(data string) store.Document {
		return store.Document{Key: "k", Class: 1, Tick: uint64(len(data)), Schema: store.HashDescriptor([]byte("s")), Data: []byte(data)}
	}
	if err := a.Write(ctx, &store.Batch{Puts: []store.Document{doc("v1")}}); err != nil {
		t.Fatal(err)
	}

	// Hold the document's row, so that the next write waits inside its
	// transaction.
	raw, err := pgx.Connect(ctx, dsn())
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close(context.Background())
	tx, err := raw.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(context.Background())
	if _, err := tx.Exec(ctx, `SELECT key FROM `+table+`_docs WHERE key = 'k' FOR UPDATE`); err != nil {
		t.Fatal(err)
	}
	// pg_stat_activity read inside tx would show the snapshot of its
	// first read: the waits are watched from a connection of their own.
	watch, err := pgx.Connect(ctx, dsn())
	if err != nil {
		t.Fatal(err)
	}
	defer watch.Close(context.Background())
	wrote := make(chan error, 1)
	go func() { wrote <- a.Write(ctx, &store.Batch{Puts: []store.Document{doc("v2-longer")}}) }()
	waitFor(t, ctx, watch, "transactionid", 1)

	opened := make(chan *pgstore.Store, 1)
	go func() {
		b, err := pgstore.Open(ctx, pgstore.Config{DSN: dsn(), Table: table, ExecMode: mode})
		if err != nil {
			t.Error(err)
		}
		opened <- b
	}()
	// Open is waiting for the write's advisory lock, not done.
	waitFor(t, ctx, watch, "advisory", 1)
	select {
	case <-opened:
		t.Fatal("Open returned while a write was in flight")
	default:
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-wrote; err != nil {
		t.Fatal(err)
	}
	b := <-opened
	if b == nil {
		return
	}
	defer b.Close()
	d, err := b.Load(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	if string(d.Data) != "v2-longer" {
		t.Fatalf("loaded %q after Open, want the write in flight at Open: %q", d.Data, "v2-longer")
	}
}

// waitFor waits until n backends wait on a lock of the given kind
// (pg_stat_activity's wait_event: transactionid for a row held by another
// transaction, advisory for an advisory lock).
func waitFor(t *testing.T, ctx context.Context, c *pgx.Conn, event string, n int) {
	t.Helper()
	for {
		var got int
		err := c.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock' AND wait_event = $1`, event).Scan(&got)
		if err != nil {
			t.Fatalf("waiting for %d backends waiting on %s: %v", n, event, err)
		}
		if got >= n {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
}
