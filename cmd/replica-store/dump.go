package main

import (
	"bufio"
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/url"
	"os"
	"regexp"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/redis/go-redis/v9"

	"github.com/replicago/replica/pgstore"
	"github.com/replicago/replica/redisstore"
	"github.com/replicago/replica/schema"
	"github.com/replicago/replica/sqlitestore"
	"github.com/replicago/replica/store"
)

const dumpUsage = `usage:
  replica-store dump -store sqlite|postgres|redis -dsn DSN [-table PREFIX] [-key K] [-pretty]

dump prints the stored documents as JSON, one object per line, with the
fields named by the schema descriptor stored beside them.
`

func runDump(args []string) error {
	fs := flag.NewFlagSet("dump", flag.ContinueOnError)
	fs.Usage = func() { fmt.Fprint(fs.Output(), dumpUsage); fs.PrintDefaults() }
	kind := fs.String("store", "sqlite", "sqlite, postgres or redis")
	dsn := fs.String("dsn", "", "sqlite: the database file; postgres: a connection string; redis: host:port or a redis:// URL")
	table := fs.String("table", "", "the store's table prefix (sqlite, postgres; default replica) or key prefix (redis; default replica:)")
	key := fs.String("key", "", "dump only the document of this key")
	pretty := fs.Bool("pretty", false, "indent the JSON")
	if err := fs.Parse(args); err != nil {
		return err
	}
	ctx := context.Background()
	if err := checkTables(ctx, *kind, *dsn, *table); err != nil {
		return err
	}
	st, err := openStore(ctx, *kind, *dsn, *table)
	if err != nil {
		return err
	}
	defer st.Close()
	out := bufio.NewWriter(os.Stdout)
	defer out.Flush()
	return dump(ctx, st, *key, *pretty, out)
}

// tablePrefix is the stores' rule for -table.
var tablePrefix = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,40}$`)

// checkTables makes sure an SQL database holds a store's documents table
// before dump opens it as a store, which would create the tables: a dump
// of the wrong database, or with a mistyped -table, fails instead of
// adding empty tables to it and printing nothing. In Redis it looks for
// the store's index of keys under the prefix.
func checkTables(ctx context.Context, kind, dsn, table string) error {
	if kind == "redis" {
		return checkRedis(ctx, dsn, table)
	}
	if table == "" {
		table = "replica"
	}
	if !tablePrefix.MatchString(table) {
		return nil // openStore refuses it by the store's rules
	}
	docs := table + "_docs"
	where := dsn // not a PostgreSQL DSN, which may hold a password
	var found bool
	switch kind {
	case "sqlite":
		if dsn == "" {
			return nil // openStore says what is missing
		}
		if _, err := os.Stat(dsn); err != nil {
			return fmt.Errorf("store: %w", err)
		}
		db, err := sql.Open("sqlite", "file:"+(&url.URL{Path: dsn}).EscapedPath()+"?mode=ro")
		if err != nil {
			return fmt.Errorf("store: %w", err)
		}
		defer db.Close()
		if err := db.QueryRowContext(ctx, `SELECT count(*) > 0 FROM sqlite_master WHERE type = 'table' AND name = ?`, docs).Scan(&found); err != nil {
			return fmt.Errorf("store: %s: %w", dsn, err)
		}
	case "postgres":
		if dsn == "" {
			return nil
		}
		where = "the database"
		c, err := pgx.Connect(ctx, dsn)
		if err != nil {
			return fmt.Errorf("store: %w", err)
		}
		defer c.Close(ctx)
		if err := c.QueryRow(ctx, `SELECT to_regclass($1) IS NOT NULL`, docs).Scan(&found); err != nil {
			return fmt.Errorf("store: %w", err)
		}
	default:
		return nil
	}
	if !found {
		return fmt.Errorf("store: %s has no table %s: not a replica store, or its -table prefix is another", where, docs)
	}
	return nil
}

// checkRedis makes sure Redis holds a document under the key prefix: with
// a mistyped prefix dump would print nothing.
func checkRedis(ctx context.Context, dsn, prefix string) error {
	st, err := openStore(ctx, "redis", dsn, prefix)
	if err != nil {
		return err
	}
	defer st.Close()
	errFound := errors.New("a document") // ends the scan at the first
	if err := st.Scan(ctx, func(store.Document) error { return errFound }); !errors.Is(err, errFound) {
		if err != nil {
			return err
		}
		if prefix == "" {
			prefix = redisstore.DefaultPrefix
		}
		hint := ""
		if !strings.HasSuffix(prefix, ":") {
			hint = fmt.Sprintf(" (prefixes end with a colon: -table %s:?)", prefix)
		}
		return fmt.Errorf("store: redis has no document under the prefix %q%s", prefix, hint)
	}
	return nil
}

// redisOptions returns the options of a Redis -dsn: host:port, a
// redis:// URL, or the local server's default address.
func redisOptions(dsn string) (*redis.Options, error) {
	if strings.Contains(dsn, "://") {
		opt, err := redis.ParseURL(dsn)
		if err != nil {
			return nil, fmt.Errorf("store: %w", err)
		}
		return opt, nil
	}
	if dsn == "" {
		dsn = "127.0.0.1:6379"
	}
	return &redis.Options{Addr: dsn}, nil
}

// openStore opens a store of the named kind.
func openStore(ctx context.Context, kind, dsn, table string) (store.Store, error) {
	switch kind {
	case "sqlite":
		if dsn == "" {
			return nil, errors.New("store: -dsn must name the SQLite database file")
		}
		if _, err := os.Stat(dsn); err != nil {
			return nil, fmt.Errorf("store: %w", err)
		}
		return sqlitestore.Open(ctx, sqlitestore.Config{Path: dsn, Table: table})
	case "postgres":
		if dsn == "" {
			return nil, errors.New("store: -dsn must be a PostgreSQL connection string")
		}
		return pgstore.Open(ctx, pgstore.Config{DSN: dsn, Table: table})
	case "redis":
		opt, err := redisOptions(dsn)
		if err != nil {
			return nil, err
		}
		return redisstore.Open(ctx, redisstore.Config{Options: opt, Prefix: table})
	}
	return nil, fmt.Errorf("store: unknown store %q (known: sqlite, postgres, redis)", kind)
}

// dump writes the documents of st, or the one of key, as JSON lines.
func dump(ctx context.Context, st store.Store, key string, pretty bool, w io.Writer) error {
	schemas := map[store.SchemaHash]*schema.Schema{}
	bad := 0
	one := func(d store.Document) error {
		s, ok := schemas[d.Schema]
		if !ok {
			desc, err := st.Schema(ctx, d.Schema)
			switch {
			case err == nil:
				if s, err = schema.DecodeDescriptor(desc); err != nil {
					return fmt.Errorf("store: schema %s: %w", d.Schema, err)
				}
			case errors.Is(err, store.ErrNotFound):
				fmt.Fprintf(os.Stderr, "replica-store dump: schema %s is not stored; fields are named by ID\n", d.Schema)
			default:
				return err
			}
			schemas[d.Schema] = s
		}
		b, err := store.AppendJSON(nil, d, s)
		if err != nil && key == "" {
			// A damaged document does not hide the others.
			fmt.Fprintf(os.Stderr, "replica-store dump: document %q: %v\n", d.Key, err)
			bad++
			return nil
		}
		if err != nil {
			return fmt.Errorf("store: document %q: %w", d.Key, err)
		}
		if pretty {
			var buf bytes.Buffer
			json.Indent(&buf, b, "", "  ")
			b = buf.Bytes()
		}
		_, err = w.Write(append(b, '\n'))
		return err
	}
	if key != "" {
		d, err := st.Load(ctx, key)
		if err != nil {
			return err
		}
		return one(d)
	}
	if err := st.Scan(ctx, one); err != nil {
		return err
	}
	if bad > 0 {
		return fmt.Errorf("store: %d documents could not be read (above)", bad)
	}
	return nil
}
