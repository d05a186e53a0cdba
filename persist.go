package replica

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/replicago/replica/schema"
	"github.com/replicago/replica/state"
	"github.com/replicago/replica/store"
)

// ErrNotBound is the error of Server.Save for an entity that is not bound to
// a key (Server.Bind, Server.Load).
var ErrNotBound = errors.New("replica: entity not bound to a store key")

// ErrNoStore is returned by Bind, Delete, Load, Restore, Save and
// SaveAsync on a server without Config.Store.
var ErrNoStore = errors.New("replica: no Config.Store (set one to bind, load and save entities)")

// persister is a server's write-behind: the entities bound to keys, by
// slot, and the Writer the tick feeds. It belongs to the tick goroutine,
// except w and st, which are safe for concurrent use.
type persister struct {
	st    store.Store
	codec *store.Codec
	w     *store.Writer
	enc   *store.Encoder // for Save's documents, on the tick goroutine

	bound  []binding           // by entity slot
	keys   map[string]state.ID // bound key → entity
	nbound int
	ops    []persistOp // Writer operations of the tick in progress, in order
	over   bool        // the backlog is over its bound (an episode is logged once)
	closed bool        // Close stopped the Writer
}

// A binding is the key an entity is saved under.
type binding struct {
	id   state.ID // 0 for none
	key  string
	tick uint64 // the tick the entity was bound in: saved whole then
}

// A persistOp is a Writer operation that the next tick hands over.
type persistOp struct {
	kind uint8 // opBind, opUnbind, opDelete
	key  string
	e    *state.Entity
}

const (
	opBind   = iota // save e whole under key
	opUnbind        // save e whole under key, then forget it
	opDelete        // delete key's document
)

// newPersister starts the write-behind of cfg.Store, or returns nil.
func newPersister(cfg *Config) (*persister, error) {
	if cfg.Store == nil {
		return nil, nil
	}
	c := store.NewCodec(cfg.Schema)
	wc := cfg.StoreWriter
	wc.Store, wc.Codec = cfg.Store, c
	w, err := store.NewWriter(wc)
	if err != nil {
		return nil, fmt.Errorf("replica: Config.StoreWriter: %w", err)
	}
	return &persister{st: cfg.Store, codec: c, w: w, enc: c.NewEncoder(), keys: map[string]state.ID{}}, nil
}

// binding returns e's binding, or nil.
func (p *persister) binding(e *state.Entity) *binding {
	id := e.ID()
	if id == 0 { // nil, or no entity: an empty slot's binding has ID 0 too
		return nil
	}
	if slot := int(id.Slot()); slot < len(p.bound) && p.bound[slot].id == id {
		return &p.bound[slot]
	}
	return nil
}

// unbind drops b.
func (p *persister) unbind(b *binding) {
	if p.keys[b.key] == b.id {
		delete(p.keys, b.key)
	}
	*b = binding{}
	p.nbound--
}

// Bind saves e under key from now on: its persist fields (life=persist) as
// they are at the end of this tick, whole, and after that whenever they
// change, behind the tick (Config.StoreWriter.FlushInterval). The key is a
// game key, such as a player ID (store.CheckKey's rules). Binding e again
// under another key moves it: the old key keeps its document. A key is bound
// to one entity at a time.
//
// When e is destroyed, its last state is saved and it is unbound: a player
// logging out keeps its document (Delete deletes it).
//
// Call Bind on the tick goroutine. It fails without Config.Store, for an
// invalid key, an entity that is not live, of a class without persist
// fields, or a key bound to another live entity.
func (s *Server) Bind(e *state.Entity, key string) error {
	p := s.persist
	if p == nil {
		return ErrNoStore
	}
	if p.closed {
		return fmt.Errorf("replica: Bind: %w: nothing more is saved", ErrServerClosed)
	}
	if err := store.CheckKey(key); err != nil {
		return fmt.Errorf("replica: Bind: %w", err)
	}
	if e == nil || s.tr.Entity(e.ID()) != e {
		return errors.New("replica: Bind: entity is not live")
	}
	if !p.codec.Persists(e.Class()) {
		return fmt.Errorf("replica: Bind: class %s has no persist field", e.Class().Name)
	}
	if id, ok := p.keys[key]; ok && id != e.ID() && s.tr.Entity(id) != nil {
		return fmt.Errorf("replica: Bind: key %q is bound to entity %v", key, id)
	}
	slot := int(e.ID().Slot())
	if slot >= len(p.bound) {
		p.bound = append(p.bound, make([]binding, slot+1-len(p.bound))...)
	}
	b := &p.bound[slot]
	if b.id != 0 {
		if b.id == e.ID() && b.key == key {
			return nil
		}
		p.unbind(b)
	}
	*b = binding{id: e.ID(), key: key, tick: s.tick + 1}
	p.keys[key] = e.ID()
	p.nbound++
	p.ops = append(p.ops, persistOp{kind: opBind, key: key, e: e})
	return nil
}

// Unbind stops saving e: its last state is saved, at the end of this tick,
// and the server forgets its document. Unbinding an entity that is not bound
// does nothing. Call it on the tick goroutine.
func (s *Server) Unbind(e *state.Entity) {
	p := s.persist
	if p == nil || e == nil {
		return
	}
	if b := p.binding(e); b != nil {
		p.ops = append(p.ops, persistOp{kind: opUnbind, key: b.key, e: e})
		p.unbind(b)
	}
}

// Delete deletes the stored document of key, at the end of this tick (a
// character deleted for good), and unbinds the entity bound to it, if any.
// Call it on the tick goroutine.
func (s *Server) Delete(key string) error {
	p := s.persist
	if p == nil {
		return ErrNoStore
	}
	if err := store.CheckKey(key); err != nil {
		return fmt.Errorf("replica: Delete: %w", err)
	}
	if id, ok := p.keys[key]; ok {
		if slot := int(id.Slot()); slot < len(p.bound) && p.bound[slot].id == id {
			p.unbind(&p.bound[slot])
		}
		delete(p.keys, key)
	}
	p.ops = append(p.ops, persistOp{kind: opDelete, key: key})
	return nil
}

// Load spawns an entity of class and restores it from the document stored
// under key: its persist fields loaded, every other field at its default.
// The entity is then bound to key (see Bind). It is how a server restores a
// player at login, in Config.OnJoin for example:
//
//	e, err := srv.Load(ctx, game.Schema().Class(1), userID)
//	if errors.Is(err, store.ErrNotFound) { // a new player
//		p, _ := game.SpawnPlayer(srv.Tracker())
//		err = srv.Bind(p.Entity(), userID)
//	}
//
// Load reads the store on the calling goroutine, the tick goroutine: a slow
// database stalls the tick. A game that loads many players reads their
// documents elsewhere (Config.Store's Load is safe for concurrent use) and
// passes them to Restore on the tick goroutine.
//
// Errors wrap store.ErrNotFound for a key without a document, and the codec's
// errors (store.ErrIncompatible, store.ErrMalformed, store.ErrUnknownClass,
// as a *store.DecodeError) for a document the schema cannot read, including
// a document of another class, and state.ErrTooLarge for a document holding
// a value over Config.ClientLimits, which the entity could not keep (raise
// the limits to load it); nothing is spawned then.
func (s *Server) Load(ctx context.Context, class *schema.Struct, key string) (*state.Entity, error) {
	p := s.persist
	if p == nil {
		return nil, ErrNoStore
	}
	if class == nil || s.cfg.Schema.Class(class.ID) != class {
		// Before the read: a missing document must not pass for a new player.
		return nil, fmt.Errorf("replica: load %q: %w: class not in the server's schema", key, store.ErrUnknownClass)
	}
	if id, ok := p.keys[key]; ok && s.tr.Entity(id) != nil {
		return nil, fmt.Errorf("replica: load %q: the key is bound to live entity %v", key, id)
	}
	doc, err := p.st.Load(ctx, key)
	if err != nil {
		return nil, fmt.Errorf("replica: load %q: %w", key, err)
	}
	return s.Restore(class, doc)
}

// Restore spawns an entity of class from doc, a document of Config.Store,
// and binds it to doc.Key: Load without the read. Call it on the tick
// goroutine.
func (s *Server) Restore(class *schema.Struct, doc store.Document) (*state.Entity, error) {
	p := s.persist
	if p == nil {
		return nil, ErrNoStore
	}
	if class == nil || s.cfg.Schema.Class(class.ID) != class {
		return nil, fmt.Errorf("replica: restore %q: %w: class not in the server's schema", doc.Key, store.ErrUnknownClass)
	}
	if doc.Class != class.ID {
		return nil, fmt.Errorf("replica: restore %q: %w: document of class %d, not %s (%d)",
			doc.Key, store.ErrIncompatible, doc.Class, class.Name, class.ID)
	}
	e, err := s.spawnFrom(p.codec, class, doc)
	if err != nil {
		return nil, fmt.Errorf("replica: restore %q: %w", doc.Key, err)
	}
	if err := s.Bind(e, doc.Key); err != nil {
		s.tr.Destroy(e)
		return nil, err
	}
	return e, nil
}

// Save saves the persist fields of entities, bound to keys, as they are now
// (stamped with the tick in progress), and returns once they are durable,
// together with every change of the ticks before: for events that must not
// be lost, a purchase or a trade. Entities saved by one call are written by
// one transaction.
//
// Save blocks its caller, the tick goroutine, for a database write: the
// clients' ticks wait too. SaveAsync captures the same state and waits
// elsewhere.
//
// Errors wrap ErrNotBound for an entity not bound to a key, ctx's error when
// it is done first (the documents stay queued, and are written when the
// database allows), and store.ErrClosed after Close.
func (s *Server) Save(ctx context.Context, entities ...*state.Entity) error {
	docs, err := s.saveDocs(entities)
	if err != nil {
		return err
	}
	return s.persist.w.Save(ctx, docs...)
}

// SaveAsync is Save without the wait: it captures the persist fields of
// entities now, on the tick goroutine, and returns a function that waits
// until they are durable, from any goroutine (an RPC's reply, a purchase's
// confirmation). The documents are written even if nobody waits.
func (s *Server) SaveAsync(entities ...*state.Entity) (wait func(ctx context.Context) error) {
	docs, err := s.saveDocs(entities)
	if err != nil {
		return func(context.Context) error { return err }
	}
	done := make(chan error, 1)
	w := s.persist.w
	go func() { done <- w.Save(context.Background(), docs...) }()
	return func(ctx context.Context) error {
		select {
		case err := <-done:
			done <- err // for a second wait
			return err
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// saveDocs encodes the documents of Save.
func (s *Server) saveDocs(entities []*state.Entity) ([]store.Document, error) {
	p := s.persist
	if p == nil {
		return nil, ErrNoStore
	}
	docs := make([]store.Document, 0, len(entities))
	for _, e := range entities {
		b := p.binding(e)
		if b == nil || s.tr.Entity(e.ID()) != e {
			return nil, fmt.Errorf("%w: entity %v", ErrNotBound, e.ID())
		}
		docs = append(docs, store.Document{Key: b.key, Class: e.Class().ID, Tick: s.tick + 1,
			Schema: p.codec.Hash(), Data: p.enc.AppendEntity(nil, e)})
	}
	return docs, nil
}

// Flush writes every change of the ticks so far now, and returns once it is
// durable, or with ctx's error: before a planned shutdown, say. It may be
// called from any goroutine.
func (s *Server) Flush(ctx context.Context) error {
	if s.persist == nil {
		return nil
	}
	return s.persist.w.Flush(ctx)
}

// persistTick hands the tick's changes of bound entities to the Writer.
func (s *Server) persistTick(cs *state.Changeset) {
	p := s.persist
	if p == nil || p.closed || (p.nbound == 0 && len(p.ops) == 0) {
		return
	}
	w := p.w
	w.Begin(s.tick)
	for i := range p.ops {
		op := &p.ops[i]
		switch op.kind {
		case opBind:
			w.Put(op.key, op.e)
			if b := p.binding(op.e); b != nil && s.tr.Entity(op.e.ID()) != op.e {
				// Created and destroyed within the tick: no change says so.
				w.Forget(op.key)
				p.unbind(b)
			}
		case opUnbind:
			w.Put(op.key, op.e)
			w.Forget(op.key)
		case opDelete:
			w.Delete(op.key)
		}
		*op = persistOp{}
	}
	p.ops = p.ops[:0]
	for _, ch := range cs.Changes {
		slot := int(ch.Entity.ID().Slot())
		if slot >= len(p.bound) {
			continue
		}
		b := &p.bound[slot]
		switch {
		case b.id != ch.Entity.ID():
		case ch.Destroyed:
			// The record stays readable until the next commit: its last
			// state is saved, and the entity forgotten.
			if b.tick != s.tick {
				w.Put(b.key, ch.Entity)
			}
			w.Forget(b.key)
			p.unbind(b)
		case b.tick == s.tick: // put whole above
		case p.codec.Changed(ch):
			w.PutChange(b.key, ch)
		}
	}
	if err := w.End(); err != nil {
		if errors.Is(err, store.ErrBacklog) {
			if !p.over {
				s.cfg.Logger.Error("replica: persistence backlog over its bound: the database is down or too slow; nothing is dropped",
					"tick", s.tick, "err", err)
			}
			p.over = true
			return
		}
		s.cfg.Logger.Error("replica: persistence: changes not taken", "tick", s.tick, "err", err)
		return
	}
	if p.over {
		s.cfg.Logger.Warn("replica: persistence backlog back under its bound", "tick", s.tick)
		p.over = false
	}
}

// persistStats returns the Writer's counters.
func (s *Server) persistStats() store.WriterStats {
	if s.persist == nil {
		return store.WriterStats{}
	}
	return s.persist.w.Stats()
}

// closePersist writes everything and stops the Writer, waiting for the
// database at most the Writer's WriteTimeout (30 seconds by default), and
// no longer than ctx allows.
func (s *Server) closePersist(ctx context.Context) error {
	p := s.persist
	if p == nil || p.closed {
		return nil
	}
	// What changed since the last tick (in OnLeave, which Close has just
	// run for every client, or by the game before Close) is in no
	// changeset yet: commit it as a last tick, which no client receives.
	if cs := s.tr.Commit(); len(cs.Changes) > 0 || len(p.ops) > 0 {
		s.tick++
		s.tickNow.Store(s.tick)
		s.persistTick(cs)
	}
	p.closed = true
	ctx, cancel := context.WithTimeout(ctx, closeTimeout(s.cfg.StoreWriter))
	defer cancel()
	if err := p.w.Close(ctx); err != nil {
		s.cfg.Logger.Error("replica: persistence: closed with changes unsaved", "err", err)
		return fmt.Errorf("replica: %w", err)
	}
	return nil
}

// closeTimeout is how long Close waits for the database.
func closeTimeout(c store.WriterConfig) time.Duration {
	if c.WriteTimeout > 0 {
		return c.WriteTimeout
	}
	return 30 * time.Second
}

// exportMagic starts an exported entity state.
const exportMagic = "RPX1"

// ErrExport is wrapped by the errors of Server.Import for bytes that are
// not an exported entity state.
var ErrExport = errors.New("replica: not an exported entity state")

// exportCodecs holds the export codec of each schema.
var exportCodecs sync.Map // *schema.Schema → *store.Codec

func exportCodec(s *schema.Schema) *store.Codec {
	if c, ok := exportCodecs.Load(s); ok {
		return c.(*store.Codec)
	}
	c, _ := exportCodecs.LoadOrStore(s, store.NewCodecLives(s, schema.LifeScene, schema.LifeSession, schema.LifePersist))
	return c.(*store.Codec)
}

// Export returns the state of e for a migration to another server (of the
// same game, or a later build of it: fields are keyed by their IDs, as in
// stored documents): its scene, session and persist fields. Process fields
// (life=process) never leave the process, and neither do its ID, owner or
// space, which the importing server gives it anew. Call it on the tick
// goroutine; it needs no Config.Store.
//
// The format: "RPX1", the 16-byte schema hash (store.SchemaHash), the class
// ID as a uvarint, then the fields in the document format of
// docs/persistence.md. A bag's items come in the bag's own order, so two
// exports of one state may differ in their bytes; they import to equal
// states.
func (s *Server) Export(e *state.Entity) ([]byte, error) {
	if e == nil || s.tr.Entity(e.ID()) != e {
		return nil, errors.New("replica: Export: entity is not live")
	}
	c := exportCodec(s.cfg.Schema)
	h := c.Hash()
	b := append([]byte(exportMagic), h[:]...)
	b = binary.AppendUvarint(b, uint64(e.Class().ID))
	return c.AppendEntity(b, e), nil
}

// Import spawns an entity from the state Export returned (on this server or
// another), its process fields at their defaults. It does not bind it to a
// store key (see Bind). Errors wrap ErrExport for bytes that are not an
// exported state, and the codec's errors (store.ErrMalformed,
// store.ErrIncompatible, store.ErrUnknownClass) for a state the schema
// cannot read, and state.ErrTooLarge for a value over this server's
// Config.ClientLimits; nothing is spawned then. Call it on the tick
// goroutine.
func (s *Server) Import(data []byte) (*state.Entity, error) {
	if len(data) < len(exportMagic) || string(data[:len(exportMagic)]) != exportMagic {
		return nil, fmt.Errorf("%w: no %q header", ErrExport, exportMagic)
	}
	if len(data) < len(exportMagic)+len(store.SchemaHash{}) {
		return nil, fmt.Errorf("%w: %d bytes, cut within the header's schema hash", ErrExport, len(data))
	}
	var h store.SchemaHash
	rest := data[len(exportMagic):]
	copy(h[:], rest)
	rest = rest[len(h):]
	id, n := binary.Uvarint(rest)
	if n <= 0 || id > math.MaxUint32 {
		return nil, fmt.Errorf("%w: bad class ID", ErrExport)
	}
	class := s.cfg.Schema.Class(uint32(id))
	if class == nil {
		return nil, fmt.Errorf("replica: Import: %w: class ID %d", store.ErrUnknownClass, id)
	}
	e, err := s.spawnFrom(exportCodec(s.cfg.Schema), class, store.Document{Class: uint32(id), Schema: h, Data: rest[n:]})
	if err != nil {
		return nil, fmt.Errorf("replica: Import: %w", err)
	}
	return e, nil
}

// spawnFrom spawns an entity of class with the fields of doc, which c
// decodes: a document c cannot read spawns nothing. The entity is destroyed
// again if the tracker refuses a value of doc as over its limits
// (Config.ClientLimits): an entity restored without that value would be
// saved without it, losing it for good.
func (s *Server) spawnFrom(c *store.Codec, class *schema.Struct, doc store.Document) (*state.Entity, error) {
	// Decoded before the spawn, so that a bad document spawns nothing,
	// and once: a new entity's fields are zero, as the decoded record's
	// fields the document does not hold.
	rec, err := c.Decode(doc)
	if err != nil {
		return nil, err
	}
	e, err := s.tr.Spawn(class)
	if err != nil {
		return nil, err
	}
	refused := s.tr.Refused()
	e.Handle().SetNested(0, class, state.ValueOf(rec))
	if s.tr.Refused() > refused {
		s.tr.Destroy(e)
		return nil, fmt.Errorf("%w: a value of class %s is over the server's ClientLimits (the tick logs which)", state.ErrTooLarge, class.Name)
	}
	return e, nil
}
