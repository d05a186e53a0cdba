package state

import (
	"errors"
	"fmt"
)

// Invalid handles. A zero generated value (var p Player, the New of a typed
// Removed bag event), a handle on a bag item that was removed or replaced,
// and an entity destroyed on its tracker refer to nothing that replicates.
// Reading through them never faults: the zero value reads as zeros, empty
// strings and empty containers, and a handle that went stale reads the
// values it had last. Writing through them is a programming error, like
// sending on a closed channel: setters panic with an error wrapping
// ErrInvalidHandle rather than write where nothing replicates.

// ErrInvalidHandle is wrapped by the value setters panic with when they
// write through an invalid handle: a zero value, an item removed from its
// bag, or an entity destroyed on its tracker.
var ErrInvalidHandle = errors.New("state: write through an invalid handle")

// ErrReadOnly is wrapped by the value setters panic with when they write
// to an entity of a client replica: the server's updates change it, and a
// write there would be overwritten, or worse, make the replica disagree
// with the server's deltas. Clients ask the server for changes with RPCs.
var ErrReadOnly = errors.New("state: write to an entity of a client replica")

// Valid reports whether e is an entity that is not destroyed: false for
// nil, for a server entity once its tracker destroyed it, and for a client
// entity once a tick destroyed it.
func (e *Entity) Valid() bool { return e != nil && !e.destroyed() }

// destroyed reports whether e was destroyed. A tracker's Destroy drops the
// tracker, and the entity keeps a change index (this tick's) or −1 (set at
// commit), neither 0 nor chOwned, which is all a live client entity (that
// never has a tracker) may hold; a client transaction sets chGone.
func (e *Entity) destroyed() bool { return e.tr == nil && e.ch != 0 && e.ch != chOwned }

// Num returns numeric slot s, or 0 for a nil entity (a zero generated
// value).
func (e *Entity) Num(s int) uint64 {
	if e == nil {
		return 0
	}
	return load(e.numPtr(s), s) // not e.Record.Num: too costly to inline
}

// Str returns string slot i, or "" for a nil entity.
func (e *Entity) Str(i int) string {
	if e == nil {
		return ""
	}
	return e.Record.Str(i)
}

// Valid reports whether h addresses a value that writes reach: false for the
// zero Handle, for a handle into an entity its tracker destroyed and for a
// handle on a bag item (or into one) that was removed from its bag or
// replaced by Add. Detached values are valid.
func (h Handle) Valid() bool { return h.invalid() == "" }

// invalid says why h is not valid, or returns "".
func (h Handle) invalid() string {
	switch {
	case h.r == nil:
		return "the zero value refers to nothing; get values from Spawn, New, a field or a bag"
	case h.e == nil:
		return ""
	case h.e.destroyed():
		return fmt.Sprintf("the %s entity %d was destroyed", h.e.t.Name, h.e.id)
	case h.bagLeaf < 0:
		return ""
	}
	bag, _ := h.e.conts()[h.e.t.Leaf(int(h.bagLeaf)).Obj].(*Bag)
	item := bag.items[h.key]
	switch {
	case item == nil:
		return fmt.Sprintf("the %s item %d was removed from its bag", h.r.t.Name, h.key)
	case h.pin < 0 && item != h.r, h.pin >= 0 && !reaches(item, h.r):
		return fmt.Sprintf("the %s item was removed from its bag or replaced", h.r.t.Name)
	}
	return ""
}

// reaches reports whether r is an item of a bag of from, or of a bag of
// one of those items, and so on.
func reaches(from, r *Record) bool {
	for _, c := range from.conts() {
		if b, ok := c.(*Bag); ok {
			for _, it := range b.items {
				if it == r || reaches(it, r) {
					return true
				}
			}
		}
	}
	return false
}

// mustWrite panics if h is invalid or addresses an entity of a client
// replica.
func (h Handle) mustWrite() {
	if why := h.invalid(); why != "" {
		panic(fmt.Errorf("%w: %s", ErrInvalidHandle, why))
	}
	if h.e != nil && h.e.tr == nil {
		h.e.mustWrite()
	}
}

// mustWrite panics if e is nil, destroyed or an entity of a client
// replica: if it has no tracker.
func (e *Entity) mustWrite() {
	switch {
	case e == nil:
		panic(fmt.Errorf("%w: the zero value refers to no entity; get entities from Spawn or the tracker", ErrInvalidHandle))
	case e.destroyed():
		panic(fmt.Errorf("%w: the %s entity %d was destroyed", ErrInvalidHandle, e.t.Name, e.id))
	case e.tr == nil:
		panic(fmt.Errorf("%w: %s entity %d is the server's, and only its updates change it; call an RPC to ask the server for a change",
			ErrReadOnly, e.t.Name, e.id))
	}
}
