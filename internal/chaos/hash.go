package chaos

import (
	"cmp"
	"encoding/binary"
	"fmt"
	"hash"
	"hash/fnv"
	"math"
	"slices"
	"strings"

	"github.com/replicago/replica/schema"
	"github.com/replicago/replica/state"
)

// A View says which partition of an entity a client sees: schema.VisOwner
// for the entities it owns, schema.VisOthers for the rest, Unseen for
// those it does not see at all (interest management).
type View func(*state.Entity) schema.Visibility

// Unseen is what a View returns for an entity the client does not have.
const Unseen schema.Visibility = 0xff

// Digest is a state hash of a set of entities: one FNV-1a 64 sum per
// entity, in ascending ID order, and a sum over all of them.
type Digest struct {
	Sum      uint64
	Entities []EntityDigest
}

// EntityDigest is the hash of one entity.
type EntityDigest struct {
	ID  state.ID
	Sum uint64
}

// ServerDigest hashes the server's entities as the client with view sees
// them: each leaf its view does not include (server-only fields, and the
// owner's or the others' fields) hashes as the zero value a replica holds
// for a leaf it never received.
func ServerDigest(ents []*state.Entity, view View) Digest {
	return digest(ents, func(e *state.Entity) (schema.Visibility, bool) { return view(e), false }, nil)
}

// ServerDigestLevels is ServerDigest for a client that holds each entity
// at a level of detail (docs/protocol.md §5.8): level returns it, or −1
// for every band. A leaf of a band above the level hashes as its zero
// value, as the client holds it.
func ServerDigestLevels(ents []*state.Entity, view View, level func(*state.Entity) int) Digest {
	return digest(ents, func(e *state.Entity) (schema.Visibility, bool) { return view(e), false }, level)
}

// ReplicaDigest hashes a client's replica as it is: every leaf, including
// those the client should never have received, so that a leaked field
// shows up as a difference from ServerDigest.
func ReplicaDigest(ents []*state.Entity) Digest {
	return digest(ents, func(*state.Entity) (schema.Visibility, bool) { return 0, true }, nil)
}

func digest(ents []*state.Entity, view func(*state.Entity) (schema.Visibility, bool), level func(*state.Entity) int) Digest {
	ents = sortedByID(ents)
	d := Digest{Entities: make([]EntityDigest, 0, len(ents))}
	all := fnv.New64a()
	h := fnv.New64a()
	w := writer{h: h}
	n := 0
	for _, e := range ents {
		h.Reset()
		v, raw := view(e)
		if v == Unseen && !raw {
			continue
		}
		n++
		w.u64(uint64(e.ID()))
		w.u64(uint64(e.Class().ID))
		band := math.MaxInt
		if level != nil {
			if l := level(e); l >= 0 {
				band = l
			}
		}
		w.recordBands(&e.Record, v, raw, band)
		sum := h.Sum64()
		d.Entities = append(d.Entities, EntityDigest{ID: e.ID(), Sum: sum})
		aw := writer{h: all}
		aw.u64(uint64(e.ID()))
		aw.u64(sum)
	}
	writer{h: all}.u64(uint64(n))
	d.Sum = all.Sum64()
	return d
}

func sortedByID(ents []*state.Entity) []*state.Entity {
	ents = slices.Clone(ents)
	slices.SortFunc(ents, func(a, b *state.Entity) int { return cmp.Compare(a.ID(), b.ID()) })
	return ents
}

type writer struct{ h hash.Hash64 }

func (w writer) u64(v uint64) {
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], v)
	w.h.Write(b[:])
}

func (w writer) str(s string) {
	w.u64(uint64(len(s)))
	w.h.Write([]byte(s))
}

// record hashes every leaf of r in leaf order. Unless raw, a leaf whose
// effective visibility does not meet view hashes as its zero value.
func (w writer) record(r *state.Record, view schema.Visibility, raw bool) {
	w.recordBands(r, view, raw, math.MaxInt)
}

// recordBands is record for an entity held at level of detail band: a
// leaf of a higher band hashes as its zero value.
func (w writer) recordBands(r *state.Record, view schema.Visibility, raw bool, band int) {
	t := r.Type()
	for i := range t.Leaves {
		l := t.Leaf(i)
		w.u64(uint64(i))
		if !raw && l.Vis&view == 0 || int(l.Band) > band {
			w.zero(l)
			continue
		}
		w.leaf(r, l)
	}
}

func (w writer) zero(l *schema.LeafInfo) {
	switch k := l.Field.Type.Kind; {
	case k.Numeric():
		w.u64(0)
	case k.Container():
		w.u64(0) // no items
	default:
		w.str("")
	}
}

func (w writer) leaf(r *state.Record, l *schema.LeafInfo) {
	switch k := l.Field.Type.Kind; {
	case k.Numeric():
		w.u64(r.Num(l.Num))
	case k == schema.List:
		li := r.List(l.Obj)
		w.u64(uint64(li.Len()))
		for i := range li.Len() {
			w.value(li.At(i))
		}
	case k == schema.Map:
		m := r.Map(l.Obj)
		keys := m.Keys(nil)
		w.u64(uint64(len(keys)))
		for _, k := range keys {
			v, _ := m.Get(k)
			w.value(k)
			w.value(v)
		}
	case k == schema.Bag:
		b := r.Bag(l.Obj)
		keys := b.Keys(nil)
		w.u64(uint64(len(keys)))
		for _, k := range keys {
			w.u64(k)
			// Item fields are visible wherever the bag is.
			w.record(b.Get(k), schema.VisAll, true)
		}
	default: // string, bytes
		w.str(r.Str(l.Obj))
	}
}

func (w writer) value(v state.Value) {
	switch {
	case v.R != nil:
		w.u64(1)
		w.record(v.R, schema.VisAll, true)
	default:
		w.u64(v.N)
		w.str(v.S)
	}
}

// Diff describes how two digests differ, entity by entity, at most max
// lines; describe, if not nil, adds details about an entity that differs.
func Diff(want, got Digest, max int, describe func(state.ID) string) string {
	var b strings.Builder
	lines := 0
	add := func(format string, args ...any) {
		if lines < max {
			fmt.Fprintf(&b, format+"\n", args...)
		}
		lines++
	}
	i, j := 0, 0
	for i < len(want.Entities) || j < len(got.Entities) {
		switch {
		case j == len(got.Entities) || i < len(want.Entities) && want.Entities[i].ID < got.Entities[j].ID:
			add("entity %#x: missing from the replica", uint32(want.Entities[i].ID))
			i++
		case i == len(want.Entities) || got.Entities[j].ID < want.Entities[i].ID:
			add("entity %#x: in the replica, not on the server", uint32(got.Entities[j].ID))
			j++
		default:
			if want.Entities[i].Sum != got.Entities[j].Sum {
				d := ""
				if describe != nil {
					d = ": " + describe(want.Entities[i].ID)
				}
				add("entity %#x: differs%s", uint32(want.Entities[i].ID), d)
			}
			i++
			j++
		}
	}
	if lines > max {
		fmt.Fprintf(&b, "... and %d more\n", lines-max)
	}
	return b.String()
}

// Leaves formats the leaves of r as the hash sees them (see ServerDigest
// and ReplicaDigest), for failure messages.
func Leaves(r *state.Record, view schema.Visibility, raw bool) string {
	t := r.Type()
	var parts []string
	for i := range t.Leaves {
		l := t.Leaf(i)
		name := l.Field.Name
		if !raw && l.Vis&view == 0 {
			parts = append(parts, name+"=(hidden)")
			continue
		}
		switch k := l.Field.Type.Kind; {
		case k.Numeric():
			parts = append(parts, fmt.Sprintf("%s=%d", name, r.Num(l.Num)))
		case k == schema.Bag:
			b := r.Bag(l.Obj)
			var items []string
			for _, k := range b.Keys(nil) {
				items = append(items, fmt.Sprintf("%d:{%s}", k, Leaves(b.Get(k), schema.VisAll, true)))
			}
			parts = append(parts, fmt.Sprintf("%s=[%s]", name, strings.Join(items, " ")))
		case k == schema.List:
			parts = append(parts, fmt.Sprintf("%s=list(%d)", name, r.List(l.Obj).Len()))
		case k == schema.Map:
			parts = append(parts, fmt.Sprintf("%s=map(%d)", name, r.Map(l.Obj).Len()))
		default:
			parts = append(parts, fmt.Sprintf("%s=%q", name, r.Str(l.Obj)))
		}
	}
	return strings.Join(parts, " ")
}
