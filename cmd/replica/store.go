package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/replicago/replica/pgstore"
	"github.com/replicago/replica/redisstore"
	"github.com/replicago/replica/schema"
	"github.com/replicago/replica/sqlitestore"
	"github.com/replicago/replica/store"
)

const storeUsage = `usage:
  replica store dump -store sqlite|postgres|redis -dsn DSN [-table PREFIX] [-key K] [-pretty]

dump prints the stored documents as JSON, one object per line, with the
fields named by the schema descriptor stored beside them.
`

func runStore(args []string) error {
	if len(args) == 0 || args[0] != "dump" {
		fmt.Fprint(os.Stderr, storeUsage)
		return errors.New("store: want a subcommand: dump")
	}
	fs := flag.NewFlagSet("store dump", flag.ContinueOnError)
	kind := fs.String("store", "sqlite", "sqlite, postgres or redis")
	dsn := fs.String("dsn", "", "sqlite: the database file; postgres: a connection string; redis: host:port or a redis:// URL")
	table := fs.String("table", "", "the store's table prefix (sqlite, postgres; default replica) or key prefix (redis; default replica:)")
	key := fs.String("key", "", "dump only the document of this key")
	pretty := fs.Bool("pretty", false, "indent the JSON")
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	ctx := context.Background()
	st, err := openStore(ctx, *kind, *dsn, *table)
	if err != nil {
		return err
	}
	defer st.Close()
	out := bufio.NewWriter(os.Stdout)
	defer out.Flush()
	return dump(ctx, st, *key, *pretty, out)
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
		opt := &redis.Options{Addr: dsn}
		if strings.Contains(dsn, "://") {
			var err error
			if opt, err = redis.ParseURL(dsn); err != nil {
				return nil, fmt.Errorf("store: %w", err)
			}
		} else if dsn == "" {
			opt.Addr = "127.0.0.1:6379"
		}
		return redisstore.Open(ctx, redisstore.Config{Options: opt, Prefix: table})
	}
	return nil, fmt.Errorf("store: unknown store %q (known: sqlite, postgres, redis)", kind)
}

// dump writes the documents of st, or the one of key, as JSON lines.
func dump(ctx context.Context, st store.Store, key string, pretty bool, w io.Writer) error {
	schemas := map[store.SchemaHash]*schema.Schema{}
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
				fmt.Fprintf(os.Stderr, "replica store dump: schema %s is not stored; fields are named by ID\n", d.Schema)
			default:
				return err
			}
			schemas[d.Schema] = s
		}
		b, err := store.AppendJSON(nil, d, s)
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
	return st.Scan(ctx, one)
}
