package pgstore_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"testing"

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
	return s
}

func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Store { return open(t, 0) })
}

// TestConformanceExecMode runs the suite in the mode PgBouncer's
// transaction pooling needs: no prepared statements kept.
func TestConformanceExecMode(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Store { return open(t, pgx.QueryExecModeExec) })
}
