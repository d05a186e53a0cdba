package codec_test

// The acceptance property of replica's core: random sequences of field
// writes and container operations on the generated test schemas
// (internal/testschema), encoded per view and applied to client replicas,
// leave every client's replica equal to the server's projection of its
// view, for every field kind and flag; likewise for a client that joins
// late and for a client running the other schema version.

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"

	"pgregory.net/rapid"

	"github.com/replicago/replica"
	"github.com/replicago/replica/codec"
	"github.com/replicago/replica/internal/mutate"
	v1 "github.com/replicago/replica/internal/testschema/v1"
	v2 "github.com/replicago/replica/internal/testschema/v2"
	"github.com/replicago/replica/schema"
	"github.com/replicago/replica/state"
)

// TestPropertyV2Server runs the server on schema v2 with clients on v2 and
// one client on v1.
func TestPropertyV2Server(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) { runWorld(t, v2.Schema(), v1.Schema(), typedV2) })
}

// TestPropertyV1Server runs the server on schema v1 with clients on v1 and
// one client on v2, which must leave every field v1 lacks at zero.
func TestPropertyV1Server(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) { runWorld(t, v1.Schema(), v2.Schema(), typedV1) })
}

// A world is the server, its encoder and the clients of one test case.
type world struct {
	srv, alt *schema.Schema // the server's schema and the other version
	tr       *state.Tracker
	enc      codec.Encoder
	ownedA   map[state.ID]bool // entities client A owns
	clients  []*client
	joined   bool // the late joiner was requested
	typed    func(*rapid.T, *world, *state.Entity)
	ticks    int
	touched  map[state.ID]bool // entities the tick being applied changed
	proj     projector
	values   map[string]int // the values the encoder counted in each segment of the tick
}

// counted notes the values the encoder counted in seg, its last output.
func (w *world) counted(seg []byte) []byte {
	w.values[string(seg)] = w.enc.Values()
	return seg
}

// A client is one replica: its table, its decoder and its view.
type client struct {
	name  string
	isA   bool // sees A's entities as their owner
	local *schema.Schema
	tab   *state.Table
	dec   *codec.Decoder
}

func runWorld(t *rapid.T, srv, alt *schema.Schema, typed func(*rapid.T, *world, *state.Entity)) {
	w := &world{srv: srv, alt: alt, tr: state.NewTracker(srv), ownedA: map[state.ID]bool{}, typed: typed}
	// A decodes through the descriptor of the server's own schema, B
	// directly; the other-version client sees what B sees.
	w.clients = append(w.clients,
		w.newClient(t, "A", true, srv, true),
		w.newClient(t, "B", false, srv, false),
		w.newClient(t, "old/new", false, alt, true))
	w.run(t)
}

// run runs the actions. Repeat runs 30 actions on average (-rapid.steps);
// several rounds let entities accumulate state over more ticks.
func (w *world) run(t *rapid.T) {
	actions := map[string]func(*rapid.T){
		"spawn":     w.spawn,
		"spawnMany": w.spawnMany,
		"touchAll":  w.touchAll,
		"destroy":   w.destroy,
		"write":     w.write,
		"container": w.container,
		"nested":    w.nested,
		"typed":     w.typedOp,
		"burst":     w.burst,
		"join":      w.join,
		"tick":      w.tick,
		"tick2":     w.tick,
	}
	for range propertyRounds {
		t.Repeat(actions)
	}
	w.tick(t)
}

const propertyRounds = 6

func (w *world) newClient(t *rapid.T, name string, isA bool, local *schema.Schema, viaDescriptor bool) *client {
	var remote *schema.Schema
	if viaDescriptor {
		var err error
		if remote, err = schema.DecodeDescriptor(w.srv.AppendDescriptor(nil)); err != nil {
			t.Fatalf("descriptor: %v", err)
		}
	}
	dec, err := codec.NewDecoder(local, remote, codec.Limits{})
	if err != nil {
		t.Fatalf("client %s: %v", name, err)
	}
	c := &client{name: name, isA: isA, local: local, tab: state.NewTable(), dec: dec}
	for _, cl := range local.Classes {
		c.tab.WatchAll(cl)
	}
	if remote != nil {
		// Classes the local schema lacks are stored with the remote layout.
		for _, cl := range remote.Classes {
			if local.Class(cl.ID) == nil {
				c.tab.WatchAll(cl)
			}
		}
	}
	return c
}

// view is the visibility bit through which c sees entity id.
func (w *world) view(c *client, id state.ID) schema.Visibility {
	if c.isA && w.ownedA[id] {
		return schema.VisOwner
	}
	return schema.VisOthers
}

// pick draws one live entity, or nil.
func (w *world) pick(t *rapid.T) *state.Entity {
	ents := w.tr.AppendEntities(nil)
	if len(ents) == 0 {
		return nil
	}
	return ents[rapid.IntRange(0, len(ents)-1).Draw(t, "entity")]
}

func (w *world) spawn(t *rapid.T) {
	c := w.srv.Classes[rapid.IntRange(0, len(w.srv.Classes)-1).Draw(t, "class")]
	e := w.spawnOne(t, c)
	// Values written in the creating tick travel with the creation.
	n := rapid.IntRange(0, 4).Draw(t, "initialWrites")
	for i := 0; i < n; i++ {
		mutate.Struct(t, e.Handle(), c, 0)
	}
}

func (w *world) spawnOne(t *rapid.T, c *schema.Struct) *state.Entity {
	e, err := w.tr.Spawn(c)
	if err != nil {
		t.Fatalf("spawn: %v", err)
	}
	if rapid.Bool().Draw(t, "ownedByA") {
		w.ownedA[e.ID()] = true
	}
	return e
}

// spawnMany creates many entities of one class with the same fields set,
// so that groups grow large.
func (w *world) spawnMany(t *rapid.T) {
	c := w.srv.Classes[rapid.IntRange(0, len(w.srv.Classes)-1).Draw(t, "class")]
	leaves := mutate.ScalarLeaves(c)
	set := rapid.SliceOfNDistinct(rapid.SampledFrom(leaves), 0, 4, rapid.ID).Draw(t, "leaves")
	n := rapid.IntRange(8, 40).Draw(t, "count")
	for range n {
		e := w.spawnOne(t, c)
		for _, i := range set {
			h, f := mutate.Reach(e.Handle(), c, c.Leaf(i).Path)
			mutate.SetScalar(t, h, f.Leaf, f.Num, f.Obj, &f.Type)
		}
	}
}

// touchAll writes the same leaves of every live entity of one class, so
// that update groups grow large.
func (w *world) touchAll(t *rapid.T) {
	c := w.srv.Classes[rapid.IntRange(0, len(w.srv.Classes)-1).Draw(t, "class")]
	set := rapid.SliceOfNDistinct(rapid.SampledFrom(mutate.ScalarLeaves(c)), 1, 3, rapid.ID).Draw(t, "leaves")
	for _, e := range w.tr.AppendEntities(nil) {
		if e.Class() != c || rapid.IntRange(0, 9).Draw(t, "skip") == 0 {
			continue
		}
		for _, i := range set {
			h, f := mutate.Reach(e.Handle(), c, c.Leaf(i).Path)
			mutate.SetScalar(t, h, f.Leaf, f.Num, f.Obj, &f.Type)
		}
	}
}

func (w *world) destroy(t *rapid.T) {
	if e := w.pick(t); e != nil {
		w.tr.Destroy(e)
	}
}

// write sets one scalar leaf, possibly several times in the tick and
// possibly back to its value at the start.
func (w *world) write(t *rapid.T) {
	e := w.pick(t)
	if e == nil {
		return
	}
	c := e.Class()
	leaves := mutate.ScalarLeaves(c)
	i := rapid.SampledFrom(leaves).Draw(t, "leaf")
	l := c.Leaf(i)
	h, f := mutate.Reach(e.Handle(), c, l.Path)
	orig := mutate.PlainOf(&e.Record, l)
	n := rapid.IntRange(1, 4).Draw(t, "writes")
	for j := 0; j < n; j++ {
		mutate.SetScalar(t, h, f.Leaf, f.Num, f.Obj, &f.Type)
	}
	if rapid.Bool().Draw(t, "revert") {
		if l.Field.Type.Kind.Numeric() {
			h.SetNum(f.Leaf, orig.N)
		} else {
			h.SetStr(f.Leaf, orig.S)
		}
	}
}

// container applies one operation to a random list, map or bag, nested
// ones included.
func (w *world) container(t *rapid.T) {
	e := w.pick(t)
	if e == nil {
		return
	}
	c := e.Class()
	conts := mutate.ContainerLeaves(c)
	if len(conts) == 0 {
		return
	}
	i := rapid.SampledFrom(conts).Draw(t, "leaf")
	h, f := mutate.Reach(e.Handle(), c, c.Leaf(i).Path)
	n := rapid.IntRange(1, 3).Draw(t, "ops")
	for j := 0; j < n; j++ {
		mutate.Container(t, h, f.Leaf, &f.Type, 0)
	}
}

// nested replaces a whole nested struct field with a detached value or
// with the same field of another entity.
func (w *world) nested(t *rapid.T) {
	e := w.pick(t)
	if e == nil {
		return
	}
	c := e.Class()
	paths := mutate.NestedPaths(c)
	if len(paths) == 0 {
		return
	}
	path := rapid.SampledFrom(paths).Draw(t, "nested")
	h, f := mutate.Reach(e.Handle(), c, path)
	var src state.Handle
	if o := w.pick(t); o != nil && o.Class() == c && rapid.Bool().Draw(t, "fromEntity") {
		oh, of := mutate.Reach(o.Handle(), c, path)
		src = oh.Nested(of.Leaf, of.Num, of.Obj)
	} else {
		src = mutate.Record(t, f.Type.Struct, 1)
	}
	mutate.SetNested(t, h, f, src)
}

func (w *world) typedOp(t *rapid.T) {
	if e := w.pick(t); e != nil {
		w.typed(t, w, e)
	}
}

// burst makes many random changes to one entity in one tick.
func (w *world) burst(t *rapid.T) {
	e := w.pick(t)
	if e == nil {
		return
	}
	n := rapid.IntRange(1, 12).Draw(t, "changes")
	for i := 0; i < n; i++ {
		mutate.Struct(t, e.Handle(), e.Class(), 0)
	}
}

// join asks for a client that connects at the next tick.
func (w *world) join(t *rapid.T) {
	w.joined = true
}

// tick commits the tick, sends every client its segments, applies them
// atomically and checks every replica against the server.
func (w *world) tick(t *rapid.T) {
	cs := w.tr.Commit()
	w.ticks++
	w.touched = map[state.ID]bool{}
	for _, c := range cs.Changes {
		w.touched[c.Entity.ID()] = true
	}
	w.values = map[string]int{}
	all := w.counted(w.enc.Delta(nil, cs, codec.PartAll, nil))
	othersB := w.counted(w.enc.Delta(nil, cs, codec.PartOthers, nil))
	othersA := w.counted(w.enc.Delta(nil, cs, codec.PartOthers, func(e *state.Entity) bool { return !w.ownedA[e.ID()] }))
	ownerA := w.counted(w.enc.Delta(nil, cs, codec.PartOwner, func(e *state.Entity) bool { return w.ownedA[e.ID()] }))
	for _, c := range w.clients {
		if c.isA {
			w.apply(t, c, all, othersA, ownerA)
		} else {
			w.apply(t, c, all, othersB)
		}
	}
	if w.joined && !w.hasLate() {
		isA := rapid.Bool().Draw(t, "lateIsA")
		local := w.srv
		if rapid.Bool().Draw(t, "lateOtherVersion") {
			local = w.alt
		}
		c := w.newClient(t, "late", isA, local, local != w.srv || rapid.Bool().Draw(t, "lateDescriptor"))
		ents := w.tr.AppendEntities(nil)
		var own, oth []*state.Entity
		for _, e := range ents {
			if isA && w.ownedA[e.ID()] {
				own = append(own, e)
			} else {
				oth = append(oth, e)
			}
		}
		w.apply(t, c, w.counted(w.enc.Full(nil, ents, codec.PartAll)),
			w.counted(w.enc.Full(nil, oth, codec.PartOthers)), w.counted(w.enc.Full(nil, own, codec.PartOwner)))
		w.clients = append(w.clients, c)
	}
	for _, c := range w.clients {
		if err := w.check(c); err != nil {
			t.Fatalf("tick %d, client %s: %v", w.ticks, c.name, err)
		}
	}
}

func (w *world) hasLate() bool {
	return slices.ContainsFunc(w.clients, func(c *client) bool { return c.name == "late" })
}

// apply applies the segments of one tick to c in one transaction and
// checks the events it reports.
func (w *world) apply(t *rapid.T, c *client, segs ...[]byte) {
	before := snapshot(c.tab, w.touched)
	if rapid.IntRange(0, 3).Draw(t, "rollbackFirst") == 0 {
		// Apply the tick, roll it back and check nothing changed.
		txn := c.tab.Begin()
		for i, seg := range segs {
			if err := c.dec.Apply(txn, seg); err != nil {
				t.Fatalf("tick %d, client %s, segment %d: %v", w.ticks, c.name, i, err)
			}
		}
		txn.Rollback()
		if err := sameTable(c.tab, before); err != nil {
			t.Fatalf("tick %d, client %s: after rollback: %v", w.ticks, c.name, err)
		}
	}
	txn := c.tab.Begin()
	for i, seg := range segs {
		if err := c.dec.Apply(txn, seg); err != nil {
			txn.Rollback()
			t.Fatalf("tick %d, client %s, segment %d: %v", w.ticks, c.name, i, err)
		}
		// Servers split segments by the encoder's count of values, so it
		// must be the decoder's.
		if got, want := w.values[string(seg)], codec.DecodedValues(c.dec); got != want {
			t.Fatalf("tick %d, client %s, segment %d: the encoder counted %d values, the decoder %d", w.ticks, c.name, i, got, want)
		}
	}
	evs := txn.Commit()
	if err := checkEvents(c.tab, before, evs); err != nil {
		t.Fatalf("tick %d, client %s: events: %v", w.ticks, c.name, err)
	}
}

// check compares c's replica with the server's projection of c's view.
func (w *world) check(c *client) error {
	srv := w.tr.AppendEntities(nil)
	got := c.tab.AppendEntities(nil)
	ids := func(es []*state.Entity) []state.ID {
		var out []state.ID
		for _, e := range es {
			out = append(out, e.ID())
		}
		return out
	}
	if !slices.Equal(ids(srv), ids(got)) {
		return fmt.Errorf("entities %v, server has %v", ids(got), ids(srv))
	}
	for i, se := range srv {
		if err := w.proj.entity(se, got[i], w.view(c, se.ID())); err != nil {
			return fmt.Errorf("entity %d (%s): %w", se.ID(), se.Class().Name, err)
		}
	}
	return nil
}

// ---- events ----

// A snap is a client's table before a transaction: its entity IDs and
// copies of the entities the tick touches (the others must not change,
// which the comparison with the server checks).
type snap struct {
	ids  []state.ID
	recs map[state.ID]*state.Record
}

func snapshot(tab *state.Table, touched map[state.ID]bool) snap {
	s := snap{recs: map[state.ID]*state.Record{}}
	for _, e := range tab.AppendEntities(nil) {
		s.ids = append(s.ids, e.ID())
		if touched[e.ID()] {
			s.recs[e.ID()] = e.Clone()
		}
	}
	return s
}

// sameTable reports how tab differs from snapshot s.
func sameTable(tab *state.Table, s snap) error {
	var ids []state.ID
	for _, e := range tab.AppendEntities(nil) {
		ids = append(ids, e.ID())
		if r := s.recs[e.ID()]; r != nil && !r.Equal(&e.Record) {
			return fmt.Errorf("entity %d differs", e.ID())
		}
	}
	if !slices.Equal(ids, s.ids) {
		return fmt.Errorf("entities %v, want %v", ids, s.ids)
	}
	return nil
}

func scalarValue(r *state.Record, l *schema.LeafInfo) state.Value {
	if l.Field.Type.Kind.Numeric() {
		return state.Value{N: r.Num(l.Num)}
	}
	return state.Value{S: r.Str(l.Obj)}
}

// checkEvents checks that the field events of a transaction chain from the
// values before it to the values after it: each Old is the value the
// previous event (or the state before the transaction) left, no event is a
// no-op, and every scalar leaf that changed has an event. Container events
// replayed on the containers before the transaction must give the
// containers after it.
func checkEvents(tab *state.Table, snap snap, evs []state.Event) error {
	before := snap.recs
	type key struct {
		id   state.ID
		leaf int
	}
	cur := map[key]state.Value{}
	created := map[state.ID]bool{}
	start := func(e *state.Entity, l *schema.LeafInfo) state.Value {
		if r := before[e.ID()]; r != nil && !created[e.ID()] {
			return scalarValue(r, l)
		}
		return state.Value{}
	}
	conts := map[key]*replay{}
	replayOf := func(e *state.Entity, leaf int) *replay {
		k := key{e.ID(), leaf}
		if r := conts[k]; r != nil {
			return r
		}
		r := new(replay)
		if b := before[e.ID()]; b != nil && !created[e.ID()] {
			r.load(b, b.Type().Leaf(leaf))
		}
		conts[k] = r
		return r
	}
	for i, ev := range evs {
		switch ev.Kind {
		case state.EvListAdd, state.EvListRemove, state.EvListSet, state.EvMapAdd, state.EvMapRemove,
			state.EvMapSet, state.EvBagAdd, state.EvBagRemove, state.EvBagItem:
			if before[ev.E.ID()] == nil && !created[ev.E.ID()] {
				return fmt.Errorf("event %d: item event for entity %d, which the tick did not touch", i, ev.E.ID())
			}
			if err := replayOf(ev.E, ev.Leaf).apply(ev); err != nil {
				return fmt.Errorf("event %d (kind %d) on entity %d leaf %d: %w", i, ev.Kind, ev.E.ID(), ev.Leaf, err)
			}
		case state.EvCreate:
			if before[ev.E.ID()] != nil {
				return fmt.Errorf("event %d: create of existing entity %d", i, ev.E.ID())
			}
			created[ev.E.ID()] = true
		case state.EvField:
			l := ev.E.Class().Leaf(ev.Leaf)
			if l.Field.Type.Kind.Container() {
				return fmt.Errorf("event %d: field event for container leaf %d", i, ev.Leaf)
			}
			if before[ev.E.ID()] == nil && !created[ev.E.ID()] {
				return fmt.Errorf("event %d: field event for entity %d, which the tick did not touch", i, ev.E.ID())
			}
			k := key{ev.E.ID(), ev.Leaf}
			prev, ok := cur[k]
			if !ok {
				prev = start(ev.E, l)
			}
			if prev != ev.Old {
				return fmt.Errorf("event %d: entity %d leaf %d (%s): Old %v, the client had %v", i, k.id, k.leaf, l.Field.Name, ev.Old, prev)
			}
			if ev.Old == ev.New {
				return fmt.Errorf("event %d: entity %d leaf %d: no-op event %v", i, k.id, k.leaf, ev.New)
			}
			cur[k] = ev.New
		}
	}
	for _, e := range tab.AppendEntities(nil) {
		if before[e.ID()] == nil && !created[e.ID()] {
			continue
		}
		c := e.Class()
		for i := 0; i < c.Leaves; i++ {
			l := c.Leaf(i)
			if l.Field.Type.Kind.Container() {
				r := conts[key{e.ID(), i}]
				if r == nil {
					r = replayOf(e, i)
				}
				if err := r.same(&e.Record, l); err != nil {
					return fmt.Errorf("entity %d leaf %d (%s): replayed events: %w", e.ID(), i, l.Field.Name, err)
				}
				continue
			}
			final := scalarValue(&e.Record, l)
			if v, ok := cur[key{e.ID(), i}]; ok {
				if v != final {
					return fmt.Errorf("entity %d leaf %d (%s): last event New %v, value %v", e.ID(), i, l.Field.Name, v, final)
				}
			} else if s := start(e, l); s != final {
				return fmt.Errorf("entity %d leaf %d (%s): changed %v → %v without an event", e.ID(), i, l.Field.Name, s, final)
			}
		}
	}
	return nil
}

type mapKey struct {
	n uint64
	s string
}

// A replay is a container rebuilt from events: a list, a map or the keys
// of a bag.
type replay struct {
	list []state.Value
	m    map[mapKey]state.Value
	bag  map[uint64]bool
}

func (r *replay) load(rec *state.Record, l *schema.LeafInfo) {
	switch l.Field.Type.Kind {
	case schema.List:
		c := rec.List(l.Obj)
		for i := 0; i < c.Len(); i++ {
			r.list = append(r.list, c.At(i))
		}
	case schema.Map:
		c := rec.Map(l.Obj)
		for _, k := range c.Keys(nil) {
			r.alloc()
			r.m[mapKey{k.N, k.S}], _ = c.Get(k)
		}
	case schema.Bag:
		for _, k := range rec.Bag(l.Obj).Keys(nil) {
			r.alloc()
			r.bag[k] = true
		}
	}
}

// alloc allocates r's maps.
func (r *replay) alloc() {
	if r.m == nil {
		r.m, r.bag = map[mapKey]state.Value{}, map[uint64]bool{}
	}
}

func sameValue(a, b state.Value) bool {
	if a.R != nil || b.R != nil {
		return a.R != nil && b.R != nil && a.R.Equal(b.R)
	}
	return a.N == b.N && a.S == b.S
}

func (r *replay) apply(ev state.Event) error {
	r.alloc()
	n := len(r.list)
	k := mapKey{ev.Key.N, ev.Key.S}
	old, had := r.m[k]
	switch ev.Kind {
	case state.EvListAdd:
		if ev.Index < 0 || ev.Index > n {
			return fmt.Errorf("add at %d of %d", ev.Index, n)
		}
		r.list = slices.Insert(r.list, ev.Index, ev.New)
	case state.EvListRemove, state.EvListSet:
		if ev.Index < 0 || ev.Index >= n {
			return fmt.Errorf("index %d of %d", ev.Index, n)
		}
		if !sameValue(r.list[ev.Index], ev.Old) {
			return fmt.Errorf("Old %v, element %v", ev.Old, r.list[ev.Index])
		}
		if ev.Kind == state.EvListSet {
			r.list[ev.Index] = ev.New
		} else {
			r.list = slices.Delete(r.list, ev.Index, ev.Index+1)
		}
	case state.EvMapAdd:
		if had {
			return fmt.Errorf("add of present key %v", ev.Key)
		}
		r.m[k] = ev.New
	case state.EvMapRemove, state.EvMapSet:
		if !had || !sameValue(old, ev.Old) {
			return fmt.Errorf("key %v: Old %v, value %v (present %v)", ev.Key, ev.Old, old, had)
		}
		if ev.Kind == state.EvMapSet {
			r.m[k] = ev.New
		} else {
			delete(r.m, k)
		}
	case state.EvBagAdd:
		if r.bag[ev.Key.N] != (ev.Old.R != nil) {
			return fmt.Errorf("add of key %d: present %v, Old %v", ev.Key.N, r.bag[ev.Key.N], ev.Old.R != nil)
		}
		r.bag[ev.Key.N] = true
	case state.EvBagRemove:
		if !r.bag[ev.Key.N] {
			return fmt.Errorf("remove of absent key %d", ev.Key.N)
		}
		delete(r.bag, ev.Key.N)
	case state.EvBagItem:
		if !r.bag[ev.Key.N] {
			return fmt.Errorf("item event for absent key %d", ev.Key.N)
		}
	}
	return nil
}

// same reports how the container at l of rec differs from r.
func (r *replay) same(rec *state.Record, l *schema.LeafInfo) error {
	switch l.Field.Type.Kind {
	case schema.List:
		c := rec.List(l.Obj)
		if c.Len() != len(r.list) {
			return fmt.Errorf("list of %d, events give %d", c.Len(), len(r.list))
		}
		for i, v := range r.list {
			if !sameValue(v, c.At(i)) {
				return fmt.Errorf("[%d] is %v, events give %v", i, c.At(i), v)
			}
		}
	case schema.Map:
		c := rec.Map(l.Obj)
		if c.Len() != len(r.m) {
			return fmt.Errorf("map of %d, events give %d", c.Len(), len(r.m))
		}
		for k, v := range r.m {
			if w, ok := c.Get(state.Value{N: k.n, S: k.s}); !ok || !sameValue(v, w) {
				return fmt.Errorf("[%v] is %v (present %v), events give %v", k, w, ok, v)
			}
		}
	case schema.Bag:
		c := rec.Bag(l.Obj)
		if c.Len() != len(r.bag) {
			return fmt.Errorf("bag of %d, events give %d", c.Len(), len(r.bag))
		}
		for k := range r.bag {
			if c.Get(k) == nil {
				return fmt.Errorf("key %d absent, events add it", k)
			}
		}
	}
	return nil
}

// ---- projection-aware comparison ----

// A projector compares a client's records with the server's, matching
// leaves by field ID path so that the two may use different schema
// versions.
type projector struct {
	maps map[[2]*schema.Struct]*leafMap
}

// A leafMap pairs the leaves of a server struct with a client struct's.
type leafMap struct {
	toClient   []int // per server leaf: the client leaf with its path, or −1
	clientOnly []int // client leaves no server leaf has the path of
}

func pathKey(p []uint32) string { return fmt.Sprint(p) }

func (p *projector) leafMap(st, kt *schema.Struct) *leafMap {
	key := [2]*schema.Struct{st, kt}
	if m := p.maps[key]; m != nil {
		return m
	}
	if p.maps == nil {
		p.maps = map[[2]*schema.Struct]*leafMap{}
	}
	byPath := make(map[string]int, kt.Leaves)
	for j := 0; j < kt.Leaves; j++ {
		byPath[pathKey(kt.Leaf(j).Path)] = j
	}
	m := &leafMap{toClient: make([]int, st.Leaves)}
	for i := range m.toClient {
		j, ok := byPath[pathKey(st.Leaf(i).Path)]
		if !ok {
			j = -1
		} else {
			delete(byPath, pathKey(st.Leaf(i).Path))
		}
		m.toClient[i] = j
	}
	for _, j := range byPath {
		m.clientOnly = append(m.clientOnly, j)
	}
	slices.Sort(m.clientOnly)
	p.maps[key] = m
	return m
}

// leafName renders the field names on the path of leaf l of st.
func leafName(st *schema.Struct, l *schema.LeafInfo) string {
	var names []string
	for _, id := range l.Path {
		f := st.Field(id)
		names = append(names, f.Name)
		st = f.Type.Struct
	}
	return strings.Join(names, ".")
}

func (p *projector) entity(se, ke *state.Entity, view schema.Visibility) error {
	if se.Class().ID != ke.Class().ID {
		return fmt.Errorf("client has class %s (ID %d)", ke.Class().Name, ke.Class().ID)
	}
	return p.record(&se.Record, &ke.Record, view, true)
}

// record compares client record k with server record s. At the top level
// of an entity only leaves whose visibility intersects view must be equal
// and the others must be zero on the client; inside container elements
// every leaf must be equal. Client leaves the server's schema lacks must be
// zero; server leaves the client's schema lacks are ignored.
func (p *projector) record(s, k *state.Record, view schema.Visibility, top bool) error {
	st, kt := s.Type(), k.Type()
	m := p.leafMap(st, kt)
	for i, j := range m.toClient {
		if j < 0 {
			continue
		}
		sl, kl := st.Leaf(i), kt.Leaf(j)
		if top && sl.Vis&view == 0 {
			if !k.IsZero(kl) {
				return fmt.Errorf("%s (vis %s) leaked to a client with view %s", leafName(st, sl), sl.Vis, view)
			}
			continue
		}
		if err := p.leaf(s, sl, k, kl); err != nil {
			return fmt.Errorf("%s: %w", leafName(st, sl), err)
		}
	}
	for _, j := range m.clientOnly {
		if !k.IsZero(kt.Leaf(j)) {
			return fmt.Errorf("%s, which the server's schema lacks, is not zero", leafName(kt, kt.Leaf(j)))
		}
	}
	return nil
}

func (p *projector) leaf(s *state.Record, sl *schema.LeafInfo, k *state.Record, kl *schema.LeafInfo) error {
	t := &sl.Field.Type
	switch {
	case t.Kind.Numeric():
		if a, b := s.Num(sl.Num), k.Num(kl.Num); a != b {
			return fmt.Errorf("client %#x, server %#x", b, a)
		}
	case t.Kind == schema.String || t.Kind == schema.Bytes:
		if a, b := s.Str(sl.Obj), k.Str(kl.Obj); a != b {
			return fmt.Errorf("client %.40q (len %d), server %.40q (len %d)", b, len(b), a, len(a))
		}
	case t.Kind == schema.List:
		a, b := s.List(sl.Obj), k.List(kl.Obj)
		if a.Len() != b.Len() {
			return fmt.Errorf("client list of %d, server %d", b.Len(), a.Len())
		}
		for i := 0; i < a.Len(); i++ {
			if err := p.value(t.Elem, a.At(i), b.At(i)); err != nil {
				return fmt.Errorf("[%d]: %w", i, err)
			}
		}
	case t.Kind == schema.Map:
		a, b := s.Map(sl.Obj), k.Map(kl.Obj)
		ak, bk := a.Keys(nil), b.Keys(nil)
		if !slices.Equal(ak, bk) {
			return fmt.Errorf("client keys %v, server %v", bk, ak)
		}
		for _, key := range ak {
			av, _ := a.Get(key)
			bv, _ := b.Get(key)
			if err := p.value(t.Elem, av, bv); err != nil {
				return fmt.Errorf("[%v]: %w", key, err)
			}
		}
	case t.Kind == schema.Bag:
		a, b := s.Bag(sl.Obj), k.Bag(kl.Obj)
		ak, bk := a.Keys(nil), b.Keys(nil)
		if !slices.Equal(ak, bk) {
			return fmt.Errorf("client keys %v, server %v", bk, ak)
		}
		for _, key := range ak {
			if err := p.record(a.Get(key), b.Get(key), 0, false); err != nil {
				return fmt.Errorf("[%d]: %w", key, err)
			}
		}
	}
	return nil
}

func (p *projector) value(t *schema.Type, a, b state.Value) error {
	switch {
	case t.Kind == schema.Nested:
		if a.R == nil || b.R == nil {
			return fmt.Errorf("missing record: client %v, server %v", b.R != nil, a.R != nil)
		}
		return p.record(a.R, b.R, 0, false)
	case t.Kind.Numeric():
		if a.N != b.N {
			return fmt.Errorf("client %#x, server %#x", b.N, a.N)
		}
	case a.S != b.S:
		return fmt.Errorf("client %.40q, server %.40q", b.S, a.S)
	}
	return nil
}

// ---- typed operations through the generated API ----

func drawF32(t *rapid.T, label string) float32 {
	return math.Float32frombits(uint32(mutate.Plain(t, &schema.Type{Kind: schema.Float32}, label)))
}

func drawF64(t *rapid.T, label string) float64 {
	return math.Float64frombits(mutate.Plain(t, &schema.Type{Kind: schema.Float64}, label))
}

func drawBytes(t *rapid.T, label string) []byte {
	return rapid.SliceOfN(rapid.Byte(), 0, 50).Draw(t, label)
}

// must reports a setter whose getter does not return what it stored.
func must(t *rapid.T, ok bool, what string, got, want any) {
	if !ok {
		t.Fatalf("%s: got %v, want %v", what, got, want)
	}
}

// roundTrip checks that storing the value a quantized getter returns
// leaves the stored code unchanged.
func roundTrip(t *rapid.T, e *state.Entity, name string, slot int, set func()) {
	before := e.Num(slot)
	set()
	must(t, e.Num(slot) == before, name+" re-stored", e.Num(slot), before)
}

func slotOf(c *schema.Struct, name string) int {
	for _, f := range c.Fields {
		if f.Name == name {
			return f.Num
		}
	}
	panic("no field " + name)
}

// Converters to the unexported named types of the schema packages, whose
// type is inferred from a value of it.
func asF32[T ~float32](_ T, f float32) T { return T(f) }
func asStr[T ~string](_ T, s string) T   { return T(s) }
func asBool[T ~bool](_ T, b bool) T      { return T(b) }
func asI64[T ~int64](_ T, v int64) T     { return T(v) }
func asU8[T ~uint8](_ T, v uint8) T      { return T(v) }

// keyOf returns the zero key of a map or bag through its Get method.
func keyOf[K, V any](func(K) (V, bool)) K {
	var k K
	return k
}

func typedV2(t *rapid.T, w *world, e *state.Entity) {
	if h, ok := v2.HeroOf(e); ok {
		heroV2(t, w, h)
	} else if m, ok := v2.MissileOf(e); ok {
		switch rapid.IntRange(0, 9).Draw(t, "missileOp") {
		case 8:
			// Named types of the schema package, unexported: values are
			// made by inference from a getter's result.
			a := asStr(m.Alias(), mutate.Str(t, "alias"))
			m.SetAlias(a)
			must(t, m.Alias() == a, "Alias", m.Alias(), a)
			d := asF32(m.Dist(), drawF32(t, "dist"))
			m.SetDist(d)
			m.SetLit(asBool(m.Lit(), rapid.Bool().Draw(t, "lit")))
			c := asI64(m.Credits(), rapid.Int64().Draw(t, "credits"))
			m.SetCredits(c)
			must(t, m.Credits() == c, "Credits", m.Credits(), c)
		case 9:
			k := asU8(keyOf(m.Crew().Get), rapid.Uint8Range(0, 3).Draw(t, "crew"))
			if it, ok := m.Crew().Get(k); ok {
				it.SetStacks(it.Stacks() + 1)
			} else {
				m.Crew().Add(k, v2.NewBuff())
			}
			lb := asStr(m.Alias(), rapid.SampledFrom([]string{"", "x", "y"}).Draw(t, "label"))
			m.Labels().Put(lb, asF32(m.Dist(), drawF32(t, "meters")))
			m.Dists().Push(asF32(m.Dist(), drawF32(t, "dist")))
		case 0:
			x := replica.Ref(rapid.Uint32().Draw(t, "ref"))
			m.SetShooter(x)
			must(t, m.Shooter() == x, "Shooter", m.Shooter(), x)
		case 1:
			m.Pos().SetX(drawF32(t, "x"))
			m.Pos().SetW(rapid.Int16().Draw(t, "w"))
		case 2:
			v := v2.NewVec()
			v.SetZ(drawF64(t, "z"))
			v.SetY(drawF32(t, "y"))
			m.SetVel(v)
			must(t, math.Float64bits(m.Vel().Z()) == math.Float64bits(v.Z()), "Vel.Z", m.Vel().Z(), v.Z())
		case 3:
			m.SetTtl(drawF32(t, "ttl"))
			roundTrip(t, m.Entity(), "Ttl", slotOf(m.Entity().Class(), "ttl"), func() { m.SetTtl(m.Ttl()) })
		case 4:
			m.Hits().Put(rapid.Int64().Draw(t, "k"), rapid.Uint8().Draw(t, "v"))
		case 5:
			k := rapid.Int8Range(-2, 2).Draw(t, "k")
			it, ok := m.Effects().Get(k)
			if !ok {
				it = m.Effects().Add(k, v2.NewItem())
			}
			it.Tags().Push(mutate.Str(t, "tag"))
			it.Notes().Put(rapid.Int32().Draw(t, "note"), mutate.Str(t, "text"))
			it.Pos().SetZ(drawF64(t, "z"))
		case 6:
			m.SetSecret(mutate.Str(t, "secret"))
		default:
			m.SetFuel(drawF64(t, "fuel"))
			roundTrip(t, m.Entity(), "Fuel", slotOf(m.Entity().Class(), "fuel"), func() { m.SetFuel(m.Fuel()) })
		}
	} else if b, ok := v2.BeaconOf(e); ok {
		switch rapid.IntRange(0, 5).Draw(t, "beaconOp") {
		case 0:
			b.Pos().SetW(rapid.Int16().Draw(t, "w"))
		case 1:
			s := mutate.Str(t, "label")
			b.SetLabel(s)
			must(t, b.Label() == s, "Label", b.Label(), s)
		case 2:
			b.SetPower(rapid.Uint32().Draw(t, "power"))
		case 3:
			b.Members().Push(replica.Ref(rapid.Uint32().Draw(t, "ref")))
			if n := b.Members().Len(); n > 1 && rapid.Bool().Draw(t, "remove") {
				b.Members().Remove(rapid.IntRange(0, n-1).Draw(t, "i"))
			}
		case 4:
			k := rapid.Uint16Range(0, 4).Draw(t, "k")
			if it, ok := b.Loot().Get(k); ok {
				it.SetStacks(rapid.Uint8().Draw(t, "stacks"))
				it.SetNote(mutate.Str(t, "note"))
			} else {
				x := v2.NewBuff()
				x.SetKind(rapid.Uint16().Draw(t, "kind"))
				b.Loot().Add(k, x)
			}
		default:
			b.Loot().Remove(rapid.Uint16Range(0, 4).Draw(t, "k"))
		}
	}
}

func heroV2(t *rapid.T, w *world, h v2.Hero) {
	switch rapid.IntRange(0, 22).Draw(t, "heroOp") {
	case 21:
		h.SetQwide(drawF64(t, "qwide"))
		roundTrip(t, h.Entity(), "Qwide", slotOf(h.Entity().Class(), "qwide"), func() { h.SetQwide(h.Qwide()) })
		k := rapid.Int8().Draw(t, "zone")
		h.Zones().Put(k, drawF64(t, "z"))
		z, _ := h.Zones().Get(k)
		h.Zones().Put(k, z)
		z2, _ := h.Zones().Get(k)
		must(t, z == z2, "Zones re-put", z2, z)
		h.Ws().Push(drawF64(t, "w"))
		h.Toggles().Push(rapid.Bool().Draw(t, "toggle"))
	case 22:
		a, b := h.Side(), h.Side()
		a, b = a+1, b*3
		h.Sides().Push(a)
		h.Teams().Put(a, b)
		if v, ok := h.Teams().Get(a); !ok || v != b {
			t.Fatalf("Teams.Get(%d) = %d, %v; want %d", a, v, ok, b)
		}
		k := rapid.Int32Range(-2, 2).Draw(t, "bin")
		bin := drawBytes(t, "bytes")
		h.Bins().Put(k, bin)
		if v, _ := h.Bins().Get(k); string(v) != string(bin) {
			t.Fatalf("Bins.Get = %q, want %q", v, bin)
		}
		h.Flags().Put(rapid.Uint16().Draw(t, "flag"), rapid.Bool().Draw(t, "on"))
		h.Refs().Put(mutate.Str(t, "ref"), replica.Ref(rapid.Uint32().Draw(t, "id")))
	case 0:
		x := rapid.Int8().Draw(t, "i8")
		h.SetI8(x)
		must(t, h.I8() == x, "I8", h.I8(), x)
		y := rapid.Int64().Draw(t, "i64")
		h.SetI64(y)
		must(t, h.I64() == y, "I64", h.I64(), y)
	case 1:
		x := rapid.Uint64().Draw(t, "u64")
		h.SetU64(x)
		must(t, h.U64() == x, "U64", h.U64(), x)
		y := rapid.Uint16().Draw(t, "u16")
		h.SetU16(y)
		must(t, h.U16() == y, "U16", h.U16(), y)
		h.SetAlive(!h.Alive())
	case 2:
		x := drawF32(t, "f32")
		h.SetF32(x)
		must(t, math.Float32bits(h.F32()) == math.Float32bits(x), "F32", h.F32(), x)
		y := drawF64(t, "f64")
		h.SetF64(y)
		must(t, math.Float64bits(h.F64()) == math.Float64bits(y), "F64", h.F64(), y)
	case 3:
		h.SetQb(drawF32(t, "qb"))
		roundTrip(t, h.Entity(), "Qb", slotOf(h.Entity().Class(), "qb"), func() { h.SetQb(h.Qb()) })
		h.SetQbits(drawF64(t, "qbits"))
		roundTrip(t, h.Entity(), "Qbits", slotOf(h.Entity().Class(), "qbits"), func() { h.SetQbits(h.Qbits()) })
		h.SetQu(drawF32(t, "qu"))
		h.SetQu64(drawF64(t, "qu64"))
	case 4:
		s := mutate.Str(t, "name")
		h.SetName(s)
		must(t, h.Name() == s, "Name", h.Name(), s)
		b := drawBytes(t, "blob")
		h.SetBlob(b)
		must(t, string(h.Blob()) == string(b), "Blob", h.Blob(), b)
		h.SetTitle(mutate.Str(t, "title"))
	case 5:
		bits := rapid.Uint8().Draw(t, "side")
		h.SetSide(asU8(h.Side(), bits))
		must(t, uint8(h.Side()) == bits, "Side", h.Side(), bits)
		h.SetTarget(replica.Ref(rapid.Uint32().Draw(t, "target")))
		h.SetMana(rapid.Int32().Draw(t, "mana"))
	case 6:
		p := h.Body().Pos()
		p.SetX(drawF32(t, "x"))
		p.SetY(drawF32(t, "y"))
		p.SetZ(drawF64(t, "z"))
		p.SetW(rapid.Int16().Draw(t, "w"))
		h.Body().SetMark(rapid.Uint16().Draw(t, "mark"))
		h.Body().SetGlow(rapid.Bool().Draw(t, "glow"))
	case 7:
		s := h.Body().Stats()
		s.SetStr(rapid.Int16().Draw(t, "str"))
		s.SetDex(rapid.Int16().Draw(t, "dex"))
		s.SetLuck(rapid.Int8().Draw(t, "luck"))
		s.Hist().Push(rapid.Int8().Draw(t, "hist"))
		r := s.Resist()
		r.SetFire(rapid.Uint8().Draw(t, "fire"))
		r.SetIce(rapid.Uint8().Draw(t, "ice"))
		r.SetGm(mutate.Str(t, "gm"))
		r.SetWind(rapid.Uint8().Draw(t, "wind"))
		must(t, h.Body().Stats().Resist().Wind() == r.Wind(), "Wind", h.Body().Stats().Resist().Wind(), r.Wind())
	case 8:
		b := v2.NewBody()
		b.Pos().SetX(drawF32(t, "x"))
		b.Stats().SetStr(rapid.Int16().Draw(t, "str"))
		b.Stats().Resist().SetFire(rapid.Uint8().Draw(t, "fire"))
		b.Stats().Hist().Push(rapid.Int8().Draw(t, "hist"))
		b.SetGlow(rapid.Bool().Draw(t, "glow"))
		h.SetBody(b)
		must(t, h.Body().Pos().X() == b.Pos().X(), "Body.Pos.X", h.Body().Pos().X(), b.Pos().X())
		must(t, h.Body().Stats().Hist().Len() == b.Stats().Hist().Len(), "Body.Stats.Hist", h.Body().Stats().Hist().Len(), b.Stats().Hist().Len())
	case 9:
		// Copy nested values between entities and out of a bag item.
		if o, ok := v2.HeroOf(w.pick(t)); ok {
			h.Body().SetStats(o.Body().Stats())
			h.Body().Stats().SetResist(o.Body().Stats().Resist().Clone())
		}
		for _, it := range h.Inv().All() {
			h.Body().SetPos(it.Pos())
			break
		}
	case 10:
		l := h.Scores()
		l.Push(rapid.Int32().Draw(t, "score"))
		if l.Len() > 1 {
			l.Insert(rapid.IntRange(0, l.Len()).Draw(t, "i"), rapid.Int32().Draw(t, "score"))
			l.Set(rapid.IntRange(0, l.Len()-1).Draw(t, "i"), rapid.Int32().Draw(t, "score"))
			l.Remove(rapid.IntRange(0, l.Len()-1).Draw(t, "i"))
		}
		if rapid.IntRange(0, 5).Draw(t, "clear") == 0 {
			l.Clear()
		}
	case 11:
		h.Path().Push(drawF32(t, "path"))
		h.Angles().Push(drawF32(t, "angle"))
		h.Perks().Push(rapid.Uint16().Draw(t, "perk"))
		h.Blobs().Push(drawBytes(t, "blob"))
		h.Tags().Push(mutate.Str(t, "tag"))
	case 12:
		x := v2.NewBuff()
		x.SetKind(rapid.Uint16().Draw(t, "kind"))
		x.SetUntil(rapid.Int64().Draw(t, "until"))
		x.SetNote(mutate.Str(t, "note"))
		x.SetStacks(rapid.Uint8().Draw(t, "stacks"))
		h.Buffs().Push(x)
		if n := h.Buffs().Len(); n > 1 {
			y := h.Buffs().At(rapid.IntRange(0, n-1).Draw(t, "from"))
			y.SetStacks(y.Stacks() + 1)
			h.Buffs().Set(rapid.IntRange(0, n-1).Draw(t, "to"), y)
		}
	case 13:
		k := rapid.SampledFrom([]string{"a", "b", ""}).Draw(t, "k")
		if rapid.Bool().Draw(t, "delete") {
			h.Cds().Delete(k)
		} else {
			h.Cds().Put(k, drawF32(t, "cd"))
		}
		h.ByLevel().Put(rapid.Int16Range(-3, 3).Draw(t, "level"), mutate.Str(t, "s"))
		h.Counts().Put(rapid.Uint64().Draw(t, "k"), rapid.Int64().Draw(t, "v"))
	case 14:
		k := rapid.SampledFrom([]string{"a", "b"}).Draw(t, "k")
		x, ok := h.ByName().Get(k)
		if !ok {
			x = v2.NewBuff()
		}
		x.SetUntil(rapid.Int64().Draw(t, "until"))
		h.ByName().Put(k, x)
		if rapid.IntRange(0, 4).Draw(t, "clear") == 0 {
			h.ByName().Clear()
		}
	case 15:
		k := rapid.Uint32Range(0, 4).Draw(t, "k")
		x := v2.NewItem()
		x.SetKind(rapid.Uint16().Draw(t, "kind"))
		x.Tags().Push(mutate.Str(t, "tag"))
		x.Mods().Put(mutate.Str(t, "mod"), rapid.Int16().Draw(t, "v"))
		x.Pos().SetY(drawF32(t, "y"))
		it := h.Inv().Add(k, x)
		must(t, it.Kind() == x.Kind(), "Inv.Add", it.Kind(), x.Kind())
	case 16, 17:
		for k, it := range h.Inv().All() {
			switch rapid.IntRange(0, 6).Draw(t, "itemOp") {
			case 0:
				it.SetCount(rapid.Int32().Draw(t, "count"))
			case 1:
				it.Pos().SetX(drawF32(t, "x"))
				it.Pos().SetW(rapid.Int16().Draw(t, "w"))
			case 2:
				it.Tags().Push(mutate.Str(t, "tag"))
				if it.Tags().Len() > 2 {
					it.Tags().Remove(0)
				}
			case 3:
				it.Mods().Put(mutate.Str(t, "mod"), rapid.Int16().Draw(t, "v"))
			case 4:
				v := v2.NewVec()
				v.SetZ(drawF64(t, "z"))
				it.SetPos(v)
			case 5:
				it.SetRarity(rapid.Uint8().Draw(t, "rarity"))
				it.Notes().Put(rapid.Int32Range(-2, 2).Draw(t, "k"), mutate.Str(t, "note"))
			default:
				h.Inv().Remove(k)
			}
			if rapid.Bool().Draw(t, "stop") {
				break
			}
		}
	case 18:
		l := h.Path()
		for n := rapid.IntRange(1, 30).Draw(t, "n"); n > 0; n-- {
			l.Push(float32(n) / 2)
		}
		if l.Len() > 3 {
			l.Remove(1)
			l.Insert(2, drawF32(t, "p"))
		}
	case 19:
		// Repeated writes to one field in a tick, ending where it started.
		old := h.I16()
		h.SetI16(old + 1)
		h.SetI16(rapid.Int16().Draw(t, "i16"))
		if rapid.Bool().Draw(t, "back") {
			h.SetI16(old)
		}
	default:
		h.SetI32(rapid.Int32().Draw(t, "i32"))
		h.SetU8(rapid.Uint8().Draw(t, "u8"))
		h.SetU32(rapid.Uint32().Draw(t, "u32"))
		h.SetI16(rapid.Int16().Draw(t, "i16"))
	}
}

func typedV1(t *rapid.T, w *world, e *state.Entity) {
	if h, ok := v1.HeroOf(e); ok {
		switch rapid.IntRange(0, 6).Draw(t, "heroOp") {
		case 0:
			h.SetDropped(rapid.Int16().Draw(t, "dropped"))
			h.SetOld(rapid.Int32().Draw(t, "old"))
		case 1:
			h.SetI8(rapid.Int8().Draw(t, "i8"))
			h.SetQb(drawF32(t, "qb"))
			roundTrip(t, h.Entity(), "Qb", slotOf(h.Entity().Class(), "qb"), func() { h.SetQb(h.Qb()) })
		case 2:
			h.Body().Stats().Resist().SetFire(rapid.Uint8().Draw(t, "fire"))
			h.Body().Pos().SetZ(drawF64(t, "z"))
		case 3:
			b := v1.NewBody()
			b.Stats().SetDex(rapid.Int16().Draw(t, "dex"))
			b.Pos().SetY(drawF32(t, "y"))
			h.SetBody(b)
		case 4:
			x := v1.NewItem()
			x.SetCount(rapid.Int32().Draw(t, "count"))
			x.Tags().Push(mutate.Str(t, "tag"))
			h.Inv().Add(rapid.Uint32Range(0, 3).Draw(t, "k"), x)
		case 5:
			for _, it := range h.Inv().All() {
				it.Pos().SetX(drawF32(t, "x"))
				it.Mods().Put(mutate.Str(t, "mod"), rapid.Int16().Draw(t, "v"))
				break
			}
		default:
			x := v1.NewBuff()
			x.SetKind(rapid.Uint16().Draw(t, "kind"))
			h.Buffs().Push(x)
			h.ByName().Put(mutate.Str(t, "k"), x)
		}
	} else if m, ok := v1.MissileOf(e); ok {
		switch rapid.IntRange(0, 2).Draw(t, "missileOp") {
		case 0:
			m.SetTtl(drawF32(t, "ttl"))
		case 1:
			v := v1.NewVec()
			v.SetX(drawF32(t, "x"))
			m.SetPos(v)
		default:
			k := rapid.Int8Range(-2, 2).Draw(t, "k")
			if it, ok := m.Effects().Get(k); ok {
				it.SetKind(rapid.Uint16().Draw(t, "kind"))
			} else {
				m.Effects().Add(k, v1.NewItem())
			}
		}
	}
}

// ---- regressions ----

// replicate sends the committed tick to a fresh-state client table through
// all three partitions as the owner and returns the client's entity id.
func replicateOwner(t *testing.T, tr *state.Tracker, dec *codec.Decoder, tab *state.Table, id state.ID) *state.Entity {
	t.Helper()
	var enc codec.Encoder
	cs := tr.Commit()
	txn := tab.Begin()
	for _, seg := range [][]byte{enc.Delta(nil, cs, codec.PartAll, nil), enc.Delta(nil, cs, codec.PartOwner, nil)} {
		if err := dec.Apply(txn, seg); err != nil {
			txn.Rollback()
			t.Fatalf("apply: %v", err)
		}
	}
	txn.Commit()
	e := tab.Entity(id)
	if e == nil {
		t.Fatalf("entity %d not replicated", id)
	}
	return e
}

// Regression: Handle.SetNested looked up the nested struct type from the
// LeafInfo of the field's first leaf, which describes the innermost first
// scalar field, not the nested field. Every generated SetX for a nested
// struct whose first field is a scalar (Vec) dereferenced a nil struct, and
// one whose first field is itself nested (Body, whose first field is Pos)
// copied the wrong, smaller struct. SetNested now takes the struct type.
func TestSetNestedStructType(t *testing.T) {
	tr := state.NewTracker(v2.Schema())
	dec, err := codec.NewDecoder(v2.Schema(), nil, codec.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	tab := state.NewTable()
	h, _ := v2.SpawnHero(tr)
	m, _ := v2.SpawnMissile(tr)
	replicateOwner(t, tr, dec, tab, h.ID())

	b := v2.NewBody()
	b.SetMark(7)
	b.SetGlow(true)
	b.Stats().SetDex(-3)
	b.Stats().Resist().SetWind(9)
	v := v2.NewVec()
	v.SetW(-5)
	v.SetZ(2.5)
	b.SetPos(v) // Body's first field is nested: the ambiguous case
	h.SetBody(b)
	m.SetVel(v) // Vec's first field is a scalar: used to panic
	if got := h.Body().Mark(); got != 7 {
		t.Errorf("Body.Mark = %d, want 7", got)
	}
	if !h.Body().Glow() || h.Body().Stats().Dex() != -3 || h.Body().Stats().Resist().Wind() != 9 {
		t.Errorf("SetBody did not copy the whole body")
	}
	if h.Body().Pos().W() != -5 || h.Body().Pos().Z() != 2.5 || m.Vel().W() != -5 {
		t.Errorf("SetPos/SetVel did not copy the vector")
	}
	ce := replicateOwner(t, tr, dec, tab, h.ID())
	ch, _ := v2.HeroViewOf(ce)
	if ch.Body().Mark() != 0 /* vis=others */ || !ch.Body().Glow() || ch.Body().Stats().Resist().Wind() != 9 || ch.Body().Pos().W() != -5 {
		t.Errorf("client body: glow %v wind %d w %d", ch.Body().Glow(), ch.Body().Stats().Resist().Wind(), ch.Body().Pos().W())
	}
}

// Regression: Handle.SetNested passed the source's stored values to
// SetNum, which expects plain values and normalizes them again, so a
// quantized float's code was taken for float bits and re-quantized (to 0).
func TestSetNestedQuantized(t *testing.T) {
	tr := state.NewTracker(v2.Schema())
	dec, err := codec.NewDecoder(v2.Schema(), nil, codec.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	tab := state.NewTable()
	h, _ := v2.SpawnHero(tr)
	replicateOwner(t, tr, dec, tab, h.ID())
	v := v2.NewVec()
	v.SetX(3)
	v.SetY(-1.25)
	h.Body().SetPos(v)
	it := h.Inv().Add(1, v2.NewItem())
	it.SetPos(v)
	if x, y := h.Body().Pos().X(), h.Body().Pos().Y(); x != 3 || y != -1.25 {
		t.Fatalf("Body.Pos = (%v, %v), want (3, -1.25)", x, y)
	}
	if x := it.Pos().X(); x != 3 {
		t.Fatalf("item Pos.X = %v, want 3", x)
	}
	ce := replicateOwner(t, tr, dec, tab, h.ID())
	ch, _ := v2.HeroViewOf(ce)
	ci, _ := ch.Inv().Get(1)
	if x := ch.Body().Pos().X(); x != 3 || ci.Pos().X() != 3 {
		t.Fatalf("client Pos.X = %v, item %v; want 3", x, ci.Pos().X())
	}
}

// TestDescriptorRoundTrip checks that the descriptor of each test schema
// decodes to the same classes, fields, types, flags and layout.
func TestDescriptorRoundTrip(t *testing.T) {
	for name, s := range map[string]*schema.Schema{"v1": v1.Schema(), "v2": v2.Schema()} {
		d, err := schema.DecodeDescriptor(s.AppendDescriptor(nil))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if len(d.Classes) != len(s.Classes) {
			t.Fatalf("%s: %d classes, want %d", name, len(d.Classes), len(s.Classes))
		}
		seen := map[*schema.Struct]bool{}
		var same func(a, b *schema.Struct) error
		same = func(a, b *schema.Struct) error {
			if seen[a] {
				return nil
			}
			seen[a] = true
			if a.Name != b.Name || a.Class != b.Class || a.ID != b.ID || len(a.Fields) != len(b.Fields) ||
				a.Leaves != b.Leaves || a.NumSlots != b.NumSlots || (a.StrSlots+a.ContSlots) != (b.StrSlots+b.ContSlots) {
				return fmt.Errorf("struct %s: decoded %+v", a.Name, *b)
			}
			for i, f := range a.Fields {
				g := b.Fields[i]
				if f.ID != g.ID || f.Name != g.Name || f.Type.String() != g.Type.String() || f.Vis != g.Vis ||
					f.Life != g.Life || f.Chan != g.Chan || f.Deprecated != g.Deprecated ||
					f.Num != g.Num || f.Obj != g.Obj || f.Leaf != g.Leaf || f.Type.Quant != g.Type.Quant {
					return fmt.Errorf("%s.%s: decoded %+v, want %+v", a.Name, f.Name, *g, *f)
				}
				for ta, tb := &f.Type, &g.Type; ta != nil; ta, tb = ta.Elem, tb.Elem {
					if ta.Struct != nil {
						if err := same(ta.Struct, tb.Struct); err != nil {
							return err
						}
					}
					if ta.Quant != tb.Quant {
						return fmt.Errorf("%s.%s: element quantization %+v, want %+v", a.Name, f.Name, tb.Quant, ta.Quant)
					}
				}
			}
			return nil
		}
		for i, c := range s.Classes {
			if err := same(c, d.Classes[i]); err != nil {
				t.Errorf("%s: %v", name, err)
			}
		}
	}
}
