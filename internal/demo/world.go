package demo

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/replicago/replica"
	"github.com/replicago/replica/state"
)

// The arena's rules.
const (
	worldSize   = 2000 // the arena is worldSize × worldSize units (the bounds of bot.x and bot.y)
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
// entity respawns in its slot, owned by the same connection: an NPC slot
// stays an NPC, a player's slot stays the player's until it leaves.
type slot struct {
	b     Bot
	owner *replica.Conn // nil for an NPC
	name  string
	speed float64 // units per tick
	rest  int     // ticks left in modeRest

	// A goal the owner steered the bot to (the steer RPC): the bot walks
	// there and holds until steerTicks have passed since the call.
	goalX, goalY float64
	steered      int // ticks left under the owner's control
}

// steerTicks is how long a steered bot stays under its owner's control
// after the last steer call; then it wanders and fights again.
const steerTicks = 100

// Stats are the cumulative counters of the arena.
type Stats struct {
	Ticks      uint64 // simulated ticks
	Spawned    int    // bots spawned, the initial ones and the players' included
	Destroyed  int    // bots destroyed in fights and by hazards (each respawns in the same tick)
	Kills      int    // destroyed in a fight; the rest died of hazards
	Retargets  int
	BagAdds    int // items added to inventories
	BagUpdates int // item counts changed
	BagRemoves int // items removed from inventories
	Joins      int // connections that got a bot
	Leaves     int // connections whose bot was removed
}

// world is the arena on a server: every bot, NPC or player-owned, moves on
// the server; clients only watch. Its methods run on the tick goroutine.
type world struct {
	srv      *replica.Server
	tr       *state.Tracker
	space    *replica.Space      // the AOI space of every bot; nil: the server's default room
	aoi      replica.SpaceConfig // space's configuration; zero for the room
	rng      *rand.Rand
	slots    []slot
	byID     map[state.ID]int // live bot → slot
	nextItem uint32
	leaving  []*replica.Conn // left since the last step; their bots go in the next
	cleanup  bool            // a bot was destroyed: clear references to it
	stats    Stats
}

// hysteresis is the AOI space's hysteresis, a fraction of its radius: a
// bot on the edge of a client's view does not enter and leave it tick
// after tick.
const hysteresis = 0.1

// aoiSpace returns the SpaceConfig of an arena whose bots are seen within
// radius of a client's own bot.
func aoiSpace(radius float64) replica.SpaceConfig {
	return replica.SpaceConfig{Name: "arena", Radius: radius, Hysteresis: hysteresis * radius}
}

// newWorld spawns npcs bots, wounded and carrying loot as if the battle
// were under way, on srv's tracker. The spawns are not committed. With a
// radius, the bots live in an AOI space of that radius, and each client
// that joins views it from its own bot; with none, they live in the
// server's default room, which shows every client every bot.
func newWorld(srv *replica.Server, seed uint64, npcs int, radius float64) (*world, error) {
	w := &world{
		srv:  srv,
		tr:   srv.Tracker(),
		rng:  rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)),
		byID: make(map[state.ID]int, npcs),
	}
	if radius > 0 {
		sp, err := srv.NewSpace(aoiSpace(radius))
		if err != nil {
			return nil, err
		}
		w.space, w.aoi = sp, aoiSpace(radius)
	}
	for i := range npcs {
		j, err := w.add(fmt.Sprintf("bot-%03d", i), nil)
		if err != nil {
			return nil, err
		}
		b := w.slots[j].b
		b.SetHp(int16(30 + w.rng.IntN(maxHP-30+1)))
		for range w.rng.IntN(4) {
			w.pickup(b)
		}
	}
	w.stats.BagAdds = 0 // starting inventories are not pickups
	return w, nil
}

// add spawns a bot in a new slot and returns the slot.
func (w *world) add(name string, owner *replica.Conn) (int, error) {
	w.slots = append(w.slots, slot{name: name, owner: owner})
	j := len(w.slots) - 1
	if err := w.spawn(j, 0); err != nil {
		w.slots = w.slots[:j]
		return 0, err
	}
	return j, nil
}

// join gives connection c a bot of its own, named after its user, and in
// AOI mode makes c view the arena from it. It runs in OnJoin, so the bot
// is part of the tick c receives as its full state.
func (w *world) join(c *replica.Conn) error {
	if w.space != nil {
		if err := w.srv.View(c, w.space); err != nil {
			return err
		}
	}
	if _, err := w.add(c.UserID(), c); err != nil {
		return err
	}
	w.stats.Joins++
	return nil
}

// leave notes that c left. Its bot is removed by the next step, so that
// the state between two ticks is the one the last tick sent.
func (w *world) leave(c *replica.Conn) { w.leaving = append(w.leaving, c) }

// botOf returns the bot c owns.
func (w *world) botOf(c *replica.Conn) (Bot, bool) {
	for _, sl := range w.slots {
		if sl.owner == c {
			return sl.b, true
		}
	}
	return Bot{}, false
}

// removeLeavers destroys the bots of the connections that left.
func (w *world) removeLeavers() {
	for _, c := range w.leaving {
		for j := 0; j < len(w.slots); j++ {
			if w.slots[j].owner != c {
				continue
			}
			b := w.slots[j].b
			delete(w.byID, b.ID())
			w.tr.Destroy(b.Entity())
			w.cleanup = true
			last := len(w.slots) - 1
			w.slots[j] = w.slots[last]
			w.slots = w.slots[:last]
			if j < last {
				w.byID[w.slots[j].b.ID()] = j
			}
			j--
			w.stats.Leaves++
		}
	}
	clear(w.leaving)
	w.leaving = w.leaving[:0]
}

// step runs the bots for one tick.
func (w *world) step() {
	w.stats.Ticks++
	w.removeLeavers()
	for i := range w.slots {
		w.think(i)
	}
	if !w.cleanup {
		return
	}
	// Nobody chases a bot that is gone: references never dangle after a
	// tick.
	w.cleanup = false
	for i := range w.slots {
		b := w.slots[i].b
		if _, ok := w.target(b); !ok && b.Target() != 0 {
			b.SetTarget(0)
			if b.Mode() == modeChase {
				b.SetMode(modeWander)
			}
		}
	}
}

// target returns the slot of the bot b chases, if it has one and it is
// still alive (it may have died earlier in the tick).
func (w *world) target(b Bot) (int, bool) {
	t := b.Target()
	if t == 0 {
		return 0, false
	}
	j, ok := w.byID[state.ID(t)]
	return j, ok
}

func (w *world) think(i int) {
	sl := &w.slots[i]
	b := sl.b
	r := w.rng
	if hp := b.Hp(); hp < maxHP && (w.stats.Ticks+uint64(i))%10 == 0 {
		b.SetHp(hp + 1)
	}
	if t := b.Target(); t == 0 && r.IntN(10) == 0 || t != 0 && r.IntN(200) == 0 {
		w.retarget(i)
	}
	if sl.steered > 0 {
		sl.steered--
		w.walk(i)
	} else if b.Mode() == modeRest {
		if sl.rest--; sl.rest <= 0 {
			b.SetMode(modeWander)
		}
	} else {
		w.move(i)
		if r.IntN(400) == 0 {
			b.SetMode(modeRest)
			sl.rest = 20 + r.IntN(40)
		}
	}
	if j, ok := w.target(b); ok && dist(b, w.slots[j].b) < attackRange && r.IntN(3) == 0 {
		w.hurt(j, 6+r.IntN(15), i)
	}
	if r.IntN(800) == 0 && w.hurt(i, 15+r.IntN(40), -1) {
		return // b died and respawned in its slot
	}
	if r.IntN(40) == 0 {
		w.pickup(b)
	}
	if r.IntN(60) == 0 {
		w.use(b)
	}
}

// errBadGoal refuses a steer RPC whose goal is not a pair of numbers: a
// client's arguments are its own, NaN and infinities included, and NaN
// passes through min and max.
var errBadGoal = errors.New("steer: the goal's x and y must be finite")

// steer puts the bot of slot i, if c owns it, under c's control: it walks
// to (x, y), clamped to the arena.
func (w *world) steer(c *replica.Conn, id state.ID, x, y float32) error {
	if !finite(x) || !finite(y) {
		return errBadGoal
	}
	i, ok := w.byID[id]
	if !ok || w.slots[i].owner != c {
		return nil
	}
	sl := &w.slots[i]
	sl.goalX = max(0, min(worldSize, float64(x)))
	sl.goalY = max(0, min(worldSize, float64(y)))
	sl.steered = steerTicks
	return nil
}

// finite reports whether v is neither NaN nor infinite.
func finite(v float32) bool { return !math.IsNaN(float64(v)) && !math.IsInf(float64(v), 0) }

// walk moves the bot of slot i straight to its goal at twice its speed,
// and keeps it there.
func (w *world) walk(i int) {
	sl := &w.slots[i]
	b := sl.b
	x, y := float64(b.X()), float64(b.Y())
	dx, dy := sl.goalX-x, sl.goalY-y
	d := math.Hypot(dx, dy)
	if d < 0.5 {
		return
	}
	h := math.Atan2(dy, dx)
	if h < 0 {
		h += 2 * math.Pi
	}
	step := min(d, 2*sl.speed)
	b.SetX(float32(x + dx/d*step))
	b.SetY(float32(y + dy/d*step))
	b.SetHeading(float32(h))
	b.SetMode(modeWander)
}

// move turns bot i, towards its target if it has one, and moves it,
// bouncing off the walls.
func (w *world) move(i int) {
	sl := &w.slots[i]
	b := sl.b
	x, y, h := float64(b.X()), float64(b.Y()), float64(b.Heading())
	mode := modeWander
	if j, ok := w.target(b); ok {
		tb := w.slots[j].b
		tx, ty := float64(tb.X()), float64(tb.Y())
		if math.Hypot(tx-x, ty-y) < holdRange {
			b.SetMode(modeChase)
			return
		}
		turn := math.Remainder(math.Atan2(ty-y, tx-x)-h, 2*math.Pi)
		h += max(-0.25, min(0.25, turn))
		mode = modeChase
	} else {
		h += (w.rng.Float64() - 0.5) * 0.4
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
func (w *world) retarget(i int) {
	b := w.slots[i].b
	best, bestD := -1, math.Inf(1)
	for range 6 {
		j := w.rng.IntN(len(w.slots))
		if j == i {
			continue
		}
		if d := dist(b, w.slots[j].b); d < bestD {
			best, bestD = j, d
		}
	}
	if best >= 0 {
		b.SetTarget(replica.Ref(w.slots[best].b.ID()))
		w.stats.Retargets++
	}
}

// hurt deals dmg to bot j on behalf of bot by (−1: a hazard) and reports
// whether it died.
func (w *world) hurt(j, dmg, by int) bool {
	b := w.slots[j].b
	hp := int(b.Hp()) - dmg
	if hp > 0 {
		b.SetHp(int16(hp))
		return false
	}
	if by >= 0 {
		k := w.slots[by].b
		k.SetScore(k.Score() + 10 + 5*int32(b.Bounty()))
		k.SetBounty(min(k.Bounty()+1, maxBounty))
		w.pickup(k) // loot
		w.stats.Kills++
	}
	w.kill(j)
	return true
}

// kill destroys bot j and respawns a fresh one in its slot. A player's bot
// keeps its score; its inventory and bounty are lost.
func (w *world) kill(j int) {
	old := w.slots[j].b
	id, score := old.ID(), old.Score()
	w.tr.Destroy(old.Entity())
	delete(w.byID, id)
	w.stats.Destroyed++
	w.cleanup = true
	if w.slots[j].owner == nil {
		score = 0
	}
	if err := w.spawn(j, score); err != nil {
		// The class is in the tracker's schema, and a bot's owner has not
		// left: step removes the leavers' bots first. Cannot happen.
		panic(err)
	}
}

// spawn puts a new bot at full health somewhere in the arena into slot j,
// owned by the slot's owner.
func (w *world) spawn(j int, score int32) error {
	sl := &w.slots[j]
	b, err := SpawnBot(w.tr)
	if err != nil {
		return err
	}
	r := w.rng
	b.SetX(float32(r.Float64() * worldSize))
	b.SetY(float32(r.Float64() * worldSize))
	b.SetHeading(float32(r.Float64() * 2 * math.Pi))
	b.SetHp(maxHP)
	b.SetName(sl.name)
	b.SetScore(score)
	if w.space != nil {
		if err := w.srv.SetSpace(b.Entity(), w.space); err != nil {
			return err
		}
	}
	if sl.owner != nil {
		w.srv.SetOwner(b.Entity(), sl.owner)
		if w.space != nil {
			// A client views the arena from its bot. The server follows
			// the first bot it is given by itself, but a respawn is given
			// in the tick the old bot dies, while the client still
			// follows that one: follow the new bot explicitly.
			if err := w.srv.Follow(sl.owner, b.Entity()); err != nil {
				return err
			}
		}
	}
	sl.b = b
	sl.speed = 1 + 2*r.Float64()
	sl.rest = 0
	w.byID[b.ID()] = j
	w.stats.Spawned++
	return nil
}

// pickup gives b one item of a random kind: it stacks onto an item of the
// same kind, or takes a new slot, dropping an item if the bag is full.
func (w *world) pickup(b Bot) {
	kind := uint8(1 + w.rng.IntN(itemKinds))
	inv := b.Inv()
	var first uint32
	for k, it := range inv.All() {
		if first == 0 {
			first = k
		}
		if it.Kind() == kind {
			if n := it.Count(); n < maxCount {
				it.SetCount(n + 1)
				w.stats.BagUpdates++
			}
			return
		}
	}
	if inv.Len() >= bagCap {
		inv.Remove(first) // drop the oldest stack
		w.stats.BagRemoves++
	}
	w.nextItem++
	it := NewItem()
	it.SetKind(kind)
	it.SetCount(1)
	inv.Add(w.nextItem, it)
	w.stats.BagAdds++
}

// use consumes one item of a random stack of b's; a medkit heals.
func (w *world) use(b Bot) {
	inv := b.Inv()
	if inv.Len() == 0 {
		return
	}
	n := w.rng.IntN(inv.Len())
	for k, it := range inv.All() {
		if n--; n >= 0 {
			continue
		}
		if it.Kind() == 1 {
			b.SetHp(min(b.Hp()+25, maxHP))
		}
		if c := it.Count(); c > 1 {
			it.SetCount(c - 1)
			w.stats.BagUpdates++
		} else {
			inv.Remove(k)
			w.stats.BagRemoves++
		}
		return
	}
}
