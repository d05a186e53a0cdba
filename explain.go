package replica

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"unsafe"

	"github.com/replicago/replica/schema"
	"github.com/replicago/replica/session"
	"github.com/replicago/replica/state"
)

// InterestStats describes the interest state of a server.
type InterestStats struct {
	Pairs int // (client, entity) pairs seen beyond rooms
	Cells int // occupied grid cells, over every AOI space
	// Bytes estimates the memory the interest state holds: per pair, its
	// entries in the client's pair list and the entity's observer list;
	// per entity and per cell, their records; per client, its record of
	// the entities it holds (by which its updates name them); and the
	// spare arrays kept for those lists to reuse.
	Bytes int
}

// InterestStats returns the size of the interest state. It walks every
// entity and connection: call it for monitoring, not every tick.
func (s *Server) InterestStats() InterestStats {
	var st InterestStats
	for _, c := range s.conns {
		v := &c.view
		st.Pairs += len(v.pairs)
		st.Bytes += int(unsafe.Sizeof(pairRef{}))*cap(v.pairs) + int(unsafe.Sizeof(*v)) +
			8*(cap(v.enter)+cap(v.leave)+cap(v.groups)) +
			4*(cap(v.relevel)+cap(v.held)) + cap(v.enterL) + int(unsafe.Sizeof(raise{}))*(cap(v.raised)+cap(v.sets)) +
			int(unsafe.Sizeof(session.Level{}))*cap(c.levels) + c.held.Bytes()
	}
	st.Bytes += len(s.ients)*int(unsafe.Sizeof(ient{})-unsafe.Sizeof(histLine{})) + s.obsSlab.bytes() + s.pairSlab.bytes() +
		int(unsafe.Sizeof(pairUpd{}))*cap(s.updBuf) + s.entSlab.bytes() + s.idSlab.bytes() + s.raiseSlab.bytes() + s.lvlSlab.bytes() + s.levelSlab.bytes()
	for i := range s.ients {
		ie := &s.ients[i]
		st.Bytes += int(unsafe.Sizeof(obsRef{}))*cap(ie.obs) + 8*(cap(ie.follow)+cap(ie.groups))
	}
	seen := map[*Space]bool{}
	for _, c := range s.conns {
		if sp := c.view.space; sp != nil && !seen[sp] {
			seen[sp] = true
			st.Cells += sp.cells.n
			st.Bytes += sp.cells.bytes()
		}
	}
	return st
}

// An Explanation says why a client does or does not see an entity, or a
// field of it (Server.Explain).
type Explanation struct {
	Sees   bool   // the client has the entity (and, if a field was named, receives that field)
	Reason string // one sentence, for people

	Space     string  // the entity's space, "" for none
	ViewSpace string  // the client's, "" for none
	Room      bool    // the entity is in the client's room, which shows it everything in it
	Owner     bool    // the client owns the entity
	Always    bool    // the entity is always relevant
	Group     string  // a group both belong to, "" for none
	Distance  float64 // from the client's viewpoint to the entity, in its space's metric; NaN when not measured
	Radius    float64 // the entity's visibility radius, plus hysteresis if Kept; NaN when not measured
	Kept      bool    // seen within radius + hysteresis, not the radius alone

	Field      string            // the field named, "" for none
	Visibility schema.Visibility // its effective visibility

	// Level is the level of detail the client holds the entity at (see
	// Class.Bands and docs/protocol.md §5.8), −1 for every band; Band
	// the named field's band (0: none) and BandDistance its distance.
	Level        int
	Band         int
	BandDistance float64
	// Held says the client's bandwidth budget holds the entity back
	// (Config.Budget): its creation, or its latest changes, wait for a
	// later tick; HeldTicks for how many ticks so far.
	Held      bool
	HeldTicks uint64
}

// Explain tells why c does or does not see e and, given a field path such
// as "hp" or "body.pos.x", that field: the space of each, ownership,
// always-relevance, a shared group, the distance against the radius, the
// field's visibility. It describes the state as of the last tick sent,
// with the rules evaluated now. It returns ErrUnknownEntity for an entity
// that is not live in this server, ErrConnGone for a nil connection, one
// of another server or one that has left (which sees nothing, whatever
// the rules would say of it), and ErrUnknownField for a field path e's
// class does not have.
func (s *Server) Explain(c *Conn, e *state.Entity, field ...string) (Explanation, error) {
	// An entity spawned in this tick has no interest state until the
	// game places it or the tick creates it: ientOf makes it, as
	// SetSpace would.
	ie, err := s.ientOf(e)
	if err != nil {
		return Explanation{}, err
	}
	if c == nil || c.srv != s || c.view.gone {
		return Explanation{}, ErrConnGone
	}
	x := Explanation{Distance: math.NaN(), Radius: math.NaN(), Level: -1}
	sp := ie.space
	if sp == nil && !ie.set && s.createdNow(ie) {
		sp = s.defSpace // the tick creates it there (updateInterest)
	}
	if sp != nil {
		x.Space = sp.cfg.Name
	}
	v := &c.view
	if v.space != nil {
		x.ViewSpace = v.space.cfg.Name
	}
	x.Owner, x.Always = s.ownerOf(e) == c, ie.always
	for _, g := range ie.groups {
		if slices.Contains(v.groups, g) {
			x.Group = g.name
			break
		}
	}
	oi := s.pairOf(c, ie)
	paired := oi >= 0
	if paired {
		o := &ie.obs[oi]
		if int(o.level) < len(e.Class().Bands()) {
			x.Level = int(o.level)
		}
		if o.held != 0 {
			x.Held, x.HeldTicks = true, s.tick-o.since
		}
	}
	switch {
	case sp != nil && sp.room && sp == v.space:
		x.Room, x.Sees = true, true
		x.Reason = fmt.Sprintf("both are in room %q", sp.cfg.Name)
	case x.Owner:
		x.Sees, x.Reason = true, "the client owns it"
	case x.Always:
		x.Sees, x.Reason = true, "it is always relevant"
	case x.Group != "":
		x.Sees, x.Reason = true, fmt.Sprintf("both are in group %q", x.Group)
	case sp == nil:
		x.Reason = "it is in no space, and neither owned by the client, always relevant nor in a group of the client's"
	case sp != v.space:
		x.Reason = fmt.Sprintf("it is in space %q, the client views %q", sp.cfg.Name, x.ViewSpace)
	case !ie.placed:
		x.Sees, x.Reason = true, fmt.Sprintf("its class has no position: every viewer of %q sees it", sp.cfg.Name)
	case !v.point:
		x.Reason = "the client has no viewpoint (it follows no entity in this space, and none was set)"
	default:
		dx, dy := v.px-ie.x, v.py-ie.y
		if sp.cfg.Metric == Square {
			x.Distance = max(math.Abs(dx), math.Abs(dy))
		} else {
			x.Distance = math.Hypot(dx, dy)
		}
		r := s.radius(ie)
		x.Radius = r
		in := sp.within(dx, dy, r)
		if !in && paired && sp.within(dx, dy, r+sp.cfg.Hysteresis) {
			in, x.Kept, x.Radius = true, true, r+sp.cfg.Hysteresis
		}
		switch {
		case !in:
			x.Reason = fmt.Sprintf("distance %.6g is over its radius %.6g", x.Distance, x.Radius)
		case s.cfg.Interest != nil && !s.cfg.Interest(c, e):
			x.Reason = fmt.Sprintf("distance %.6g is within radius %.6g, but Config.Interest hides it", x.Distance, x.Radius)
		case x.Kept:
			x.Sees, x.Reason = true, fmt.Sprintf("distance %.6g is over its radius %.6g but within the hysteresis %.6g of it, and it was seen", x.Distance, r, sp.cfg.Hysteresis)
		default:
			x.Sees, x.Reason = true, fmt.Sprintf("distance %.6g is within its radius %.6g", x.Distance, x.Radius)
		}
	}
	if x.Held && x.Sees {
		what := "its latest changes wait"
		if ie.obs[oi].held&pending != 0 {
			what, x.Sees = "its creation waits", false
		}
		x.Reason += fmt.Sprintf("; the client's bandwidth budget holds it back: %s (for %d ticks)", what, x.HeldTicks)
	}
	if len(field) == 0 {
		return x, nil
	}
	path := strings.Join(field, ".")
	vis, ok := fieldVisibility(e.Class(), path)
	if !ok {
		return Explanation{}, fmt.Errorf("%w: class %s has no field %q", ErrUnknownField, e.Class().Name, path)
	}
	x.Field, x.Visibility = path, vis
	if !x.Sees {
		return x, nil
	}
	switch {
	case vis == schema.VisServer:
		x.Sees, x.Reason = false, fmt.Sprintf("field %s is server-only", path)
	case vis == schema.VisOwner && !x.Owner:
		x.Sees, x.Reason = false, fmt.Sprintf("field %s is for the owner only, and the client does not own it (%s)", path, x.Reason)
	case vis == schema.VisOthers && x.Owner:
		x.Sees, x.Reason = false, fmt.Sprintf("field %s is for others only, and the client owns it", path)
	default:
		x.Reason = fmt.Sprintf("field %s is visible to %s, and %s", path, vis, x.Reason)
	}
	if top, _, _ := strings.Cut(path, "."); x.Sees {
		if fs := e.Class().FieldPath(top); fs != nil && fs[0].LOD != 0 {
			f := fs[0]
			x.Band, x.BandDistance = int(e.Class().Band(f.LOD)), f.LOD
			if x.Level >= 0 && x.Band > x.Level {
				x.Sees, x.Reason = false, fmt.Sprintf("field %s is sent within %.6g (level-of-detail band %d), and the client holds the entity at level %d (%s)",
					path, f.LOD, x.Band, x.Level, x.Reason)
			}
		}
	}
	return x, nil
}

// fieldVisibility returns the effective visibility of the field at a
// dotted path of class c: the narrowest along the path.
func fieldVisibility(c *schema.Struct, path string) (schema.Visibility, bool) {
	fields := c.FieldPath(path)
	if fields == nil {
		return 0, false
	}
	vis := schema.VisAll
	for _, f := range fields {
		vis &= f.Vis
	}
	return vis, true
}
