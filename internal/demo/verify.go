package demo

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/replicago/replica"
	"github.com/replicago/replica/client"
	"github.com/replicago/replica/schema"
	"github.com/replicago/replica/state"
)

// expect is what the server says one client has: the entities it sees,
// those it owns, and the server's entity of each ID.
type expect struct {
	sees   func(*state.Entity) bool
	owns   func(*state.Entity) bool
	entity func(state.ID) *state.Entity // nil for an ID the server has no entity of
}

// serverSays returns what srv says c has: the entities it sees as of the
// last tick sent (Server.Sees) and those it owns.
func serverSays(srv *replica.Server, c *replica.Conn) expect {
	return expect{
		sees:   func(e *state.Entity) bool { return srv.Sees(c, e) },
		owns:   func(e *state.Entity) bool { return srv.Owner(e) == c },
		entity: srv.Tracker().Entity,
	}
}

// verifyView checks that replica r holds exactly the server's entities
// ents that x says the client sees, as the client sees them: no entity it
// does not see, every one it sees, every field it sees with the server's
// value, every field it may not see (server-only fields, other clients'
// owner fields, its own bots' others fields) at its zero value, every
// reference resolving exactly when the server says the client sees the
// entity referred to, and the client knowing which entities it owns. It
// returns the first difference. Neither side may change while it runs.
func verifyView(ents []*state.Entity, x expect, r *client.Replica) error {
	seen := 0
	for _, e := range ents {
		got := r.Entity(e.ID())
		if !x.sees(e) {
			if got != nil {
				return fmt.Errorf("entity %d (%s) is in the replica, but the server says the client does not see it", e.ID(), describe(e))
			}
			continue
		}
		seen++
		if got == nil {
			return fmt.Errorf("entity %d (%s) is missing: the server says the client sees it", e.ID(), describe(e))
		}
		if got.Class() != e.Class() {
			return fmt.Errorf("entity %d is a %s, want a %s", e.ID(), got.Class().Name, e.Class().Name)
		}
		owned := x.owns(e)
		if got.Owned() != owned {
			return fmt.Errorf("entity %d (%s): the client says it owns it: %v; the server: %v", e.ID(), describe(e), got.Owned(), owned)
		}
		if err := compareProjection(e, got, owned); err != nil {
			return fmt.Errorf("entity %d (%s): %w", e.ID(), describe(e), err)
		}
		if err := checkRefs(r, got, x); err != nil {
			return fmt.Errorf("entity %d (%s): %w", e.ID(), describe(e), err)
		}
	}
	if r.Len() != seen {
		for _, e := range r.Entities(nil) {
			if x.entity(e.ID()) == nil {
				return fmt.Errorf("entity %d (%s) should not exist: the server has no such entity", e.ID(), describe(e))
			}
		}
		return fmt.Errorf("has %d entities, the server says the client sees %d", r.Len(), seen)
	}
	return nil
}

// checkInterest checks what x says a client sees against the arena's
// rule. In a room (cfg.Radius zero) the client sees every bot. In an AOI
// space it sees, from its own bot me, the bots it owns and, of the others,
// every bot within the radius of me and none beyond the radius plus the
// hysteresis (one in between it may keep, if it saw it before); distances
// are computed as the server does, from the quantized positions. It
// returns the first bot that breaks the rule.
func checkInterest(ents []*state.Entity, x expect, me Bot, cfg replica.SpaceConfig) error {
	mx, my := float64(me.X()), float64(me.Y())
	for _, e := range ents {
		sees := x.sees(e)
		if x.owns(e) || cfg.Radius == 0 {
			if !sees {
				return fmt.Errorf("entity %d (%s) is the client's, or in its room, and the server says it does not see it", e.ID(), describe(e))
			}
			continue
		}
		b, ok := BotOf(e)
		if !ok {
			return fmt.Errorf("entity %d is a %s, not a bot", e.ID(), e.Class().Name)
		}
		dx, dy := mx-float64(b.X()), my-float64(b.Y())
		d2 := dx*dx + dy*dy
		r, far := cfg.Radius, cfg.Radius+cfg.Hysteresis
		switch {
		case d2 <= r*r && !sees:
			return fmt.Errorf("entity %d (%s) is %.6g from the client's bot, within the radius %g, and the server says the client does not see it",
				e.ID(), describe(e), math.Sqrt(d2), r)
		case d2 > far*far && sees:
			return fmt.Errorf("entity %d (%s) is %.6g from the client's bot, beyond the radius %g plus the hysteresis %g, and the server says the client sees it",
				e.ID(), describe(e), math.Sqrt(d2), r, cfg.Hysteresis)
		}
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

// checkRefs checks the references of e, a client's entity: each must
// name an entity the server has, and resolve exactly when the server says
// the client sees that entity.
func checkRefs(r *client.Replica, e *state.Entity, x expect) error {
	c := e.Class()
	for i := 0; i < c.Leaves; i++ {
		l := c.Leaf(i)
		if l.Field.Type.Kind != schema.Ref {
			continue
		}
		ref := replica.Ref(e.Num(l.Num))
		if ref == 0 {
			continue
		}
		to := x.entity(state.ID(ref))
		switch resolved := r.Resolve(ref) != nil; {
		case to == nil:
			return fmt.Errorf("field %s refers to entity %d, which the server does not have", l.Field.Name, ref)
		case x.sees(to) && !resolved:
			return fmt.Errorf("field %s refers to entity %d, which the client sees and does not have", l.Field.Name, ref)
		case !x.sees(to) && resolved:
			return fmt.Errorf("field %s refers to entity %d, which the client has and the server says it does not see", l.Field.Name, ref)
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
