package replica

import (
	"cmp"
	"math"
	"slices"

	"github.com/replicago/replica/codec"
	"github.com/replicago/replica/session"
	"github.com/replicago/replica/state"
)

// updateInterest brings the interest state up to the tick's changeset and
// the game's calls, and works out each client's pair changes: the
// entities that entered and left its view beyond its room, and the changes
// of the entities it keeps seeing so. Room changes are bucketed by room.
func (s *Server) updateInterest(cs *state.Changeset) {
	for _, c := range s.conns {
		v := &c.view
		v.enter, v.leave, v.upd, v.ownUpd = s.entSlab.empty(v.enter), s.entSlab.empty(v.leave), nil, false
		v.relevel, v.enterL = s.idSlab.empty(v.relevel), s.lvlSlab.empty(v.enterL)
		v.raised, v.sets = s.raiseSlab.empty(v.raised), s.raiseSlab.empty(v.sets)
		c.levels = s.levelSlab.empty(c.levels)
	}
	s.pairCS.Schema, s.pairCS.Tick = cs.Schema, cs.Tick
	s.pairCS.Changes = s.pairCS.Changes[:0]
	for _, ch := range cs.Changes {
		e := ch.Entity
		switch {
		case ch.Destroyed:
			ie := s.ientIf(e)
			if ie == nil {
				continue
			}
			if sp := ie.space; sp != nil && sp.room {
				if ie.arrived == s.tick {
					// Moved in and destroyed: the viewers never had it.
					sp.movedIn = slices.DeleteFunc(sp.movedIn, func(x *state.Entity) bool { return x == e })
				} else {
					s.roomChange(sp, ch)
				}
			}
			s.drop(ie)
		case ch.Created:
			ie := s.ientIf(e)
			if ie == nil {
				ie = s.newIent(e)
			}
			ie.born = s.tick
			if !ie.set && ie.space == nil {
				s.enterSpace(ie, s.defSpace, false)
			} else if ie.placed {
				s.moveEnt(ie) // placed when SetSpace was called, written since
			}
			if ie.space != nil && ie.space.room {
				s.roomChange(ie.space, ch)
			}
			s.markEnt(ie)
		default:
			ie := s.ientIf(e)
			if ie == nil {
				continue // not yet known: a write before SetSpace of an old entity cannot happen
			}
			if ie.space != nil && ie.space.room && ie.arrived != s.tick {
				s.roomChange(ie.space, ch) // one that moved in is created whole
			}
			if ie.placed {
				if p := s.pos.of(e.Class()); ch.Dirty(p.xi) || ch.Dirty(p.yi) {
					s.moveEnt(ie)
				}
			}
			if len(ie.obs) > 0 {
				// Seen beyond rooms: encoded once in the pair batches;
				// each observer that keeps seeing it gets it (below).
				// Only the evaluation adds observers, which enter.
				s.pairCS.Changes = append(s.pairCS.Changes, ch)
			}
		}
	}
	s.settleCells()
	// Evaluate what changed. Entities first: their evaluation may add
	// pairs that the views' evaluation then keeps. An entity's evaluation
	// settles its pairs with every client, from the positions of the end
	// of the tick: the views' evaluations pass over it (entStamp).
	// The entities created and destroyed within the tick, which no change
	// reports, are dropped first, as the destroyed ones were above: a
	// client that followed one loses its viewpoint (or follows another
	// entity) before any entity is evaluated from it. Dropped during the
	// evaluations, it would leave the pairs of the entities evaluated
	// before it as that viewpoint saw them, which the views' evaluations
	// pass over.
	for _, id := range s.dirtyEnts {
		if ie := s.ientByID(id); ie != nil && ie.dirty && !ie.e.Valid() {
			s.drop(ie)
		}
	}
	s.stamp++
	s.entStamp = s.stamp
	for i := 0; i < len(s.dirtyEnts); i++ {
		if ie := s.ientByID(s.dirtyEnts[i]); ie != nil && ie.dirty {
			ie.dirty = false
			s.evalEnt(ie)
		}
	}
	s.dirtyEnts = s.dirtyEnts[:0]
	for i := 0; i < len(s.dirtyViews); i++ {
		c := s.dirtyViews[i]
		if c.view.dirty {
			c.view.dirty = false
			s.evalView(c)
		}
	}
	clear(s.dirtyViews) // a connection that leaves is not kept by this array
	s.dirtyViews = s.dirtyViews[:0]
	// The changes each client gets: of the entities it kept seeing, the
	// bands it held them at and still does. Counted first, so that every
	// client's list is a run of one array (updBuf) that lasts the tick.
	n := 0
	for _, ch := range s.pairCS.Changes {
		ie := &s.ients[ch.Entity.ID().Slot()]
		if ie.e != ch.Entity {
			continue
		}
		for _, o := range ie.obs {
			if o.entered != s.tick && o.held == 0 { // a held pair gets its set instead
				o.c.view.nupd++
				n++
			}
		}
	}
	s.updBuf = fitCap(s.updBuf, n)
	at := 0
	for _, c := range s.conns {
		v := &c.view
		v.upd = s.updBuf[at : at : at+int(v.nupd)]
		at += int(v.nupd)
		v.nupd = 0
	}
	for i, ch := range s.pairCS.Changes {
		ie := &s.ients[ch.Entity.ID().Slot()]
		if ie.e != ch.Entity {
			continue
		}
		owner := s.ownerByID(ie.id)
		for _, o := range ie.obs {
			if o.entered != s.tick && o.held == 0 {
				v := &o.c.view
				v.upd = append(v.upd, pairUpd{i: int32(i), level: min(o.level, o.sent)})
				v.ownUpd = v.ownUpd || o.c == owner
			}
		}
	}
}

// fitCap returns s emptied, with room for n elements: s's array, or a new
// one of twice that, so that a buffer sized by the busiest tick so far
// seldom grows again.
func fitCap[T any](s []T, n int) []T {
	if cap(s) < n {
		return make([]T, 0, 2*n)
	}
	return s[:0]
}

func (s *Server) roomChange(sp *Space, ch *state.Change) {
	sp.cs.Changes = append(sp.cs.Changes, ch)
	s.activate(sp)
}

// moveEnt re-reads a placed entity's position after a write.
func (s *Server) moveEnt(ie *ient) {
	x, y, _ := s.position(ie.e)
	if x == ie.x && y == ie.y {
		return
	}
	s.moveCell(ie, x, y)
	s.markEnt(ie)
	s.moveFollowers(ie)
}

// drop forgets a destroyed entity: its observers are sent its
// destruction, its followers lose their viewpoint.
func (s *Server) drop(ie *ient) {
	for len(ie.obs) > 0 {
		i := len(ie.obs) - 1
		if c := ie.obs[i].c; ie.obs[i].entered == s.tick {
			c.view.enter = slices.DeleteFunc(c.view.enter, func(e *state.Entity) bool { return e == ie.e })
		} else if ie.obs[i].held&pending == 0 { // a held creation: c never had it
			c.view.leave = s.entSlab.push(c.view.leave, ie.e)
		}
		s.removePair(ie, i)
	}
	for _, g := range ie.groups {
		g.ents = slices.DeleteFunc(g.ents, func(id state.ID) bool { return id == ie.id })
	}
	if ie.always {
		s.always = slices.DeleteFunc(s.always, func(id state.ID) bool { return id == ie.id })
	}
	s.leaveSpace(ie, false)
	followers := ie.follow
	*ie = ient{obs: ie.obs, follow: ie.follow[:0], groups: ie.groups[:0], hist: ie.hist}
	for _, c := range followers {
		c.view.follow = 0
		s.refollow(c)
		s.refreshPoint(c)
		s.markView(c)
	}
}

// refollow makes c, whose followed entity is gone, follow another entity
// with a position it owns, if it has one: a player whose avatar died and
// respawned in the same tick views from the new avatar, whichever of the
// two calls came first. It scans the owners, which only such a death
// costs.
func (s *Server) refollow(c *Conn) {
	for slot, o := range s.owners {
		if o.c != c {
			continue
		}
		if e := s.tr.Entity(o.id); e != nil && uint32(slot) == o.id.Slot() {
			if _, _, ok := s.posLeaves(e.Class()); ok {
				if ie, err := s.ientOf(e); err == nil {
					s.follow(c, ie)
					return
				}
			}
		}
	}
}

// Reconsider re-evaluates who sees e: call it when what Config.Interest
// decides from has changed for e (a stealth unit revealed, say).
func (s *Server) Reconsider(e *state.Entity) error {
	ie, err := s.ientOf(e)
	if err != nil {
		return err
	}
	s.markEnt(ie)
	return nil
}

// pairWanted reports whether c should see ie beyond its room; seen says
// whether it does now, for hysteresis.
func (s *Server) pairWanted(c *Conn, ie *ient, seen bool) bool {
	v := &c.view
	sp := ie.space
	if sp != nil && sp.room && sp == v.space {
		return false // its room: seen without a pair
	}
	if ie.always || s.ownerByID(ie.id) == c {
		return true
	}
	for _, g := range ie.groups {
		if slices.Contains(v.groups, g) {
			return true
		}
	}
	if sp == nil || sp != v.space {
		return false
	}
	if ie.placed {
		if !v.point {
			return false
		}
		r := s.radius(ie)
		if seen {
			r += sp.cfg.Hysteresis
		}
		if !sp.within(v.px-ie.x, v.py-ie.y, r) {
			return false
		}
	}
	return s.cfg.Interest == nil || s.cfg.Interest(c, ie.e)
}

// levelOf returns the level of detail c should see ie at: the number of
// ie's class's bands whose distance reaches c's viewpoint (with the
// space's hysteresis for the bands it held, at level old, when seen), or
// every band when no distance applies: c owns ie, or c or ie has no
// position, or ie is in another space than the one c views. Whatever
// else makes c see ie (a group, always relevant, the Interest hook),
// distance decides the detail when it can be measured: a party member
// across the zone is seen, its near fields are not.
func (s *Server) levelOf(c *Conn, ie *ient, old uint8, seen bool) uint8 {
	bands := ie.e.Class().Bands()
	v := &c.view
	sp := ie.space
	if len(bands) == 0 || !ie.placed || !v.point || sp != v.space || s.ownerByID(ie.id) == c {
		return uint8(len(bands))
	}
	dx, dy := v.px-ie.x, v.py-ie.y
	level := uint8(0)
	for b, d := range bands {
		if seen && int(old) > b {
			d += sp.cfg.Hysteresis
		}
		if !sp.within(dx, dy, d) {
			break
		}
		level++
	}
	return level
}

// within reports whether the offset (dx, dy) lies within r by the space's
// metric.
func (sp *Space) within(dx, dy, r float64) bool {
	if sp.cfg.Metric == Square {
		return math.Abs(dx) <= r && math.Abs(dy) <= r
	}
	if r2 := r * r; r2 <= math.MaxFloat64 {
		return dx*dx+dy*dy <= r2
	}
	// A radius over about 1e154, whose square is +Inf, would take in
	// every offset whose square overflows too, an infinite one among
	// them (an entity the game put at +Inf): compare the lengths.
	return math.Hypot(dx, dy) <= r
}

// dist returns the length of the offset (dx, dy) by the space's metric.
func (sp *Space) dist(dx, dy float64) float64 {
	if sp.cfg.Metric == Square {
		return max(math.Abs(dx), math.Abs(dy))
	}
	return math.Sqrt(dx*dx + dy*dy)
}

// A viewpoint's move alone. A pair's state (seen or not, and its level of
// detail) depends on the distance between the viewpoint and the entity
// only through which side of a boundary it lies on: the entity's radius,
// its class's band distances, each with or without the space's
// hysteresis. When a viewpoint moved by d since its pairs were last
// evaluated, and nothing else that decides them changed (its view is
// queued for the move alone: markMoved), the distance to an entity that
// did not move changed by d at most: a pair farther than that from every
// boundary keeps its state, and its evaluation is passed over (evalMove).
// The entities that moved in the tick were evaluated in full, with every
// viewpoint where it now is. (With Config.Interest, whose answers may
// change as the game likes, every pair is evaluated, as ever.)

// far reports whether distance d is farther than margin from every
// boundary of an entity of radius r in sp: those of the radius and of
// every class's bands, each with and without the hysteresis. The margin
// has room for the rounding of the distances compared.
func (s *Server) far(sp *Space, d, r, margin float64) bool {
	m := margin + 1e-9*(1+d)
	h := sp.cfg.Hysteresis
	if math.Abs(d-r) <= m || math.Abs(d-r-h) <= m {
		return false
	}
	for _, b := range s.bandDists {
		if math.Abs(d-b) <= m || math.Abs(d-b-h) <= m {
			return false
		}
	}
	return true
}

// moved returns how far v's viewpoint moved since its pairs were last
// evaluated, by its space's metric: +Inf if it has no viewpoint, had
// none, or views no AOI space, or if either point is not a number (the
// position of an entity it follows is the game's to write, NaN
// included): no distance bounds such a move, whose evaluation must be in
// full (far would find every pair far from a NaN distance, and keep
// them all).
func (v *view) moved() float64 {
	if !v.point || !v.epoint || v.space == nil || v.space.room {
		return math.Inf(1)
	}
	if d := v.space.dist(v.px-v.ex, v.py-v.ey); !math.IsNaN(d) {
		return d
	}
	return math.Inf(1)
}

// evalPair brings the pair (c, ie) up to date.
func (s *Server) evalPair(c *Conn, ie *ient) { s.evalPairAt(c, ie, s.pairOf(c, ie)) }

// evalPairAt is evalPair for a caller that knows the pair's index in
// ie.obs, or that there is none (−1).
func (s *Server) evalPairAt(c *Conn, ie *ient, oi int) {
	v := &c.view
	had := oi >= 0
	want := s.pairWanted(c, ie, had)
	if want != had && !v.resync && v.space != nil && v.space.room && ie.e != nil &&
		(want && slices.Contains(v.space.movedOut, ie.e) || !want && ie.space == v.space) {
		// Between its room and a pair: the room's shared segments
		// destroy or create ie, which c keeps seeing. Rather than
		// destroy and create it again, c starts over from the full
		// state (a rare event: an entity it owns moving to another
		// room, say).
		v.resync = true
	}
	switch {
	case want && !had:
		s.addPair(c, ie)
		o := &ie.obs[len(ie.obs)-1]
		o.level = s.levelOf(c, ie, 0, false)
		o.sent = o.level
		v.enter = s.entSlab.push(v.enter, ie.e)
	case want && s.bands > 0:
		o := &ie.obs[oi]
		if l := s.levelOf(c, ie, o.level, true); l != o.level {
			o.level = l
			v.relevel = s.idSlab.push(v.relevel, ie.id)
		}
	case !want && had:
		if ie.obs[oi].entered == s.tick {
			v.enter = slices.DeleteFunc(v.enter, func(e *state.Entity) bool { return e == ie.e })
		} else if ie.obs[oi].held&pending == 0 { // a held creation: c never had it
			v.leave = s.entSlab.push(v.leave, ie.e)
		}
		s.removePair(ie, oi)
	}
}

// evalEnt re-evaluates every client that may see ie or stop seeing it.
func (s *Server) evalEnt(ie *ient) {
	ie.vstamp = s.entStamp
	s.stamp++
	try := func(c *Conn) {
		if c.view.stamp != s.stamp && c.admitted {
			c.view.stamp = s.stamp
			s.evalPair(c, ie)
		}
	}
	for i := len(ie.obs) - 1; i >= 0; i-- { // evalPair may remove the current one
		if i >= len(ie.obs) {
			continue
		}
		if c := ie.obs[i].c; c.view.stamp != s.stamp && c.admitted {
			c.view.stamp = s.stamp
			s.evalPairAt(c, ie, i)
		}
	}
	if o := s.ownerByID(ie.id); o != nil {
		try(o)
	}
	if ie.always {
		for _, c := range s.conns {
			try(c)
		}
	}
	for _, g := range ie.groups {
		for _, c := range g.conns {
			try(c)
		}
	}
	sp := ie.space
	if sp == nil || sp.room {
		return
	}
	if !ie.placed {
		for _, c := range sp.viewers {
			try(c)
		}
		return
	}
	// The viewers whose viewpoint is within reach: one beyond cannot
	// want ie, every other reason having been tried above. So were
	// all the clients that see ie: one not tried yet has no pair with it.
	// The reach is a billionth longer than the radius and hysteresis: a
	// viewpoint far from a huge radius's entity (1e20 away, say) is at
	// an offset within rounds, and it may round into reach from beyond
	// the cells the exact bounds give.
	reach := (s.radius(ie) + sp.cfg.Hysteresis) * (1 + 1e-9)
	for _, run := range sp.cells.viewRuns(sp.key(ie.x-reach, ie.y-reach), sp.key(ie.x+reach, ie.y+reach)) {
		for i := range run {
			if v := &run[i]; sp.within(v.x-ie.x, v.y-ie.y, reach) {
				if c := v.c; c.view.stamp != s.stamp && c.admitted {
					c.view.stamp = s.stamp
					s.evalPairAt(c, ie, -1)
				}
			}
		}
	}
}

// cellsNear calls fn for the cells of the square of half-size reach
// around (x, y), or for every cell if there are fewer of them.
func (sp *Space) cellsNear(x, y, reach float64, fn func(*cell)) {
	sp.cells.near(sp.key(x-reach, y-reach), sp.key(x+reach, y+reach), fn)
}

// evalView re-evaluates every entity c may see or stop seeing, each once.
func (s *Server) evalView(c *Conn) {
	if !c.admitted {
		return
	}
	v := &c.view
	if !v.full && s.cfg.Interest == nil && v.switched == nil && !math.IsInf(v.moved(), 1) {
		s.evalMove(c)
		return
	}
	v.full = false
	v.ex, v.ey, v.epoint = v.px, v.py, v.point
	s.stamp++
	stamp := s.stamp
	try := func(id state.ID) {
		if ie := s.ientByID(id); ie != nil && ie.vstamp != stamp && ie.vstamp != s.entStamp {
			ie.vstamp = stamp
			s.evalPair(c, ie)
		}
	}
	// Entities seen now (evalPair may drop the current pair, no other);
	// then those it may start seeing.
	for i := len(v.pairs) - 1; i >= 0; i-- {
		if i < len(v.pairs) {
			try(v.pairs[i].id)
		}
	}
	if v.switched != nil {
		// The room it left: what it owns there, say, it still sees.
		for _, id := range v.switched.members {
			try(id)
		}
		v.switched = nil
	}
	for _, id := range s.always {
		try(id)
	}
	for _, g := range v.groups {
		for _, id := range g.ents {
			try(id)
		}
	}
	sp := v.space
	if sp == nil || sp.room {
		return
	}
	for _, id := range sp.unplace {
		try(id)
	}
	if !v.point {
		return
	}
	// The placed entities within reach, read from the grid: c cannot
	// want one beyond unless it owns it (its pairs, the always-relevant
	// entities and its groups' were tried above).
	hyst := sp.cfg.Hysteresis
	near := func(e *cellEnt) {
		if sp.within(v.px-e.x, v.py-e.y, e.r+hyst) || s.owns(c, e.id) {
			try(e.id)
		}
	}
	for i := range sp.wide {
		near(&sp.wide[i])
	}
	sp.cellsNear(v.px, v.py, sp.cfg.CellSize+hyst, func(ce *cell) {
		for i := range ce.ents {
			near(&ce.ents[i])
		}
	})
}

// evalMove re-evaluates, for c's viewpoint's move alone within its AOI
// space, the entities near a boundary (see far): those it sees, then
// those it may start seeing. What does not depend on its viewpoint (the
// entities of other spaces and without a position, its groups', the
// always-relevant ones) is as it was.
func (s *Server) evalMove(c *Conn) {
	v := &c.view
	sp := v.space
	dv := v.moved()
	v.ex, v.ey = v.px, v.py
	s.stamp++
	stamp := s.stamp
	for i := len(v.pairs) - 1; i >= 0; i-- { // evalPair may drop the current pair, no other
		if i >= len(v.pairs) {
			continue
		}
		ie := s.ientByID(v.pairs[i].id)
		// One that moved in the tick was evaluated in full (evalEnt):
		// tested first, as it spares the distance.
		if ie == nil || ie.vstamp == s.entStamp || ie.space != sp || !ie.placed ||
			s.far(sp, sp.dist(v.px-ie.x, v.py-ie.y), s.radius(ie), dv) {
			continue
		}
		ie.vstamp = stamp
		s.evalPairAt(c, ie, int(v.pairs[i].at))
	}
	// The entities it does not see, which it starts seeing within their
	// radius: whatever else might make it want one (owning it, a group,
	// always relevant) would have made a pair already. So only one within
	// its radius and farther than its radius less dv may have come in;
	// the band boundaries and the hysteresis bear on pairs alone, tried
	// above (their vstamp passes over them here). The test is on squared
	// distances, with far's margin for rounding, which takes in a few
	// entities more than the exact one would, never fewer.
	px, py := v.px, v.py
	square := sp.cfg.Metric == Square
	// The bounds of the squared distance, for the radius of the entity
	// scanned last: the entities of a space mostly share one.
	lastR, hi2, lo2 := math.NaN(), 0.0, 0.0
	scan := func(ents []cellEnt) {
		r, hi, lo := lastR, hi2, lo2 // in registers for the loop
		for i := range ents {
			e := &ents[i]
			dx, dy := px-e.x, py-e.y
			d2 := dx*dx + dy*dy
			if square {
				d2 = max(dx*dx, dy*dy)
			}
			if e.r != r {
				r = e.r
				eps := 1e-9 * (2 + r + dv)
				hi, lo = (r+eps)*(r+eps), -1.0
				if l := r - dv - eps; l > 0 {
					lo = l * l
				}
			}
			if d2 > hi || d2 < lo {
				continue
			}
			if ie := s.ientByID(e.id); ie != nil && ie.vstamp != stamp && ie.vstamp != s.entStamp {
				ie.vstamp = stamp
				s.evalPair(c, ie)
			}
		}
		lastR, hi2, lo2 = r, hi, lo
	}
	scan(sp.wide)
	sp.cellsNear(px, py, sp.cfg.CellSize+sp.cfg.Hysteresis, func(ce *cell) { scan(ce.ents) })
}

// forget removes a connection that left from the interest state.
func (s *Server) forget(c *Conn) {
	v := &c.view
	v.gone, c.admitted = true, false
	for len(v.pairs) > 0 {
		p := v.pairs[len(v.pairs)-1]
		s.removePair(&s.ients[p.id.Slot()], int(p.at))
	}
	for _, g := range v.groups {
		g.conns = slices.DeleteFunc(g.conns, func(x *Conn) bool { return x == c })
	}
	v.groups = nil
	s.unfollow(c)
	s.unview(c)
	v.dirty = false
}

// batchPairs encodes, once for every client, what clients see beyond
// their rooms this tick: the changes of the entities seen so, the full
// states of those that entered some client's view (or, for their new
// bands, rose in level of detail, or had their creation held back by a
// budget), and the whole states of those whose changes a budget held
// back. It also works out each client's level-of-detail changes of the
// entities it holds, for its TICK.
func (s *Server) batchPairs() {
	s.enterEnts, s.setEnts = s.enterEnts[:0], s.setEnts[:0]
	if s.setAt == nil {
		s.setAt = make(map[state.ID]int32)
	}
	clear(s.setAt)
	s.enterNeed = s.enterNeed[:0]
	// full lists ie's full state for c, noting whether c is its owner:
	// the owner partition's pieces are for the owner, the others' for
	// the others.
	full := func(ie *ient, c *Conn) {
		if ie.entered != s.tick {
			ie.entered, ie.enterAt = s.tick, int32(len(s.enterEnts))
			s.enterEnts = append(s.enterEnts, ie.e)
			s.enterNeed = append(s.enterNeed, 0)
		}
		if s.ownerByID(ie.id) == c {
			s.enterNeed[ie.enterAt] |= needOwner
		} else {
			s.enterNeed[ie.enterAt] |= needOthers
		}
	}
	for _, c := range s.conns {
		v := &c.view
		for _, e := range v.enter {
			full(&s.ients[e.ID().Slot()], c)
		}
		held := v.held[:0]
		for _, id := range v.held {
			ie := &s.ients[id.Slot()]
			if ie.id != id {
				continue // destroyed (its slot may hold another entity now)
			}
			oi := s.pairOf(c, ie)
			if oi < 0 || ie.obs[oi].held == 0 || slices.Contains(held, id) {
				continue // no longer held, or listed already
			}
			held = append(held, id)
			if ie.obs[oi].held&pending != 0 {
				full(ie, c)
			} else if _, ok := s.setAt[id]; !ok {
				s.setAt[id] = int32(len(s.setEnts))
				s.setEnts = append(s.setEnts, ie.e)
			}
		}
		v.held = held
		if s.bands == 0 {
			continue
		}
		for _, id := range v.relevel {
			ie := &s.ients[id.Slot()]
			oi := s.pairOf(c, ie)
			if oi < 0 || ie.obs[oi].entered == s.tick || ie.obs[oi].level == ie.obs[oi].sent || ie.obs[oi].held&pending != 0 {
				continue // gone, entering, done already, or not created yet
			}
			o := &ie.obs[oi]
			c.levels = s.levelSlab.push(c.levels, session.Level{ID: uint32(id), Level: o.level})
			if o.level > o.sent && o.held == 0 { // a stale one gets its set
				v.raised = s.raiseSlab.push(v.raised, raise{e: ie.e, from: o.sent, to: o.level})
				full(ie, c)
			}
			o.sent = o.level
		}
	}
	// The owner and others partitions encode only the entities some
	// client gets their pieces of: a player entering the views of
	// others does not have its owner's fields encoded.
	byVis := [codec.PartOwner + 1][]*state.Entity{s.enterEnts, s.enterEnts, s.enterEnts}
	if len(s.enterEnts) > 0 {
		s.enterOwn, s.enterOthers = s.enterOwn[:0], s.enterOthers[:0]
		for i, e := range s.enterEnts {
			own, others := e, e
			if s.enterNeed[i]&needOwner == 0 {
				own = nil
			}
			if s.enterNeed[i]&needOthers == 0 {
				others = nil
			}
			s.enterOwn, s.enterOthers = append(s.enterOwn, own), append(s.enterOthers, others)
		}
		byVis[codec.PartOwner], byVis[codec.PartOthers] = s.enterOwn, s.enterOthers
	}
	for _, part := range s.pairParts {
		p := int(part)
		if len(s.pairCS.Changes) > 0 {
			s.enc.DeltaBatch(&s.pairDelta[p], &s.pairCS, part)
		}
		if len(s.enterEnts) > 0 {
			s.enc.FullBatch(&s.pairFull[p], byVis[part.Vis()], part)
		}
		if len(s.setEnts) > 0 {
			s.enc.SetBatch(&s.pairSet[p], s.setEnts, part)
		}
	}
}

// A candidate is what a tick would send a client of one entity beyond its
// room, for its budget to weigh: its entry, its changes and the bands it
// rose to, or, held back before, its creation or whole state.
type candidate struct {
	ie    *ient
	o     *obsRef
	enter int32 // in view.enter, or −1
	upd   int32 // in view.upd, or −1
	raise int32 // in view.raised, or −1
	bits  int
	prio  float64
}

// budgetPairs decides what of its pairs c is sent this tick, within its
// bandwidth budget (Config.Budget): everything, if it fits; else the
// entities of highest priority, holding the others back (obsRef.held).
// It leaves the result in c's view (enter, upd, raised, sets) and the
// levels of the entities it creates in c.levels.
func (s *Server) budgetPairs(c *Conn) {
	v := &c.view
	if c.budget >= 0 {
		// What the tick may send: a tick's worth more, at most two
		// saved up, and at most a second's worth of debt (send charges
		// what was sent).
		per := c.budget / float64(s.cfg.TickRate)
		c.tokens = max(min(c.tokens+per, 2*per), -c.budget)
	}
	if len(v.enter)+len(v.upd)+len(v.raised)+len(v.held) == 0 {
		return
	}
	if len(v.held) == 0 && (c.budget < 0 || s.bound(len(v.enter)+len(v.raised), len(v.upd)) <= c.tokens) {
		// Everything fits whatever each entity costs: all of it goes,
		// without weighing it.
		for _, e := range v.enter {
			ie := &s.ients[e.ID().Slot()]
			o := &ie.obs[s.pairOf(c, ie)]
			s.entered(c, ie, o)
		}
		return
	}
	cands := s.cands[:0]
	for j, e := range v.enter {
		ie := &s.ients[e.ID().Slot()]
		o := &ie.obs[s.pairOf(c, ie)]
		cands = append(cands, candidate{ie: ie, o: o, enter: int32(j), upd: -1, raise: -1,
			bits: s.pieceBits(&s.pairFull, ie.enterAt, 0, o.level)})
	}
	for j, u := range v.upd {
		ie := &s.ients[s.pairCS.Changes[u.i].Entity.ID().Slot()]
		cands = append(cands, candidate{ie: ie, enter: -1, upd: int32(j), raise: -1,
			bits: s.pieceBits(&s.pairDelta, u.i, 0, u.level)})
	}
	for j, r := range v.raised {
		ie := &s.ients[r.e.ID().Slot()]
		bits := s.pieceBits(&s.pairFull, ie.enterAt, r.from+1, r.to)
		if k := slices.IndexFunc(cands, func(x candidate) bool { return x.ie == ie && x.upd >= 0 }); k >= 0 {
			cands[k].raise, cands[k].bits = int32(j), cands[k].bits+bits
			continue
		}
		cands = append(cands, candidate{ie: ie, enter: -1, upd: -1, raise: int32(j), bits: bits})
	}
	for _, id := range v.held {
		ie := &s.ients[id.Slot()]
		o := &ie.obs[s.pairOf(c, ie)]
		x := candidate{ie: ie, o: o, enter: -1, upd: -1, raise: -1}
		if o.held&pending != 0 {
			x.bits = s.pieceBits(&s.pairFull, ie.enterAt, 0, o.level)
		} else {
			x.bits = s.pieceBits(&s.pairSet, s.setAt[ie.id], 0, o.level)
		}
		cands = append(cands, x)
	}
	total := 0
	for i := range cands {
		cands[i].bits += 16 // its ID, and a share of the group's headers
		total += cands[i].bits
	}
	s.cands = cands
	if c.budget < 0 || float64(total)/8 <= c.tokens {
		s.sendAll(c, cands)
		return
	}
	// Over budget: the most important first, for as long as it lasts.
	for i := range cands {
		x := &cands[i]
		if x.o == nil {
			x.o = &x.ie.obs[s.pairOf(c, x.ie)]
		}
		x.prio = s.priority(c, x.ie, x.o)
	}
	slices.SortStableFunc(cands, func(a, b candidate) int { return cmp.Compare(b.prio, a.prio) })
	sent, left := false, c.tokens
	for i := range cands {
		x := &cands[i]
		if b := float64(x.bits) / 8; !sent || math.IsInf(x.prio, 1) || b <= left {
			left -= b // the first goes whatever its size: the budget catches up
			sent = true
			continue
		}
		x.bits = -1 // held back
	}
	s.sendAll(c, cands)
}

// entered records that c is sent ie's creation this tick: its level, in
// view.enterL and, below the top, in c's TICK.
func (s *Server) entered(c *Conn, ie *ient, o *obsRef) {
	o.held, o.sent = 0, o.level
	c.view.enterL = s.lvlSlab.push(c.view.enterL, o.level)
	if s.bands > 0 && int(o.level) < len(ie.e.Class().Bands()) {
		c.levels = s.levelSlab.push(c.levels, session.Level{ID: uint32(ie.id), Level: o.level})
	}
}

// bound returns, in bytes, what a client's tick of entries (or level
// rises) and changes of pairs costs at most: each at the largest piece
// of the tick's batches, and 16 bits of ID and headers.
func (s *Server) bound(full, delta int) float64 {
	if s.boundTick != s.tick {
		s.boundTick, s.maxFull, s.maxDelta = s.tick, 16, 16
		for _, p := range s.pairParts {
			s.maxFull += s.pairFull[p].MaxBits()
			s.maxDelta += s.pairDelta[p].MaxBits()
		}
	}
	return float64(full*s.maxFull+delta*s.maxDelta) / 8
}

// priority returns how much ie matters to c now (see SetPriority).
func (s *Server) priority(c *Conn, ie *ient, o *obsRef) float64 {
	if s.ownerByID(ie.id) == c {
		return math.Inf(1)
	}
	p := ie.prio
	if p == 0 {
		p = 1
	}
	if v := &c.view; ie.placed && v.point && ie.space == v.space {
		d := math.Hypot(v.px-ie.x, v.py-ie.y)
		p /= 1 + d/max(s.radius(ie), 1)
	}
	if o.held != 0 {
		p *= float64(1 + s.tick - o.since)
	}
	return p
}

// pieceBits returns the bits of piece i of the batches bs of the bands lo
// to hi (every band without bands), over every partition: an estimate of
// what an entity costs a client.
func (s *Server) pieceBits(bs *[codec.NumParts]codec.Batch, i int32, lo, hi uint8) int {
	n := 0
	for _, part := range s.pairParts {
		if b, banded := part.Banded(); banded && (b < int(lo) || b > int(hi)) {
			continue
		}
		n += bs[part].Bits(bs[part].Piece(int(i)))
	}
	return n
}

// sendAll rewrites c's view for what its budget lets through: candidates
// with bits ≥ 0 are sent, the others held back.
func (s *Server) sendAll(c *Conn, cands []candidate) {
	v := &c.view
	enter := v.enter[:0] // in place: candidates name entities, not indexes in enter
	v.enterL = v.enterL[:0]
	upd, raised := v.upd, v.raised
	v.sets, v.held = v.sets[:0], v.held[:0]
	keepU, keepR := s.keepU[:0], s.keepR[:0]
	hold := func(x *candidate, what uint8) {
		if x.o.held == 0 {
			x.o.since = s.tick
		}
		x.o.held |= what
		v.held = s.idSlab.push(v.held, x.ie.id)
		s.stats.Deferred++
	}
	for i := range cands {
		x := &cands[i]
		if x.o == nil && x.bits >= 0 {
			// Changes of a pair not held back, sent as they are.
			if x.upd >= 0 {
				keepU = append(keepU, upd[x.upd])
			}
			if x.raise >= 0 {
				keepR = append(keepR, raised[x.raise])
			}
			continue
		}
		if x.o == nil {
			x.o = &x.ie.obs[s.pairOf(c, x.ie)]
		}
		o := x.o
		switch {
		case x.bits < 0 && (x.enter >= 0 || o.held&pending != 0):
			hold(x, pending)
		case x.bits < 0:
			hold(x, stale)
		case x.enter >= 0 || o.held&pending != 0:
			enter = append(enter, x.ie.e)
			s.entered(c, x.ie, o)
		case o.held&stale != 0:
			o.held = 0
			v.sets = s.raiseSlab.push(v.sets, raise{e: x.ie.e, to: o.level})
			s.noteSet(c, x.ie.id)
		default:
			if x.upd >= 0 {
				keepU = append(keepU, upd[x.upd])
			}
			if x.raise >= 0 {
				keepR = append(keepR, raised[x.raise])
			}
		}
	}
	v.enter = enter
	v.upd = append(v.upd[:0], keepU...)
	v.raised = append(v.raised[:0], keepR...)
	s.keepU, s.keepR = keepU, keepR
}

// pairSegments appends to segs the segments of partition part of what c
// sees beyond its room: the entities that entered its view (creates in
// PartAll, fills in the others) and the changes of those it kept seeing,
// for the entities keep accepts; in PartAll the destructions of those
// that left. With level-of-detail bands, each entity's bands up to the
// level c sees it at, and fills of the bands it rose to. keep nil accepts
// all.
func (s *Server) pairSegments(segs [][]byte, c *Conn, part codec.Part, keep func(*state.Entity) bool) [][]byte {
	v := &c.view
	a := &s.asm
	if len(v.enter)+len(v.upd)+len(v.raised)+len(v.sets)+len(v.leave) == 0 {
		// Nothing beyond its room this tick, as for every client of an
		// idle zone: the Assembler holds nothing either (Segments leaves
		// it empty).
		return segs
	}
	if s.bands == 0 && keep == nil {
		// Every entity's one piece of each batch: no bands to pick (nor
		// any raised), no entity to leave out.
		full, delta, set := &s.pairFull[part], &s.pairDelta[part], &s.pairSet[part]
		for _, e := range v.enter {
			a.Add(full, full.Piece(int(s.ients[e.ID().Slot()].enterAt)))
		}
		if part.Vis() != codec.PartOwner || v.ownUpd {
			for _, u := range v.upd {
				a.Add(delta, delta.Piece(int(u.i)))
			}
		}
		for _, r := range v.sets {
			a.Add(set, set.Piece(int(s.setAt[r.e.ID()])))
		}
		if part == codec.PartAll {
			for _, e := range v.leave {
				a.Destroy(e.ID())
			}
		}
		maxBytes, maxValues := s.segLimits()
		return a.Segments(segs, s.cfg.SegmentEntities, maxBytes, maxValues)
	}
	// add adds e's pieces of batches bs (by part) for bands lo..hi,
	// piece i of each; every band if there are none.
	add := func(bs *[codec.NumParts]codec.Batch, i int, lo, hi uint8) {
		if s.bands == 0 {
			a.Add(&bs[part], bs[part].Piece(i))
			return
		}
		for b := lo; b <= hi; b++ {
			if p := part.Band(int(b)); s.parts[p] {
				a.Add(&bs[p], bs[p].Piece(i))
			}
		}
	}
	for j, e := range v.enter {
		if keep == nil || keep(e) {
			hi := v.enterL[j]
			add(&s.pairFull, int(s.ients[e.ID().Slot()].enterAt), 0, hi)
		}
	}
	// The owner partition's changes are of the entities c owns: none of
	// them changed, none to look for. The changes are most of what c
	// gets: add, by hand.
	if part.Vis() != codec.PartOwner || v.ownUpd {
		bs := &s.pairDelta
		for _, u := range v.upd {
			if keep != nil && !keep(s.pairCS.Changes[u.i].Entity) {
				continue
			}
			if s.bands == 0 {
				a.Add(&bs[part], bs[part].Piece(int(u.i)))
				continue
			}
			for b := uint8(0); b <= u.level; b++ {
				if p := part.Band(int(b)); s.parts[p] {
					a.Add(&bs[p], bs[p].Piece(int(u.i)))
				}
			}
		}
	}
	for _, r := range v.raised {
		if keep == nil || keep(r.e) {
			add(&s.pairFull, int(s.ients[r.e.ID().Slot()].enterAt), r.from+1, r.to)
		}
	}
	for _, r := range v.sets {
		if keep == nil || keep(r.e) {
			add(&s.pairSet, int(s.setAt[r.e.ID()]), 0, r.to)
		}
	}
	if part == codec.PartAll {
		for _, e := range v.leave {
			a.Destroy(e.ID())
		}
	}
	maxBytes, maxValues := s.segLimits()
	return a.Segments(segs, s.cfg.SegmentEntities, maxBytes, maxValues)
}
