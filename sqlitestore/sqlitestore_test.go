package sqlitestore_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/replicago/replica/sqlitestore"
	"github.com/replicago/replica/store"
	"github.com/replicago/replica/store/storetest"
)

func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Store {
		s, err := sqlitestore.Open(context.Background(), sqlitestore.Config{Path: filepath.Join(t.TempDir(), "test.db")})
		if err != nil {
			t.Fatal(err)
		}
		return s
	})
}

// TestReopen: what was written is there after the store is reopened,
// and two table prefixes in one file are separate stores.
func TestReopen(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "game.db")
	s, err := sqlitestore.Open(ctx, sqlitestore.Config{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	d := store.Document{Key: "p1", Class: 1, Tick: 5, Data: []byte{1, 2, 3}}
	if err := s.Write(ctx, &store.Batch{Puts: []store.Document{d}}); err != nil {
		t.Fatal(err)
	}
	s.Close()
	s, err = sqlitestore.Open(ctx, sqlitestore.Config{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if got, err := s.Load(ctx, "p1"); err != nil || got.Tick != 5 || string(got.Data) != "\x01\x02\x03" {
		t.Fatalf("after reopening: %+v, %v", got, err)
	}
	other, err := sqlitestore.Open(ctx, sqlitestore.Config{Path: path, Table: "other"})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if _, err := other.Load(ctx, "p1"); err == nil {
		t.Fatal("a second table prefix sees the first one's documents")
	}
	if _, err := sqlitestore.Open(ctx, sqlitestore.Config{Path: path, Table: "bad; DROP"}); err == nil {
		t.Fatal("a table prefix that is not an identifier was accepted")
	}
}
