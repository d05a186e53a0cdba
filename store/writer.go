package store

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/replicago/replica/state"
)

// WriterConfig configures a [Writer]. Store and Codec are required; the
// zero value of every other field selects its default.
type WriterConfig struct {
	Store Store  // where documents go; the Writer does not close it
	Codec *Codec // encodes the entities given to Put

	// FlushInterval is the time between flushes. If zero, 1 second.
	FlushInterval time.Duration
	// MaxBacklog is the number of entities waiting to be written past
	// which End returns ErrBacklog (and the Writer logs an error): the
	// database is down or slower than the game. Nothing is dropped, so
	// memory grows with the number of distinct entities changed, at most
	// one document each. If zero, 100,000.
	MaxBacklog int
	// RetryMin and RetryMax bound the wait before retrying a failed
	// flush, which doubles from RetryMin up to RetryMax. If zero, 100
	// milliseconds and 10 seconds.
	RetryMin, RetryMax time.Duration
	// WriteTimeout bounds one Store.Write. If zero, 30 seconds.
	WriteTimeout time.Duration
	// Logger receives failed flushes and backlog warnings. If nil,
	// slog.Default().
	Logger *slog.Logger
	// OnFlush, if set, is called on the Writer's goroutine after every
	// flush that wrote something or failed.
	OnFlush func(FlushInfo)
}

// FlushInfo describes one flush, for OnFlush.
type FlushInfo struct {
	Entities int           // documents and deletions in the batch
	Duration time.Duration // time spent in Store.Write
	Err      error         // the Write's error; the batch will be retried
	// Lags holds, for each entity of a successful flush, the time from
	// the End of the oldest of its changes the flush saved to the end of
	// the flush: the write-behind lag. It is valid during the call only.
	Lags []time.Duration
}

// WriterStats are a Writer's counters (see Writer.Stats).
type WriterStats struct {
	Pending     int           // entities waiting for a flush (not counting those being written)
	Writing     int           // entities of the flush in progress, until it succeeds or fails
	Flushes     uint64        // successful flushes that wrote something
	Failures    uint64        // failed flushes
	Written     uint64        // documents and deletions written
	OverBacklog uint64        // Ends that found the backlog over MaxBacklog
	LastError   error         // the last flush error, nil after a success
	LastFlush   time.Duration // duration of the last Store.Write
}

// A Writer saves the persist state of entities behind the game's tick:
// the tick hands it the entities whose persist fields changed, the Writer
// coalesces them per entity and writes them in batches, one Store.Write
// (one transaction) per flush, on its own goroutine. The tick never waits
// on the database; a slow or failing database builds a backlog, bounded
// by the number of distinct entities, that is retried until written and
// reported by Stats, End and the log.
//
// The tick goroutine calls, per tick:
//
//	w.Begin(tick)
//	for _, c := range changeset.Changes {  // state.Tracker.Commit's
//		if codec.Changed(c) {
//			w.PutChange(key(c.Entity), c)  // encodes what changed, now
//		}
//	}
//	w.End()                                // hands the whole tick over, atomically
//
// PutChange encodes the whole entity the first time (or after Forget) and
// after that only the stored fields that changed, and the changed items of
// a bag: the Writer keeps each entity's document in memory, in pieces, and
// reassembles it at flush time. Put always encodes the whole entity.
//
// Atomicity: a flush takes every tick ended before it, whole, so the
// stored documents always show the entities as they were at the end of
// one tick: never half of a tick's changes, and entities changed by one
// game action in one tick are saved by the same transaction.
//
// Memory: the Writer keeps the document of every entity put, until Forget
// (a player logging out: put the last state, then Forget) or Delete.
//
// Begin, Put, PutChange, Delete, Forget and End belong to one goroutine.
// Flush, Save, Stats and Close may be called from any goroutine.
type Writer struct {
	cfg WriterConfig
	log *slog.Logger

	// Tick goroutine only.
	enc    *Encoder
	buf    []byte
	stage  []staged
	tick   uint64
	inTick bool
	known  map[string]struct{} // keys whose whole document the Writer holds

	// Writer goroutine only.
	models map[string]*docModel
	out    []byte      // the documents of a flush
	firsts []time.Time // the first changes of the batch's keys

	mu       sync.Mutex
	pend     *pendingSet
	spare    *pendingSet   // the set of the previous flush, emptied
	writing  int           // entities of the flush in progress (Stats)
	free     [][]byte      // tick buffers whose operations were applied
	seq      uint64        // Ends so far
	durable  uint64        // Ends whose changes are all durable
	durableC chan struct{} // closed and replaced when durable grows
	closed   bool
	stats    WriterStats
	warned   bool

	kick chan struct{}
	quit chan struct{}
	done chan struct{}
}

// Operations on a key, in the order of the calls.
const (
	opFull   = iota // data: a whole document
	opPatch         // data: a patch (see appendPatch)
	opDelete        // delete the document
	opForget        // drop the kept document once written
)

type staged struct {
	key        string
	class      uint32
	start, end int // of the data in buf
	op         uint8
}

type keyOp struct {
	kind  uint8
	class uint32
	data  []byte
}

// A pendingSet is what waits to be written, by key. Its entries and their
// operation slices are reused from flush to flush, so that a tick hands
// over its changes without allocating.
type pendingSet struct {
	idx    map[string]int32
	ents   []pending
	arenas [][]byte // the tick buffers the operations point into
}

func newPendingSet() *pendingSet { return &pendingSet{idx: make(map[string]int32)} }

// get returns the entry of key, adding it (first changed at now) if
// absent.
func (ps *pendingSet) get(key string, now time.Time) *pending {
	if i, ok := ps.idx[key]; ok {
		return &ps.ents[i]
	}
	i := len(ps.ents)
	if i < cap(ps.ents) {
		ps.ents = ps.ents[:i+1]
		ops := ps.ents[i].ops[:0]
		ps.ents[i] = pending{ops: ops}
	} else {
		ps.ents = append(ps.ents, pending{})
	}
	p := &ps.ents[i]
	p.key, p.first = key, now
	ps.idx[key] = int32(i)
	return p
}

// reset empties ps, keeping its storage.
func (ps *pendingSet) reset() {
	clear(ps.idx)
	for i := range ps.ents {
		clear(ps.ents[i].ops) // drop references to tick buffers
	}
	ps.ents = ps.ents[:0]
	clear(ps.arenas)
	ps.arenas = ps.arenas[:0]
}

// pending is what waits to be written for one key.
type pending struct {
	key     string
	ops     []keyOp // since the last flush; a whole document or deletion drops those before
	first   time.Time
	tick    uint64
	class   uint32
	del     bool // the last operation deleted the key
	forget  bool
	rewrite bool // a failed flush applied the operations: write what is kept
}

// NewWriter starts a Writer.
func NewWriter(cfg WriterConfig) (*Writer, error) {
	if cfg.Store == nil || cfg.Codec == nil {
		return nil, errors.New("store: WriterConfig needs a Store and a Codec")
	}
	if cfg.FlushInterval <= 0 {
		cfg.FlushInterval = time.Second
	}
	if cfg.MaxBacklog <= 0 {
		cfg.MaxBacklog = 100_000
	}
	if cfg.RetryMin <= 0 {
		cfg.RetryMin = 100 * time.Millisecond
	}
	if cfg.RetryMax <= 0 {
		cfg.RetryMax = 10 * time.Second
	}
	if cfg.RetryMax < cfg.RetryMin {
		cfg.RetryMax = cfg.RetryMin
	}
	if cfg.WriteTimeout <= 0 {
		cfg.WriteTimeout = 30 * time.Second
	}
	w := &Writer{
		cfg:      cfg,
		log:      cfg.Logger,
		enc:      cfg.Codec.NewEncoder(),
		known:    make(map[string]struct{}),
		models:   make(map[string]*docModel),
		pend:     newPendingSet(),
		spare:    newPendingSet(),
		durableC: make(chan struct{}),
		kick:     make(chan struct{}, 1),
		quit:     make(chan struct{}),
		done:     make(chan struct{}),
	}
	if w.log == nil {
		w.log = slog.Default()
	}
	go w.run()
	return w, nil
}

// Begin starts collecting the changes of tick.
func (w *Writer) Begin(tick uint64) {
	w.tick, w.inTick = tick, true
	w.stage = w.stage[:0]
}

// Put encodes the stored fields of e, as they are now, as the document of
// key, whole.
func (w *Writer) Put(key string, e *state.Entity) {
	w.mustTick()
	start := len(w.buf)
	w.buf = w.enc.AppendEntity(w.buf, e)
	w.stage = append(w.stage, staged{key: key, class: e.Class().ID, start: start, end: len(w.buf), op: opFull})
	w.known[key] = struct{}{}
}

// PutChange saves the changes of c, the change of an entity in the tick's
// changeset, under key: the stored fields c changed (and a bag's changed
// items) when the Writer holds the entity's document, else the whole
// entity. Changes of a destroyed entity are ignored.
func (w *Writer) PutChange(key string, c *state.Change) {
	w.mustTick()
	if c.Destroyed {
		return
	}
	if _, ok := w.known[key]; !ok || c.Created {
		w.Put(key, c.Entity)
		return
	}
	start := len(w.buf)
	var changed bool
	w.buf, changed = w.enc.appendPatch(w.buf, c)
	if changed {
		w.stage = append(w.stage, staged{key: key, class: c.Entity.Class().ID, start: start, end: len(w.buf), op: opPatch})
	}
}

// Delete deletes the document of key (a character deleted for good).
func (w *Writer) Delete(key string) {
	w.mustTick()
	delete(w.known, key)
	w.stage = append(w.stage, staged{key: key, op: opDelete})
}

// Forget lets the Writer drop the document it keeps for key once what
// was put before is written: for an entity that leaves the server. A later
// PutChange of key encodes the whole entity again.
func (w *Writer) Forget(key string) {
	w.mustTick()
	delete(w.known, key)
	w.stage = append(w.stage, staged{key: key, op: opForget})
}

func (w *Writer) mustTick() {
	if !w.inTick {
		panic("store: Writer.Put, PutChange, Delete or Forget outside Begin and End")
	}
}

// End hands the tick's changes to the Writer, all at once. It returns
// ErrClosed after Close (the changes are not taken), and an error wrapping
// ErrBacklog when more entities than MaxBacklog wait to be written (the
// changes are taken).
func (w *Writer) End() error {
	w.inTick = false
	now := time.Now()
	buf := w.buf
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		return ErrClosed
	}
	for i := range w.stage {
		st := &w.stage[i]
		w.pend.get(st.key, now).addOp(st.op, st.class, buf[st.start:st.end:st.end], w.tick)
	}
	if len(buf) > 0 {
		w.pend.arenas = append(w.pend.arenas, buf)
		// The operations keep the buffer until the Writer applies them:
		// the next tick appends to a free one.
		if n := len(w.free); n > 0 {
			w.buf, w.free = w.free[n-1][:0], w.free[:n-1]
		} else {
			// Sized by this tick: one large tick (a login storm) must not
			// make every later one allocate as much.
			w.buf = make([]byte, 0, max(2*len(buf), 1024))
		}
	}
	w.seq++
	n := len(w.pend.idx)
	over := n > w.cfg.MaxBacklog
	if over {
		w.stats.OverBacklog++
	}
	warn := over && !w.warned
	w.warned = over
	w.mu.Unlock()
	if over {
		if warn {
			w.log.Error("store: write-behind backlog over its bound; the database is down or too slow, nothing is dropped",
				"pending", n, "max", w.cfg.MaxBacklog)
		}
		return fmt.Errorf("%w: %d entities waiting, bound %d", ErrBacklog, n, w.cfg.MaxBacklog)
	}
	return nil
}

// addOp records an operation on the key.
func (p *pending) addOp(op uint8, class uint32, data []byte, tick uint64) {
	switch op {
	case opForget:
		p.forget = true
		return
	case opFull, opDelete:
		p.ops = p.ops[:0]
		p.forget = false // the Writer keeps what comes now
	}
	p.ops = append(p.ops, keyOp{kind: op, class: class, data: data})
	p.del = op == opDelete
	if op != opDelete {
		p.tick, p.class = tick, class
	}
}

// Save submits whole documents encoded by the caller with the Writer's
// codec (Codec.Document, on the goroutine that owns the entities) and
// returns once they, and every change ended before, are durable, or when
// ctx is done. A document older (by Tick) than what waits under its key
// is ignored. The documents' Data must not be modified afterwards.
func (w *Writer) Save(ctx context.Context, docs ...Document) error {
	for _, d := range docs {
		if err := CheckKey(d.Key); err != nil {
			return err
		}
		if d.Schema != w.cfg.Codec.hash {
			return fmt.Errorf("%w: document %q of schema %s, the Writer's codec is of %s", ErrInvalid, d.Key, d.Schema, w.cfg.Codec.hash)
		}
	}
	now := time.Now()
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		return ErrClosed
	}
	for _, d := range docs {
		p := w.pend.get(d.Key, now)
		if !p.del && len(p.ops) > 0 && p.tick > d.Tick {
			continue
		}
		p.addOp(opFull, d.Class, d.Data, d.Tick)
	}
	w.seq++
	w.mu.Unlock()
	return w.Flush(ctx)
}

// Flush writes everything ended before the call now, rather than at the
// next interval, and returns once it is durable, or with ctx's error
// (joined with the last flush error) when ctx is done first.
func (w *Writer) Flush(ctx context.Context) error {
	w.mu.Lock()
	target := w.seq
	w.mu.Unlock()
	for {
		w.mu.Lock()
		if w.durable >= target {
			w.mu.Unlock()
			return nil
		}
		ch := w.durableC
		closed := w.closed
		w.mu.Unlock()
		if closed {
			select {
			case <-w.done:
				w.mu.Lock()
				ok := w.durable >= target
				w.mu.Unlock()
				if ok {
					return nil
				}
				return ErrClosed
			default:
			}
		}
		select {
		case w.kick <- struct{}{}:
		default:
		}
		select {
		case <-ch:
		case <-w.done:
		case <-ctx.Done():
			w.mu.Lock()
			last := w.stats.LastError
			w.mu.Unlock()
			return errors.Join(ctx.Err(), last)
		}
	}
}

// Stats returns the Writer's counters.
func (w *Writer) Stats() WriterStats {
	w.mu.Lock()
	defer w.mu.Unlock()
	s := w.stats
	s.Pending, s.Writing = len(w.pend.idx), w.writing
	return s
}

// Close stops taking changes, flushes everything taken, retrying failed
// flushes until ctx is done, and stops the Writer's goroutine. It returns
// nil when everything was written, else an error saying how many entities
// were not. It does not close the Store.
func (w *Writer) Close(ctx context.Context) error {
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		<-w.done
		return nil
	}
	w.closed = true
	w.mu.Unlock()
	err := w.Flush(ctx)
	close(w.quit)
	<-w.done
	if err != nil {
		st := w.Stats()
		return fmt.Errorf("store: Writer closed with %d entities unsaved: %w", st.Pending, err)
	}
	return nil
}

func (w *Writer) run() {
	defer close(w.done)
	t := time.NewTimer(w.cfg.FlushInterval)
	defer t.Stop()
	retry := time.Duration(0)
	batch := &Batch{}
	schemaStored := false
	var lags []time.Duration
	for {
		select {
		case <-t.C:
		case <-w.kick:
		case <-w.quit:
			return
		}
		w.mu.Lock()
		take := w.pend
		w.pend, w.spare = w.spare, nil
		upto := w.seq
		w.writing = len(take.idx)
		w.mu.Unlock()

		batch.Schemas, batch.Puts, batch.Deletes = batch.Schemas[:0], batch.Puts[:0], batch.Deletes[:0]
		w.build(take, batch)
		// The operations are applied: their tick buffers are free.
		w.mu.Lock()
		for _, a := range take.arenas {
			if len(w.free) < 4 {
				w.free = append(w.free, a)
			}
		}
		w.mu.Unlock()
		if batch.Len() == 0 {
			w.mu.Lock()
			w.writing = 0
			w.mu.Unlock()
			w.markDurable(upto, take)
			t.Reset(w.cfg.FlushInterval)
			continue
		}
		if !schemaStored {
			batch.Schemas = append(batch.Schemas, w.cfg.Codec.SchemaRecord())
		}
		ctx, cancel := context.WithTimeout(context.Background(), w.cfg.WriteTimeout)
		start := time.Now()
		err := w.cfg.Store.Write(ctx, batch)
		end := time.Now()
		cancel()
		info := FlushInfo{Entities: batch.Len(), Duration: end.Sub(start), Err: err}
		if err != nil {
			// The kept documents already hold the changes: what is left
			// to do is writing them, under the keys taken.
			w.mu.Lock()
			for i := range take.ents {
				p := &take.ents[i]
				newer := w.pend.get(p.key, p.first)
				switch {
				case len(newer.ops) == 0: // not changed since (or forgotten)
					newer.del, newer.tick, newer.class = p.del, p.tick, p.class
					newer.forget = newer.forget || p.forget
				case newer.ops[0].kind == opPatch:
					newer.forget = newer.forget || p.forget
				}
				newer.first, newer.rewrite = p.first, true
			}
			take.reset()
			w.spare = take
			w.writing = 0
			w.stats.Failures++
			w.stats.LastError = err
			w.stats.LastFlush = info.Duration
			pendN := len(w.pend.idx)
			w.mu.Unlock()
			retry = min(max(retry*2, w.cfg.RetryMin), w.cfg.RetryMax)
			w.log.Warn("store: flush failed; will retry", "err", err, "pending", pendN, "retry_in", retry)
			if w.cfg.OnFlush != nil {
				w.cfg.OnFlush(info)
			}
			t.Reset(retry)
			continue
		}
		retry = 0
		schemaStored = true
		for i := range take.ents {
			if p := &take.ents[i]; p.forget {
				delete(w.models, p.key)
			}
		}
		if w.cfg.OnFlush != nil {
			lags = lags[:0]
			for _, f := range w.firsts {
				lags = append(lags, end.Sub(f))
			}
			info.Lags = lags
		}
		w.mu.Lock()
		w.writing = 0
		w.stats.Flushes++
		w.stats.Written += uint64(batch.Len())
		w.stats.LastError = nil
		w.stats.LastFlush = info.Duration
		w.mu.Unlock()
		clear(batch.Puts)
		if w.cfg.OnFlush != nil {
			w.cfg.OnFlush(info) // before waiters of the flush return
		}
		w.markDurable(upto, take)
		t.Reset(w.cfg.FlushInterval)
	}
}

// markDurable records that every End up to upto is durable and gives the
// flushed map back for reuse.
func (w *Writer) markDurable(upto uint64, take *pendingSet) {
	take.reset()
	w.mu.Lock()
	if w.spare == nil {
		w.spare = take
	}
	if upto > w.durable {
		w.durable = upto
		close(w.durableC)
		w.durableC = make(chan struct{})
	}
	w.mu.Unlock()
}

// build applies the operations taken to the kept documents and fills the
// batch with the documents and deletions to write.
func (w *Writer) build(take *pendingSet, b *Batch) {
	type span struct{ at, start, end int }
	spans := make([]span, 0, len(take.ents))
	w.out = w.out[:0]
	w.firsts = w.firsts[:0]
	for i := range take.ents {
		p := &take.ents[i]
		k := p.key
		m := w.models[k]
		for _, o := range p.ops {
			var err error
			switch o.kind {
			case opFull:
				m, err = w.cfg.Codec.loadModel(m, o.class, o.data)
			case opDelete:
				m = nil
			case opPatch:
				if m == nil {
					err = errModel
				} else {
					err = m.apply(o.data)
				}
			}
			if err != nil {
				w.log.Error("store: Writer dropped a change it cannot apply", "key", k, "err", err)
			}
		}
		if m == nil {
			delete(w.models, k)
			if p.del {
				b.Deletes = append(b.Deletes, k)
				w.firsts = append(w.firsts, p.first)
			}
			continue
		}
		w.models[k] = m
		if len(p.ops) == 0 && !p.rewrite {
			continue // Forget alone: nothing new to write
		}
		w.firsts = append(w.firsts, p.first)
		start := len(w.out)
		w.out = m.appendDoc(w.out)
		spans = append(spans, span{len(b.Puts), start, len(w.out)})
		b.Puts = append(b.Puts, Document{Key: k, Class: p.class, Tick: p.tick, Schema: w.cfg.Codec.hash})
	}
	for _, s := range spans {
		b.Puts[s.at].Data = w.out[s.start:s.end:s.end]
	}
}
