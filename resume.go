package replica

import (
	"cmp"
	"crypto/rand"
	"encoding/binary"
	"math/bits"
	"slices"

	"github.com/replicago/replica/codec"
	"github.com/replicago/replica/session"
	"github.com/replicago/replica/state"
)

// Resume: reconnect catch-up by delta (docs/protocol.md §10.5).
//
// Every WELCOME carries a ticket naming the session. A client that comes
// back within Config.ResumeWindow of its session's end sends the ticket,
// the last tick it applied and what its replica holds; the server answers
// with one catch-up TICK: destroys, creates, and set sections with the
// leaves changed after that tick, at their current values. To know which
// leaves changed, the server keeps, per entity and leaf, the last tick
// that changed it (history), updated from each tick's changeset: memory
// of one number per leaf of each live entity, and work per tick of one
// store per changed leaf.

// A history is the last tick that changed each leaf of each entity, by
// slot. Each slot's is a 64-byte line, pointer-free, with the entity's ID,
// the tick that created it and the ticks of its first histInline leaves;
// those of the leaves past them, if any, are in a record of their own in
// the history's array. The lines lie in the slots' interest records
// (ient.hist), beside what a change of the entity reads for interest: in a
// large world, where each change's entity is anywhere, a change's history
// costs a line of a memory page its interest state brings in anyway, not
// a page of its own; and a class whose often changed leaves come first
// touches nothing else.
type history struct {
	more []uint64  // records: log₂ of the capacity in words, then a tick per leaf; more[0] is none's
	free [][]int32 // by log₂ of capacity: records no line uses
}

// histInline is the number of leaves whose ticks a history line holds.
const histInline = 6

type histLine struct {
	id   state.ID
	more int32  // the record of the ticks of leaves histInline on, or 0
	born uint64 // the tick that created the entity, 0 if unknown: every leaf counts as changed
	at   [histInline]uint64
}

// recordHistory notes the changes of the tick of cs in the history.
func (s *Server) recordHistory(cs *state.Changeset) {
	for _, ch := range cs.Changes {
		if !ch.Destroyed {
			s.hist.note(&s.ientAt(int(ch.Entity.ID().Slot())).hist, ch, s.tick)
		}
	}
}

// note records in ln, its entity's line, the change ch of tick.
func (h *history) note(ln *histLine, ch *state.Change, tick uint64) {
	e := ch.Entity
	if ch.Created || ln.id != e.ID() {
		h.reset(ln, e, tick, ch.Created)
		return
	}
	for i, w := range ch.DirtySet() {
		for ; w != 0; w &= w - 1 {
			if j := i<<6 | bits.TrailingZeros64(w); j < histInline {
				ln.at[j] = tick
			} else {
				h.more[int(ln.more)+1+j-histInline] = tick
			}
		}
	}
}

// reset gives ln to e, with no leaf changed since tick, when e was created
// (created), or since it is not known when.
func (h *history) reset(ln *histLine, e *state.Entity, tick uint64, created bool) {
	if !created {
		tick = 0
	}
	more := ln.more
	if n := e.Class().Leaves - histInline; n <= 0 {
		h.release(more)
		more = 0
	} else if more == 0 || 1<<h.more[more] < 1+n {
		h.release(more)
		more = h.alloc(bits.Len(uint(n))) // 1 + n words or more
	} else {
		clear(h.more[more+1 : int(more)+1<<h.more[more]])
	}
	*ln = histLine{id: e.ID(), more: more, born: tick}
}

// alloc returns a record of capacity 2^k words, clear.
func (h *history) alloc(k int) int32 {
	for len(h.free) <= k {
		h.free = append(h.free, nil)
	}
	if f := h.free[k]; len(f) > 0 {
		h.free[k] = f[:len(f)-1]
		o := f[len(f)-1]
		clear(h.more[o+1 : int(o)+1<<k])
		return o
	}
	if h.more == nil {
		h.more = make([]uint64, 1, 1<<10)
	}
	o := len(h.more)
	h.more = slices.Grow(h.more, 1<<k)[:o+1<<k]
	h.more[o] = uint64(k)
	return int32(o)
}

// release puts record o, if any, on its free list.
func (h *history) release(o int32) {
	if o != 0 {
		k := h.more[o]
		h.free[k] = append(h.free[k], o)
	}
}

// tick returns the last tick that changed leaf i of the entity of line ln.
func (h *history) tick(ln *histLine, i int) uint64 {
	if i < histInline {
		return ln.at[i]
	}
	return h.more[int(ln.more)+1+i-histInline]
}

// changedSince returns the leaves of e, whose line is ln, changed after
// tick t, a bit per leaf, in a new slice. e must be known, born by t
// (bornAfter).
func (h *history) changedSince(ln *histLine, e *state.Entity, t uint64) []uint64 {
	n := e.Class().Leaves
	m := make([]uint64, (n+63)/64)
	for i := range n {
		if h.tick(ln, i) > t {
			m[i>>6] |= 1 << (i & 63)
		}
	}
	return m
}

// bornAfter reports whether e, whose slot's line is ln (nil if none), was
// created after tick t, or the history does not know when.
func bornAfter(ln *histLine, e *state.Entity, t uint64) bool {
	return ln == nil || ln.id != e.ID() || ln.born == 0 || ln.born > t
}

// histOf returns the history line of e's slot, or nil.
func (s *Server) histOf(e *state.Entity) *histLine {
	if slot := int(e.ID().Slot()); slot < len(s.ients) {
		return &s.ients[slot].hist
	}
	return nil
}

// A resumable is a session a client may resume: open, or gone at most
// Config.ResumeWindow ago.
type resumable struct {
	user  string
	login uint64 // the login it continues (Conn.login)
	gone  bool
	left  uint64 // the tick it left, if gone
	// A budget (Config.Budget) may have held back changes the client
	// then lacks, from any tick since it last sent the entity whole:
	// stale lists the pairs stale when it left, sets the sets that
	// brought stale pairs up to date in its last ticks (complete after
	// tick setsFrom), which the client may not have applied. Those
	// entities are sent whole.
	stale    []state.ID
	sets     []setMark
	setsFrom uint64
}

// A setMark is the end, in a tick, of a pair's staleness (the entity id):
// its budget sent its set, it left the client's view, or the client was
// sent the full state. A client that applied an earlier tick may hold a
// copy of it out of date.
type setMark struct {
	tick uint64
	id   state.ID
}

// maxSetMarks bounds the sets a connection remembers.
const maxSetMarks = 1024

// noteSet records that c's pair with id ends being stale this tick
// (setMark): a client that resumes from before this tick may lack changes
// its budget held back.
func (s *Server) noteSet(c *Conn, id state.ID) {
	if !s.resumes() {
		return
	}
	k := 0
	for k < len(c.sets) && (s.tick-c.sets[k].tick > s.windowTicks() || len(c.sets)-k >= maxSetMarks) {
		c.setsFrom = max(c.setsFrom, c.sets[k].tick)
		k++
	}
	if k > 0 {
		c.sets = append(c.sets[:0], c.sets[k:]...)
	}
	c.sets = append(c.sets, setMark{s.tick, id})
}

// wholeAfter returns which entities a client that applied tick t of
// session r gets whole in its catch-up: those its budget may have left
// out of date. With t before what r remembers, all of them.
func (r *resumable) wholeAfter(t uint64) func(state.ID) bool {
	if t < r.setsFrom {
		return func(state.ID) bool { return true }
	}
	whole := map[state.ID]bool{}
	for _, id := range r.stale {
		whole[id] = true
	}
	for _, m := range r.sets {
		if m.tick > t {
			whole[m.id] = true
		}
	}
	return func(id state.ID) bool { return whole[id] }
}

// A departure is a session that left, in the order they left, so that
// tickets expire in order.
type departure struct {
	ticket session.Ticket
	tick   uint64
}

// resumes reports whether the server resumes sessions.
func (s *Server) resumes() bool { return s.cfg.ResumeWindow >= 0 }

// windowTicks is Config.ResumeWindow in ticks, rounded up.
func (s *Server) windowTicks() uint64 { return s.ticksOf(s.cfg.ResumeWindow) }

// newTicket returns a random ticket.
func newTicket() session.Ticket {
	var b [16]byte
	rand.Read(b[:])
	return session.Ticket{binary.LittleEndian.Uint64(b[:8]), binary.LittleEndian.Uint64(b[8:]) | 1}
}

// admitResume gives c a ticket and, if its HELLO asks to resume a
// session the server may resume, takes that session's login and notes
// what c holds for its catch-up. It reports whether c resumes. It runs on
// the handshake goroutine.
func (s *Server) admitResume(c *Conn, r *session.Resume) bool {
	if !s.resumes() {
		return false
	}
	c.ticket = newTicket()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.tickets == nil {
		s.tickets = make(map[session.Ticket]*resumable)
	}
	resumed := false
	if r != nil && !r.Ticket.IsZero() {
		now := s.tickNow.Load()
		if old := s.tickets[r.Ticket]; old != nil && old.user == c.userID && r.Tick <= now &&
			(!old.gone || now-old.left <= s.windowTicks()) {
			// A ticket resumes once: the new session has its own.
			delete(s.tickets, r.Ticket)
			c.resume, c.login, c.whole, resumed = r, old.login, old.wholeAfter(r.Tick), true
		}
	}
	s.tickets[c.ticket] = &resumable{user: c.userID, login: c.login}
	return resumed
}

// dropTicket forgets c's ticket: c never joined.
func (s *Server) dropTicket(c *Conn) {
	if c.ticket.IsZero() {
		return
	}
	s.mu.Lock()
	delete(s.tickets, c.ticket)
	s.mu.Unlock()
}

// departed notes that c left: its ticket resumes it for
// Config.ResumeWindow. Call it on the tick goroutine.
func (s *Server) departed(c *Conn) {
	if c.ticket.IsZero() {
		return
	}
	var stales []state.ID
	for _, id := range c.view.held {
		if ie := &s.ients[id.Slot()]; ie.id == id {
			if oi := s.pairOf(c, ie); oi >= 0 && ie.obs[oi].held&stale != 0 {
				stales = append(stales, id)
			}
		}
	}
	s.mu.Lock()
	if r := s.tickets[c.ticket]; r != nil {
		r.gone, r.left, r.stale, r.sets, r.setsFrom = true, s.tick, stales, c.sets, c.setsFrom
	}
	s.mu.Unlock()
	s.departures = append(s.departures, departure{c.ticket, s.tick})
}

// expireTickets forgets the tickets of sessions gone longer than
// Config.ResumeWindow. Call it on the tick goroutine.
func (s *Server) expireTickets() {
	n := 0
	for n < len(s.departures) && s.tick-s.departures[n].tick > s.windowTicks() {
		n++
	}
	if n == 0 {
		return
	}
	s.mu.Lock()
	for _, d := range s.departures[:n] {
		if r := s.tickets[d.ticket]; r != nil && r.gone {
			delete(s.tickets, d.ticket)
		}
	}
	s.mu.Unlock()
	s.departures = slices.Delete(s.departures, 0, n)
}

// A seen is an entity a client sees now, for its catch-up.
type seen struct {
	e     *state.Entity
	level uint8
	owned bool
}

// catchUp sends c, which resumes a session with what r declares, the
// catch-up TICK, if it is no larger than the full state whose segments
// are full, and reports whether it did. The full state's bookkeeping
// (levels sent, held slots, budgets) has been done: both leave the client
// holding what it sees now.
func (s *Server) catchUp(c *Conn, r *session.Resume, full [][]byte) bool {
	now, ok := s.seenNow(c)
	if !ok {
		return false
	}
	var (
		patches [3][]codec.Patch // by partition: PartAll, PartOthers, PartOwner
		info    session.Tick
	)
	add := func(p codec.Part, op codec.PatchOp, e *state.Entity, leaves []uint64) {
		patches[p] = append(patches[p], codec.Patch{Op: op, E: e, Leaves: leaves})
	}
	var destroys []codec.Patch
	held := r.Held
	i, j := 0, 0
	for i < len(held) || j < len(now) {
		var hs, ns uint32 = 1 << 24, 1 << 24
		if i < len(held) {
			hs = held[i].ID & (1<<24 - 1)
		}
		if j < len(now) {
			ns = uint32(now[j].e.ID().Slot())
		}
		switch {
		case hs < ns: // held, no longer seen
			destroys = append(destroys, codec.Patch{Op: codec.PatchDestroy, ID: state.ID(held[i].ID)})
			i++
		case ns < hs: // seen, not held: created as in a full state
			n := now[j]
			add(codec.PartAll, codec.PatchCreate, n.e, s.bandMask(n.e, codec.PartAll, 0, n.level))
			add(n.vis(), codec.PatchFill, n.e, s.bandMask(n.e, n.vis(), 0, n.level))
			if n.level < top(n.e) {
				info.Levels = append(info.Levels, session.Level{ID: uint32(n.e.ID()), Level: n.level})
			}
			if n.owned {
				info.Gained = append(info.Gained, uint32(n.e.ID()))
			}
			j++
		default:
			h, n := held[i], now[j]
			if state.ID(h.ID) != n.e.ID() || bornAfter(s.histOf(n.e), n.e, r.Tick) {
				// Another entity in the slot the client holds: the
				// destroy goes in a segment before the create.
				destroys = append(destroys, codec.Patch{Op: codec.PatchDestroy, ID: state.ID(h.ID)})
				i++
				continue // and the slot is created as not held
			}
			s.keepUp(n, h, r.Tick, c.whole, &info, add)
			i++
			j++
		}
	}
	// Destroys first, in segments of their own: a slot they free may be
	// created again. Then each partition's, creates first, so that any
	// split keeps them before their fills.
	segs := s.split(s.seg[:0], len(destroys), func(lo, hi int) []byte { return s.enc.Patch(nil, destroys[lo:hi]) })
	for p := range patches {
		ps := patches[p]
		slices.SortStableFunc(ps, func(a, b codec.Patch) int { return cmp.Compare(opOrder(a.Op), opOrder(b.Op)) })
		segs = s.split(segs, len(ps), func(lo, hi int) []byte { return s.enc.Patch(nil, ps[lo:hi]) })
	}
	s.seg = segs
	info.Tick = s.tick
	cu, fu := size(segs, &info), size(full, &session.Tick{Tick: s.tick, Gained: c.gained, Levels: c.levels})
	s.stats.ResumeFullBytes += uint64(fu)
	if cu > fu+1 { // the full state costs a RESYNC besides: one byte
		s.stats.ResumeBytes += uint64(fu + 1)
		return false
	}
	s.stats.ResumeBytes += uint64(cu)
	c.gained, c.lost, c.levels = info.Gained, info.Lost, info.Levels
	s.stats.Resumes++
	s.send(c, segs)
	return true
}

// opOrder orders a partition's patches: creates before fills.
func opOrder(op codec.PatchOp) int {
	if op == codec.PatchCreate {
		return 0
	}
	return 1
}

// size returns the bytes of a TICK with info's lists and the non-empty
// segments of segs.
func size(segs [][]byte, info *session.Tick) int {
	n, k := 0, 0
	for _, seg := range segs {
		if !empty(seg) {
			n += len(seg)
			k++
		}
	}
	hdr := *info
	hdr.Segments = k
	return n + len(session.AppendTick(nil, &hdr))
}

// keepUp adds the catch-up of an entity the client held as h and still
// sees as n: its level and ownership changes, a set of the leaves changed
// after tick t (every leaf if whole: a budget may have left it out of
// date) that it saw then and sees now, and fills of what it newly
// sees (the partition an ownership change shows, the bands a level rise
// shows).
func (s *Server) keepUp(n seen, h session.Held, t uint64, whole func(state.ID) bool, info *session.Tick, add func(codec.Part, codec.PatchOp, *state.Entity, []uint64)) {
	e := n.e
	was := min(h.Level, top(e))
	if was != n.level {
		info.Levels = append(info.Levels, session.Level{ID: uint32(e.ID()), Level: n.level})
	}
	switch {
	case n.owned && !h.Owned:
		info.Gained = append(info.Gained, uint32(e.ID()))
	case !n.owned && h.Owned:
		info.Lost = append(info.Lost, uint32(e.ID()))
	}
	changed := s.hist.changedSince(s.histOf(e), e, t)
	if whole(e.ID()) {
		changed = s.bandMask(e, codec.PartAll, 0, top(e)) // every leaf
		for k, w := range s.bandMask(e, n.vis(), 0, top(e)) {
			changed[k] |= w
		}
	}
	kept := min(was, n.level)
	for _, p := range [...]codec.Part{codec.PartAll, n.vis()} {
		if p != codec.PartAll && n.owned != h.Owned {
			// The client reset the partition it sees now: it comes whole.
			add(p, codec.PatchFill, e, s.bandMask(e, p, 0, n.level))
			continue
		}
		set := s.bandMask(e, p, 0, kept)
		for k := range set {
			set[k] &= changed[k]
		}
		add(p, codec.PatchSet, e, set)
		if n.level > was {
			add(p, codec.PatchFill, e, s.bandMask(e, p, was+1, n.level))
		}
	}
}

// vis returns the partition besides PartAll the client sees n's fields
// in.
func (n seen) vis() codec.Part {
	if n.owned {
		return codec.PartOwner
	}
	return codec.PartOthers
}

// top returns the level of detail at which a client sees every band of
// e's class.
func top(e *state.Entity) uint8 { return uint8(len(e.Class().Bands())) }

// bandMask returns, in a new slice, e's leaves of partition p (whole) in
// the bands from..to.
func (s *Server) bandMask(e *state.Entity, p codec.Part, from, to uint8) []uint64 {
	c := e.Class()
	m := make([]uint64, (c.Leaves+63)/64)
	for b := int(from); b <= int(to); b++ {
		for k, w := range s.enc.Leaves(c, p.Band(b)) {
			m[k] |= w
		}
	}
	return m
}

// seenNow returns what c sees now, by ascending slot, with the level of
// detail and ownership it has them at after this tick's full state; false
// if an entity appears twice (c must then get the full state).
func (s *Server) seenNow(c *Conn) ([]seen, bool) {
	var now []seen
	if sp := c.view.space; sp != nil && sp.room {
		for _, id := range sp.members {
			e := s.ients[id.Slot()].e
			now = append(now, seen{e: e, level: top(e), owned: s.ownerOf(e) == c})
		}
	}
	for _, p := range c.view.pairs {
		ie := &s.ients[p.id.Slot()]
		now = append(now, seen{e: ie.e, level: ie.obs[p.at].level, owned: s.ownerByID(ie.id) == c})
	}
	slices.SortFunc(now, func(a, b seen) int { return cmp.Compare(a.e.ID().Slot(), b.e.ID().Slot()) })
	for k := 1; k < len(now); k++ {
		if now[k].e.ID().Slot() == now[k-1].e.ID().Slot() {
			return nil, false
		}
	}
	return now, true
}
