// Package w2 implements workload W2 "zone", the deterministic replication
// benchmark of an MMO zone with interest management: 5000 entities, of which
// the first 500 are players, wander a 2000×2000 world; each player is a
// client that sees the entities within their visibility radius of its
// avatar, the owner-only fields (gold, inventory) of its own avatar, and the
// near-only fields (gear, emote) of the players close to it.
//
// The generator is a bit-exact port of the JavaScript reference generator
// w2.mjs: the mulberry32 PRNG and the partial Fisher–Yates sampling are W1's
// (package w1, uint32 arithmetic), every intermediate value is computed in
// float64 exactly as JavaScript does, and values are rounded to float32 only
// where the reference stores them into a Float32Array. Products that feed an
// addition are wrapped in explicit float64 conversions so that the compiler
// cannot fuse them into FMA instructions on architectures that have them,
// which would change results. Visibility distances are computed the same way,
// in float64 from the float32 fields, and compared after the square root as
// the reference does.
package w2

import (
	"fmt"
	"math"
	"strconv"

	"github.com/replicago/replica/internal/workload/w1"
)

// Config holds the W2 parameters.
type Config struct {
	N          int     // number of entities; ids 0..P-1 are players, the rest NPCs
	P          int     // number of players (= clients; client c owns and views from entity c)
	W          float64 // the world is [0, W) × [0, W)
	MoveN      int     // entities that move per tick
	StepMax    float64 // maximum |dx|, |dy| per move
	Turn       float64 // maximum |dangle| per move, in radians
	HPN        int     // entities whose hp changes per tick
	InvN       int     // players with one inventory item's count changed per tick
	GoldN      int     // players whose gold changes per tick
	GearN      int     // players whose armor changes per tick
	EmoteN     int     // players whose emote changes per tick
	InvSize    int     // inventory items per player, keys 1..InvSize
	Radius     float64 // visibility radius of an ordinary entity
	BossRadius float64 // visibility radius of a boss: an NPC whose id % 100 == 0
	NearLOD    float64 // gear and emote are seen only within this distance (and by the owner)
	Seed       uint32  // PRNG seed
}

// DefaultConfig returns the standard W2 parameters.
func DefaultConfig() Config {
	return Config{
		N:          5000,
		P:          500,
		W:          2000,
		MoveN:      1000,
		StepMax:    4,
		Turn:       0.2,
		HPN:        100,
		InvN:       50,
		GoldN:      25,
		GearN:      5,
		EmoteN:     10,
		InvSize:    40,
		Radius:     100,
		BossRadius: 300,
		NearLOD:    50,
		Seed:       3,
	}
}

// Item is one inventory item of a player.
type Item struct {
	Kind  uint16
	Count int16
}

// Gear is a player's gear, a near-LOD field.
type Gear struct {
	Helm, Armor, Weapon uint16
}

// InvChange identifies the inventory item whose count a Step set: the item
// with key Key (1..InvSize) of player Player, that is Inv[Player][Key-1].
type InvChange struct {
	Player, Key int
}

// Changes lists what one Step set, by kind of change, each list in the order
// the reference applies the changes. Within a list an id appears at most
// once (the samples draw distinct ids), but an id may appear in several
// lists. A field may have been set to the value it already held (a move
// clamped at the world's edge, an hp drawn equal to the old one, and so on).
type Changes struct {
	Moved []int       // entities whose x, y and angle were set
	HP    []int       // entities whose hp was set
	Inv   []InvChange // inventory items whose count was set
	Gold  []int       // players whose gold was set
	Armor []int       // players whose gear's armor was set
	Emote []int       // players whose emote was set
}

// World is the W2 state. The exported slices may be read freely; they must
// not be modified if the generator is to stay in sync with the reference.
//
// X, Y, Angle, HP, Level and Name are indexed by entity id (0..N-1) and seen
// by every client that sees the entity. Gold, Inv, Gear and Emote are
// indexed by player id (0..P-1): client c sees the gold and inventory of
// player c only (owner-only fields), and the gear and emote of the players p
// for which SeesNear(c, p) holds (near-LOD fields).
type World struct {
	X, Y, Angle []float32
	HP          []int16
	Level       []uint8
	Name        []string // "player-<id>" or "npc-<id>"; never changes

	Gold  []int32
	Inv   [][]Item // Inv[p][k-1] is the item with key k, for k = 1..InvSize
	Gear  []Gear
	Emote []uint8

	Tick int // number of completed Steps

	cfg   Config
	r     w1.Rand
	perm  []int32 // persistent permutation over all entities
	pperm []int32 // persistent permutation over the players
	maxXY float64 // W - 0.001, the upper clamp bound for x and y
	ch    Changes // reused result buffers of Step
	invp  []int   // reused buffer of Step: the players sampled for Changes.Inv
}

// NewWorld creates the initial W2 state for cfg. It panics if the
// configuration would make the reference generator index out of range
// (P outside [0, N], a per-tick count larger than the population it samples
// from, or inventory changes with no inventory).
func NewWorld(cfg Config) *World {
	n, np := cfg.N, cfg.P
	if n < 0 || np < 0 || np > n {
		panic(fmt.Sprintf("w2: N=%d, P=%d, want 0 <= P <= N", n, np))
	}
	for _, c := range []struct {
		name   string
		k, max int
	}{
		{"MoveN", cfg.MoveN, n}, {"HPN", cfg.HPN, n},
		{"InvN", cfg.InvN, np}, {"GoldN", cfg.GoldN, np}, {"GearN", cfg.GearN, np}, {"EmoteN", cfg.EmoteN, np},
	} {
		if c.k < 0 || c.k > c.max {
			panic(fmt.Sprintf("w2: %s=%d, want 0..%d", c.name, c.k, c.max))
		}
	}
	if cfg.InvSize < 0 || cfg.InvSize == 0 && cfg.InvN > 0 {
		panic(fmt.Sprintf("w2: InvSize=%d with InvN=%d", cfg.InvSize, cfg.InvN))
	}
	w := &World{
		X:     make([]float32, n),
		Y:     make([]float32, n),
		Angle: make([]float32, n),
		HP:    make([]int16, n),
		Level: make([]uint8, n),
		Name:  make([]string, n),
		Gold:  make([]int32, np),
		Inv:   make([][]Item, np),
		Gear:  make([]Gear, np),
		Emote: make([]uint8, np),
		cfg:   cfg,
		r:     *w1.NewRand(cfg.Seed),
		perm:  make([]int32, n),
		pperm: make([]int32, np),
		maxXY: cfg.W - 0.001,
		invp:  make([]int, 0, cfg.InvN),
		ch: Changes{
			Moved: make([]int, 0, cfg.MoveN),
			HP:    make([]int, 0, cfg.HPN),
			Inv:   make([]InvChange, 0, cfg.InvN),
			Gold:  make([]int, 0, cfg.GoldN),
			Armor: make([]int, 0, cfg.GearN),
			Emote: make([]int, 0, cfg.EmoteN),
		},
	}
	for i := 0; i < n; i++ {
		w.X[i] = float32(w.r.Float64() * cfg.W)
		w.Y[i] = float32(w.r.Float64() * cfg.W)
		w.Angle[i] = float32(float64(w.r.Float64()*2) * math.Pi)
		w.HP[i] = 100
		w.Level[i] = uint8(1 + math.Floor(w.r.Float64()*60))
		if i < np {
			w.Name[i] = "player-" + strconv.Itoa(i)
		} else {
			w.Name[i] = "npc-" + strconv.Itoa(i)
		}
	}
	items := make([]Item, np*cfg.InvSize)
	for p := 0; p < np; p++ {
		w.Gold[p] = 1000
		w.Gear[p].Helm = uint16(math.Floor(w.r.Float64() * 1000))
		w.Gear[p].Armor = uint16(math.Floor(w.r.Float64() * 1000))
		w.Gear[p].Weapon = uint16(math.Floor(w.r.Float64() * 1000))
		inv := items[p*cfg.InvSize : (p+1)*cfg.InvSize : (p+1)*cfg.InvSize]
		for k := range inv {
			inv[k].Kind = uint16(1 + math.Floor(w.r.Float64()*500))
			inv[k].Count = int16(1 + math.Floor(w.r.Float64()*99))
		}
		w.Inv[p] = inv
	}
	for i := range w.perm {
		w.perm[i] = int32(i)
	}
	for i := range w.pperm {
		w.pperm[i] = int32(i)
	}
	return w
}

// Step advances the world by one tick, applying the reference's changes in
// its order (moves, hp, inventory, gold, armor, emote, each over a fresh
// sample of the persistent permutations), and returns what it set.
//
// The returned lists are backed by buffers owned by the World and reused by
// every call: they are only valid until the next call to Step, and must be
// copied if they are needed longer. Step does not allocate.
func (w *World) Step() Changes {
	cfg := &w.cfg
	ch := &w.ch

	ch.Moved = w1.AppendSample(ch.Moved[:0], &w.r, w.perm, cfg.MoveN)
	for _, id := range ch.Moved {
		w.X[id], w.Y[id], w.Angle[id] = w1.Move(&w.r, w.X[id], w.Y[id], w.Angle[id], cfg.StepMax, cfg.Turn, w.maxXY)
	}

	ch.HP = w1.AppendSample(ch.HP[:0], &w.r, w.perm, cfg.HPN)
	for _, id := range ch.HP {
		w.HP[id] = int16(math.Floor(w.r.Float64() * 101))
	}

	w.invp = w1.AppendSample(w.invp[:0], &w.r, w.pperm, cfg.InvN)
	ch.Inv = ch.Inv[:0]
	for _, p := range w.invp {
		key := 1 + int(math.Floor(w.r.Float64()*float64(cfg.InvSize)))
		w.Inv[p][key-1].Count = int16(1 + math.Floor(w.r.Float64()*99))
		ch.Inv = append(ch.Inv, InvChange{Player: p, Key: key})
	}

	ch.Gold = w1.AppendSample(ch.Gold[:0], &w.r, w.pperm, cfg.GoldN)
	for _, p := range ch.Gold {
		// int32 addition wraps as the reference's Int32Array store does.
		w.Gold[p] += int32(math.Floor(w.r.Float64() * 100))
	}

	ch.Armor = w1.AppendSample(ch.Armor[:0], &w.r, w.pperm, cfg.GearN)
	for _, p := range ch.Armor {
		w.Gear[p].Armor = uint16(math.Floor(w.r.Float64() * 1000))
	}

	ch.Emote = w1.AppendSample(ch.Emote[:0], &w.r, w.pperm, cfg.EmoteN)
	for _, p := range ch.Emote {
		w.Emote[p] = uint8(math.Floor(w.r.Float64() * 16))
	}

	w.Tick++
	return *ch
}

// IsBoss reports whether entity e is a boss: an NPC whose id is a multiple
// of 100.
func (w *World) IsBoss(e int) bool { return e >= w.cfg.P && e%100 == 0 }

// Radius returns entity e's visibility radius: Config.BossRadius for a boss,
// Config.Radius otherwise.
func (w *World) Radius(e int) float64 {
	if w.IsBoss(e) {
		return w.cfg.BossRadius
	}
	return w.cfg.Radius
}

// Dist returns the Euclidean distance from client c's avatar (entity c) to
// entity e, computed in float64 from the float32 fields as the reference
// does.
func (w *World) Dist(c, e int) float64 {
	dx := float64(w.X[e]) - float64(w.X[c])
	dy := float64(w.Y[e]) - float64(w.Y[c])
	// The explicit conversions of the products prevent FMA fusion.
	return math.Sqrt(float64(dx*dx) + float64(dy*dy))
}

// Sees reports whether client c sees entity e at the current tick: e is c's
// own avatar, or Dist(c, e) <= Radius(e).
func (w *World) Sees(c, e int) bool { return e == c || w.Dist(c, e) <= w.Radius(e) }

// SeesNear reports whether client c sees the near-LOD fields (gear, emote)
// of player e at the current tick: c owns e, or Dist(c, e) <= Config.NearLOD.
// This is the reference's near(); with the default configuration it implies
// Sees(c, e) for every player e.
func (w *World) SeesNear(c, e int) bool { return e == c || w.Dist(c, e) <= w.cfg.NearLOD }

// View is what one client may see at one tick.
type View struct {
	// Visible lists the entities the client sees, in increasing id order;
	// it includes the client's own avatar.
	Visible []int
	// Near lists the players among Visible whose near-LOD fields (gear,
	// emote) the client sees, in increasing id order; it includes the
	// client's own avatar.
	Near []int
}

// AppendView appends to v.Visible and v.Near what client c sees at the
// current tick, by brute force over all N entities with Sees and SeesNear.
func (w *World) AppendView(v *View, c int) {
	for e := 0; e < w.cfg.N; e++ {
		if w.Sees(c, e) {
			v.Visible = append(v.Visible, e)
			if e < w.cfg.P && w.SeesNear(c, e) {
				v.Near = append(v.Near, e)
			}
		}
	}
}

// Views is the reference interest computation: it returns what every client
// 0..P-1 sees at the current tick, by brute force (O(P × N) distance
// tests). It reuses dst and the lists of its elements, and returns dst
// resized to P; it does not allocate once the lists have grown large enough.
// An interest manager must produce exactly these sets.
func (w *World) Views(dst []View) []View {
	if cap(dst) < w.cfg.P {
		dst = append(dst[:cap(dst)], make([]View, w.cfg.P-cap(dst))...)
	}
	dst = dst[:w.cfg.P]
	for c := range dst {
		v := &dst[c]
		v.Visible, v.Near = v.Visible[:0], v.Near[:0]
		w.AppendView(v, c)
	}
	return dst
}
