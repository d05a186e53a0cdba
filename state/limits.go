package state

import (
	"errors"
	"fmt"

	"github.com/replicago/replica/schema"
)

// Limits bound the values a [Tracker] accepts into its entities: what
// clients accept. A client's decoder refuses a tick that holds a longer
// string, a bigger container or deeper nesting (codec.Limits), so such a
// value in a field clients see would make every client refuse its ticks
// and come back to the same full state, again and again. The tracker
// refuses the write instead: the entity keeps its old value, nothing is
// recorded, and the refusal is kept for [Tracker.TakeRefusals]
// (replica.Server logs them at every tick). Server-only fields are not
// limited.
type Limits struct {
	MaxString    int // bytes of one string or bytes value; default 64 KiB, as codec.Limits.MaxStringBytes
	MaxContainer int // elements of one list, map or bag; default 65,536, as codec.Limits.MaxContainerLen
	MaxDepth     int // nesting levels of a value (protocol.md §7.1); default 16, as codec.Limits.MaxDepth
}

// WithDefaults returns l with each zero or negative field replaced by its
// default.
func (l Limits) WithDefaults() Limits { return l.withDefaults() }

func (l Limits) withDefaults() Limits {
	if l.MaxString <= 0 {
		l.MaxString = 64 << 10
	}
	if l.MaxContainer <= 0 {
		l.MaxContainer = 1 << 16
	}
	if l.MaxDepth <= 0 {
		l.MaxDepth = 16
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

// CheckSchema returns an error naming a field of a class in s that
// clients see and that sits deeper than l.MaxDepth levels allow whatever
// its value: a nested struct field too many levels down, or any container
// when l.MaxDepth is 1. A tracker with these limits could never send it.
// What containers hold is checked write by write instead.
func (l Limits) CheckSchema(s *schema.Schema) error {
	l = l.withDefaults()
	for _, c := range s.Classes {
		for i := range c.Leaves {
			lf := c.Leaf(i)
			if n := LeafLevels(c, i); lf.Vis != schema.VisServer && n > l.MaxDepth {
				return fmt.Errorf("state: %s.%s is %d levels deep, over the limit of %d", c.Name, fieldPath(c, i), n, l.MaxDepth)
			}
		}
	}
	return nil
}

// LeafLevels returns the nesting levels (protocol.md §7.1) a client's
// decoder counts down to leaf i of class c whatever its value: one for the
// entity's own fields and one more per nested struct field on the way, and
// at least two for a container, whose values sit one level below the
// entity's fields. [Limits.CheckSchema] refuses a leaf clients see with more
// levels than MaxDepth; replicagen refuses it at generate time against the
// default limit.
func LeafLevels(c *schema.Struct, i int) int {
	lf := c.Leaf(i)
	n := len(lf.Path)
	if lf.Field.Type.Kind.Container() {
		n = max(n, 2)
	}
	return n
}

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

// Refused returns how many writes t refused since the last TakeRefusals,
// without taking them: a caller that writes a whole stored value compares
// it before and after to learn whether the tracker kept all of it.
func (t *Tracker) Refused() int { return t.refused }

// refuse records a refused write to leaf of e.
func (e *Entity) refuse(leaf int, what string, n, max int) {
	e.noteRefusal(&LimitError{Class: e.t.Name, Field: fieldPath(e.t, leaf), What: what, Len: n, Max: max})
}

// noteRefusal records a refused write, err saying why.
func (e *Entity) noteRefusal(err error) {
	t := e.tr
	t.refused++
	if len(t.refusals) < maxRefusals {
		t.refusals = append(t.refusals, err)
	}
}

// ErrNaN is wrapped by the refusal of a NaN written to a quantized float
// field of an entity: a quantized field has no code for it (stored, it
// would read as the bottom of the field's range, moving an entity to the
// edge of the map), so the field keeps its value. Tracker.TakeRefusals
// reports it; the server logs it and counts it in Stats.Refused.
var ErrNaN = errors.New("state: NaN written to a quantized float")

// A NaNError is the refusal of a NaN written to a quantized float field.
type NaNError struct {
	Class string // the entity's class
	Field string // the field written, a dotted path for nested fields
}

func (e *NaNError) Error() string {
	return fmt.Sprintf("state: %s.%s: NaN for a quantized float, refused: the field keeps its value", e.Class, e.Field)
}

func (e *NaNError) Unwrap() error { return ErrNaN }

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

// limited returns the limits that apply to a write to leaf abs of h's
// record: those of the entity's tracker, or nil for a detached value, a
// client entity or a field clients never see.
func (h Handle) limited(abs int) *Limits {
	if h.e == nil || h.e.tr == nil || h.e.t.Leaf(h.entityLeaf(abs)).Vis == schema.VisServer {
		return nil
	}
	return &h.e.tr.limits
}

// overflows reports whether adding one element to a container of n
// elements goes over the limit, and records the refusal if so.
func (h Handle) overflows(leaf int32, kind string, n int) bool {
	lim := h.limited(int(leaf))
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
// holds a string or container over the limits or nests too deep, and
// records the refusal if so.
func (h Handle) tooLarge(leaf int32, v Value) bool {
	lim := h.limited(int(leaf))
	if lim == nil {
		return false
	}
	what, n, max := valueOver(lim, v)
	if what == "" {
		if n = h.levels(v); n <= lim.MaxDepth {
			return false
		}
		what, max = "nesting", lim.MaxDepth
	}
	h.e.refuse(h.entityLeaf(int(leaf)), "element "+what, n, max)
	return true
}

// levels returns how many nesting levels (protocol.md §7.1) clients count
// down to the deepest part of v once it is stored in a container of h's
// record: the record's own level is h.depth, the container's the next, a
// struct element's the one after. Nested struct fields count as set: a
// bag item's may be set later, through a handle that does not check.
func (h Handle) levels(v Value) int {
	n := int(h.depth) + 2 // down to the container
	if v.R == nil {
		return n
	}
	t := h.e.tr
	if d := t.structDepth(v.R.t); d >= 0 && n+1+d <= t.limits.MaxDepth {
		return n + 1 + d // within the limit however full v is: no need to walk it
	}
	return n + 1 + t.recordDepth(v.R)
}

// contLevels is levels for a whole container stored in h's record.
func (h Handle) contLevels(c any) int {
	return int(h.depth) + 1 + h.e.tr.contDepth(c)
}

// structDepth returns st.Depth, computed once per struct.
func (t *Tracker) structDepth(st *schema.Struct) int {
	d, ok := t.depths[st]
	if !ok {
		if t.depths == nil {
			t.depths = make(map[*schema.Struct]int)
		}
		d = st.Depth()
		t.depths[st] = d
	}
	return d
}

// recordDepth returns the deepest level below r, at level 0, that clients
// count in r as it is: [schema.Struct.Depth]'s rules, applied to r's
// non-empty containers and their elements.
func (t *Tracker) recordDepth(r *Record) int {
	st, conts := r.t, r.conts()
	d := 0
	for i := range st.Leaves {
		l := st.Leaf(i)
		d = max(d, len(l.Path)-1)
		if l.Field.Type.Kind.Container() {
			d = max(d, t.contDepth(conts[l.Obj]))
		}
	}
	return d
}

// contDepth returns the deepest level below the record holding c that
// clients count in c: none for an empty container, which is not sent, 1
// for the container, and 2 plus their own for struct elements.
func (t *Tracker) contDepth(c any) int {
	d := 1
	switch c := c.(type) {
	case *List:
		if len(c.v) == 0 {
			return 0
		}
		for _, v := range c.v {
			if v.R != nil {
				d = max(d, 2+t.recordDepth(v.R))
			}
		}
	case *Map:
		if c.Len() == 0 {
			return 0
		}
		for _, v := range c.all {
			if v.R != nil {
				d = max(d, 2+t.recordDepth(v.R))
			}
		}
	case *Bag:
		if len(c.items) == 0 {
			return 0
		}
		for _, r := range c.items {
			d = max(d, 2+t.recordDepth(r))
		}
	}
	return d
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
