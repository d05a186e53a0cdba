// Package redisstore is a store.Store in Redis, through go-redis v9. Each
// batch is one MULTI/EXEC transaction, so it applies whole or not at all.
//
//	st, err := redisstore.Open(ctx, redisstore.Config{Options: &redis.Options{Addr: "127.0.0.1:6379"}})
//
// Layout under Config.Prefix: <prefix>d:<key> holds a document (a small
// binary header, then its data), the sorted set <prefix>keys indexes the
// keys for Scan, and <prefix>s:<hash> holds a schema descriptor. Durability
// is Redis's: configure appendonly (appendfsync everysec or always) for a
// game's saves.
package redisstore

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"

	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"

	"github.com/replicago/replica/store"
)

// Config configures a Store. The zero value of every field selects its
// default.
type Config struct {
	// Options are the client's options. If nil, a client of
	// 127.0.0.1:6379. Unless Options.MaintNotificationsConfig is set, the
	// Store disables maintenance notifications, which open-source Redis
	// does not support. go-redis logs failed dials to stderr itself, with
	// the standard library's logger: redis.SetLogger routes them, and
	// go-redis's logging.Disable silences them, for the whole process
	// (the Store's own calls return their errors either way).
	Options *redis.Options
	// Prefix starts every key the store uses. If empty, DefaultPrefix.
	Prefix string
}

// DefaultPrefix is Config.Prefix's default.
const DefaultPrefix = "replica:"

// Store is a store.Store in Redis.
type Store struct {
	c      *redis.Client
	prefix string
	index  string
	mu     sync.RWMutex
	shut   bool
}

// Open connects to Redis and checks that it answers.
func Open(ctx context.Context, cfg Config) (*Store, error) {
	opt := &redis.Options{Addr: "127.0.0.1:6379"}
	if cfg.Options != nil {
		o := *cfg.Options
		opt = &o
	}
	if opt.MaintNotificationsConfig == nil {
		opt.MaintNotificationsConfig = &maintnotifications.Config{Mode: maintnotifications.ModeDisabled}
	}
	if cfg.Prefix == "" {
		cfg.Prefix = DefaultPrefix
	}
	c := redis.NewClient(opt)
	if err := c.Ping(ctx).Err(); err != nil {
		c.Close()
		return nil, fmt.Errorf("redisstore: %w", err)
	}
	return &Store{c: c, prefix: cfg.Prefix, index: cfg.Prefix + "keys"}, nil
}

func (s *Store) enter() error {
	s.mu.RLock()
	if s.shut {
		s.mu.RUnlock()
		return store.ErrClosed
	}
	return nil
}

func (s *Store) docKey(key string) string { return s.prefix + "d:" + key }

func (s *Store) schemaKey(h store.SchemaHash) string { return s.prefix + "s:" + h.String() }

// encode packs a document's fields and data into one value.
func encode(d *store.Document) []byte {
	b := make([]byte, 0, 2*binary.MaxVarintLen64+len(d.Schema)+len(d.Data))
	b = binary.AppendUvarint(b, uint64(d.Class))
	b = binary.AppendUvarint(b, d.Tick)
	b = append(b, d.Schema[:]...)
	return append(b, d.Data...)
}

func decode(key string, b []byte) (store.Document, error) {
	d := store.Document{Key: key}
	class, n := binary.Uvarint(b)
	if n <= 0 || class > 1<<32-1 {
		return d, fmt.Errorf("redisstore: document %q: bad header", key)
	}
	b = b[n:]
	tick, n := binary.Uvarint(b)
	if n <= 0 || len(b)-n < len(d.Schema) {
		return d, fmt.Errorf("redisstore: document %q: bad header", key)
	}
	b = b[n:]
	d.Class, d.Tick = uint32(class), tick
	copy(d.Schema[:], b)
	d.Data = b[len(d.Schema):]
	return d, nil
}

// Load implements store.Store.
func (s *Store) Load(ctx context.Context, key string) (store.Document, error) {
	if err := s.enter(); err != nil {
		return store.Document{}, err
	}
	defer s.mu.RUnlock()
	b, err := s.c.Get(ctx, s.docKey(key)).Bytes()
	if errors.Is(err, redis.Nil) {
		return store.Document{}, fmt.Errorf("%w: %q", store.ErrNotFound, key)
	}
	if err != nil {
		return store.Document{}, fmt.Errorf("redisstore: load %q: %w", key, err)
	}
	return decode(key, b)
}

// Write implements store.Store: one MULTI/EXEC per batch.
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
	_, err := s.c.TxPipelined(ctx, func(p redis.Pipeliner) error {
		for _, sc := range b.Schemas {
			p.SetNX(ctx, s.schemaKey(sc.Hash), sc.Descriptor, 0)
		}
		if len(b.Deletes) > 0 {
			keys := make([]string, len(b.Deletes))
			members := make([]any, len(b.Deletes))
			for i, k := range b.Deletes {
				keys[i], members[i] = s.docKey(k), k
			}
			p.Del(ctx, keys...)
			p.ZRem(ctx, s.index, members...)
		}
		if len(b.Puts) > 0 {
			pairs := make([]any, 0, 2*len(b.Puts))
			members := make([]redis.Z, len(b.Puts))
			for i := range b.Puts {
				d := &b.Puts[i]
				pairs = append(pairs, s.docKey(d.Key), encode(d))
				members[i] = redis.Z{Member: d.Key}
			}
			p.MSet(ctx, pairs...)
			p.ZAdd(ctx, s.index, members...)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("redisstore: write: %w", err)
	}
	return nil
}

// Scan implements store.Store, reading the key index in pages.
func (s *Store) Scan(ctx context.Context, fn func(store.Document) error) error {
	if err := s.enter(); err != nil {
		return err
	}
	defer s.mu.RUnlock()
	const page = 256
	min := "-"
	for {
		keys, err := s.c.ZRangeByLex(ctx, s.index, &redis.ZRangeBy{Min: min, Max: "+", Count: page}).Result()
		if err != nil {
			return fmt.Errorf("redisstore: scan: %w", err)
		}
		if len(keys) == 0 {
			return nil
		}
		dk := make([]string, len(keys))
		for i, k := range keys {
			dk[i] = s.docKey(k)
		}
		vals, err := s.c.MGet(ctx, dk...).Result()
		if err != nil {
			return fmt.Errorf("redisstore: scan: %w", err)
		}
		for i, v := range vals {
			str, ok := v.(string)
			if !ok {
				continue // deleted since the index was read
			}
			d, err := decode(keys[i], []byte(str))
			if err != nil {
				return err
			}
			if err := fn(d); err != nil {
				return err
			}
		}
		if len(keys) < page {
			return nil
		}
		min = "(" + keys[len(keys)-1]
	}
}

// Schema implements store.Store.
func (s *Store) Schema(ctx context.Context, h store.SchemaHash) ([]byte, error) {
	if err := s.enter(); err != nil {
		return nil, err
	}
	defer s.mu.RUnlock()
	b, err := s.c.Get(ctx, s.schemaKey(h)).Bytes()
	if errors.Is(err, redis.Nil) {
		return nil, fmt.Errorf("%w: schema %s", store.ErrNotFound, h)
	}
	if err != nil {
		return nil, fmt.Errorf("redisstore: schema %s: %w", h, err)
	}
	return b, nil
}

// Close implements store.Store: it waits for operations in progress and
// closes the client.
func (s *Store) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.shut {
		return nil
	}
	s.shut = true
	return s.c.Close()
}
