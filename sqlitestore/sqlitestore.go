// Package sqlitestore is the embedded store.Store of replica, the default:
// an SQLite database file through modernc.org/sqlite, pure Go (no cgo).
//
// SQLite allows one writer at a time, so every write goes through one
// goroutine that owns the only write connection and runs each batch as one
// IMMEDIATE transaction; reads use a pool of read-only connections, which
// the write-ahead log lets proceed during writes.
//
//	st, err := sqlitestore.Open(ctx, sqlitestore.Config{Path: "game.db"})
package sqlitestore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"sync"
	"time"

	_ "modernc.org/sqlite" // the "sqlite" database/sql driver

	"github.com/replicago/replica/store"
)

// Config configures a Store. Path is required; the zero value of every
// other field selects its default.
type Config struct {
	// Path is the database file, created if missing.
	Path string
	// Table prefixes the store's tables: <Table>_docs and
	// <Table>_schemas. If empty, "replica". Letters, digits and _.
	Table string
	// BusyTimeout is how long a connection waits for a lock held by
	// another process before failing. If zero, 5 seconds.
	BusyTimeout time.Duration
	// Synchronous is SQLite's synchronous pragma: "FULL" (the default)
	// makes each committed batch durable against power loss; "NORMAL"
	// only against a crash of the process, and writes faster.
	Synchronous string
	// Readers is the number of read connections. If zero, 4.
	Readers int
}

// Store is a store.Store in an SQLite database.
type Store struct {
	cfg    Config
	w, r   *sql.DB
	docs   string // table names
	scheme string
	q      queries

	reqs chan request
	mu   sync.RWMutex // held for reading by every operation, for writing by Close
	done chan struct{}
	shut bool
}

type queries struct {
	load, scan, schema, putSchema, del, put string
}

type request struct {
	ctx   context.Context
	batch *store.Batch
	reply chan error
}

var ident = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,40}$`)

// Open opens (creating if needed) the database at cfg.Path.
func Open(ctx context.Context, cfg Config) (*Store, error) {
	if cfg.Path == "" {
		return nil, errors.New("sqlitestore: Config.Path is required")
	}
	if cfg.Table == "" {
		cfg.Table = "replica"
	}
	if !ident.MatchString(cfg.Table) {
		return nil, fmt.Errorf("sqlitestore: table prefix %q: want letters, digits and _", cfg.Table)
	}
	if cfg.BusyTimeout <= 0 {
		cfg.BusyTimeout = 5 * time.Second
	}
	switch cfg.Synchronous {
	case "":
		cfg.Synchronous = "FULL"
	case "FULL", "NORMAL", "EXTRA", "OFF":
	default:
		return nil, fmt.Errorf("sqlitestore: Synchronous %q: want FULL, NORMAL, EXTRA or OFF", cfg.Synchronous)
	}
	if cfg.Readers <= 0 {
		cfg.Readers = 4
	}
	dsn := func(extra ...string) string {
		q := url.Values{}
		q.Add("_pragma", fmt.Sprintf("busy_timeout(%d)", cfg.BusyTimeout.Milliseconds()))
		q.Add("_pragma", "journal_mode(WAL)")
		q.Add("_pragma", "synchronous("+cfg.Synchronous+")")
		for i := 0; i < len(extra); i += 2 {
			q.Add(extra[i], extra[i+1])
		}
		return "file:" + (&url.URL{Path: cfg.Path}).EscapedPath() + "?" + q.Encode()
	}
	w, err := sql.Open("sqlite", dsn("_txlock", "immediate"))
	if err != nil {
		return nil, fmt.Errorf("sqlitestore: %w", err)
	}
	w.SetMaxOpenConns(1)
	w.SetConnMaxIdleTime(0)
	s := &Store{cfg: cfg, w: w, docs: cfg.Table + "_docs", scheme: cfg.Table + "_schemas",
		reqs: make(chan request), done: make(chan struct{})}
	if _, err := w.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS `+s.docs+` (
		key TEXT PRIMARY KEY, class INTEGER NOT NULL, tick INTEGER NOT NULL, schema BLOB NOT NULL, data BLOB NOT NULL) WITHOUT ROWID;
		CREATE TABLE IF NOT EXISTS `+s.scheme+` (hash BLOB PRIMARY KEY, descriptor BLOB NOT NULL) WITHOUT ROWID`); err != nil {
		w.Close()
		return nil, fmt.Errorf("sqlitestore: creating tables: %w", err)
	}
	s.r, err = sql.Open("sqlite", dsn("_pragma", "query_only(1)"))
	if err != nil {
		w.Close()
		return nil, fmt.Errorf("sqlitestore: %w", err)
	}
	s.r.SetMaxOpenConns(cfg.Readers)
	s.r.SetMaxIdleConns(cfg.Readers)
	s.q = queries{
		load:      `SELECT class, tick, schema, data FROM ` + s.docs + ` WHERE key = ?`,
		scan:      `SELECT key, class, tick, schema, data FROM ` + s.docs + ` WHERE key > ? ORDER BY key LIMIT 256`,
		schema:    `SELECT descriptor FROM ` + s.scheme + ` WHERE hash = ?`,
		putSchema: `INSERT OR IGNORE INTO ` + s.scheme + ` (hash, descriptor) VALUES (?, ?)`,
		del:       `DELETE FROM ` + s.docs + ` WHERE key = ?`,
		put:       `INSERT OR REPLACE INTO ` + s.docs + ` (key, class, tick, schema, data) VALUES (?, ?, ?, ?, ?)`,
	}
	go s.writer()
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
	var tick int64
	var hash []byte
	err := s.r.QueryRowContext(ctx, s.q.load, key).Scan(&d.Class, &tick, &hash, &d.Data)
	if errors.Is(err, sql.ErrNoRows) {
		return store.Document{}, fmt.Errorf("%w: %q", store.ErrNotFound, key)
	}
	if err != nil {
		return store.Document{}, fmt.Errorf("sqlitestore: load %q: %w", key, err)
	}
	d.Tick = uint64(tick)
	copy(d.Schema[:], hash)
	if d.Data == nil {
		d.Data = []byte{}
	}
	return d, nil
}

// Write implements store.Store: the batch goes to the writer goroutine,
// which runs it as one transaction.
func (s *Store) Write(ctx context.Context, b *store.Batch) error {
	if err := s.enter(); err != nil {
		return err
	}
	defer s.mu.RUnlock()
	if err := b.Check(); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	reply := make(chan error, 1)
	select {
	case s.reqs <- request{ctx: ctx, batch: b, reply: reply}:
	case <-ctx.Done():
		return ctx.Err()
	}
	return <-reply // the writer honours ctx
}

func (s *Store) writer() {
	defer close(s.done)
	for req := range s.reqs {
		req.reply <- s.apply(req.ctx, req.batch)
	}
}

func (s *Store) apply(ctx context.Context, b *store.Batch) (err error) {
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("sqlitestore: begin: %w", err)
	}
	defer func() {
		if err != nil {
			tx.Rollback()
		}
	}()
	for _, sc := range b.Schemas {
		if _, err := tx.ExecContext(ctx, s.q.putSchema, sc.Hash[:], sc.Descriptor); err != nil {
			return fmt.Errorf("sqlitestore: storing schema: %w", err)
		}
	}
	if len(b.Deletes) > 0 {
		del, err := tx.PrepareContext(ctx, s.q.del)
		if err != nil {
			return fmt.Errorf("sqlitestore: %w", err)
		}
		defer del.Close()
		for _, k := range b.Deletes {
			if _, err := del.ExecContext(ctx, k); err != nil {
				return fmt.Errorf("sqlitestore: delete %q: %w", k, err)
			}
		}
	}
	if len(b.Puts) > 0 {
		put, err := tx.PrepareContext(ctx, s.q.put)
		if err != nil {
			return fmt.Errorf("sqlitestore: %w", err)
		}
		defer put.Close()
		for i := range b.Puts {
			d := &b.Puts[i]
			data := d.Data
			if data == nil {
				data = []byte{}
			}
			if _, err := put.ExecContext(ctx, d.Key, int64(d.Class), int64(d.Tick), d.Schema[:], data); err != nil {
				return fmt.Errorf("sqlitestore: put %q: %w", d.Key, err)
			}
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("sqlitestore: commit: %w", err)
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
		page, err := s.page(ctx, after)
		if err != nil {
			return err
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

func (s *Store) page(ctx context.Context, after string) ([]store.Document, error) {
	rows, err := s.r.QueryContext(ctx, s.q.scan, after)
	if err != nil {
		return nil, fmt.Errorf("sqlitestore: scan: %w", err)
	}
	defer rows.Close()
	var page []store.Document
	for rows.Next() {
		var d store.Document
		var tick int64
		var hash []byte
		if err := rows.Scan(&d.Key, &d.Class, &tick, &hash, &d.Data); err != nil {
			return nil, fmt.Errorf("sqlitestore: scan: %w", err)
		}
		d.Tick = uint64(tick)
		copy(d.Schema[:], hash)
		if d.Data == nil {
			d.Data = []byte{}
		}
		page = append(page, d)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlitestore: scan: %w", err)
	}
	return page, nil
}

// Schema implements store.Store.
func (s *Store) Schema(ctx context.Context, h store.SchemaHash) ([]byte, error) {
	if err := s.enter(); err != nil {
		return nil, err
	}
	defer s.mu.RUnlock()
	var desc []byte
	err := s.r.QueryRowContext(ctx, s.q.schema, h[:]).Scan(&desc)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("%w: schema %s", store.ErrNotFound, h)
	}
	if err != nil {
		return nil, fmt.Errorf("sqlitestore: schema %s: %w", h, err)
	}
	return desc, nil
}

// Close implements store.Store: it waits for operations in progress, then
// closes the database.
func (s *Store) Close() error {
	s.mu.Lock()
	if s.shut {
		s.mu.Unlock()
		return nil
	}
	s.shut = true
	s.mu.Unlock()
	close(s.reqs)
	<-s.done
	return errors.Join(s.r.Close(), s.w.Close())
}
