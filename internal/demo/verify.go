package demo

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/replicago/replica"
	"github.com/replicago/replica/client"
	"github.com/replicago/replica/schema"
	"github.com/replicago/replica/state"
)

// verifyView checks that replica r equals the server's entities ents as a
// client sees them: the same entities, every field the client sees with
// the server's value, every field it may not see (server-only fields,
// other clients' owner fields, its own bots' others fields) at its zero
// value, every reference resolving, and the client knowing which entities
// it owns. owned reports whether the client
// owns an entity. It returns the first difference. Neither side may change
// while it runs.
func verifyView(ents []*state.Entity, owned func(*state.Entity) bool, r *client.Replica) error {
	for _, e := range ents {
		got := r.Entity(e.ID())
		if got == nil {
			return fmt.Errorf("entity %d (%s) is missing", e.ID(), describe(e))
		}
		if got.Class() != e.Class() {
			return fmt.Errorf("entity %d is a %s, want a %s", e.ID(), got.Class().Name, e.Class().Name)
		}
		if got.Owned() != owned(e) {
			return fmt.Errorf("entity %d (%s): the client says it owns it: %v; the server: %v", e.ID(), describe(e), got.Owned(), owned(e))
		}
		if err := compareProjection(e, got, owned(e)); err != nil {
			return fmt.Errorf("entity %d (%s): %w", e.ID(), describe(e), err)
		}
		if err := checkRefs(r, got); err != nil {
			return fmt.Errorf("entity %d (%s): %w", e.ID(), describe(e), err)
		}
	}
	if r.Len() != len(ents) {
		have := make(map[state.ID]bool, len(ents))
		for _, e := range ents {
			have[e.ID()] = true
		}
		for _, e := range r.Entities(nil) {
			if !have[e.ID()] {
				return fmt.Errorf("entity %d (%s) should not exist: the server has no such entity", e.ID(), describe(e))
			}
		}
		return fmt.Errorf("has %d entities, the server %d", r.Len(), len(ents))
	}
	return nil
}

func describe(e *state.Entity) string {
	if b, ok := BotViewOf(e); ok { // a server's entity or a client's
		return strconv.Quote(b.Name())
	}
	return e.Class().Name
}

// visible reports whether a client sees a leaf of an entity it owns or not.
func visible(l *schema.LeafInfo, owned bool) bool {
	if owned {
		return l.Vis&schema.VisOwner != 0
	}
	return l.Vis&schema.VisOthers != 0
}

// compareProjection compares a client's copy of an entity with the
// server's, leaf by leaf, as a client that owns it or not sees it.
func compareProjection(srv, cli *state.Entity, owned bool) error {
	c := srv.Class()
	for i := 0; i < c.Leaves; i++ {
		l := c.Leaf(i)
		if !visible(l, owned) {
			if !cli.IsZero(l) {
				return fmt.Errorf("field %s (vis=%s) leaked: the client has %s, want it absent",
					l.Field.Name, l.Vis, format(&cli.Record, l))
			}
			continue
		}
		if err := leafEqual(&srv.Record, &cli.Record, l); err != nil {
			return fmt.Errorf("field %s: %w", l.Field.Name, err)
		}
	}
	return nil
}

// checkRefs reports a visible reference of e to an entity the client does
// not have.
func checkRefs(r *client.Replica, e *state.Entity) error {
	c := e.Class()
	for i := 0; i < c.Leaves; i++ {
		l := c.Leaf(i)
		if l.Field.Type.Kind != schema.Ref {
			continue
		}
		if ref := replica.Ref(e.Num(l.Num)); ref != 0 && r.Resolve(ref) == nil {
			return fmt.Errorf("field %s refers to entity %d, which the client does not have", l.Field.Name, ref)
		}
	}
	return nil
}

// leafEqual compares leaf l of two records of the same type and describes
// the first difference.
func leafEqual(want, got *state.Record, l *schema.LeafInfo) error {
	t := &l.Field.Type
	differ := func() error {
		return fmt.Errorf("the client has %s, the server %s", format(got, l), format(want, l))
	}
	switch k := t.Kind; {
	case k.Numeric():
		if want.Num(l.Num) != got.Num(l.Num) {
			return differ()
		}
	case k == schema.String || k == schema.Bytes:
		if want.Str(l.Obj) != got.Str(l.Obj) {
			return differ()
		}
	case k == schema.List:
		a, b := want.List(l.Obj), got.List(l.Obj)
		if a.Len() != b.Len() {
			return differ()
		}
		for i := 0; i < a.Len(); i++ {
			if !valueEqual(a.At(i), b.At(i)) {
				return fmt.Errorf("element %d differs", i)
			}
		}
	case k == schema.Map:
		a, b := want.Map(l.Obj), got.Map(l.Obj)
		if a.Len() != b.Len() {
			return differ()
		}
		for _, key := range a.Keys(nil) {
			av, _ := a.Get(key)
			if bv, ok := b.Get(key); !ok || !valueEqual(av, bv) {
				return fmt.Errorf("key %v differs", key)
			}
		}
	case k == schema.Bag:
		a, b := want.Bag(l.Obj), got.Bag(l.Obj)
		for _, key := range a.Keys(nil) {
			switch ai, bi := a.Get(key), b.Get(key); {
			case bi == nil:
				return fmt.Errorf("item %d %s is missing", key, formatRecord(ai))
			case !ai.Equal(bi):
				return fmt.Errorf("item %d: the client has %s, the server %s", key, formatRecord(bi), formatRecord(ai))
			}
		}
		for _, key := range b.Keys(nil) {
			if a.Get(key) == nil {
				return fmt.Errorf("item %d %s should not exist", key, formatRecord(b.Get(key)))
			}
		}
	}
	return nil
}

func valueEqual(a, b state.Value) bool {
	if a.R != nil || b.R != nil {
		return a.R.Equal(b.R)
	}
	return a.N == b.N && a.S == b.S
}

// format renders leaf l of r for a message.
func format(r *state.Record, l *schema.LeafInfo) string {
	t := &l.Field.Type
	switch k := t.Kind; {
	case k == schema.Float32 || k == schema.Float64:
		return strconv.FormatFloat(state.Float(t, r.Num(l.Num)), 'g', -1, 64)
	case k.Signed():
		return strconv.FormatInt(int64(r.Num(l.Num)), 10)
	case k == schema.Ref:
		if r.Num(l.Num) == 0 {
			return "no entity"
		}
		return "entity " + strconv.FormatUint(r.Num(l.Num), 10)
	case k.Numeric():
		return strconv.FormatUint(r.Num(l.Num), 10)
	case k == schema.String || k == schema.Bytes:
		return strconv.Quote(r.Str(l.Obj))
	case k == schema.List:
		return fmt.Sprintf("a list of %d", r.List(l.Obj).Len())
	case k == schema.Map:
		return fmt.Sprintf("a map of %d", r.Map(l.Obj).Len())
	case k == schema.Bag:
		b := r.Bag(l.Obj)
		var sb strings.Builder
		sb.WriteString("[")
		for i, key := range b.Keys(nil) {
			if i > 0 {
				sb.WriteString(" ")
			}
			fmt.Fprintf(&sb, "%d:%s", key, formatRecord(b.Get(key)))
		}
		sb.WriteString("]")
		return sb.String()
	}
	return "?"
}

// formatRecord renders a record's leaves as {name=value ...}.
func formatRecord(r *state.Record) string {
	var sb strings.Builder
	sb.WriteString("{")
	st := r.Type()
	for i := 0; i < st.Leaves; i++ {
		if i > 0 {
			sb.WriteString(" ")
		}
		l := st.Leaf(i)
		sb.WriteString(l.Field.Name + "=" + format(r, l))
	}
	sb.WriteString("}")
	return sb.String()
}
