package client

import (
	"fmt"
	"slices"

	"github.com/replicago/replica/schema"
	"github.com/replicago/replica/state"
)

// ItemKind says what happened to an element of a list, an entry of a map
// or an item of a bag.
type ItemKind uint8

// Item kinds.
const (
	Added   ItemKind = iota + 1 // the element appeared (New)
	Removed                     // the element went away (Old)
	Changed                     // the element was replaced or, for bag items, one of its fields changed
)

func (k ItemKind) String() string {
	switch k {
	case Added:
		return "added"
	case Removed:
		return "removed"
	case Changed:
		return "changed"
	}
	return fmt.Sprintf("ItemKind(%d)", uint8(k))
}

// A ListEvent reports one change to a list. Index is the element's index
// when the change happened: replaying a tick's events in order on the list
// as it was reproduces the list as it is. Values are in the stored
// representation (see state.Value); a struct element's record must not be
// modified.
type ListEvent struct {
	Kind     ItemKind
	Index    int
	Old, New state.Value // Old for Removed and Changed, New for Added and Changed
}

// A MapEvent reports one change to a map entry.
type MapEvent struct {
	Kind     ItemKind
	Key      state.Value // N for integer keys, S for string keys
	Old, New state.Value // Old for Removed and Changed, New for Added and Changed
}

// A BagEvent reports one change to a bag item.
//
// Added reports a new item (New.R). Removed reports a removed item
// (Old.R). Changed reports either a whole item replaced under the same key
// (ItemLeaf −1; Old.R and New.R are the old and new items) or one field of
// an item that changed (ItemLeaf is the leaf of the item's struct; Old and
// New are the leaf's old and new values, zero for a container leaf).
type BagEvent struct {
	Kind     ItemKind
	Key      uint64 // the item's key, sign-extended for signed key kinds
	ItemLeaf int
	Old, New state.Value
	// Item is the item stored under Key once the tick is applied, nil if
	// there is none (after Removed, unless a later change of the tick
	// added the key again). Its record must not be modified.
	Item *state.Record
}

// ListChange is a [ListEvent] with values of the element's Go type, for
// generated typed callbacks. Old and New are the zero T where a ListEvent
// has no value; struct elements are detached copies.
type ListChange[T any] struct {
	Kind     ItemKind
	Index    int
	Old, New T
}

// MapChange is a [MapEvent] with keys and values of their Go types, for
// generated typed callbacks. Old and New are the zero V where a MapEvent
// has no value; struct values are detached copies.
type MapChange[K, V any] struct {
	Kind     ItemKind
	Key      K
	Old, New V
}

// BagChange is a [BagEvent] with its key and items of their Go types, for
// generated typed callbacks. Items are detached copies. New is the item as
// the tick left it (for Added and Changed), Old the removed or replaced item
// (for Removed, and Changed with ItemLeaf −1). When one field of an item
// changed (ItemLeaf ≥ 0), Old is the item with that field's old value, if
// the field is a number or string; for a container field it is the zero V.
type BagChange[K, V any] struct {
	Kind     ItemKind
	Key      K
	ItemLeaf int
	Old, New V
}

// A callback is one registration.
type callback struct {
	from  uint64 // first tick whose events it sees
	dead  bool
	ent   func(*state.Entity) // OnCreate, OnDestroy
	own   func(e *state.Entity, owned bool)
	level func(e *state.Entity, old, new int)
	field func(e *state.Entity, old, new state.Value)
	list  func(*state.Entity, ListEvent)
	mapf  func(*state.Entity, MapEvent)
	bag   func(*state.Entity, BagEvent)
}

type classCallbacks struct {
	create, destroy []*callback
	owned           []*callback
	level           []*callback
	leaves          [][]*callback // by leaf
}

// class returns the callbacks of class c, creating them if needed. It
// panics if c is not a class of the replica's local or remote schema.
func (r *Replica) class(op string, c *schema.Struct) *classCallbacks {
	if cc := r.classes[c]; cc != nil {
		return cc
	}
	if c == nil || !c.Class || r.local.Class(c.ID) != c && r.remote.Class(c.ID) != c {
		name := "<nil>"
		if c != nil {
			name = c.Name
		}
		panic(fmt.Sprintf("client: %s: %s is not a class of the replica's schema", op, name))
	}
	cc := &classCallbacks{leaves: make([][]*callback, c.Leaves)}
	r.classes[c] = cc
	r.lastC = nil
	return cc
}

// add registers cb in *list and returns the func that unregisters it.
// Lists are copied on write, so that dispatch can range over them while
// callbacks register and unregister.
func (r *Replica) add(list *[]*callback, cb *callback) func() {
	cb.from = r.tick + 1
	*list = append(slices.Clip(*list), cb)
	return func() {
		if cb.dead {
			return
		}
		cb.dead = true
		*list = slices.DeleteFunc(slices.Clone(*list), func(x *callback) bool { return x == cb })
	}
}

// leaf checks that leaf of c is of a kind op handles, watches it and
// returns its callback list.
func (r *Replica) leaf(op string, c *schema.Struct, leaf int, ok func(schema.Kind) bool) *[]*callback {
	cc := r.class(op, c)
	if leaf < 0 || leaf >= c.Leaves {
		panic(fmt.Sprintf("client: %s: %s has no leaf %d", op, c.Name, leaf))
	}
	if k := c.Leaf(leaf).Field.Type.Kind; !ok(k) {
		panic(fmt.Sprintf("client: %s: leaf %d of %s (%s) is a %s", op, leaf, c.Name, c.Leaf(leaf).Field.Name, k))
	}
	r.tab.Watch(c, leaf)
	return &cc.leaves[leaf]
}

// OnCreate registers fn to run for each new entity of class c and returns
// a func that unregisters it. fn sees the entity with the whole tick
// applied. It panics if c is not a class of the replica's schema (local or
// remote), as do the other registration methods.
func (r *Replica) OnCreate(c *schema.Struct, fn func(e *state.Entity)) (cancel func()) {
	return r.add(&r.class("OnCreate", c).create, &callback{ent: fn})
}

// OnDestroy registers fn to run for each destroyed entity of class c and
// returns a func that unregisters it. fn sees the entity as it was when
// destroyed; it is no longer in the replica.
func (r *Replica) OnDestroy(c *schema.Struct, fn func(e *state.Entity)) (cancel func()) {
	return r.add(&r.class("OnDestroy", c).destroy, &callback{ent: fn})
}

// OnOwnership registers fn to run when this client gains (owned is true)
// or loses ownership of an entity of class c, and returns a func that
// unregisters it. The entities a client owns when it joins are reported as
// gained, after their OnCreate. fn sees the entity with the whole tick
// applied: on a gain, its owner-only fields are filled in.
func (r *Replica) OnOwnership(c *schema.Struct, fn func(e *state.Entity, owned bool)) (cancel func()) {
	return r.add(&r.class("OnOwnership", c).owned, &callback{own: fn})
}

// OnLevel registers fn to run when the level of detail an entity of class
// c is held at changes (docs/protocol.md §5.8), and returns a func that
// unregisters it. old and new are levels as [state.Entity.Level] reports
// them, −1 for every band. fn sees the entity with the whole tick applied:
// the fields of the bands it left are zero, those of the bands it entered
// filled in.
func (r *Replica) OnLevel(c *schema.Struct, fn func(e *state.Entity, old, new int)) (cancel func()) {
	return r.add(&r.class("OnLevel", c).level, &callback{level: fn})
}

// OnField registers fn to run when scalar leaf leaf (a number, bool, ref,
// string or bytes field, possibly of a nested struct) of an entity of class
// c changes, and returns a func that unregisters it. old and new are in the
// stored representation (see state.Record.Num): use the generated typed
// callbacks for Go values. It panics if leaf is not a scalar leaf of c.
func (r *Replica) OnField(c *schema.Struct, leaf int, fn func(e *state.Entity, old, new state.Value)) (cancel func()) {
	l := r.leaf("OnField", c, leaf, func(k schema.Kind) bool { return !k.Container() })
	return r.add(l, &callback{field: fn})
}

// OnList registers fn to run for each change to list leaf leaf of an
// entity of class c, and returns a func that unregisters it.
func (r *Replica) OnList(c *schema.Struct, leaf int, fn func(e *state.Entity, ev ListEvent)) (cancel func()) {
	l := r.leaf("OnList", c, leaf, func(k schema.Kind) bool { return k == schema.List })
	return r.add(l, &callback{list: fn})
}

// OnMap registers fn to run for each change to map leaf leaf of an entity
// of class c, and returns a func that unregisters it.
func (r *Replica) OnMap(c *schema.Struct, leaf int, fn func(e *state.Entity, ev MapEvent)) (cancel func()) {
	l := r.leaf("OnMap", c, leaf, func(k schema.Kind) bool { return k == schema.Map })
	return r.add(l, &callback{mapf: fn})
}

// OnBag registers fn to run for each change to bag leaf leaf of an entity
// of class c, item field changes included, and returns a func that
// unregisters it.
func (r *Replica) OnBag(c *schema.Struct, leaf int, fn func(e *state.Entity, ev BagEvent)) (cancel func()) {
	l := r.leaf("OnBag", c, leaf, func(k schema.Kind) bool { return k == schema.Bag })
	return r.add(l, &callback{bag: fn})
}

// dispatch runs the callbacks of a committed tick's events.
func (r *Replica) dispatch(events []state.Event) {
	if len(r.classes) == 0 {
		return
	}
	r.dispatching = true
	defer func() { r.dispatching = false }()
	tick := r.tick
	for i := range events {
		ev := &events[i]
		c := ev.E.Class()
		if c != r.lastC {
			r.lastC, r.lastCC = c, r.classes[c]
		}
		cc := r.lastCC
		if cc == nil {
			continue
		}
		var list []*callback
		switch ev.Kind {
		case state.EvCreate:
			list = cc.create
		case state.EvDestroy:
			list = cc.destroy
		case state.EvOwned:
			list = cc.owned
		case state.EvLevel:
			list = cc.level
		default:
			list = cc.leaves[ev.Leaf]
		}
		if len(list) == 0 {
			continue
		}
		switch ev.Kind {
		case state.EvCreate, state.EvDestroy:
			for _, cb := range list {
				if cb.from <= tick && !cb.dead {
					cb.ent(ev.E)
				}
			}
		case state.EvOwned:
			for _, cb := range list {
				if cb.from <= tick && !cb.dead {
					cb.own(ev.E, ev.New.N == 1)
				}
			}
		case state.EvLevel:
			for _, cb := range list {
				if cb.from <= tick && !cb.dead {
					cb.level(ev.E, int(ev.Old.N)-1, int(ev.New.N)-1)
				}
			}
		case state.EvField:
			for _, cb := range list {
				if cb.from <= tick && !cb.dead {
					cb.field(ev.E, ev.Old, ev.New)
				}
			}
		case state.EvListAdd, state.EvListRemove, state.EvListSet:
			le := ListEvent{Kind: itemKind(ev.Kind), Index: ev.Index, Old: ev.Old, New: ev.New}
			for _, cb := range list {
				if cb.from <= tick && !cb.dead {
					cb.list(ev.E, le)
				}
			}
		case state.EvMapAdd, state.EvMapRemove, state.EvMapSet:
			me := MapEvent{Kind: itemKind(ev.Kind), Key: ev.Key, Old: ev.Old, New: ev.New}
			for _, cb := range list {
				if cb.from <= tick && !cb.dead {
					cb.mapf(ev.E, me)
				}
			}
		case state.EvBagAdd, state.EvBagRemove, state.EvBagItem:
			be := BagEvent{Key: ev.Key.N, ItemLeaf: -1, Old: ev.Old, New: ev.New,
				Item: ev.E.Bag(c.Leaf(ev.Leaf).Obj).Get(ev.Key.N)}
			switch {
			case ev.Kind == state.EvBagRemove:
				be.Kind = Removed
			case ev.Kind == state.EvBagItem:
				be.Kind, be.ItemLeaf = Changed, ev.ItemLeaf
			case ev.Old.R != nil:
				be.Kind = Changed // replaced
			default:
				be.Kind = Added
			}
			for _, cb := range list {
				if cb.from <= tick && !cb.dead {
					cb.bag(ev.E, be)
				}
			}
		}
	}
}

func itemKind(k state.EventKind) ItemKind {
	switch k {
	case state.EvListAdd, state.EvMapAdd, state.EvBagAdd:
		return Added
	case state.EvListRemove, state.EvMapRemove, state.EvBagRemove:
		return Removed
	}
	return Changed
}
