package replica

import (
	"errors"
	"fmt"
	"math"
	"slices"

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
	ErrBadRadius = errors.New("replica: a distance (radius, hysteresis, cell size) must be finite and not negative")
	// ErrNoPosition is returned when following an entity whose class has
	// no position fields.
	ErrNoPosition = errors.New("replica: class has no position (pos=x, pos=y fields)")
	// ErrConnGone is returned for a connection of another server, or one
	// that has left.
	ErrConnGone = errors.New("replica: connection left, or of another server")
	// ErrBadPriority is returned for a priority that is not finite and
	// > 0.
	ErrBadPriority = errors.New("replica: priority must be finite and > 0")
	// ErrBadViewpoint is returned for a viewpoint with an infinite or NaN
	// coordinate.
	ErrBadViewpoint = errors.New("replica: viewpoint must be finite")
	// ErrUnknownMetric is returned by NewSpace for a Metric that is
	// neither Euclidean nor Square.
	ErrUnknownMetric = errors.New("replica: unknown metric")
	// ErrUnknownField is returned by Explain for a field path the
	// entity's class does not have.
	ErrUnknownField = errors.New("replica: no such field")
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
	// Name names the space in logs and in Explain. It is a label, not a
	// key: the server does not look spaces up by name, and several
	// instances of one dungeon may share it, but Explain's reasons are
	// clearer when each space has its own.
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
	perCell float64    // 1 / CellSize: a multiplication is cheaper than a division (key)
	cells   grid       // placed entities and viewpoints by cell
	wide    []cellEnt  // placed entities whose radius exceeds the cell size
	unplace []state.ID // members without a position: every viewer sees them

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

// Name returns the space's name.
func (sp *Space) Name() string { return sp.cfg.Name }

// Room reports whether the space is a room: every viewer sees every entity.
func (sp *Space) Room() bool { return sp.room }

// Len returns the number of entities in the space.
func (sp *Space) Len() int { return len(sp.members) }

// ient is the interest state of one entity, by slot. Its fields are laid
// out by use, in three 64-byte lines: what every change of the entity
// reads and what a moved viewpoint reads of the entities it sees, then
// what evaluating its pairs reads, then the rest, so that a move in a
// large world costs two cache lines of it and a viewpoint's move one per
// entity; a fourth holds the slot's history. (A field added here should
// keep the size a multiple of 64.)
type ient struct {
	// What a change reads, and what a viewpoint's move reads of the
	// entities it sees (evalMove: vstamp, space, placed, x, y, radius).
	id       state.ID
	cidx     int32 // its index in its cell's entities, or in the wide list
	e        *state.Entity
	space    *Space
	x, y     float64
	vstamp   uint64  // dedupes it within one view's evaluation
	radius   float64 // its own; 0 for the space's
	placed   bool    // in its AOI space's grid (or wide list)
	wide     bool
	dirty    bool // queued in Server.dirtyEnts
	always   bool
	followed bool // follow is not empty
	set      bool // the game placed it (SetSpace) before the tick that created it ended

	// What evaluating its pairs reads, and its cell, which a change
	// reads (as it reads obs).
	obs     []obsRef // the clients that see it through a pair
	groups  []*Group
	cell    cellKey // of its grid cell, while placed
	midx    int32
	enterAt int32 // when it entered some client's pairs, its index in Server.enterEnts

	follow  []*Conn // the clients whose viewpoint it is
	born    uint64  // the tick that created it
	arrived uint64  // the tick it moved into its room (Space.movedIn)
	left    uint64  // the tick it moved out of a room (Space.movedOut)
	entered uint64  // the tick it last entered some client's pairs
	prio    float64 // its priority for budgets (SetPriority); 0 for 1

	// Not interest state: the slot's history line, for resumes
	// (resume.go), kept here so that a change's history and interest
	// state share a memory page. To 256 bytes: in Server.ients, every
	// record starts a line.
	hist histLine
}

// view is a connection's interest state. Its first fields are what
// evaluating one of its pairs reads (with Conn.admitted, just before the
// view: TestConnLayout).
type view struct {
	space  *Space
	stamp  uint64 // dedupes candidates within one evaluation
	px, py float64
	point  bool // has a viewpoint
	fixed  bool // the viewpoint is a point the game set
	dirty  bool
	full   bool // dirty for more than a move of its viewpoint (markView): evaluated in full
	epoint bool // its pairs were last evaluated from a viewpoint, (ex, ey)
	resync bool // View changed its room: send it the full state
	gone   bool // the connection left: forgotten, and not to be viewed again
	vidx   int32
	follow state.ID

	pairs    []pairRef // the entities it sees beyond its room
	groups   []*Group
	cell     cellKey
	ex, ey   float64
	switched *Space // the room it viewed before View moved it, until evaluated

	// This tick's pair changes and the changes of its pair entities.
	enter   []*state.Entity
	leave   []*state.Entity
	upd     []pairUpd  // the changes of entities it kept seeing: a run of Server.updBuf
	nupd    int32      // while updateInterest counts them, their number
	ownUpd  bool       // some of upd is of an entity it owns
	relevel []state.ID // pairs whose level of detail changed (may repeat)
	raised  []raise    // pairs whose level rose, for their new bands' fills
	enterL  []uint8    // the level of each of enter
	held    []state.ID // pairs its budget holds back (obsRef.held); may repeat, or name pairs no longer held
	sets    []raise    // stale pairs sent this tick, whole: to is the level
}

// A pairUpd is the change of an entity a client keeps seeing: its index in
// Server.pairCS, and the bands the client gets of it (those up to level).
type pairUpd struct {
	i     int32
	level uint8
}

// A raise is a pair whose level of detail rose this tick: the client gets
// the bands above from as fills.
type raise struct {
	e    *state.Entity
	from uint8
	to   uint8
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
	for _, f := range []struct {
		name string
		v    float64
	}{{"Radius", cfg.Radius}, {"Hysteresis", cfg.Hysteresis}, {"CellSize", cfg.CellSize}} {
		if f.v < 0 || math.IsInf(f.v, 0) || math.IsNaN(f.v) {
			return nil, fmt.Errorf("%w: space %q: %s is %v", ErrBadRadius, cfg.Name, f.name, f.v)
		}
	}
	if cfg.Metric > Square {
		return nil, fmt.Errorf("%w: space %q: metric %d", ErrUnknownMetric, cfg.Name, cfg.Metric)
	}
	sp := &Space{srv: s, cfg: cfg, room: cfg.Radius == 0}
	if !sp.room && sp.cfg.CellSize == 0 {
		sp.cfg.CellSize = cfg.Radius
	}
	if !sp.room {
		sp.perCell = min(1/sp.cfg.CellSize, math.MaxFloat64) // finite: 0 · perCell is 0
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
//
// An entity whose space changes (to another space, into none, or from
// none into one) has its fields of lifetime scene (life=scene) reset to
// their zero values (state.Entity.ResetLife), unless it was spawned in
// this tick; set them for the new space after SetSpace.
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
	if !s.createdNow(ie) {
		e.ResetLife(schema.LifeScene)
	}
	s.leaveSpace(ie, true)
	s.enterSpace(ie, sp, true)
	s.markEnt(ie)
	s.refreshFollowers(ie)
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
	if c == nil || c.srv != s || c.view.gone {
		return ErrConnGone
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
		if v.space != nil && v.space.room || sp != nil && sp.room {
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
func (s *Server) ViewOf(c *Conn) *Space {
	if c == nil || c.srv != s {
		return nil
	}
	return c.view.space
}

// SetViewpoint makes c view its space from the point (x, y), a spectator's
// camera, instead of from an entity.
func (s *Server) SetViewpoint(c *Conn, x, y float64) error {
	if math.IsInf(x, 0) || math.IsNaN(x) || math.IsInf(y, 0) || math.IsNaN(y) {
		return fmt.Errorf("%w: (%v, %v)", ErrBadViewpoint, x, y)
	}
	if c == nil || c.srv != s || c.view.gone {
		return ErrConnGone
	}
	s.unfollow(c)
	v := &c.view
	v.fixed = true
	s.movePoint(c, x, y, true)
	s.markView(c)
	return nil
}

// Follow makes c view its space from e's position, wherever e goes. By
// default a client follows the first entity with a position it is given
// to own (SetOwner). When the entity it follows is destroyed, it follows
// another entity with a position it owns, if it has one (an avatar that
// respawns), else it has no viewpoint. After a camera (SetViewpoint),
// Follow the avatar again to view from it: nil is not an entity, and
// returns ErrUnknownEntity.
func (s *Server) Follow(c *Conn, e *state.Entity) error {
	if c == nil || c.srv != s || c.view.gone {
		return ErrConnGone
	}
	ie, err := s.ientOf(e)
	if err != nil {
		return err
	}
	if _, _, ok := s.posLeaves(e.Class()); !ok {
		return fmt.Errorf("%w: %s", ErrNoPosition, e.Class().Name)
	}
	s.unfollow(c)
	s.follow(c, ie)
	return nil
}

// follow makes c, which follows nothing, view from ie.
func (s *Server) follow(c *Conn, ie *ient) {
	c.view.fixed, c.view.follow = false, ie.id
	ie.follow, ie.followed = append(ie.follow, c), true
	s.refreshPoint(c)
	s.markView(c)
}

// refreshFollowers re-reads the viewpoints of the clients that follow ie.
func (s *Server) refreshFollowers(ie *ient) {
	if !ie.followed {
		return // without reading follow
	}
	for _, c := range ie.follow {
		s.refreshPoint(c)
		s.markView(c)
	}
}

// moveFollowers re-reads the viewpoints of the clients that follow ie,
// which moved within its space: they are re-evaluated for the move alone
// (markMoved).
func (s *Server) moveFollowers(ie *ient) {
	if !ie.followed {
		return
	}
	for _, c := range ie.follow {
		s.refreshPoint(c)
		s.markMoved(c)
	}
}

// SetRadius sets e's visibility radius: clients whose viewpoint lies
// within it (in e's AOI space) see e. Zero restores the space's radius.
// The radius stays with e: in a room, where every viewer sees every
// entity, it has no effect until e moves to an area-of-interest space.
func (s *Server) SetRadius(e *state.Entity, r float64) error {
	if r < 0 || math.IsInf(r, 0) || math.IsNaN(r) {
		return fmt.Errorf("%w: radius %v", ErrBadRadius, r)
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

// SetPriority sets how much e matters to the clients that see it when a
// bandwidth budget must choose (Config.Budget): a client is sent the
// changes and entries of the entities of highest priority first. An
// entity's priority for a client is p, divided by 1 + its distance over
// its radius, times 1 + the ticks it has been held back, so that nothing
// waits for ever; what the client owns always goes first. The default p
// is 1; p must be finite and > 0.
func (s *Server) SetPriority(e *state.Entity, p float64) error {
	ie, err := s.ientOf(e)
	if err != nil {
		return err
	}
	if !(p > 0) || math.IsInf(p, 0) {
		return fmt.Errorf("%w: priority %v", ErrBadPriority, p)
	}
	ie.prio = p
	return nil
}

// SetBudget sets c's bandwidth budget in bytes per second (see
// Config.Budget); negative means none.
func (s *Server) SetBudget(c *Conn, bytesPerSecond int) error {
	if c == nil || c.srv != s || c.view.gone {
		return ErrConnGone
	}
	c.budget = float64(bytesPerSecond)
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

// AddEntity makes e visible to the group's members. It returns
// ErrUnknownEntity for an entity that is not a live one of the group's
// server, and for every entity when the group was not made by NewGroup:
// a zero Group is of no server's world.
func (g *Group) AddEntity(e *state.Entity) error {
	if g.srv == nil {
		return fmt.Errorf("%w: group %q was not made by Server.NewGroup", ErrUnknownEntity, g.name)
	}
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
	if g.srv == nil {
		return // a zero Group has no entities
	}
	ie := g.srv.ientIf(e)
	if ie == nil || !slices.Contains(ie.groups, g) {
		return
	}
	ie.groups = slices.DeleteFunc(ie.groups, func(x *Group) bool { return x == g })
	g.ents = slices.DeleteFunc(g.ents, func(id state.ID) bool { return id == ie.id })
	g.srv.markEnt(ie)
}

// AddConn makes c a member: it sees the group's entities. It does
// nothing for a connection that has left.
func (g *Group) AddConn(c *Conn) {
	if c == nil || c.srv != g.srv || c.view.gone {
		return
	}
	if !slices.Contains(c.view.groups, g) {
		c.view.groups = append(c.view.groups, g)
		g.conns = append(g.conns, c)
		g.srv.markView(c)
	}
}

// RemoveConn undoes AddConn.
func (g *Group) RemoveConn(c *Conn) {
	if c == nil || !slices.Contains(c.view.groups, g) {
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
	if ie == nil || c == nil || c.srv != s {
		return false
	}
	if ie.space != nil && ie.space.room && ie.space == c.view.space {
		return true
	}
	oi := s.pairOf(c, ie)
	return oi >= 0 && ie.obs[oi].held&pending == 0 // a held creation has not reached c
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

// ientOf returns the interest state of e, a live entity of the tracker,
// making it for one created in this tick.
func (s *Server) ientOf(e *state.Entity) (*ient, error) {
	// The tracker first: an entity destroyed in this tick keeps its
	// interest state until the tick drops it, but is no longer the
	// game's to place, show or follow.
	if e == nil || s.tr.Entity(e.ID()) != e {
		return nil, ErrUnknownEntity
	}
	if ie := s.ientIf(e); ie != nil {
		return ie, nil
	}
	return s.newIent(e), nil
}

func (s *Server) newIent(e *state.Entity) *ient {
	ie := s.ientAt(int(e.ID().Slot()))
	*ie = ient{id: e.ID(), e: e, midx: -1, obs: ie.obs[:0], follow: ie.follow[:0], groups: ie.groups[:0], hist: ie.hist}
	return ie
}

// ientAt returns the record of slot, making room for it.
func (s *Server) ientAt(slot int) *ient {
	for len(s.ients) <= slot {
		s.ients = append(s.ients, ient{})
	}
	return &s.ients[slot]
}

func (s *Server) markEnt(ie *ient) {
	if !ie.dirty {
		ie.dirty = true
		s.dirtyEnts = append(s.dirtyEnts, ie.id)
	}
}

// markView queues c's view for evaluation in full with the next tick.
func (s *Server) markView(c *Conn) {
	c.view.full = true
	if !c.view.dirty {
		c.view.dirty = true
		s.dirtyViews = append(s.dirtyViews, c)
	}
}

// markMoved queues c's view, whose viewpoint moved, for evaluation: for
// the move alone, unless something else queues it too.
func (s *Server) markMoved(c *Conn) {
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
	moved := ie.x != x || ie.y != y
	ie.x, ie.y, ie.placed = x, y, true
	if moved {
		// Read anew (placed again after a radius change, say): whoever
		// follows it views from here now, not from where it was.
		s.refreshFollowers(ie)
	}
	e := cellEnt{id: ie.id, x: x, y: y, r: s.radius(ie)}
	if e.r > sp.cfg.CellSize {
		ie.wide = true
		ie.cidx = int32(len(sp.wide))
		sp.wide = append(sp.cells.ents.grow(sp.wide), e)
		return
	}
	ie.wide = false
	ie.cell = sp.key(x, y)
	ie.cidx = sp.cells.addEnt(ie.cell, e)
}

func (s *Server) unplace(ie *ient) {
	sp := ie.space
	var moved state.ID
	var ok bool
	if ie.wide {
		sp.wide, moved, ok = removeEnt(&sp.cells.ents, sp.wide, ie.cidx)
	} else {
		moved, ok = sp.cells.removeEnt(ie.cell, ie.cidx)
	}
	if ok {
		s.ients[moved.Slot()].cidx = ie.cidx
	}
	ie.placed, ie.wide = false, false
}

// moveCell moves placed ie to (x, y) in its space's grid or wide list. A
// move to another cell of the grid is only noted, for settleCells: until
// then ie.cell and ie.cidx name its entry in the cell it leaves.
func (s *Server) moveCell(ie *ient, x, y float64) {
	sp := ie.space
	ie.x, ie.y = x, y
	if ie.wide {
		sp.wide[ie.cidx].x, sp.wide[ie.cidx].y = x, y
		return
	}
	if sp.key(x, y) != ie.cell {
		s.crossing = append(s.crossing, ie.id)
		return
	}
	e := &sp.cells.get(ie.cell).ents[ie.cidx]
	e.x, e.y = x, y
}

// settleCells makes the moves to other cells that moveCell noted. Each
// writes lines of the grid that the tick has not read, anywhere in a large
// world: the entry of the cell it leaves that takes its place there (the
// last) and that entry's record, and the next free entry of the cell it
// enters. Those are read first, in loops of their own, so that their
// misses overlap (see warm), then the moves are made.
func (s *Server) settleCells() {
	if len(s.crossing) == 0 {
		return
	}
	var sum uintptr
	lasts := s.warmEnts[:0]
	for _, id := range s.crossing {
		ie := s.ientByID(id)
		if ie == nil || !ie.placed || ie.wide {
			continue
		}
		sp := ie.space
		if ce := sp.cells.get(ie.cell); ce != nil && len(ce.ents) > 0 {
			lasts = append(lasts, &ce.ents[len(ce.ents)-1])
		}
		if ce := sp.cells.get(sp.key(ie.x, ie.y)); ce != nil && len(ce.ents) < cap(ce.ents) {
			lasts = append(lasts, &ce.ents[:len(ce.ents)+1][len(ce.ents)])
		}
	}
	for _, e := range lasts {
		if slot := int(e.id.Slot()); slot < len(s.ients) {
			sum += uintptr(s.ients[slot].cidx)
		}
	}
	clear(lasts)
	s.warmEnts, s.warmSum = lasts[:0], s.warmSum+sum
	for _, id := range s.crossing {
		ie := s.ientByID(id)
		if ie == nil || !ie.placed || ie.wide {
			continue
		}
		sp := ie.space
		k := sp.key(ie.x, ie.y)
		if k == ie.cell { // back within the tick (moveCell updated its entry), or noted twice
			continue
		}
		e := sp.cells.get(ie.cell).ents[ie.cidx]
		if moved, ok := sp.cells.removeEnt(ie.cell, ie.cidx); ok {
			s.ients[moved.Slot()].cidx = ie.cidx
		}
		e.x, e.y = ie.x, ie.y
		ie.cell = k
		ie.cidx = sp.cells.addEnt(k, e)
	}
	s.crossing = s.crossing[:0]
}

func (sp *Space) key(x, y float64) cellKey {
	return cellKey{cellOf(x * sp.perCell), cellOf(y * sp.perCell)}
}

// cellOf returns ⌊q⌋ clamped to ±2³⁰: a cell coordinate. It floors by
// hand, as math.Floor is a call on the baseline amd64 (without SSE4.1's
// rounding instruction), and every move computes a few keys.
func cellOf(q float64) int32 {
	// Compared, not min and max, which order NaNs and zeros' signs at a
	// cost. A NaN (from a NaN position, or an infinite one less an
	// infinite reach) is the lowest cell, on every platform (converted,
	// it would give what the CPU gives), so that a range of cells around
	// any point, lo to hi, is never inverted: grid.nearSparse would loop
	// through every int32 from lo.
	if q > 1<<30 {
		q = 1 << 30
	} else if !(q >= -1<<30) {
		q = -1 << 30
	}
	i := int32(q) // toward zero
	if float64(i) > q {
		i--
	}
	return i
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

// A posTable maps each class of a schema to its posInfo: by class ID in
// an array when the IDs are small, as they usually are, which every
// moved entity's look-ups (two) find faster than a map; else in a map.
type posTable struct {
	byID []posEntry
	m    map[*schema.Struct]posInfo
}

type posEntry struct {
	c *schema.Struct
	p posInfo
}

// of returns class c's posInfo.
func (t *posTable) of(c *schema.Struct) posInfo {
	if id := int(c.ID); id < len(t.byID) && t.byID[id].c == c {
		return t.byID[id].p
	}
	return t.m[c]
}

// positions maps each class of sc to its posInfo.
func positions(sc *schema.Schema) posTable {
	m := make(map[*schema.Struct]posInfo, len(sc.Classes))
	var t posTable
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
		if c.ID < 256 {
			for len(t.byID) <= int(c.ID) {
				t.byID = append(t.byID, posEntry{})
			}
			t.byID[c.ID] = posEntry{c, p}
		} else {
			m[c] = p
		}
	}
	t.m = m
	return t
}

// posLeaves returns the leaves of class c that hold its position.
func (s *Server) posLeaves(c *schema.Struct) (x, y *schema.LeafInfo, ok bool) {
	p := s.pos.of(c)
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
	if grid && v.point && ok && sp.key(x, y) == v.cell && sp.cells.moveView(v.cell, c, x, y) {
		v.px, v.py = x, y // within its cell
		return
	}
	if grid && v.point {
		sp.cells.removeView(v.cell, c)
	}
	if ok { // a fixed point survives a time without one (between spaces)
		v.px, v.py = x, y
	}
	v.point = ok
	if grid && ok {
		v.cell = sp.key(x, y)
		sp.cells.addView(v.cell, c, x, y)
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
			ie.followed = len(ie.follow) > 0
		}
	}
	v.follow = 0
}

// unview removes c from the space it views.
func (s *Server) unview(c *Conn) {
	v := &c.view
	sp := v.space
	if sp == nil {
		return
	}
	s.movePoint(c, 0, 0, false)
	sp.cells.forgetView(c)
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
	// One whose entity was destroyed in this tick follows nothing, though
	// the tick has not dropped it yet.
	if to != nil && !to.view.fixed && (to.view.follow == 0 || s.tr.Entity(to.view.follow) == nil) {
		if _, _, ok := s.posLeaves(e.Class()); ok {
			s.unfollow(to)
			s.follow(to, ie)
		}
	}
}

// owns reports whether c owns entity id, from the owners' table alone.
func (s *Server) owns(c *Conn, id state.ID) bool {
	slot := int(id.Slot())
	return slot < len(s.owners) && s.owners[slot].id == id && s.owners[slot].c == c
}

// A pair is a client seeing an entity beyond its room. Each side lists
// the other, with the index of its own entry there, so that either side
// can drop a pair in O(1).
type obsRef struct {
	c       *Conn
	at      int32  // in c.view.pairs
	level   uint8  // the level of detail c should see the entity at (levelOf)
	sent    uint8  // the level c holds it at, as of the last tick sent
	held    uint8  // what c's budget held back: pending or stale, or 0
	entered uint64 // the tick c started seeing the entity
	since   uint64 // when held, the first tick it was held back
}

// What a budget held back of a pair (obsRef.held).
const (
	pending = 1 // its creation: c does not have the entity yet
	stale   = 2 // changes: c's copy is out of date, and gets a set
)

// Who gets an entering entity's full state this tick (Server.enterNeed).
const (
	needOwner  = 1 // its owner
	needOthers = 2 // a client that does not own it
)

type pairRef struct {
	id state.ID
	at int32 // in the entity's obs
}

// pairOf returns the index in ie.obs of c's pair with ie, or -1. It scans
// the shorter of the two lists: an entity's observers (a few, in a zone)
// or the client's pairs (a few dozen; fewer than the observers of an
// always-relevant entity).
func (s *Server) pairOf(c *Conn, ie *ient) int {
	if len(ie.obs) <= len(c.view.pairs) {
		for i := range ie.obs {
			if ie.obs[i].c == c {
				return i
			}
		}
		return -1
	}
	for _, p := range c.view.pairs {
		if p.id == ie.id {
			return int(p.at)
		}
	}
	return -1
}

// addPair records that c sees ie, from this tick. The two lists take
// their arrays from the server's slabs.
func (s *Server) addPair(c *Conn, ie *ient) {
	v := &c.view
	v.pairs = s.pairSlab.grow(v.pairs)
	ie.obs = append(s.obsSlab.grow(ie.obs), obsRef{c: c, at: int32(len(v.pairs)), entered: s.tick})
	v.pairs = append(v.pairs, pairRef{id: ie.id, at: int32(len(ie.obs) - 1)})
}

// removePair drops ie.obs[i] and its other side.
func (s *Server) removePair(ie *ient, i int) {
	o := ie.obs[i]
	v := &o.c.view
	if o.held&stale != 0 && !v.gone {
		s.noteSet(o.c, ie.id) // its client's copy stays out of date
	}
	if last := len(v.pairs) - 1; int(o.at) != last {
		moved := v.pairs[last]
		v.pairs[o.at] = moved
		s.ients[moved.id.Slot()].obs[moved.at].at = o.at
	}
	v.pairs = v.pairs[:len(v.pairs)-1]
	last := len(ie.obs) - 1
	if i != last {
		moved := ie.obs[last]
		ie.obs[i] = moved
		moved.c.view.pairs[moved.at].at = int32(i)
	}
	ie.obs[last] = obsRef{} // the array is kept: it must not keep the connection
	ie.obs = s.obsSlab.shrink(ie.obs[:last])
	v.pairs = s.pairSlab.shrink(v.pairs)
}

// warm reads, ahead of the tick's work on its changes (the history,
// updateInterest), what that work reads of each changed entity: its
// interest record, its history, its observers, its grid entry. The
// changes touch entities anywhere in the world, and in a large one each
// touch misses the CPU's caches (and its TLB); read in loops of their own,
// where nothing waits for what was read, the misses overlap instead of
// coming one after the other. Each loop reads what the one before brought
// in and what it finds from there, so that no miss waits for another: the
// records and history lines, found from the changes alone; then the
// observers and the grid cells; then the entries in the cells' lists.
func (s *Server) warm(cs *state.Changeset) {
	var sum uintptr
	hist := s.resumes()
	for _, ch := range cs.Changes {
		slot := int(ch.Entity.ID().Slot())
		if slot < len(s.ients) {
			ie := &s.ients[slot]
			sum += uintptr(ie.cidx) + uintptr(len(ie.obs))
			if hist {
				sum += uintptr(ie.hist.id)
			}
		}
	}
	entries := s.warmEnts[:0]
	for _, ch := range cs.Changes {
		slot := int(ch.Entity.ID().Slot())
		if slot >= len(s.ients) {
			continue
		}
		ie := &s.ients[slot]
		if len(ie.obs) > 0 {
			sum += uintptr(ie.obs[0].at)
		}
		if ie.placed && !ie.wide {
			if ce := ie.space.cells.get(ie.cell); ce != nil && int(ie.cidx) < len(ce.ents) {
				entries = append(entries, &ce.ents[ie.cidx])
			}
		}
	}
	for _, e := range entries {
		sum += uintptr(e.id)
	}
	clear(entries) // they point into the grid's arrays, which move
	s.warmEnts, s.warmSum = entries[:0], sum
}
