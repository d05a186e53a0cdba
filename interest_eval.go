package replica

import (
	"math"
	"slices"

	"github.com/replicago/replica/codec"
	"github.com/replicago/replica/state"
)

// updateInterest brings the interest state up to the tick's changeset and
// the game's calls, and works out each client's pair changes: the
// entities that entered and left its view beyond its room, and the changes
// of the entities it keeps seeing so. Room changes are bucketed by room.
func (s *Server) updateInterest(cs *state.Changeset) {
	for _, c := range s.conns {
		v := &c.view
		v.enter, v.leave, v.upd = v.enter[:0], v.leave[:0], v.upd[:0]
	}
	s.pairCS.Schema, s.pairCS.Tick = cs.Schema, cs.Tick
	s.pairCS.Changes = s.pairCS.Changes[:0]
	s.warm(cs)
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
				if p := s.pos[e.Class()]; ch.Dirty(p.xi) || ch.Dirty(p.yi) {
					s.moveEnt(ie)
				}
			}
			if len(ie.obs) > 0 {
				// Seen beyond rooms: encoded once in the pair batches,
				// each observer's tick names it. (Pairs change only in
				// the evaluation below, so every observer had it.)
				i := int32(len(s.pairCS.Changes))
				s.pairCS.Changes = append(s.pairCS.Changes, ch)
				for _, o := range ie.obs {
					o.c.view.upd = append(o.c.view.upd, i)
				}
			}
		}
	}
	// Evaluate what changed. Entities first: their evaluation may add
	// pairs that the views' evaluation then keeps.
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
	s.dirtyViews = s.dirtyViews[:0]
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
	s.refreshFollowers(ie)
}

// drop forgets a destroyed entity: its observers are sent its
// destruction, its followers lose their viewpoint.
func (s *Server) drop(ie *ient) {
	for len(ie.obs) > 0 {
		i := len(ie.obs) - 1
		if c := ie.obs[i].c; ie.obs[i].entered == s.tick {
			c.view.enter = slices.DeleteFunc(c.view.enter, func(e *state.Entity) bool { return e == ie.e })
		} else {
			c.view.leave = append(c.view.leave, ie.e)
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
	for _, c := range ie.follow {
		c.view.follow = 0
		s.refreshPoint(c)
		s.markView(c)
	}
	*ie = ient{obs: ie.obs, follow: ie.follow[:0], groups: ie.groups[:0]}
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
	if ie.always || s.ownerOf(ie.e) == c {
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

// within reports whether the offset (dx, dy) lies within r by the space's
// metric.
func (sp *Space) within(dx, dy, r float64) bool {
	if sp.cfg.Metric == Square {
		return math.Abs(dx) <= r && math.Abs(dy) <= r
	}
	return dx*dx+dy*dy <= r*r
}

// evalPair brings the pair (c, ie) up to date.
func (s *Server) evalPair(c *Conn, ie *ient) {
	v := &c.view
	oi := s.pairOf(c, ie)
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
		v.enter = append(v.enter, ie.e)
	case !want && had:
		if ie.obs[oi].entered == s.tick {
			v.enter = slices.DeleteFunc(v.enter, func(e *state.Entity) bool { return e == ie.e })
		} else {
			v.leave = append(v.leave, ie.e)
		}
		s.removePair(ie, oi)
	}
}

// evalEnt re-evaluates every client that may see ie or stop seeing it.
func (s *Server) evalEnt(ie *ient) {
	if !ie.e.Valid() { // read from the entity, not the tracker's table
		s.drop(ie) // created and destroyed within the tick: never seen
		return
	}
	s.stamp++
	try := func(c *Conn) {
		if c.view.stamp != s.stamp && c.admitted {
			c.view.stamp = s.stamp
			s.evalPair(c, ie)
		}
	}
	for i := len(ie.obs) - 1; i >= 0; i-- { // evalPair may remove the current one
		if i < len(ie.obs) {
			try(ie.obs[i].c)
		}
	}
	if o := s.ownerOf(ie.e); o != nil {
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
	// want ie, every other reason having been tried above.
	reach := s.radius(ie) + sp.cfg.Hysteresis
	sp.cells.nearViews(sp.key(ie.x-reach, ie.y-reach), sp.key(ie.x+reach, ie.y+reach), func(ce *cell) {
		for _, v := range ce.views {
			if sp.within(v.x-ie.x, v.y-ie.y, reach) {
				try(v.c)
			}
		}
	})
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
	s.stamp++
	stamp := s.stamp
	try := func(id state.ID) {
		if ie := s.ientByID(id); ie != nil && ie.vstamp != stamp {
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
// their rooms this tick: the changes of the entities seen so, and the
// full states of those that entered some client's view.
func (s *Server) batchPairs() {
	s.enterEnts = s.enterEnts[:0]
	for _, c := range s.conns {
		for _, e := range c.view.enter {
			ie := &s.ients[e.ID().Slot()]
			if ie.entered != s.tick {
				ie.entered, ie.enterAt = s.tick, int32(len(s.enterEnts))
				s.enterEnts = append(s.enterEnts, e)
			}
		}
	}
	for p := range s.pairDelta {
		if !s.parts[p] {
			continue // no class has a field in it: tickSegments skips it
		}
		if len(s.pairCS.Changes) > 0 {
			s.enc.DeltaBatch(&s.pairDelta[p], &s.pairCS, codec.Part(p))
		}
		if len(s.enterEnts) > 0 {
			s.enc.FullBatch(&s.pairFull[p], s.enterEnts, codec.Part(p))
		}
	}
}

// pairSegments appends to segs the segments of partition part of what c
// sees beyond its room: the entities that entered its view (creates in
// PartAll, fills in the others) and the changes of those it kept seeing,
// for the entities keep accepts; in PartAll the destructions of those
// that left. keep nil accepts all.
func (s *Server) pairSegments(segs [][]byte, c *Conn, part codec.Part, keep func(*state.Entity) bool) [][]byte {
	v := &c.view
	a := &s.asm
	full, delta := &s.pairFull[part], &s.pairDelta[part]
	for _, e := range v.enter {
		if keep == nil || keep(e) {
			a.Add(full, full.Piece(int(s.ients[e.ID().Slot()].enterAt)))
		}
	}
	for _, i := range v.upd {
		// upd lists pairs that existed before this tick's evaluation,
		// which can only have ended them (into leave).
		e := s.pairCS.Changes[i].Entity
		if (len(v.leave) == 0 || !slices.Contains(v.leave, e)) && (keep == nil || keep(e)) {
			a.Add(delta, delta.Piece(int(i)))
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
