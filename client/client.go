// Package client is the client side of replica: a replica of the entities
// a server replicates to this client, updated one tick at a time, with
// callbacks.
//
// # Ticks
//
// [Replica.Apply] takes the segments a client received for one tick (the
// PartAll segment and its partition's segment, see package codec), decodes
// them into the replica inside one transaction and, only when every segment
// decoded, commits the transaction and runs the callbacks. A segment that is
// malformed, exceeds the configured limits or contradicts the replica (an
// update of an unknown entity, say) makes Apply roll the whole tick back and
// return an error wrapping a [*codec.DecodeError]: the replica is then
// exactly as it was before the tick and no callback runs. Bad input never
// panics.
//
// # Callbacks
//
// Callbacks are registered per class, and per leaf for value changes: a
// leaf is a scalar or container field of the class, fields of nested
// structs included (see [schema.LeafInfo]). Generated packages wrap these
// registrations in typed functions, for example OnPlayerCreate and
// OnPlayerHpChange, which pass read-only views of the entities and their
// values (PlayerView); use them when you can. Code that registers by leaf
// number finds it as the Leaf of the field in the class's schema (the
// class's schema.Struct, from the generated Schema function): for a field
// of a nested struct, add the nested field's Leaf to its parent's.
//
// Only leaves that something watches produce events: registering a value
// callback watches its leaf (state.Table.Watch), and unwatched leaves cost
// nothing beyond being applied. A leaf stays watched after its callbacks are
// unregistered.
//
// Callbacks run after the whole tick is committed, in the order of the
// tick's events (the order the changes were applied in) and, for one event,
// in registration order. So every callback sees the replica as the tick
// left it: references to entities created in the same tick resolve (see
// [Replica.Resolve]), and a callback of an earlier event already sees later
// changes of the same tick. The old and new values an event carries are
// those of that one change.
//
// A new entity reports, in this order (other entities' events may come in
// between): its OnCreate callbacks, then each watched scalar leaf whose
// initial value differs from a new record's as a field change from that
// value, and each item of its watched containers as added. A new record
// holds zero in every slot, which is the zero value of the field's Go type
// except for a float with a bounded quantization, where it is the minimum.
// Leaves that keep the value of a new record report nothing; read them in
// OnCreate. A destroyed entity reports OnDestroy, with the entity as it was
// when destroyed; it is no longer in the replica.
//
// A callback registered while callbacks run takes effect from the next
// tick; one unregistered while callbacks run does not run again, not even
// for the rest of the tick.
//
// A Replica is not safe for concurrent use, and callbacks must not call
// Apply. Only Apply changes entities: generated views have no setters, and
// the setters of package state panic on a replica's entities (see
// state.ErrReadOnly).
package client

import (
	"errors"
	"fmt"
	"slices"

	"github.com/replicago/replica"
	"github.com/replicago/replica/codec"
	"github.com/replicago/replica/schema"
	"github.com/replicago/replica/state"
)

// Config configures a [Replica]. The zero value for Config is valid.
type Config struct {
	// Remote is the sender's schema, when it is a different version of the
	// local one (normally the descriptor received at connect time); nil
	// means the same as the local schema.
	Remote *schema.Schema

	// Limits bound what one segment may contain; zero fields select the
	// defaults of codec.Limits.
	Limits codec.Limits
}

// ErrReentrant is returned by [Replica.Apply] when it is called from a
// callback.
var ErrReentrant = errors.New("client: Apply called from a callback")

// A TickError reports that a tick was rejected and the replica left as it
// was before it. Err is the [*codec.DecodeError] of the segment that failed;
// errors.As and errors.Is see through a TickError to it and its cause.
type TickError struct {
	Segment int   // index of the rejected segment among Apply's arguments
	Err     error // the decoder's error
}

func (e *TickError) Error() string {
	return fmt.Sprintf("client: tick rejected at segment %d: %v", e.Segment, e.Err)
}

func (e *TickError) Unwrap() error { return e.Err }

// A Replica is a client's copy of the entities replicated to it.
type Replica struct {
	local  *schema.Schema
	remote *schema.Schema
	tab    *state.Table
	dec    *codec.Decoder

	classes map[*schema.Struct]*classCallbacks
	lastC   *schema.Struct // one-entry cache of classes
	lastCC  *classCallbacks

	tick        uint64 // ticks applied or being applied
	dispatching bool
	lastEvents  int // events the last committed tick produced

	parts   map[*schema.Struct]*[2][]uint64 // codec.PartLeaves of PartOthers and PartOwner, by class
	created []state.ID                      // ApplyTick's scratch
	later   []Level                         // ApplyTick's scratch: levels of entities the tick creates
	bands   map[*schema.Struct][]uint8      // per class, each leaf's band in the sender's class
}

// A Level is an entity's new level of detail in a tick (docs/protocol.md
// §5.8): the client knows its fields of level-of-detail bands 1..Level.
type Level struct {
	ID    state.ID
	Level uint8
}

// TickInfo is what a TICK message says besides its segments: the entities
// whose ownership by this client, and whose level of detail, the tick
// changes.
type TickInfo struct {
	Gained, Lost []state.ID
	Levels       []Level
}

// ErrLevel is the cause of a [TickError] whose level-of-detail changes
// contradict the replica: an entity it neither has nor receives, a level
// above the class's bands, or an entity listed twice.
var ErrLevel = errors.New("client: inconsistent level of detail")

// leafBands returns, for each leaf of class c (local or the sender's), the
// level-of-detail band of the sender's leaf with the same path, or 0.
func (r *Replica) leafBands(c *schema.Struct) []uint8 {
	if b, ok := r.bands[c]; ok {
		return b
	}
	var out []uint8
	if rc := r.remote.Class(c.ID); rc != nil && len(rc.Bands()) > 0 {
		byPath := make(map[string]uint8)
		for i := range rc.Leaves {
			if l := rc.Leaf(i); l.Band > 0 {
				byPath[fmt.Sprint(l.Path)] = l.Band
			}
		}
		out = make([]uint8, c.Leaves)
		for i := range c.Leaves {
			out[i] = byPath[fmt.Sprint(c.Leaf(i).Path)]
		}
	}
	if r.bands == nil {
		r.bands = make(map[*schema.Struct][]uint8)
	}
	r.bands[c] = out
	return out
}

// Knows reports whether the replica knows leaf leaf of e: true unless e
// is held at a level of detail below the leaf's band (docs/protocol.md
// §5.8), in which case the leaf holds its zero value and the server sends
// it again when the client comes near enough.
func (r *Replica) Knows(e *state.Entity, leaf int) bool {
	level, all := e.Level()
	if all {
		return true
	}
	b := r.leafBands(e.Class())
	return b == nil || int(b[leaf]) <= level
}

// ErrNoField is returned by KnowsField for a path that names no field of
// the entity's class.
var ErrNoField = errors.New("client: no such field")

// KnowsField is Knows for the field at a dotted path of e's class ("emote",
// "gear.helm"), as the generated code names fields: false when e is held
// at a level of detail below the field's band (the field then holds its
// zero value, and the server sends it again when the client comes near
// enough). A struct field is known when its leaves are: they share its
// band.
func (r *Replica) KnowsField(e *state.Entity, path string) (bool, error) {
	c := e.Class()
	fields := c.FieldPath(path)
	if fields == nil {
		return false, fmt.Errorf("%w: %s has no %q", ErrNoField, c.Name, path)
	}
	for i := range c.Leaves {
		if p := c.Leaf(i).Path; len(p) >= len(fields) && slices.EqualFunc(p[:len(fields)], fields, func(id uint32, f *schema.Field) bool { return id == f.ID }) {
			return r.Knows(e, i), nil
		}
	}
	return false, fmt.Errorf("%w: %s has no %q", ErrNoField, c.Name, path)
}

// setLevel applies a level change to e in txn: level ≥ the sender's
// class's bands means every band.
func (r *Replica) setLevel(txn *state.Txn, e *state.Entity, level uint8) error {
	rc := r.remote.Class(e.Class().ID)
	if rc == nil || int(level) > len(rc.Bands()) {
		return fmt.Errorf("%w: level %d of %#x, whose class has fewer bands", ErrLevel, level, uint32(e.ID()))
	}
	lod := level + 1
	if int(level) == len(rc.Bands()) {
		lod = 0
	}
	var forget []uint64
	if old, all := e.Level(); all || int(level) < old {
		bands := r.leafBands(e.Class())
		forget = make([]uint64, (e.Class().Leaves+63)/64)
		for i, b := range bands {
			if int(b) > int(level) {
				forget[i>>6] |= 1 << (i & 63)
			}
		}
	}
	txn.SetLevel(e, lod, forget)
	return nil
}

// partLeaves returns codec.PartLeaves(c, part) for PartOthers or PartOwner.
func (r *Replica) partLeaves(c *schema.Struct, part codec.Part) []uint64 {
	p := r.parts[c]
	if p == nil {
		p = &[2][]uint64{codec.PartLeaves(c, codec.PartOthers), codec.PartLeaves(c, codec.PartOwner)}
		if r.parts == nil {
			r.parts = make(map[*schema.Struct]*[2][]uint64)
		}
		r.parts[c] = p
	}
	if part == codec.PartOwner {
		return p[1]
	}
	return p[0]
}

// New returns an empty replica of the classes of local, decoding data
// encoded with cfg.Remote. It reports codec.ErrIncompatible if the two
// schemas disagree on a field.
func New(local *schema.Schema, cfg Config) (*Replica, error) {
	if local == nil {
		return nil, errors.New("client: nil local schema")
	}
	dec, err := codec.NewDecoder(local, cfg.Remote, cfg.Limits)
	if err != nil {
		return nil, err
	}
	remote := cfg.Remote
	if remote == nil {
		remote = local
	}
	return &Replica{local: local, remote: remote, tab: state.NewTable(), dec: dec,
		classes: make(map[*schema.Struct]*classCallbacks)}, nil
}

// Schema returns the local schema.
func (r *Replica) Schema() *schema.Schema { return r.local }

// Apply applies one tick: the segments the client received for it, in the
// order they were encoded (PartAll first). It either applies all of them
// and then runs the callbacks, or, if any segment is bad, none: it then
// returns a [*TickError] and the replica is as it was before the call.
//
// A panic in a callback propagates out of Apply. The tick is committed by
// then: the replica stays consistent and usable, but the callbacks of the
// tick's remaining events do not run.
func (r *Replica) Apply(segments ...[]byte) error { return r.ApplyTick(nil, nil, segments...) }

// ErrOwnership is the cause of a [TickError] whose ownership changes
// contradict the replica: it gains an entity it already owns or that the
// tick does not create, or loses one it does not own.
var ErrOwnership = errors.New("client: inconsistent ownership change")

// ApplyTick is [Replica.Apply] for a tick that also changes which entities
// this client owns (docs/protocol.md §10.2, TICK): it gains the entities of
// gained and loses those of lost. An entity it loses forgets its owner-only
// fields and one it gains its others-only fields, in the same transaction,
// and the tick's segments fill in the fields of the partition it now sees;
// [state.Entity.Owned] reports the result, and OnOwnership callbacks run
// with the others. A contradictory change rejects the tick with a
// [TickError] whose Segment is −1 and whose cause is ErrOwnership.
func (r *Replica) ApplyTick(gained, lost []state.ID, segments ...[]byte) error {
	return r.ApplyTickInfo(TickInfo{Gained: gained, Lost: lost}, segments...)
}

// ApplyTickInfo is [Replica.ApplyTick] for a tick that may also change
// levels of detail (docs/protocol.md §5.8): an entity held at a lower
// level forgets the fields of the bands above it (they read as zero,
// [Replica.Knows] reports them unknown, and field callbacks report the
// change to zero); at a higher level the tick's segments fill in the
// fields of the bands it enters. [state.Entity.Level] reports the
// result, and OnLevel callbacks run with the others. A contradictory
// change rejects the tick with a [TickError] whose Segment is −1 and whose
// cause is ErrLevel.
func (r *Replica) ApplyTickInfo(info TickInfo, segments ...[]byte) error {
	if r.dispatching {
		return ErrReentrant
	}
	gained, lost := info.Gained, info.Lost
	txn := r.tab.Begin()
	fail := func(seg int, err error) error {
		txn.Rollback()
		return &TickError{Segment: seg, Err: err}
	}
	later := r.later[:0] // levels of entities the tick creates
	for i, l := range info.Levels {
		for _, m := range info.Levels[:i] {
			if m.ID == l.ID {
				return fail(-1, fmt.Errorf("%w: %#x listed twice", ErrLevel, uint32(l.ID)))
			}
		}
		e := r.tab.Entity(l.ID)
		if e == nil {
			later = append(later, l)
			continue
		}
		if err := r.setLevel(txn, e, l.Level); err != nil {
			return fail(-1, err)
		}
	}
	r.later = later
	for _, id := range lost {
		e := r.tab.Entity(id)
		if !e.Owned() {
			return fail(-1, fmt.Errorf("%w: lost %#x, which it does not own", ErrOwnership, uint32(id)))
		}
		txn.ZeroLeaves(e, r.partLeaves(e.Class(), codec.PartOwner))
		txn.SetOwned(e, false)
	}
	created := r.created[:0] // gained entities the tick creates
	for _, id := range gained {
		switch e := r.tab.Entity(id); {
		case e == nil:
			created = append(created, id)
		case e.Owned():
			return fail(-1, fmt.Errorf("%w: gained %#x, which it already owns", ErrOwnership, uint32(id)))
		default:
			txn.ZeroLeaves(e, r.partLeaves(e.Class(), codec.PartOthers))
			txn.SetOwned(e, true)
		}
	}
	r.created = created
	for i, seg := range segments {
		if err := r.dec.Apply(txn, seg); err != nil {
			return fail(i, err)
		}
	}
	for _, id := range created {
		e := r.tab.Entity(id)
		if e == nil || !txn.Fillable(id.Slot()) || e.Owned() {
			return fail(-1, fmt.Errorf("%w: gained %#x, which it neither has nor receives", ErrOwnership, uint32(id)))
		}
		txn.SetOwned(e, true)
	}
	for _, l := range later {
		e := r.tab.Entity(l.ID)
		if e == nil || !txn.Fillable(l.ID.Slot()) {
			return fail(-1, fmt.Errorf("%w: level of %#x, which it neither has nor receives", ErrLevel, uint32(l.ID)))
		}
		if err := r.setLevel(txn, e, l.Level); err != nil {
			return fail(-1, err)
		}
	}
	events := txn.Commit()
	r.tick++
	r.lastEvents = len(events)
	r.dispatch(events)
	return nil
}

// Reset empties the replica for a new session whose sender speaks remote
// (nil: the local schema): every entity is removed, with OnDestroy
// callbacks, and the next full state creates them again, with OnCreate and
// initial-value callbacks. Registered callbacks stay.
func (r *Replica) Reset(remote *schema.Schema) error {
	if r.dispatching {
		return ErrReentrant
	}
	dec, err := codec.NewDecoder(r.local, remote, r.dec.Limits())
	if err != nil {
		return err
	}
	txn := r.tab.Begin()
	for _, e := range r.tab.AppendEntities(nil) {
		if err := txn.DestroySlot(e.ID().Slot()); err != nil {
			txn.Rollback()
			return err
		}
	}
	events := txn.Commit()
	if remote == nil {
		remote = r.local
	}
	r.dec, r.remote = dec, remote
	r.dispatch(events)
	return nil
}

// Entity returns the entity with the given ID, or nil.
func (r *Replica) Entity(id state.ID) *state.Entity { return r.tab.Entity(id) }

// Resolve returns the entity ref refers to, or nil if ref is zero or the
// entity is not in the replica. Callbacks run after the whole tick is
// applied, so a reference to an entity created in the same tick resolves.
func (r *Replica) Resolve(ref replica.Ref) *state.Entity {
	if ref == 0 {
		return nil
	}
	return r.tab.Entity(state.ID(ref))
}

// Owned appends the entities this client owns, in ascending ID order, to
// dst and returns the extended slice.
func (r *Replica) Owned(dst []*state.Entity) []*state.Entity {
	n := len(dst)
	dst = r.tab.AppendEntities(dst)
	kept := slices.DeleteFunc(dst[n:], func(e *state.Entity) bool { return !e.Owned() })
	return dst[:n+len(kept)]
}

// Len returns the number of entities.
func (r *Replica) Len() int { return r.tab.Len() }

// Entities appends every entity, in ascending ID order, to dst and returns
// the extended slice.
func (r *Replica) Entities(dst []*state.Entity) []*state.Entity { return r.tab.AppendEntities(dst) }
