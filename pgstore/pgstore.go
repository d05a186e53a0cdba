// Package pgstore is a store.Store in PostgreSQL, through pgx v5: each
// batch is one transaction, documents are upserted in one statement.
//
//	st, err := pgstore.Open(ctx, pgstore.Config{DSN: "postgres://user@db:5432/game"})
//
// Behind PgBouncer in transaction pooling mode, set Config.ExecMode to
// pgx.QueryExecModeExec (or QueryExecModeSimpleProtocol): the default
// caches prepared statements per connection, which such a pooler breaks.
//
// A process killed during a Write may leave a COMMIT that PostgreSQL
// received but has not finished: it still commits after the process is
// gone. Every write transaction therefore holds a shared advisory lock
// named after the store's tables, and Open waits for that lock
// exclusively before it returns, so a server restarted after a crash
// loads nothing older than what its predecessor committed (see
// docs/persistence.md).
package pgstore

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"regexp"
	"sync"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/replicago/replica/store"
)

// Config configures a Store. DSN is required; the zero value of every
// other field selects its default.
type Config struct {
	// DSN is a PostgreSQL connection string, URL or key=value form.
	DSN string
	// Table prefixes the store's tables: <Table>_docs and
	// <Table>_schemas. If empty, "replica". Letters, digits and _.
	Table string
	// ExecMode is how pgx sends queries. If zero, pgx's default
	// (pgx.QueryExecModeCacheStatement, or the DSN's
	// default_query_exec_mode), which prepares and caches statements per
	// connection; use pgx.QueryExecModeExec or
	// pgx.QueryExecModeSimpleProtocol behind PgBouncer's transaction
	// pooling.
	ExecMode pgx.QueryExecMode
	// MaxConns bounds the connection pool. If zero, pgxpool's default.
	MaxConns int32
}

// Store is a store.Store in PostgreSQL.
type Store struct {
	pool *pgxpool.Pool
	q    queries
	mu   sync.RWMutex
	shut bool
}

type queries struct {
	load, scan, schema, putSchema, del, put string
	lock                                    int32 // the advisory lock's second key: the table prefix's hash
}

// lockClass is the first key of the store's advisory locks ("repl"): the
// second is a hash of the table prefix, so stores of different prefixes
// in one database do not wait for each other (a collision only makes
// one wait for the other's writes in flight).
const lockClass = 0x7265706c

// Held by every write transaction (shared, so writers do not wait for
// each other) and taken exclusively by Open, which thereby waits for the
// writes in flight of any process, including one that died before its
// COMMIT completed. Transaction-level locks work behind PgBouncer's
// transaction pooling, unlike session-level ones.
const (
	lockWrite   = `SELECT pg_advisory_xact_lock_shared($1::int4, $2::int4)`
	lockBarrier = `SELECT pg_advisory_xact_lock($1::int4, $2::int4)`
)

var ident = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,40}$`)

// Open connects to the database, creates the store's tables if missing,
// and waits until no write transaction on them is in flight, such as one
// whose process was killed while PostgreSQL was committing it (ctx bounds
// the wait).
func Open(ctx context.Context, cfg Config) (*Store, error) {
	if cfg.Table == "" {
		cfg.Table = "replica"
	}
	if !ident.MatchString(cfg.Table) {
		return nil, fmt.Errorf("pgstore: table prefix %q: want letters, digits and _", cfg.Table)
	}
	pc, err := pgxpool.ParseConfig(cfg.DSN)
	if err != nil {
		return nil, fmt.Errorf("pgstore: %w", err)
	}
	if cfg.ExecMode != 0 {
		pc.ConnConfig.DefaultQueryExecMode = cfg.ExecMode
	}
	if cfg.MaxConns > 0 {
		pc.MaxConns = cfg.MaxConns
	}
	pool, err := pgxpool.NewWithConfig(ctx, pc)
	if err != nil {
		return nil, fmt.Errorf("pgstore: %w", err)
	}
	docs, schemas := cfg.Table+"_docs", cfg.Table+"_schemas"
	// Keys sort byte-wise (COLLATE "C"), as Store.Scan promises.
	for _, ddl := range []string{
		`CREATE TABLE IF NOT EXISTS ` + docs + ` (key TEXT COLLATE "C" PRIMARY KEY, class BIGINT NOT NULL, tick BIGINT NOT NULL, schema BYTEA NOT NULL, data BYTEA NOT NULL)`,
		`CREATE TABLE IF NOT EXISTS ` + schemas + ` (hash BYTEA PRIMARY KEY, descriptor BYTEA NOT NULL)`,
	} {
		if _, err := pool.Exec(ctx, ddl); err != nil {
			pool.Close()
			return nil, fmt.Errorf("pgstore: creating tables: %w", err)
		}
	}
	h := fnv.New32a()
	h.Write([]byte(cfg.Table))
	lock := int32(h.Sum32())
	if err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, lockBarrier, lockClass, lock)
		return err
	}); err != nil {
		pool.Close()
		return nil, fmt.Errorf("pgstore: waiting for earlier writes to end: %w", err)
	}
	s := &Store{pool: pool, q: queries{
		lock:      lock,
		load:      `SELECT class, tick, schema, data FROM ` + docs + ` WHERE key = $1`,
		scan:      `SELECT key, class, tick, schema, data FROM ` + docs + ` WHERE key > $1 ORDER BY key LIMIT 256`,
		schema:    `SELECT descriptor FROM ` + schemas + ` WHERE hash = $1`,
		putSchema: `INSERT INTO ` + schemas + ` (hash, descriptor) VALUES ($1, $2) ON CONFLICT (hash) DO NOTHING`,
		del:       `DELETE FROM ` + docs + ` WHERE key = ANY($1)`,
		put: `INSERT INTO ` + docs + ` (key, class, tick, schema, data)
			SELECT * FROM unnest($1::text[], $2::bigint[], $3::bigint[], $4::bytea[], $5::bytea[])
			ON CONFLICT (key) DO UPDATE SET class = EXCLUDED.class, tick = EXCLUDED.tick, schema = EXCLUDED.schema, data = EXCLUDED.data`,
	}}
	return s, nil
}

func (s *Store) enter() error {
	s.mu.RLock()
	if s.shut {
		s.mu.RUnlock()
		return store.ErrClosed
	}
	return nil
}

// Load implements store.Store.
func (s *Store) Load(ctx context.Context, key string) (store.Document, error) {
	if err := s.enter(); err != nil {
		return store.Document{}, err
	}
	defer s.mu.RUnlock()
	d := store.Document{Key: key}
	var class, tick int64
	var hash []byte
	err := s.pool.QueryRow(ctx, s.q.load, key).Scan(&class, &tick, &hash, &d.Data)
	if errors.Is(err, pgx.ErrNoRows) {
		return store.Document{}, fmt.Errorf("%w: %q", store.ErrNotFound, key)
	}
	if err != nil {
		return store.Document{}, fmt.Errorf("pgstore: load %q: %w", key, err)
	}
	d.Class, d.Tick = uint32(class), uint64(tick)
	copy(d.Schema[:], hash)
	if d.Data == nil {
		d.Data = []byte{}
	}
	return d, nil
}

// Write implements store.Store: one transaction per batch.
func (s *Store) Write(ctx context.Context, b *store.Batch) error {
	if err := s.enter(); err != nil {
		return err
	}
	defer s.mu.RUnlock()
	if err := b.Check(); err != nil {
		return err
	}
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, lockWrite, lockClass, s.q.lock); err != nil {
			return fmt.Errorf("lock: %w", err)
		}
		for _, sc := range b.Schemas {
			if _, err := tx.Exec(ctx, s.q.putSchema, sc.Hash[:], sc.Descriptor); err != nil {
				return fmt.Errorf("storing schema: %w", err)
			}
		}
		if len(b.Deletes) > 0 {
			if _, err := tx.Exec(ctx, s.q.del, b.Deletes); err != nil {
				return fmt.Errorf("delete: %w", err)
			}
		}
		if n := len(b.Puts); n > 0 {
			keys := make([]string, n)
			classes := make([]int64, n)
			ticks := make([]int64, n)
			hashes := make([][]byte, n)
			data := make([][]byte, n)
			for i := range b.Puts {
				d := &b.Puts[i]
				keys[i], classes[i], ticks[i], hashes[i], data[i] = d.Key, int64(d.Class), int64(d.Tick), d.Schema[:], d.Data
				if data[i] == nil {
					data[i] = []byte{}
				}
			}
			if _, err := tx.Exec(ctx, s.q.put, keys, classes, ticks, hashes, data); err != nil {
				return fmt.Errorf("put: %w", err)
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("pgstore: write: %w", err)
	}
	return nil
}

// Scan implements store.Store, reading pages of documents in key order.
func (s *Store) Scan(ctx context.Context, fn func(store.Document) error) error {
	if err := s.enter(); err != nil {
		return err
	}
	defer s.mu.RUnlock()
	after := ""
	for {
		rows, err := s.pool.Query(ctx, s.q.scan, after)
		if err != nil {
			return fmt.Errorf("pgstore: scan: %w", err)
		}
		page, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (store.Document, error) {
			var d store.Document
			var class, tick int64
			var hash []byte
			err := row.Scan(&d.Key, &class, &tick, &hash, &d.Data)
			d.Class, d.Tick = uint32(class), uint64(tick)
			copy(d.Schema[:], hash)
			if d.Data == nil {
				d.Data = []byte{}
			}
			return d, err
		})
		if err != nil {
			return fmt.Errorf("pgstore: scan: %w", err)
		}
		for _, d := range page {
			if err := fn(d); err != nil {
				return err
			}
		}
		if len(page) < 256 {
			return nil
		}
		after = page[len(page)-1].Key
	}
}

// Schema implements store.Store.
func (s *Store) Schema(ctx context.Context, h store.SchemaHash) ([]byte, error) {
	if err := s.enter(); err != nil {
		return nil, err
	}
	defer s.mu.RUnlock()
	var desc []byte
	err := s.pool.QueryRow(ctx, s.q.schema, h[:]).Scan(&desc)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("%w: schema %s", store.ErrNotFound, h)
	}
	if err != nil {
		return nil, fmt.Errorf("pgstore: schema %s: %w", h, err)
	}
	return desc, nil
}

// Close implements store.Store: it waits for operations in progress and
// closes the pool.
func (s *Store) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.shut {
		s.shut = true
		s.pool.Close()
	}
	return nil
}
