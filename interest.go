package replica

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"unsafe"

	"github.com/replicago/replica/codec"
	"github.com/replicago/replica/schema"
	"github.com/replicago/replica/state"
)

// Interest management decides which entities each client sees.
//
// Every entity lives in at most one Space, and every client views at most
// one. A space is either a room (SpaceConfig.Radius zero: its viewers see
// every entity in it, the server's default space is one) or an area of
// interest (AOI) space, where a viewer sees an entity whose position lies
// within the entity's visibility radius of the viewer's point. Besides,
// whatever its space, a client always sees the entities it owns, the
// entities marked always relevant, and the entities of the groups it
// belongs to.
//
// The server keeps, per client, the entities it sees beyond its room (the
// "pairs"), and per entity the clients that see it so; both change only
// when something that decides them changes (a position, a viewpoint, a
// space, a group, an owner, a radius), so idle entities and idle clients
// cost nothing per tick. What a room's viewers see needs no per-client
// state: the room's changes are encoded once and shared.

// Errors of the interest API.
var (
	// ErrUnknownEntity is returned for an entity the server's tracker does
	// not hold (nil, destroyed, or of another server).
	ErrUnknownEntity = errors.New("replica: entity not in this server's world")
	// ErrUnknownSpace is returned for a space of another server.
	ErrUnknownSpace = errors.New("replica: space not of this server")
	// ErrBadRadius is returned for a negative, infinite or NaN radius,
	// hysteresis or cell size.
	ErrBadRadius = errors.New("replica: radius must be finite and not negative")
	// ErrNoPosition is returned when following an entity whose class has
	// no position fields.
	ErrNoPosition = errors.New("replica: class has no position (pos=x, pos=y fields)")
)

// A Metric is how an AOI space measures the distance between a viewer and
// an entity.
type Metric uint8

// Metrics.
const (
	// Euclidean distance: an entity is seen within a disc of its radius.
	Euclidean Metric = iota
	// Square (Chebyshev) distance, max(|dx|, |dy|): an entity is seen
	// within a square of half-size its radius.
	Square
)

// SpaceConfig configures a space.
type SpaceConfig struct {
	// Name names the space in logs and in Explain.
	Name string
	// Radius is the visibility radius of the space's entities that have
	// none of their own (Server.SetRadius). Zero makes the space a room:
	// its viewers see every entity in it.
	Radius float64
	// Hysteresis keeps an entity seen until its distance exceeds its
	// radius plus Hysteresis, so that one on the edge does not enter and
	// leave a client's view tick after tick. The default is zero.
	Hysteresis float64
	// Metric measures distances. The default is Euclidean.
	Metric Metric
	// CellSize is the side of the cells of the space's spatial grid. The
	// default is Radius, which suits entities of about that radius; an
	// entity whose radius exceeds the cell size is kept apart and checked
	// against every viewpoint that moves.
	CellSize float64
}

// A Space is a scene, room or zone of one server's world: see SpaceConfig.
type Space struct {
	srv  *Server
	cfg  SpaceConfig
	room bool

	members []state.ID // the entities in it, in no order; ient.midx indexes it

	// AOI spaces only.
	cells   map[cellKey]*cell // placed entities and viewpoints by cell
	wide    []state.ID        // placed entities whose radius exceeds the cell size
	unplace []state.ID        // members without a position: every viewer sees them
	maxR    float64           // the largest radius of a placed member, for queries

	viewers []*Conn // the connections viewing it; view.vidx indexes it

	// Room spaces: this tick's changes of its entities, and the entities
	// that moved in (to create on its viewers) or out (to destroy).
	cs        state.Changeset
	movedIn   []*state.Entity
	movedOut  []*state.Entity
	active    bool // has changes this tick: listed in Server.activeRooms
	segAll    [][]byte
	segOthers [][]byte
	full      fullState
}

type cellKey struct{ x, y int32 }

type cell struct {
	ents  []state.ID
	views []*Conn
}

// Name returns the space's name.
func (sp *Space) Name() string { return sp.cfg.Name }

// Room reports whether the space is a room: every viewer sees every entity.
func (sp *Space) Room() bool { return sp.room }

// Len returns the number of entities in the space.
func (sp *Space) Len() int { return len(sp.members) }

// ient is the interest state of one entity, by slot.
type ient struct {
	id      state.ID
	e       *state.Entity
	space   *Space
	set     bool // the game placed it (SetSpace) before the tick that created it ended
	midx    int32
	x, y    float64
	placed  bool // in its AOI space's grid (or wide list)
	wide    bool
	cell    cellKey
	radius  float64 // its own; 0 for the space's
	always  bool
	groups  []*Group
	obs     []*Conn // the clients that see it through a pair
	follow  []*Conn // the clients whose viewpoint it is
	dirty   bool    // queued in Server.dirtyEnts
	born    uint64  // the tick that created it
	arrived uint64  // the tick it moved into its room (Space.movedIn)
	left    uint64  // the tick it moved out of a room (Space.movedOut)
	entered uint64  // the tick it last entered some client's pairs
	enterAt int32   // then, its index in Server.enterEnts
}

// view is a connection's interest state.
type view struct {
	space    *Space
	vidx     int32
	fixed    bool // the viewpoint is a point the game set
	follow   state.ID
	auto     bool // follow was chosen as the connection's first owned entity with a position
	px, py   float64
	point    bool // has a viewpoint
	cell     cellKey
	groups   []*Group
	pairs    map[state.ID]uint64 // entities seen beyond its room → the tick they entered
	dirty    bool
	switched *Space // the room it viewed before View moved it, until evaluated
	resync   bool   // View changed its room: send it the full state

	// This tick's pair changes and the changes of its pair entities.
	enter []*state.Entity
	leave []*state.Entity
	upd   []int32 // indexes in Server.pairCS
	stamp uint64  // dedupes candidates within one evaluation
}

// A Group makes entities visible to its member connections wherever they
// are: a team, a party, a guild.
type Group struct {
	srv   *Server
	name  string
	ents  []state.ID
	conns []*Conn
}

// Name returns the group's name.
func (g *Group) Name() string { return g.name }

// NewGroup returns an empty group.
func (s *Server) NewGroup(name string) *Group { return &Group{srv: s, name: name} }

// NewSpace adds a space to the server's world. Call it on the tick
// goroutine.
func (s *Server) NewSpace(cfg SpaceConfig) (*Space, error) {
	for _, v := range []float64{cfg.Radius, cfg.Hysteresis, cfg.CellSize} {
		if v < 0 || math.IsInf(v, 0) || math.IsNaN(v) {
			return nil, fmt.Errorf("%w: space %q", ErrBadRadius, cfg.Name)
		}
	}
	if cfg.Metric > Square {
		return nil, fmt.Errorf("replica: space %q: unknown metric %d", cfg.Name, cfg.Metric)
	}
	sp := &Space{srv: s, cfg: cfg, room: cfg.Radius == 0}
	if !sp.room {
		if sp.cfg.CellSize == 0 {
			sp.cfg.CellSize = cfg.Radius
		}
		sp.cells = make(map[cellKey]*cell)
	}
	return sp, nil
}

// DefaultSpace returns the room every entity is created in and every
// client views, unless the game places them elsewhere.
func (s *Server) DefaultSpace() *Space { return s.defSpace }

// SetSpace moves e into sp (nil: into no space, where only its owner, its
// groups' members and, if always relevant, everyone see it). Clients that
// stop seeing e are sent its destruction, those that start seeing it its
// creation, with the next tick. An entity created in this tick may be
// placed before the tick ends: it is created directly in sp.
func (s *Server) SetSpace(e *state.Entity, sp *Space) error {
	ie, err := s.ientOf(e)
	if err != nil {
		return err
	}
	if sp != nil && sp.srv != s {
		return ErrUnknownSpace
	}
	ie.set = true
	if ie.space == sp {
		return nil
	}
	s.leaveSpace(ie, true)
	s.enterSpace(ie, sp, true)
	s.markEnt(ie)
	for _, c := range ie.follow {
		s.refreshPoint(c)
		s.markView(c)
	}
	return nil
}

// SpaceOf returns the space e is in, or nil.
func (s *Server) SpaceOf(e *state.Entity) *Space {
	if ie := s.ientIf(e); ie != nil {
		return ie.space
	}
	return nil
}

// View makes c view sp (nil: no space; c then sees only what it owns, its
// groups and the always-relevant entities). Call it on the tick goroutine,
// in OnJoin or later.
func (s *Server) View(c *Conn, sp *Space) error {
	if sp != nil && sp.srv != s {
		return ErrUnknownSpace
	}
	v := &c.view
	if v.space == sp {
		return nil
	}
	if c.joined {
		if v.space != nil && v.space.room && v.switched == nil {
			v.switched = v.space // what it owns there it keeps seeing
		}
		// Its room's entities are all created or all destroyed: the
		// client starts over from the full state of what it now sees.
		if c.joined && (v.space != nil && v.space.room || sp != nil && sp.room) {
			v.resync = true
		}
	}
	s.unview(c)
	v.space = sp
	if sp != nil {
		v.vidx = int32(len(sp.viewers))
		sp.viewers = append(sp.viewers, c)
	}
	s.refreshPoint(c)
	s.markView(c)
	return nil
}

// ViewOf returns the space c views.
func (s *Server) ViewOf(c *Conn) *Space { return c.view.space }

// SetViewpoint makes c view its space from the point (x, y), a spectator's
// camera, instead of from an entity.
func (s *Server) SetViewpoint(c *Conn, x, y float64) error {
	if math.IsInf(x, 0) || math.IsNaN(x) || math.IsInf(y, 0) || math.IsNaN(y) {
		return fmt.Errorf("replica: viewpoint (%v, %v) is not finite", x, y)
	}
	s.unfollow(c)
	v := &c.view
	v.fixed, v.auto = true, false
	s.movePoint(c, x, y, true)
	s.markView(c)
	return nil
}

// Follow makes c view its space from e's position, wherever e goes. By
// default a client follows the first entity with a position it is given
// to own (SetOwner).
func (s *Server) Follow(c *Conn, e *state.Entity) error {
	ie, err := s.ientOf(e)
	if err != nil {
		return err
	}
	if _, _, ok := s.posLeaves(e.Class()); !ok {
		return fmt.Errorf("%w: %s", ErrNoPosition, e.Class().Name)
	}
	s.unfollow(c)
	v := &c.view
	v.fixed, v.auto, v.follow = false, false, e.ID()
	ie.follow = append(ie.follow, c)
	s.refreshPoint(c)
	s.markView(c)
	return nil
}

// SetRadius sets e's visibility radius: clients whose viewpoint lies
// within it (in e's AOI space) see e. Zero restores the space's radius.
func (s *Server) SetRadius(e *state.Entity, r float64) error {
	if r < 0 || math.IsInf(r, 0) || math.IsNaN(r) {
		return fmt.Errorf("%w: %v", ErrBadRadius, r)
	}
	ie, err := s.ientOf(e)
	if err != nil {
		return err
	}
	if ie.radius == r {
		return nil
	}
	ie.radius = r
	if ie.placed {
		s.unplace(ie)
		s.place(ie)
	}
	s.markEnt(ie)
	return nil
}

// SetAlwaysRelevant makes every client see e (true), whatever space either
// is in: the game's state, a world boss everyone tracks.
func (s *Server) SetAlwaysRelevant(e *state.Entity, always bool) error {
	ie, err := s.ientOf(e)
	if err != nil {
		return err
	}
	if ie.always != always {
		ie.always = always
		if always {
			s.always = append(s.always, ie.id)
		} else {
			s.always = slices.DeleteFunc(s.always, func(id state.ID) bool { return id == ie.id })
		}
		s.markEnt(ie)
	}
	return nil
}

// AddEntity makes e visible to the group's members.
func (g *Group) AddEntity(e *state.Entity) error {
	ie, err := g.srv.ientOf(e)
	if err != nil {
		return err
	}
	if !slices.Contains(ie.groups, g) {
		ie.groups = append(ie.groups, g)
		g.ents = append(g.ents, ie.id)
		g.srv.markEnt(ie)
	}
	return nil
}

// RemoveEntity undoes AddEntity.
func (g *Group) RemoveEntity(e *state.Entity) {
	ie := g.srv.ientIf(e)
	if ie == nil || !slices.Contains(ie.groups, g) {
		return
	}
	ie.groups = slices.DeleteFunc(ie.groups, func(x *Group) bool { return x == g })
	g.ents = slices.DeleteFunc(g.ents, func(id state.ID) bool { return id == ie.id })
	g.srv.markEnt(ie)
}

// AddConn makes c a member: it sees the group's entities.
func (g *Group) AddConn(c *Conn) {
	if !slices.Contains(c.view.groups, g) {
		c.view.groups = append(c.view.groups, g)
		g.conns = append(g.conns, c)
		g.srv.markView(c)
	}
}

// RemoveConn undoes AddConn.
func (g *Group) RemoveConn(c *Conn) {
	if !slices.Contains(c.view.groups, g) {
		return
	}
	c.view.groups = slices.DeleteFunc(c.view.groups, func(x *Group) bool { return x == g })
	g.conns = slices.DeleteFunc(g.conns, func(x *Conn) bool { return x == c })
	g.srv.markView(c)
}

// Sees reports whether c sees e as of the last tick sent (or, for a
// connection not yet joined, as it will when it joins).
func (s *Server) Sees(c *Conn, e *state.Entity) bool {
	ie := s.ientIf(e)
	if ie == nil {
		return false
	}
	if ie.space != nil && ie.space.room && ie.space == c.view.space {
		return true
	}
	_, ok := c.view.pairs[ie.id]
	return ok
}

// ientIf returns e's interest state, or nil.
func (s *Server) ientIf(e *state.Entity) *ient {
	if e == nil {
		return nil
	}
	slot := int(e.ID().Slot())
	if slot < len(s.ients) && s.ients[slot].id == e.ID() && s.ients[slot].e == e {
		return &s.ients[slot]
	}
	return nil
}

// ientOf returns e's interest state, making it for an entity of the
// tracker created in this tick.
func (s *Server) ientOf(e *state.Entity) (*ient, error) {
	if ie := s.ientIf(e); ie != nil {
		return ie, nil
	}
	if e == nil || s.tr.Entity(e.ID()) != e {
		return nil, ErrUnknownEntity
	}
	return s.newIent(e), nil
}

func (s *Server) newIent(e *state.Entity) *ient {
	slot := int(e.ID().Slot())
	for len(s.ients) <= slot {
		s.ients = append(s.ients, ient{})
	}
	ie := &s.ients[slot]
	*ie = ient{id: e.ID(), e: e, midx: -1, obs: ie.obs[:0], follow: ie.follow[:0], groups: ie.groups[:0]}
	return ie
}

func (s *Server) markEnt(ie *ient) {
	if !ie.dirty {
		ie.dirty = true
		s.dirtyEnts = append(s.dirtyEnts, ie.id)
	}
}

func (s *Server) markView(c *Conn) {
	if !c.view.dirty {
		c.view.dirty = true
		s.dirtyViews = append(s.dirtyViews, c)
	}
}

// enterSpace adds ie to sp. moved records, for a room, that its viewers
// must be sent ie's creation (an entity created in the tick is in the
// room's changes instead).
func (s *Server) enterSpace(ie *ient, sp *Space, moved bool) {
	ie.space = sp
	if sp == nil {
		return
	}
	ie.midx = int32(len(sp.members))
	sp.members = append(sp.members, ie.id)
	if sp.room {
		if moved && ie.left == s.tick+1 {
			if i := slices.Index(sp.movedOut, ie.e); i >= 0 {
				// Out and back in within the tick: no change.
				sp.movedOut = slices.Delete(sp.movedOut, i, i+1)
				return
			}
		}
		if moved && !s.createdNow(ie) {
			sp.movedIn = append(sp.movedIn, ie.e)
			ie.arrived = s.tick + 1
			s.activate(sp)
		}
		return
	}
	s.place(ie)
}

// leaveSpace removes ie from its space.
func (s *Server) leaveSpace(ie *ient, moved bool) {
	sp := ie.space
	if sp == nil {
		return
	}
	if ie.placed {
		s.unplace(ie)
	} else if !sp.room {
		sp.unplace = removeID(sp.unplace, ie.id)
	}
	last := len(sp.members) - 1
	if int(ie.midx) != last {
		moved := sp.members[last]
		sp.members[ie.midx] = moved
		s.ients[moved.Slot()].midx = ie.midx
	}
	sp.members = sp.members[:last]
	ie.midx, ie.space = -1, nil
	if sp.room && moved && !s.createdNow(ie) {
		if ie.arrived == s.tick+1 {
			ie.arrived = 0
			i := slices.Index(sp.movedIn, ie.e)
			sp.movedIn = slices.Delete(sp.movedIn, i, i+1) // in and out within the tick
		} else {
			sp.movedOut = append(sp.movedOut, ie.e)
			ie.left = s.tick + 1
			s.activate(sp)
		}
	}
	for _, c := range ie.follow {
		s.refreshPoint(c)
		s.markView(c)
	}
}

// createdNow reports whether ie's entity is created in the current tick:
// it is not in the clients' replicas yet.
func (s *Server) createdNow(ie *ient) bool { return s.tr.Created(ie.e) }

func (s *Server) activate(sp *Space) {
	if !sp.active {
		sp.active = true
		s.activeRooms = append(s.activeRooms, sp)
	}
}

func removeID(ids []state.ID, id state.ID) []state.ID {
	if i := slices.Index(ids, id); i >= 0 {
		ids[i] = ids[len(ids)-1]
		ids = ids[:len(ids)-1]
	}
	return ids
}

// place puts a member of an AOI space in its grid by its position, or in
// the unplaced list if its class has none.
func (s *Server) place(ie *ient) {
	sp := ie.space
	x, y, ok := s.position(ie.e)
	if !ok {
		sp.unplace = append(sp.unplace, ie.id)
		return
	}
	ie.x, ie.y, ie.placed = x, y, true
	r := s.radius(ie)
	sp.maxR = max(sp.maxR, r)
	if r > sp.cfg.CellSize {
		ie.wide = true
		sp.wide = append(sp.wide, ie.id)
		return
	}
	ie.wide = false
	ie.cell = sp.key(x, y)
	ce := sp.cellAt(ie.cell)
	ce.ents = append(ce.ents, ie.id)
}

func (s *Server) unplace(ie *ient) {
	sp := ie.space
	if ie.wide {
		sp.wide = removeID(sp.wide, ie.id)
	} else if ce := sp.cells[ie.cell]; ce != nil {
		ce.ents = removeID(ce.ents, ie.id)
		sp.dropCell(ie.cell, ce)
	}
	ie.placed, ie.wide = false, false
}

func (sp *Space) key(x, y float64) cellKey {
	cs := sp.cfg.CellSize
	return cellKey{clampCell(math.Floor(x / cs)), clampCell(math.Floor(y / cs))}
}

func clampCell(f float64) int32 { return int32(max(-1<<30, min(1<<30, f))) }

func (sp *Space) cellAt(k cellKey) *cell {
	ce := sp.cells[k]
	if ce == nil {
		ce = &cell{}
		sp.cells[k] = ce
	}
	return ce
}

func (sp *Space) dropCell(k cellKey, ce *cell) {
	if len(ce.ents) == 0 && len(ce.views) == 0 {
		delete(sp.cells, k)
	}
}

// radius returns ie's visibility radius.
func (s *Server) radius(ie *ient) float64 {
	if ie.radius > 0 {
		return ie.radius
	}
	if ie.space != nil {
		return ie.space.cfg.Radius
	}
	return 0
}

// A posInfo is where a class keeps its position: the leaves and their
// indexes, or nil leaves for a class without one.
type posInfo struct {
	x, y   *schema.LeafInfo
	xi, yi int
}

// positions maps each class of sc to its posInfo.
func positions(sc *schema.Schema) map[*schema.Struct]posInfo {
	m := make(map[*schema.Struct]posInfo, len(sc.Classes))
	for _, c := range sc.Classes {
		var p posInfo
		for i := 0; i < c.Leaves; i++ {
			switch l := c.Leaf(i); l.Field.Pos {
			case schema.AxisX:
				p.x, p.xi = l, i
			case schema.AxisY:
				p.y, p.yi = l, i
			}
		}
		if p.x == nil || p.y == nil {
			p = posInfo{}
		}
		m[c] = p
	}
	return m
}

// posLeaves returns the leaves of class c that hold its position.
func (s *Server) posLeaves(c *schema.Struct) (x, y *schema.LeafInfo, ok bool) {
	p := s.pos[c]
	return p.x, p.y, p.x != nil
}

// checkPositions checks that each class marks both coordinates of its
// position or neither, on numeric fields.
func checkPositions(sc *schema.Schema) error {
	for _, c := range sc.Classes {
		var n [3]int
		for i := 0; i < c.Leaves; i++ {
			l := c.Leaf(i)
			if l.Field.Pos == schema.AxisNone {
				continue
			}
			if l.Field.Pos > schema.AxisY {
				return fmt.Errorf("replica: class %s field %s: unknown position axis %d", c.Name, l.Field.Name, l.Field.Pos)
			}
			if !l.Field.Type.Kind.Numeric() || l.Field.Type.Kind == schema.Ref || l.Field.Type.Kind == schema.Bool {
				return fmt.Errorf("replica: class %s field %s: a position coordinate must be a number, not %s", c.Name, l.Field.Name, &l.Field.Type)
			}
			n[l.Field.Pos]++
		}
		if n[schema.AxisX] > 1 || n[schema.AxisY] > 1 || n[schema.AxisX] != n[schema.AxisY] {
			return fmt.Errorf("replica: class %s: a position needs exactly one pos=x and one pos=y field", c.Name)
		}
	}
	return nil
}

// position reads e's position, if its class has one.
func (s *Server) position(e *state.Entity) (x, y float64, ok bool) {
	lx, ly, ok := s.posLeaves(e.Class())
	if !ok {
		return 0, 0, false
	}
	return numFloat(lx, e), numFloat(ly, e), true
}

// numFloat returns the numeric leaf l of e as a float64.
func numFloat(l *schema.LeafInfo, e *state.Entity) float64 {
	t := &l.Field.Type
	raw := e.Num(l.Num)
	switch {
	case t.Quant.Enabled():
		return t.Quant.Dequantize(int64(raw))
	case t.Kind == schema.Float32:
		return float64(math.Float32frombits(uint32(raw)))
	case t.Kind == schema.Float64:
		return math.Float64frombits(raw)
	case t.Kind.Signed():
		return float64(int64(raw))
	}
	return float64(raw)
}

// movePoint moves c's viewpoint, keeping the space's viewpoint grid.
func (s *Server) movePoint(c *Conn, x, y float64, ok bool) {
	v := &c.view
	sp := v.space
	grid := sp != nil && !sp.room
	if grid && v.point {
		if ce := sp.cells[v.cell]; ce != nil {
			ce.views = slices.DeleteFunc(ce.views, func(x *Conn) bool { return x == c })
			sp.dropCell(v.cell, ce)
		}
	}
	if ok { // a fixed point survives a time without one (between spaces)
		v.px, v.py = x, y
	}
	v.point = ok
	if grid && ok {
		v.cell = sp.key(x, y)
		ce := sp.cellAt(v.cell)
		ce.views = append(ce.views, c)
	}
}

// refreshPoint recomputes c's viewpoint from what it follows.
func (s *Server) refreshPoint(c *Conn) {
	v := &c.view
	switch {
	case v.fixed:
		s.movePoint(c, v.px, v.py, true)
	case v.follow != 0:
		ie := s.ientByID(v.follow)
		if ie != nil && ie.space == v.space && ie.placed {
			s.movePoint(c, ie.x, ie.y, true)
		} else {
			s.movePoint(c, 0, 0, false)
		}
	default:
		s.movePoint(c, 0, 0, false)
	}
}

func (s *Server) ientByID(id state.ID) *ient {
	if slot := int(id.Slot()); slot < len(s.ients) && s.ients[slot].id == id && s.ients[slot].e != nil {
		return &s.ients[slot]
	}
	return nil
}

func (s *Server) unfollow(c *Conn) {
	v := &c.view
	if v.follow != 0 {
		if ie := s.ientByID(v.follow); ie != nil {
			ie.follow = slices.DeleteFunc(ie.follow, func(x *Conn) bool { return x == c })
		}
	}
	v.follow, v.auto = 0, false
}

// unview removes c from the space it views.
func (s *Server) unview(c *Conn) {
	v := &c.view
	sp := v.space
	if sp == nil {
		return
	}
	s.movePoint(c, 0, 0, false)
	last := len(sp.viewers) - 1
	if int(v.vidx) != last {
		o := sp.viewers[last]
		sp.viewers[v.vidx] = o
		o.view.vidx = v.vidx
	}
	sp.viewers[last] = nil
	sp.viewers = sp.viewers[:last]
	v.space = nil
}

// ownerChanged notes a change of e's owner for interest: the new owner
// sees it, the old one maybe no longer, and a client with no viewpoint of
// its own follows the first entity with a position it is given.
func (s *Server) ownerChanged(e *state.Entity, to *Conn) {
	ie, err := s.ientOf(e)
	if err != nil {
		return
	}
	s.markEnt(ie)
	if to != nil && !to.view.fixed && to.view.follow == 0 {
		if _, _, ok := s.posLeaves(e.Class()); ok {
			to.view.follow, to.view.auto = ie.id, true
			ie.follow = append(ie.follow, to)
			s.refreshPoint(to)
			s.markView(to)
		}
	}
}

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
				for _, c := range ie.obs {
					c.view.upd = append(c.view.upd, i)
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
	sp := ie.space
	ie.x, ie.y = x, y
	if !ie.wide {
		if k := sp.key(x, y); k != ie.cell {
			if ce := sp.cells[ie.cell]; ce != nil {
				ce.ents = removeID(ce.ents, ie.id)
				sp.dropCell(ie.cell, ce)
			}
			ie.cell = k
			ce := sp.cellAt(k)
			ce.ents = append(ce.ents, ie.id)
		}
	}
	s.markEnt(ie)
	for _, c := range ie.follow {
		s.refreshPoint(c)
		s.markView(c)
	}
}

// drop forgets a destroyed entity: its observers are sent its
// destruction, its followers lose their viewpoint.
func (s *Server) drop(ie *ient) {
	for _, c := range ie.obs {
		if c.view.pairs[ie.id] == s.tick {
			c.view.enter = slices.DeleteFunc(c.view.enter, func(e *state.Entity) bool { return e == ie.e })
		} else {
			c.view.leave = append(c.view.leave, ie.e)
		}
		delete(c.view.pairs, ie.id)
	}
	ie.obs = ie.obs[:0]
	for _, g := range ie.groups {
		g.ents = slices.DeleteFunc(g.ents, func(id state.ID) bool { return id == ie.id })
	}
	if ie.always {
		s.always = slices.DeleteFunc(s.always, func(id state.ID) bool { return id == ie.id })
	}
	follow := slices.Clone(ie.follow)
	ie.follow = ie.follow[:0]
	s.leaveSpace(ie, false)
	for _, c := range follow {
		c.view.follow, c.view.auto = 0, false
		s.refreshPoint(c)
		s.markView(c)
	}
	*ie = ient{obs: ie.obs, follow: ie.follow, groups: ie.groups[:0]}
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
	entered, had := v.pairs[ie.id]
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
		if v.pairs == nil {
			v.pairs = make(map[state.ID]uint64)
		}
		v.pairs[ie.id] = s.tick
		v.enter = append(v.enter, ie.e)
		ie.obs = append(ie.obs, c)
	case !want && had:
		delete(v.pairs, ie.id)
		if entered == s.tick {
			v.enter = slices.DeleteFunc(v.enter, func(e *state.Entity) bool { return e == ie.e })
		} else {
			v.leave = append(v.leave, ie.e)
		}
		if i := slices.Index(ie.obs, c); i >= 0 {
			ie.obs[i] = ie.obs[len(ie.obs)-1]
			ie.obs = ie.obs[:len(ie.obs)-1]
		}
	}
}

// evalEnt re-evaluates every client that may see ie or stop seeing it.
func (s *Server) evalEnt(ie *ient) {
	if s.tr.Entity(ie.id) != ie.e {
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
			try(ie.obs[i])
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
	sp.viewsNear(ie.x, ie.y, s.radius(ie)+sp.cfg.Hysteresis, try)
}

// viewsNear calls fn for the viewers whose viewpoint's cell lies within
// reach of (x, y).
func (sp *Space) viewsNear(x, y, reach float64, fn func(*Conn)) {
	sp.cellsNear(x, y, reach, func(ce *cell) {
		for _, c := range ce.views {
			fn(c)
		}
	})
}

// cellsNear calls fn for the cells of the square of half-size reach
// around (x, y), or for every cell if there are fewer of them.
func (sp *Space) cellsNear(x, y, reach float64, fn func(*cell)) {
	lo, hi := sp.key(x-reach, y-reach), sp.key(x+reach, y+reach)
	if n := (int64(hi.x) - int64(lo.x) + 1) * (int64(hi.y) - int64(lo.y) + 1); n > int64(len(sp.cells)) {
		for k, ce := range sp.cells {
			if k.x >= lo.x && k.x <= hi.x && k.y >= lo.y && k.y <= hi.y {
				fn(ce)
			}
		}
		return
	}
	for cx := lo.x; cx <= hi.x; cx++ {
		for cy := lo.y; cy <= hi.y; cy++ {
			if ce := sp.cells[cellKey{cx, cy}]; ce != nil {
				fn(ce)
			}
		}
	}
}

// evalView re-evaluates every entity c may see or stop seeing.
func (s *Server) evalView(c *Conn) {
	if !c.admitted {
		return
	}
	v := &c.view
	try := func(id state.ID) {
		if ie := s.ientByID(id); ie != nil {
			s.evalPair(c, ie)
		}
	}
	// Entities seen now; then those it may start seeing.
	s.idBuf = s.idBuf[:0]
	for id := range v.pairs {
		s.idBuf = append(s.idBuf, id)
	}
	for _, id := range s.idBuf {
		try(id)
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
	for _, id := range sp.wide {
		try(id)
	}
	sp.cellsNear(v.px, v.py, sp.cfg.CellSize+sp.cfg.Hysteresis, func(ce *cell) {
		for _, id := range ce.ents {
			try(id)
		}
	})
}

// forget removes a connection that left from the interest state.
func (s *Server) forget(c *Conn) {
	v := &c.view
	for id := range v.pairs {
		if ie := s.ientByID(id); ie != nil {
			ie.obs = slices.DeleteFunc(ie.obs, func(x *Conn) bool { return x == c })
		}
	}
	clear(v.pairs)
	for _, g := range v.groups {
		g.conns = slices.DeleteFunc(g.conns, func(x *Conn) bool { return x == c })
	}
	v.groups = nil
	s.unfollow(c)
	s.unview(c)
	v.dirty = false
}

// InterestStats describes the interest state of a server.
type InterestStats struct {
	Pairs int // (client, entity) pairs seen beyond rooms
	Cells int // occupied grid cells, over every AOI space
	// Bytes estimates the memory the interest state holds: per pair, its
	// map entry and its entry in the entity's observer list; per entity
	// and per cell, their records.
	Bytes int
}

// InterestStats returns the size of the interest state. It walks every
// entity and connection: call it for monitoring, not every tick.
func (s *Server) InterestStats() InterestStats {
	var st InterestStats
	const mapEntry = 48 // key, value, tophash and load-factor slack of a Go map entry
	for _, c := range s.conns {
		st.Pairs += len(c.view.pairs)
		st.Bytes += len(c.view.pairs)*mapEntry + int(unsafe.Sizeof(c.view)) +
			8*(cap(c.view.enter)+cap(c.view.leave)+cap(c.view.groups)) + 4*cap(c.view.upd)
	}
	st.Bytes += len(s.ients) * int(unsafe.Sizeof(ient{}))
	for i := range s.ients {
		ie := &s.ients[i]
		st.Bytes += 8 * (cap(ie.obs) + cap(ie.follow) + cap(ie.groups))
	}
	seen := map[*Space]bool{}
	for _, c := range s.conns {
		if sp := c.view.space; sp != nil && !seen[sp] {
			seen[sp] = true
			st.Cells += len(sp.cells)
			for _, ce := range sp.cells {
				st.Bytes += mapEntry + int(unsafe.Sizeof(*ce)) + 4*cap(ce.ents) + 8*cap(ce.views)
			}
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
}

// Explain tells why c does or does not see e and, given a field path such
// as "hp" or "body.pos.x", that field: the space of each, ownership,
// always-relevance, a shared group, the distance against the radius, the
// field's visibility. It describes the state as of the last tick sent,
// with the rules evaluated now.
func (s *Server) Explain(c *Conn, e *state.Entity, field ...string) (Explanation, error) {
	ie := s.ientIf(e)
	if ie == nil || s.tr.Entity(e.ID()) != e {
		return Explanation{}, ErrUnknownEntity
	}
	x := Explanation{Distance: math.NaN(), Radius: math.NaN()}
	if ie.space != nil {
		x.Space = ie.space.cfg.Name
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
	_, paired := v.pairs[ie.id]
	sp := ie.space
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
	if len(field) == 0 {
		return x, nil
	}
	path := strings.Join(field, ".")
	vis, ok := fieldVisibility(e.Class(), path)
	if !ok {
		return Explanation{}, fmt.Errorf("replica: class %s has no field %q", e.Class().Name, path)
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
	return x, nil
}

// fieldVisibility returns the effective visibility of the field at a
// dotted path of class c: the narrowest along the path.
func fieldVisibility(c *schema.Struct, path string) (schema.Visibility, bool) {
	vis, st := schema.VisAll, c
	for name := range strings.SplitSeq(path, ".") {
		if st == nil {
			return 0, false
		}
		var f *schema.Field
		for _, g := range st.Fields {
			if g.Name == name && !g.Deprecated {
				f = g
			}
		}
		if f == nil {
			return 0, false
		}
		vis &= f.Vis
		st = nil
		if f.Type.Kind == schema.Nested {
			st = f.Type.Struct
		}
	}
	return vis, true
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
		e := s.pairCS.Changes[i].Entity
		if entered, ok := v.pairs[e.ID()]; ok && entered != s.tick && (keep == nil || keep(e)) {
			a.Add(delta, delta.Piece(int(i)))
		}
	}
	if part == codec.PartAll {
		for _, e := range v.leave {
			a.Destroy(e.ID())
		}
	}
	lim := s.cfg.ClientLimits
	return a.Segments(segs, s.cfg.SegmentEntities, lim.MaxSegmentBytes/4, lim.MaxValues/4)
}
