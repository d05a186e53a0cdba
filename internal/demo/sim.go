package demo

import (
	"fmt"
	"math"
	"math/rand/v2"
	"time"

	"github.com/replicago/replica"
	"github.com/replicago/replica/client"
	"github.com/replicago/replica/codec"
	"github.com/replicago/replica/schema"
	"github.com/replicago/replica/state"
)

// The arena's rules.
const (
	worldSize   = 1000 // the arena is worldSize × worldSize units
	maxHP       = 100
	attackRange = 40
	holdRange   = 20 // a chasing bot stops this close to its target
	bagCap      = 6  // inventory slots; a full bag drops an item to pick one up
	itemKinds   = 6  // kind 1 is a medkit
	maxCount    = 99 // items per stack
	maxBounty   = 99
)

// AI modes, kept in the server-only mode field.
const (
	modeWander uint8 = iota
	modeChase
	modeRest
)

// A slot is one bot of the arena. When a bot dies it is destroyed and a new
// entity respawns in its slot, so slot i is always occupied and slot i <
// clients is always owned by client i.
type slot struct {
	b     Bot
	owner int // index of the owning client, or −1
	name  string
	speed float64 // units per tick
	rest  int     // ticks left in modeRest
}

// A session is the server's view of one connected client: the bot it owns
// and the segments of the tick being delivered.
type session struct {
	own    *state.Change // this tick's change of the owned bot, or nil
	owner  []byte        // PartOwner segment
	others []byte        // this client's own PartOthers segment, when the shared one would not do
	segs   [][]byte
}

// A player is an in-process client: a client.Replica (with its own
// decoder) and the callbacks it registered, which count what they see.
type player struct {
	r  *client.Replica
	ev Callbacks
	// badRef describes the first target change whose reference did not
	// resolve, which the client package promises cannot happen once a tick
	// is applied.
	badRef string
}

// Callbacks counts the callbacks clients ran, summed over clients.
type Callbacks struct {
	Creates, Destroys   int64 // OnBotCreate, OnBotDestroy
	HP, Targets, Scores int64 // OnBotHpChange, OnBotTargetChange, OnBotScoreChange

	// OnBotInvChange, by kind: ItemsChanged counts item field changes.
	ItemsAdded, ItemsChanged, ItemsRemoved int64
}

// Total returns the number of callbacks.
func (c Callbacks) Total() int64 {
	return c.Creates + c.Destroys + c.HP + c.Targets + c.Scores + c.ItemsAdded + c.ItemsRemoved + c.ItemsChanged
}

func (c *Callbacks) add(o Callbacks) {
	c.Creates += o.Creates
	c.Destroys += o.Destroys
	c.HP += o.HP
	c.Targets += o.Targets
	c.Scores += o.Scores
	c.ItemsAdded += o.ItemsAdded
	c.ItemsRemoved += o.ItemsRemoved
	c.ItemsChanged += o.ItemsChanged
}

func newPlayer() (*player, error) {
	r, err := client.New(Schema(), client.Config{})
	if err != nil {
		return nil, err
	}
	p := &player{r: r}
	ev := &p.ev
	OnBotCreate(r, func(Bot) { ev.Creates++ })
	OnBotDestroy(r, func(Bot) { ev.Destroys++ })
	OnBotHpChange(r, func(Bot, int16, int16) { ev.HP++ })
	OnBotScoreChange(r, func(Bot, int32, int32) { ev.Scores++ })
	OnBotTargetChange(r, func(b Bot, _, ref replica.Ref) {
		ev.Targets++
		if ref != 0 && r.Resolve(ref) == nil && p.badRef == "" {
			p.badRef = fmt.Sprintf("bot %d (%q) changed target to entity %d, which did not resolve", b.ID(), b.Name(), ref)
		}
	})
	OnBotInvChange(r, func(_ Bot, c client.BagChange[uint32, Item]) {
		switch c.Kind {
		case client.Added:
			ev.ItemsAdded++
		case client.Removed:
			ev.ItemsRemoved++
		default:
			ev.ItemsChanged++
		}
	})
	return p, nil
}

// Stats are the cumulative counters of a run.
type Stats struct {
	Ticks      uint64
	Spawned    int // bots spawned, the initial ones included
	Destroyed  int // bots destroyed (each one respawns in the same tick)
	Kills      int // destroyed in a fight; the rest died of hazards
	Retargets  int
	BagAdds    int // items added to inventories
	BagUpdates int // item counts changed
	BagRemoves int // items removed from inventories

	JoinBytes     int       // full-state bytes the clients received on joining, summed over clients
	Bytes         int64     // tick payload bytes delivered, summed over clients
	OwnOthers     int64     // PartOthers segments encoded for one client because its own bot was in the shared one
	Callbacks     Callbacks // client callbacks run, joins included
	Verifications int       // successful Verify calls
}

// Sim is the demo world: the server's tracker, encoder and bots, and the
// in-process clients. Step advances it one tick. A Sim is not safe for
// concurrent use.
type Sim struct {
	cfg Config
	rng *rand.Rand
	tr  *state.Tracker
	enc codec.Encoder

	slots    []slot
	byID     map[state.ID]int // live bot → slot
	nextItem uint32
	sessions []session
	players  []*player

	othersMask []uint64 // leaves of a bot in PartOthers
	all        []byte
	others     []byte
	one        state.Changeset
	ents       []*state.Entity

	// othersPerClient encodes PartOthers for every client instead of
	// sharing one segment; for the benchmark that justifies sharing.
	othersPerClient bool

	stats Stats
	win   window
	run   histogram
	apply histogram
}

// window collects the figures of one status line.
type window struct {
	ticks  int
	server []time.Duration
	bytes  int64
	events int64
	start  time.Time
}

// New builds the arena of cfg, spawns its bots and connects its clients,
// each of which receives the full state.
func New(cfg Config) (*Sim, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	s := &Sim{
		cfg:  cfg,
		rng:  rand.New(rand.NewPCG(cfg.Seed, cfg.Seed^0x9e3779b97f4a7c15)),
		tr:   state.NewTracker(Schema()),
		byID: make(map[state.ID]int, cfg.Entities),
	}
	for i := 0; i < replicaBot.Leaves; i++ {
		if replicaBot.Leaf(i).Vis == schema.VisOthers {
			s.othersMask = setBit(s.othersMask, i)
		}
	}
	s.slots = make([]slot, cfg.Entities)
	for i := range s.slots {
		sl := &s.slots[i]
		sl.owner = -1
		sl.name = fmt.Sprintf("bot-%03d", i)
		if i < cfg.Clients {
			sl.owner = i
			sl.name = fmt.Sprintf("player-%02d", i)
		}
		if err := s.spawn(i, 0); err != nil {
			return nil, err
		}
		// The battle is already under way: start with wounds and loot.
		b := sl.b
		b.SetHp(int16(30 + s.rng.IntN(maxHP-30+1)))
		for range s.rng.IntN(4) {
			s.pickup(b)
		}
	}
	s.stats.BagAdds = 0 // starting inventories are not pickups
	s.tr.Commit()       // nobody is connected yet: the spawn tick goes nowhere
	if err := s.connect(); err != nil {
		return nil, err
	}
	s.win.start = time.Now()
	return s, nil
}

// connect joins every client: each receives the full state as its
// partitions show it, in one transaction.
func (s *Sim) connect() error {
	s.ents = s.tr.AppendEntities(s.ents[:0])
	s.all = s.enc.Full(s.all[:0], s.ents, codec.PartAll)
	s.sessions = make([]session, s.cfg.Clients)
	s.players = make([]*player, s.cfg.Clients)
	var notMine []*state.Entity
	for i := range s.players {
		p, err := newPlayer()
		if err != nil {
			return err
		}
		s.players[i] = p
		own := s.slots[i].b.Entity()
		notMine = notMine[:0]
		for _, e := range s.ents {
			if e != own {
				notMine = append(notMine, e)
			}
		}
		sess := &s.sessions[i]
		sess.others = s.enc.Full(sess.others[:0], notMine, codec.PartOthers)
		sess.owner = s.enc.Full(sess.owner[:0], []*state.Entity{own}, codec.PartOwner)
		segs := nonEmpty(sess.segs[:0], s.all, sess.others, sess.owner)
		if err := p.r.Apply(segs...); err != nil {
			return fmt.Errorf("client %d joining: %w", i, err)
		}
		for _, seg := range segs {
			s.stats.JoinBytes += len(seg)
		}
	}
	return nil
}

// Config returns the configuration the Sim runs.
func (s *Sim) Config() Config { return s.cfg }

// Step runs one tick: the bots act, the server commits the tick and
// encodes it per visibility partition, and every client applies what it is
// sent in one transaction.
func (s *Sim) Step() error {
	start := time.Now()
	s.simulate()
	cs := s.tr.Commit()
	s.encode(cs)
	d := time.Since(start)
	s.win.server = append(s.win.server, d)
	s.run.add(d)

	for i, p := range s.players {
		segs := s.sessions[i].segs
		before := p.ev.Total()
		start := time.Now()
		err := p.r.Apply(segs...)
		s.apply.add(time.Since(start))
		if err != nil {
			return fmt.Errorf("tick %d: client %d: %w", s.stats.Ticks, i, err)
		}
		for _, seg := range segs {
			s.win.bytes += int64(len(seg))
		}
		s.win.events += p.ev.Total() - before
	}
	s.win.ticks++
	return nil
}

// encode encodes the tick for every client. A client receives, for every
// entity, the PartAll fields, plus the PartOwner fields of the bot it owns
// and the PartOthers fields of every other bot.
//
// PartAll is the same for everyone: encoded once, shared.
//
// PartOwner is encoded per client from a one-entry changeset holding the
// change of its bot, so it costs O(1) per client, not a pass over the tick.
//
// PartOthers is encoded once over every entity and shared. That shared
// segment is exactly what a client must get unless its own bot has
// something in it (its bounty changed this tick); only
// then is a segment that leaves its bot out encoded for that client. The
// alternative, one include=not-mine pass per client, costs a pass over
// every change of the tick per client: BenchmarkTick at 500 bots and 50
// clients measured the server's tick at about 0.34 ms shared against 0.52
// ms per client, a cost that grows with clients × changes, while the
// exceptions are rare (a few per second: a client's bot scoring a kill)
// and their segments tiny. Verify would catch a client that got its own
// bot's others-only fields.
func (s *Sim) encode(cs *state.Changeset) {
	s.all = s.enc.Delta(s.all[:0], cs, codec.PartAll, nil)
	if !s.othersPerClient {
		s.others = s.enc.Delta(s.others[:0], cs, codec.PartOthers, nil)
	}
	for i := range s.sessions {
		s.sessions[i].own = nil
	}
	for _, ch := range cs.Changes {
		if ch.Destroyed {
			continue
		}
		if o := s.ownerOf(ch.Entity); o >= 0 {
			s.sessions[o].own = ch
		}
	}
	for i := range s.sessions {
		sess := &s.sessions[i]
		others := s.others
		if s.othersPerClient || s.ownInOthers(sess.own) {
			own := s.slots[i].b.Entity()
			sess.others = s.enc.Delta(sess.others[:0], cs, codec.PartOthers, func(e *state.Entity) bool { return e != own })
			others = sess.others
			s.stats.OwnOthers++
		}
		sess.owner = sess.owner[:0]
		if sess.own != nil {
			s.one.Tick = cs.Tick
			s.one.Changes = append(s.one.Changes[:0], sess.own)
			sess.owner = s.enc.Delta(sess.owner, &s.one, codec.PartOwner, nil)
		}
		sess.segs = nonEmpty(sess.segs[:0], s.all, others, sess.owner)
	}
}

// ownInOthers reports whether a client's own bot, changed by ch, has
// anything in the tick's PartOthers segment.
func (s *Sim) ownInOthers(ch *state.Change) bool {
	switch {
	case ch == nil || ch.Destroyed:
		return false
	case ch.Created:
		for leaf := state.NextDirty(s.othersMask, 0); leaf >= 0; leaf = state.NextDirty(s.othersMask, leaf+1) {
			if !ch.Entity.IsZero(replicaBot.Leaf(leaf)) {
				return true
			}
		}
		return false
	}
	for i, w := range ch.DirtySet() {
		if i < len(s.othersMask) && w&s.othersMask[i] != 0 {
			return true
		}
	}
	return false
}

// ownerOf returns the client that owns e, or −1.
func (s *Sim) ownerOf(e *state.Entity) int {
	i, ok := s.byID[e.ID()]
	if !ok || s.slots[i].b.Entity() != e {
		return -1
	}
	return s.slots[i].owner
}

// nonEmpty appends the segments that carry anything to dst.
func nonEmpty(dst [][]byte, segs ...[]byte) [][]byte {
	for _, seg := range segs {
		// A segment with nothing in it is its end tag: one zero byte.
		if len(seg) > 1 || len(seg) == 1 && seg[0] != 0 {
			dst = append(dst, seg)
		}
	}
	return dst
}

// simulate runs the bots for one tick.
func (s *Sim) simulate() {
	s.stats.Ticks++
	died := s.stats.Destroyed
	for i := range s.slots {
		s.think(i)
	}
	if s.stats.Destroyed == died {
		return
	}
	// Nobody chases a dead bot: references never dangle after a tick.
	for i := range s.slots {
		b := s.slots[i].b
		if _, ok := s.target(b); !ok && b.Target() != 0 {
			b.SetTarget(0)
			if b.Mode() == modeChase {
				b.SetMode(modeWander)
			}
		}
	}
}

// target returns the slot of the bot b chases, if it has one and it is
// still alive (it may have died earlier in the tick).
func (s *Sim) target(b Bot) (int, bool) {
	t := b.Target()
	if t == 0 {
		return 0, false
	}
	j, ok := s.byID[state.ID(t)]
	return j, ok
}

func (s *Sim) think(i int) {
	sl := &s.slots[i]
	b := sl.b
	r := s.rng
	if hp := b.Hp(); hp < maxHP && (s.stats.Ticks+uint64(i))%10 == 0 {
		b.SetHp(hp + 1)
	}
	if t := b.Target(); t == 0 && r.IntN(10) == 0 || t != 0 && r.IntN(200) == 0 {
		s.retarget(i)
	}
	if b.Mode() == modeRest {
		if sl.rest--; sl.rest <= 0 {
			b.SetMode(modeWander)
		}
	} else {
		s.move(i)
		if r.IntN(400) == 0 {
			b.SetMode(modeRest)
			sl.rest = 20 + r.IntN(40)
		}
	}
	if j, ok := s.target(b); ok && dist(b, s.slots[j].b) < attackRange && r.IntN(3) == 0 {
		s.hurt(j, 6+r.IntN(15), i)
	}
	if r.IntN(800) == 0 && s.hurt(i, 15+r.IntN(40), -1) {
		return // b died and respawned in its slot
	}
	if r.IntN(40) == 0 {
		s.pickup(b)
	}
	if r.IntN(60) == 0 {
		s.use(b)
	}
}

// move turns bot i, towards its target if it has one, and moves it,
// bouncing off the walls.
func (s *Sim) move(i int) {
	sl := &s.slots[i]
	b := sl.b
	x, y, h := float64(b.X()), float64(b.Y()), float64(b.Heading())
	mode := modeWander
	if j, ok := s.target(b); ok {
		tb := s.slots[j].b
		tx, ty := float64(tb.X()), float64(tb.Y())
		if math.Hypot(tx-x, ty-y) < holdRange {
			b.SetMode(modeChase)
			return
		}
		turn := math.Remainder(math.Atan2(ty-y, tx-x)-h, 2*math.Pi)
		h += max(-0.25, min(0.25, turn))
		mode = modeChase
	} else {
		h += (s.rng.Float64() - 0.5) * 0.4
	}
	x += math.Cos(h) * sl.speed
	y += math.Sin(h) * sl.speed
	if x < 0 {
		x, h = -x, math.Pi-h
	} else if x > worldSize {
		x, h = 2*worldSize-x, math.Pi-h
	}
	if y < 0 {
		y, h = -y, -h
	} else if y > worldSize {
		y, h = 2*worldSize-y, -h
	}
	if h = math.Mod(h, 2*math.Pi); h < 0 {
		h += 2 * math.Pi
	}
	b.SetX(float32(x))
	b.SetY(float32(y))
	b.SetHeading(float32(h))
	b.SetMode(mode)
}

func dist(a, b Bot) float64 {
	return math.Hypot(float64(a.X()-b.X()), float64(a.Y()-b.Y()))
}

// retarget points bot i at the nearest of a few bots picked at random.
func (s *Sim) retarget(i int) {
	b := s.slots[i].b
	best, bestD := -1, math.Inf(1)
	for range 6 {
		j := s.rng.IntN(len(s.slots))
		if j == i {
			continue
		}
		if d := dist(b, s.slots[j].b); d < bestD {
			best, bestD = j, d
		}
	}
	if best >= 0 {
		b.SetTarget(replica.Ref(s.slots[best].b.ID()))
		s.stats.Retargets++
	}
}

// hurt deals dmg to bot j on behalf of bot by (−1: a hazard) and reports
// whether it died.
func (s *Sim) hurt(j, dmg, by int) bool {
	b := s.slots[j].b
	hp := int(b.Hp()) - dmg
	if hp > 0 {
		b.SetHp(int16(hp))
		return false
	}
	if by >= 0 {
		k := s.slots[by].b
		k.SetScore(k.Score() + 10 + 5*int32(b.Bounty()))
		k.SetBounty(min(k.Bounty()+1, maxBounty))
		s.pickup(k) // loot
		s.stats.Kills++
	}
	s.kill(j)
	return true
}

// kill destroys bot j and respawns a fresh one in its slot. An owned bot's
// score survives; its inventory and bounty do not.
func (s *Sim) kill(j int) {
	old := s.slots[j].b
	id, score := old.ID(), old.Score()
	s.tr.Destroy(old.Entity())
	delete(s.byID, id)
	s.stats.Destroyed++
	if s.slots[j].owner < 0 {
		score = 0
	}
	if err := s.spawn(j, score); err != nil {
		panic(err) // the class is in the tracker's schema: cannot happen
	}
}

// spawn puts a new bot at full health somewhere in the arena into slot j.
func (s *Sim) spawn(j int, score int32) error {
	sl := &s.slots[j]
	b, err := SpawnBot(s.tr)
	if err != nil {
		return err
	}
	r := s.rng
	b.SetX(float32(r.Float64() * worldSize))
	b.SetY(float32(r.Float64() * worldSize))
	b.SetHeading(float32(r.Float64() * 2 * math.Pi))
	b.SetHp(maxHP)
	b.SetName(sl.name)
	b.SetScore(score)
	sl.b = b
	sl.speed = 1 + 2*r.Float64()
	sl.rest = 0
	s.byID[b.ID()] = j
	s.stats.Spawned++
	return nil
}

// pickup gives b one item of a random kind: it stacks onto an item of the
// same kind, or takes a new slot, dropping an item if the bag is full.
func (s *Sim) pickup(b Bot) {
	kind := uint8(1 + s.rng.IntN(itemKinds))
	inv := b.Inv()
	var first uint32
	for k, it := range inv.All() {
		if first == 0 {
			first = k
		}
		if it.Kind() == kind {
			if n := it.Count(); n < maxCount {
				it.SetCount(n + 1)
				s.stats.BagUpdates++
			}
			return
		}
	}
	if inv.Len() >= bagCap {
		inv.Remove(first) // drop the oldest stack
		s.stats.BagRemoves++
	}
	s.nextItem++
	it := NewItem()
	it.SetKind(kind)
	it.SetCount(1)
	inv.Add(s.nextItem, it)
	s.stats.BagAdds++
}

// use consumes one item of a random stack of b's; a medkit heals.
func (s *Sim) use(b Bot) {
	inv := b.Inv()
	if inv.Len() == 0 {
		return
	}
	n := s.rng.IntN(inv.Len())
	for k, it := range inv.All() {
		if n--; n >= 0 {
			continue
		}
		if it.Kind() == 1 {
			b.SetHp(min(b.Hp()+25, maxHP))
		}
		if c := it.Count(); c > 1 {
			it.SetCount(c - 1)
			s.stats.BagUpdates++
		} else {
			inv.Remove(k)
			s.stats.BagRemoves++
		}
		return
	}
}

func setBit(set []uint64, i int) []uint64 {
	for len(set) <= i>>6 {
		set = append(set, 0)
	}
	set[i>>6] |= 1 << (i & 63)
	return set
}
