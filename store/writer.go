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
	Pending     int           // entities waiting to be written
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
//	for each entity whose persist fields changed (Codec.Changed):
//		w.Put(key, entity)   // encodes the entity's persist fields now
//	w.End()                  // hands the whole tick over, atomically
//
// Atomicity: a flush takes every tick ended before it, whole, so the
// stored documents always show the entities as they were at the end of
// one tick: never half of a tick's changes, and entities changed by one
// game action in one tick are saved by the same transaction.
//
// Begin, Put, Delete and End belong to one goroutine. Flush, Save, Stats
// and Close may be called from any goroutine.
type Writer struct {
	cfg WriterConfig
	log *slog.Logger

	// Tick goroutine only.
	enc    *Encoder
	buf    []byte
	stage  []staged
	tick   uint64
	inTick bool

	mu       sync.Mutex
	pend     map[string]pending
	spare    map[string]pending // the map of the previous flush, cleared
	seq      uint64             // Ends so far
	durable  uint64             // Ends whose changes are all durable
	durableC chan struct{}      // closed and replaced when durable grows
	closed   bool
	stats    WriterStats
	warned   bool

	kick chan struct{}
	quit chan struct{}
	done chan struct{}
}

type staged struct {
	key        string
	class      uint32
	start, end int // of the data in buf
	del        bool
}

type pending struct {
	doc   Document
	del   bool
	first time.Time // End of the oldest change not yet durable
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
		pend:     make(map[string]pending),
		spare:    make(map[string]pending),
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

// Put encodes the persist fields of e, as they are now, as the document of
// key. A key put twice in a tick keeps the last.
func (w *Writer) Put(key string, e *state.Entity) {
	w.mustTick()
	start := len(w.buf)
	w.buf = w.enc.AppendEntity(w.buf, e)
	w.stage = append(w.stage, staged{key: key, class: e.Class().ID, start: start, end: len(w.buf)})
}

// Delete deletes the document of key (a character deleted for good).
func (w *Writer) Delete(key string) {
	w.mustTick()
	w.stage = append(w.stage, staged{key: key, del: true})
}

func (w *Writer) mustTick() {
	if !w.inTick {
		panic("store: Writer.Put or Delete outside Begin and End")
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
	hash := w.cfg.Codec.hash
	for i := range w.stage {
		s := &w.stage[i]
		p := pending{del: s.del, first: now}
		if !s.del {
			p.doc = Document{Key: s.key, Class: s.class, Tick: w.tick, Schema: hash, Data: buf[s.start:s.end:s.end]}
		} else {
			p.doc.Key = s.key
		}
		if old, ok := w.pend[s.key]; ok {
			p.first = old.first
		}
		w.pend[s.key] = p
	}
	w.seq++
	n := len(w.pend)
	over := n > w.cfg.MaxBacklog
	if over {
		w.stats.OverBacklog++
	}
	warn := over && !w.warned
	w.warned = over
	w.mu.Unlock()
	// The documents keep the buffer: the next tick appends to a new one.
	if len(buf) > 0 {
		w.buf = make([]byte, 0, cap(buf))
	}
	if over {
		if warn {
			w.log.Error("store: write-behind backlog over its bound; the database is down or too slow, nothing is dropped",
				"pending", n, "max", w.cfg.MaxBacklog)
		}
		return fmt.Errorf("%w: %d entities waiting, bound %d", ErrBacklog, n, w.cfg.MaxBacklog)
	}
	return nil
}

// Save submits documents encoded by the caller (Codec.Document, on the
// goroutine that owns the entities) and returns once they, and every
// change ended before, are durable, or when ctx is done. A document older
// than one already waiting under its key (by Tick) is ignored.
func (w *Writer) Save(ctx context.Context, docs ...Document) error {
	now := time.Now()
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		return ErrClosed
	}
	for _, d := range docs {
		if err := CheckKey(d.Key); err != nil {
			w.mu.Unlock()
			return err
		}
	}
	for _, d := range docs {
		p := pending{doc: d, first: now}
		if old, ok := w.pend[d.Key]; ok {
			if !old.del && old.doc.Tick > d.Tick {
				continue
			}
			p.first = old.first
		}
		w.pend[d.Key] = p
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
	s.Pending = len(w.pend)
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
		w.mu.Unlock()

		if len(take) == 0 {
			w.markDurable(upto, take)
			t.Reset(w.cfg.FlushInterval)
			continue
		}
		batch.Schemas, batch.Puts, batch.Deletes = batch.Schemas[:0], batch.Puts[:0], batch.Deletes[:0]
		if !schemaStored {
			batch.Schemas = append(batch.Schemas, w.cfg.Codec.SchemaRecord())
		}
		for k, p := range take {
			if p.del {
				batch.Deletes = append(batch.Deletes, k)
			} else {
				batch.Puts = append(batch.Puts, p.doc)
			}
		}
		ctx, cancel := context.WithTimeout(context.Background(), w.cfg.WriteTimeout)
		start := time.Now()
		err := w.cfg.Store.Write(ctx, batch)
		end := time.Now()
		cancel()
		info := FlushInfo{Entities: len(take), Duration: end.Sub(start), Err: err}
		if err != nil {
			w.mu.Lock()
			for k, p := range take {
				if newer, ok := w.pend[k]; ok {
					newer.first = p.first
					w.pend[k] = newer
				} else {
					w.pend[k] = p
				}
			}
			clear(take)
			w.spare = take
			w.stats.Failures++
			w.stats.LastError = err
			w.stats.LastFlush = info.Duration
			pendN := len(w.pend)
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
		if w.cfg.OnFlush != nil {
			lags = lags[:0]
			for _, p := range take {
				lags = append(lags, end.Sub(p.first))
			}
			info.Lags = lags
		}
		w.mu.Lock()
		w.stats.Flushes++
		w.stats.Written += uint64(len(take))
		w.stats.LastError = nil
		w.stats.LastFlush = info.Duration
		w.mu.Unlock()
		clear(batch.Puts) // drop references to the documents' buffers
		if w.cfg.OnFlush != nil {
			w.cfg.OnFlush(info) // before waiters of the flush return
		}
		w.markDurable(upto, take)
		t.Reset(w.cfg.FlushInterval)
	}
}

// markDurable records that every End up to upto is durable and gives the
// flushed map back for reuse.
func (w *Writer) markDurable(upto uint64, take map[string]pending) {
	clear(take)
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
