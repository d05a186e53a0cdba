package storetest

import (
	"context"
	"fmt"
	"slices"
	"sync"

	"github.com/replicago/replica/store"
)

// Memory is an in-memory store.Store: the reference the suite is checked
// against, and a store for tests that need no database. Its zero value is
// an empty store, as NewMemory's.
type Memory struct {
	mu      sync.Mutex
	docs    map[string]store.Document
	schemas map[store.SchemaHash][]byte
	closed  bool
	writes  int
}

// NewMemory returns an empty Memory store.
func NewMemory() *Memory {
	return &Memory{docs: make(map[string]store.Document), schemas: make(map[store.SchemaHash][]byte)}
}

func (m *Memory) check(ctx context.Context) error {
	if m.closed {
		return store.ErrClosed
	}
	return ctx.Err()
}

// Load implements store.Store.
func (m *Memory) Load(ctx context.Context, key string) (store.Document, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.check(ctx); err != nil {
		return store.Document{}, err
	}
	d, ok := m.docs[key]
	if !ok {
		return store.Document{}, fmt.Errorf("%w: %q", store.ErrNotFound, key)
	}
	d.Data = slices.Clone(d.Data)
	return d, nil
}

// Write implements store.Store.
func (m *Memory) Write(ctx context.Context, b *store.Batch) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.check(ctx); err != nil {
		return err
	}
	if err := b.Check(); err != nil {
		return err
	}
	if m.docs == nil { // the zero value
		m.docs, m.schemas = make(map[string]store.Document), make(map[store.SchemaHash][]byte)
	}
	for _, s := range b.Schemas {
		if _, ok := m.schemas[s.Hash]; !ok {
			m.schemas[s.Hash] = slices.Clone(s.Descriptor)
		}
	}
	for _, k := range b.Deletes {
		delete(m.docs, k)
	}
	for _, d := range b.Puts {
		d.Data = slices.Clone(d.Data)
		m.docs[d.Key] = d
	}
	m.writes++
	return nil
}

// Writes returns the number of successful Write calls.
func (m *Memory) Writes() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.writes
}

// Scan implements store.Store.
func (m *Memory) Scan(ctx context.Context, fn func(store.Document) error) error {
	m.mu.Lock()
	if err := m.check(ctx); err != nil {
		m.mu.Unlock()
		return err
	}
	keys := make([]string, 0, len(m.docs))
	for k := range m.docs {
		keys = append(keys, k)
	}
	m.mu.Unlock()
	slices.Sort(keys)
	for _, k := range keys {
		m.mu.Lock()
		d, ok := m.docs[k]
		closed := m.closed
		m.mu.Unlock()
		if closed {
			return store.ErrClosed
		}
		if !ok {
			continue
		}
		d.Data = slices.Clone(d.Data)
		if err := fn(d); err != nil {
			return err
		}
	}
	return nil
}

// Schema implements store.Store.
func (m *Memory) Schema(ctx context.Context, h store.SchemaHash) ([]byte, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.check(ctx); err != nil {
		return nil, err
	}
	d, ok := m.schemas[h]
	if !ok {
		return nil, fmt.Errorf("%w: schema %s", store.ErrNotFound, h)
	}
	return slices.Clone(d), nil
}

// Close implements store.Store.
func (m *Memory) Close() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.closed = true
	return nil
}
