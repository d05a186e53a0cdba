package state

import "github.com/replicago/replica/schema"

// ResetLife sets every field of e whose class field has lifetime life to
// the value a newly spawned entity has: numbers to a stored zero, strings
// and bytes to empty, containers to empty. A class field's lifetime covers
// its whole value, nested structs and container items included. The
// changes are recorded like a generated setter's, so they replicate with
// the tick. It reports whether any field changed, and panics like the
// setters if e cannot be written.
func (e *Entity) ResetLife(life schema.Lifetime) bool {
	e.mustWrite()
	h := e.Handle()
	changed := false
	for i := 0; i < e.t.Leaves; i++ {
		l := e.t.Leaf(i)
		if f := e.t.Field(l.Path[0]); f == nil || f.Life != life {
			continue
		}
		if e.IsZero(l) {
			continue
		}
		switch k := l.Field.Type.Kind; {
		case k.Numeric():
			h.setStored(i, 0)
		case k == schema.String || k == schema.Bytes:
			h.SetStr(i, "")
		default:
			h.setContainer(i, newContainer(&l.Field.Type))
		}
		changed = true
	}
	return changed
}
