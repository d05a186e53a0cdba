package state

import (
	"errors"
	"fmt"

	"github.com/replicago/replica/schema"
)

// Limits bound the values a [Tracker] accepts into its entities: what
// clients accept. A client's decoder refuses a tick that holds a longer
// string or a bigger container (codec.Limits), so such a value, once set,
// would make every client that sees it refuse its ticks and come back to
// the same full state, again and again. The tracker refuses the write
// instead: the entity keeps its old value, nothing is recorded, and the
// refusal is kept for [Tracker.TakeRefusals] (replica.Server logs them at
// every tick).
type Limits struct {
	MaxString    int // bytes of one string or bytes value; default 64 KiB, as codec.Limits.MaxStringBytes
	MaxContainer int // elements of one list, map or bag; default 65,536, as codec.Limits.MaxContainerLen
}

func (l Limits) withDefaults() Limits {
	if l.MaxString <= 0 {
		l.MaxString = 64 << 10
	}
	if l.MaxContainer <= 0 {
		l.MaxContainer = 1 << 16
	}
	return l
}

// ErrTooLarge is wrapped by every [LimitError].
var ErrTooLarge = errors.New("state: value over the tracker's limits")

// A LimitError is a write a tracker refused.
type LimitError struct {
	Class string // the entity's class
	Field string // the field written, a dotted path for nested fields
	What  string // "string", "list", "map", "bag", or "element string" and so on for a value stored in a container
	Len   int    // its length in bytes or elements
	Max   int    // the limit
}

func (e *LimitError) Error() string {
	return fmt.Sprintf("state: %s.%s: %s of %d over the limit of %d, refused", e.Class, e.Field, e.What, e.Len, e.Max)
}

func (e *LimitError) Unwrap() error { return ErrTooLarge }

// maxRefusals bounds the refusals a tracker keeps between two calls of
// TakeRefusals; the others are only counted.
const maxRefusals = 16

// SetLimits sets the limits of the values t accepts (zero fields select
// the defaults).
func (t *Tracker) SetLimits(l Limits) { t.limits = l.withDefaults() }

// Limits returns the limits of the values t accepts.
func (t *Tracker) Limits() Limits { return t.limits }

// TakeRefusals returns the writes refused since the last call, at most 16
// of them, and how many there were in all.
func (t *Tracker) TakeRefusals() (errs []error, n int) {
	errs, n = t.refusals, t.refused
	t.refusals, t.refused = nil, 0
	return errs, n
}

// refuse records a refused write to leaf of e.
func (e *Entity) refuse(leaf int, what string, n, max int) {
	t := e.tr
	t.refused++
	if len(t.refusals) < maxRefusals {
		t.refusals = append(t.refusals, &LimitError{Class: e.t.Name, Field: fieldPath(e.t, leaf), What: what, Len: n, Max: max})
	}
}

// fieldPath names leaf of c by its field names.
func fieldPath(c *schema.Struct, leaf int) string {
	st, name := c, ""
	for i, id := range c.Leaf(leaf).Path {
		f := st.Field(id)
		if i > 0 {
			name += "."
		}
		name += f.Name
		st = f.Type.Struct
	}
	return name
}

// limited returns the limits that apply to writes through h: those of the
// entity's tracker, or nil for a detached value or a client entity.
func (h Handle) limited() *Limits {
	if h.e == nil || h.e.tr == nil {
		return nil
	}
	return &h.e.tr.limits
}

// overflows reports whether adding one element to a container of n
// elements goes over the limit, and records the refusal if so.
func (h Handle) overflows(leaf int32, kind string, n int) bool {
	lim := h.limited()
	if lim == nil || n < lim.MaxContainer {
		return false
	}
	h.e.refuse(h.entityLeaf(int(leaf)), kind, n+1, lim.MaxContainer)
	return true
}

// entityLeaf returns the entity leaf a write to leaf abs of h's record
// goes to: abs itself, or the bag holding the item h addresses.
func (h Handle) entityLeaf(abs int) int {
	if h.bagLeaf >= 0 {
		return int(h.bagLeaf)
	}
	return abs
}

// tooLarge reports whether a value to be stored in the container at leaf
// holds a string or container over the limits, and records the refusal if
// so.
func (h Handle) tooLarge(leaf int32, v Value) bool {
	lim := h.limited()
	if lim == nil {
		return false
	}
	what, n, max := valueOver(lim, v)
	if what == "" {
		return false
	}
	h.e.refuse(h.entityLeaf(int(leaf)), "element "+what, n, max)
	return true
}

// valueOver returns what in v is over lim, with its size and the limit,
// or "" if nothing is.
func valueOver(lim *Limits, v Value) (what string, n, max int) {
	if len(v.S) > lim.MaxString {
		return "string", len(v.S), lim.MaxString
	}
	if v.R != nil {
		return recordOver(lim, v.R)
	}
	return "", 0, 0
}

// recordOver is valueOver for every string and container of r.
func recordOver(lim *Limits, r *Record) (what string, n, max int) {
	for _, s := range r.strs() {
		if len(s) > lim.MaxString {
			return "string", len(s), lim.MaxString
		}
	}
	for _, c := range r.conts() {
		if what, n, max = containerOver(lim, c); what != "" {
			return what, n, max
		}
	}
	return "", 0, 0
}

// containerOver is valueOver for container c and its elements.
func containerOver(lim *Limits, c any) (what string, n, max int) {
	switch c := c.(type) {
	case *List:
		if len(c.v) > lim.MaxContainer {
			return "list", len(c.v), lim.MaxContainer
		}
		for _, v := range c.v {
			if what, n, max = valueOver(lim, v); what != "" {
				return what, n, max
			}
		}
	case *Map:
		if c.Len() > lim.MaxContainer {
			return "map", c.Len(), lim.MaxContainer
		}
		for k, v := range c.all {
			if what, n, max = valueOver(lim, k); what == "" {
				what, n, max = valueOver(lim, v)
			}
			if what != "" {
				return what, n, max
			}
		}
	case *Bag:
		if len(c.items) > lim.MaxContainer {
			return "bag", len(c.items), lim.MaxContainer
		}
		for _, r := range c.items {
			if what, n, max = recordOver(lim, r); what != "" {
				return what, n, max
			}
		}
	}
	return "", 0, 0
}
