package replica

import (
	"fmt"
	"math"
	"slices"

	"github.com/replicago/replica/state"
)

// CallForTest runs one client RPC message as the tick would, for the
// dispatch benchmark.
func (s *Server) CallForTest(c *Conn, msg []byte) { s.call(c, msg) }

// FullEncodedForTest returns the number of entities the server has encoded
// into full states, shared or not.
func (s *Server) FullEncodedForTest() uint64 { return s.fullEncoded }

// JoiningForTest returns the number of handshaken connections waiting for
// a tick to admit them.
func (s *Server) JoiningForTest() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.joining)
}

// ArenaChunksForTest returns the number of chunks the server's arena for
// the clients' messages has made.
func (s *Server) ArenaChunksForTest() int { return s.arena.Chunks() }

// CheckGridForTest checks that the AOI grids agree with the entities'
// and the viewpoints' records: every placed entity is at its index in its
// cell (or the wide list) with its position and radius, and every entry
// is such an entity; every viewpoint is in its cell at its position.
func (s *Server) CheckGridForTest() error {
	spaces := map[*Space]bool{}
	for i := range s.ients {
		ie := &s.ients[i]
		if ie.e == nil || !ie.placed {
			continue
		}
		sp := ie.space
		spaces[sp] = true
		var e cellEnt
		if ie.wide {
			if int(ie.cidx) >= len(sp.wide) {
				return fmt.Errorf("entity %#x: wide index %d of %d", uint32(ie.id), ie.cidx, len(sp.wide))
			}
			e = sp.wide[ie.cidx]
		} else {
			ce := sp.cells.get(ie.cell)
			if ce == nil || int(ie.cidx) >= len(ce.ents) {
				return fmt.Errorf("entity %#x: not in its cell %v", uint32(ie.id), ie.cell)
			}
			if k := sp.key(ie.x, ie.y); k != ie.cell {
				return fmt.Errorf("entity %#x at (%v, %v) in cell %v, not %v", uint32(ie.id), ie.x, ie.y, ie.cell, k)
			}
			e = ce.ents[ie.cidx]
		}
		if e.id != ie.id || !same(e.x, ie.x) || !same(e.y, ie.y) || e.r != s.radius(ie) {
			return fmt.Errorf("entity %#x at (%v, %v) radius %v: its entry says %+v", uint32(ie.id), ie.x, ie.y, s.radius(ie), e)
		}
	}
	for _, c := range s.conns {
		if sp := c.view.space; sp != nil && !sp.room {
			spaces[sp] = true
			if c.view.point {
				ce := sp.cells.get(c.view.cell)
				if ce == nil || !slices.ContainsFunc(ce.views, func(v cellView) bool { return sameView(v, cellView{c, c.view.px, c.view.py}) }) {
					return fmt.Errorf("viewpoint (%v, %v) not in its cell %v", c.view.px, c.view.py, c.view.cell)
				}
			}
		}
	}
	for sp := range spaces {
		sp.cells.indexViews()
		for i := range sp.cells.dense {
			views := sp.cells.dense[i].views
			if int(sp.cells.nviews[i]) != len(views) {
				return fmt.Errorf("space %s: dense cell %d counts %d viewpoints", sp.Name(), i, sp.cells.nviews[i])
			}
			if flat := sp.cells.vflat[sp.cells.voff[i]:sp.cells.voff[i+1]]; !slices.EqualFunc(flat, views, sameView) {
				return fmt.Errorf("space %s: dense cell %d has viewpoints %v, its run of the index %v", sp.Name(), i, views, flat)
			}
		}
		n := len(sp.wide)
		var err error
		sp.cells.each(func(k cellKey, ce *cell) {
			n += len(ce.ents)
			for i, e := range ce.ents {
				if ie := s.ientByID(e.id); err == nil && (ie == nil || ie.wide || ie.cell != k || int(ie.cidx) != i) {
					err = fmt.Errorf("cell %v entry %d: entity %#x is not there", k, i, uint32(e.id))
				}
			}
		})
		if err != nil {
			return err
		}
		for i, e := range sp.wide {
			if ie := s.ientByID(e.id); ie == nil || !ie.wide || int(ie.cidx) != i {
				return fmt.Errorf("wide entry %d: entity %#x is not there", i, uint32(e.id))
			}
		}
		placed := 0
		for _, id := range sp.members {
			if s.ients[id.Slot()].placed {
				placed++
			}
		}
		if n != placed {
			return fmt.Errorf("space %s: %d entries, %d placed members", sp.Name(), n, placed)
		}
	}
	return nil
}

// same reports whether a and b are the same coordinate: equal, or both
// the same NaN (an entity's position is the game's, NaN included).
func same(a, b float64) bool { return math.Float64bits(a) == math.Float64bits(b) }

// sameView reports whether a and b are the same viewpoint.
func sameView(a, b cellView) bool { return a.c == b.c && same(a.x, b.x) && same(a.y, b.y) }

// PairLevelsForTest returns the entities c sees beyond its room, each
// with the level of detail it should see it at.
func (s *Server) PairLevelsForTest(c *Conn) map[state.ID]int {
	m := map[state.ID]int{}
	for _, p := range c.view.pairs {
		m[p.id] = int(s.ients[p.id.Slot()].obs[p.at].level)
	}
	return m
}
