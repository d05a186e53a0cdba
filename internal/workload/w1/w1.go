// Package w1 implements workload W1 "arena", the deterministic replication
// benchmark in which 1000 entities with float32 position and angle, an int16
// hp and a fixed name wander a 1000×1000 world, 10% of them moving and 1%
// changing hp each tick, observed by broadcast or area-of-interest clients.
//
// The generator is a bit-exact port of the JavaScript reference generator:
// the mulberry32 PRNG is reproduced with uint32 arithmetic, every
// intermediate value is computed in float64 exactly as JavaScript does, and
// values are rounded to float32 only where the reference stores them into a
// Float32Array. Products that feed an addition are wrapped in explicit
// float64 conversions so that the compiler cannot fuse them into FMA
// instructions on architectures that have them, which would change results.
//
// Workload W2 (package w2) uses the same PRNG, sampling and move, which this
// package exports as Rand, AppendSample and Move.
package w1

import (
	"fmt"
	"math"
	"strconv"
)

// Rand is the mulberry32 generator used by W1.
// The zero value is a generator with seed 0.
type Rand struct{ a uint32 }

// NewRand returns a mulberry32 generator with the given seed.
func NewRand(seed uint32) *Rand { return &Rand{a: seed} }

// Uint32 advances the generator and returns the next 32-bit output.
func (r *Rand) Uint32() uint32 {
	r.a += 0x6D2B79F5
	t := r.a
	t = (t ^ t>>15) * (t | 1)
	t ^= t + (t^t>>7)*(t|61)
	return t ^ t>>14
}

// Float64 advances the generator and returns a value in [0, 1), namely the
// next Uint32 output divided by 2^32 (exact in float64). The explicit
// conversion keeps the compiler from fusing the scaling into a caller's
// arithmetic; that would be harmless (every step is exact), but this way the
// package compiles to no FMA instructions on any architecture.
func (r *Rand) Float64() float64 { return float64(float64(r.Uint32()) / 4294967296) }

// Config holds the W1 parameters.
type Config struct {
	N          int     // number of entities
	W          float64 // the world is [0, W) × [0, W)
	MoveFrac   float64 // fraction of entities that move per tick
	HPFrac     float64 // fraction of entities whose hp changes per tick
	StepMax    float64 // maximum |dx|, |dy| per move
	Turn       float64 // maximum |dangle| per move, in radians
	Seed       uint32  // world PRNG seed
	ClientSeed uint32  // PRNG seed for AOI client centres
	AOIHalf    float64 // AOI box half-size (square, inclusive bounds)
}

// DefaultConfig returns the standard W1 parameters.
func DefaultConfig() Config {
	return Config{
		N:          1000,
		W:          1000,
		MoveFrac:   0.10,
		HPFrac:     0.01,
		StepMax:    5,
		Turn:       0.2,
		Seed:       1,
		ClientSeed: 2,
		AOIHalf:    150,
	}
}

// twoPi is 2*Math.PI as a float64 and twoPi32 is Math.fround(2*Math.PI).
// twoPi32 is converted at run time from the float64 value, as JavaScript
// does, rather than from the exact constant.
var (
	twoPi   = 2 * math.Pi
	twoPi32 = float32(twoPi)
)

// World is the W1 entity state. X, Y, Angle, HP and Name are indexed by
// entity id and may be read freely; they must not be modified if the
// generator is to stay in sync with the reference.
type World struct {
	X, Y, Angle []float32
	HP          []int16
	Name        []string
	Tick        int // number of completed Steps

	cfg       Config
	r         Rand
	perm      []int32 // persistent permutation for Sample
	maxXY     float64 // W - 0.001, the upper clamp bound for x and y
	nMoved    int     // Math.round(N * MoveFrac)
	nHP       int     // Math.round(N * HPFrac)
	moved     []int   // reused result buffer of Step
	hpChanged []int   // reused result buffer of Step
}

// jsRound rounds like JavaScript's Math.round: to the nearest integer, with
// ties going towards +Inf. For the non-negative counts used here it agrees
// with math.Round.
func jsRound(x float64) float64 {
	f := math.Floor(x)
	if x-f >= 0.5 {
		return f + 1
	}
	return f
}

// New creates the initial W1 state for cfg. It panics if the configuration
// would make the reference generator index out of range (negative N, or a
// per-tick count outside [0, N]).
func New(cfg Config) *World {
	n := cfg.N
	if n < 0 {
		panic("w1: negative N")
	}
	w := &World{
		X:     make([]float32, n),
		Y:     make([]float32, n),
		Angle: make([]float32, n),
		HP:    make([]int16, n),
		Name:  make([]string, n),
		cfg:   cfg,
		r:     Rand{a: cfg.Seed},
		perm:  make([]int32, n),
		maxXY: cfg.W - 0.001,
	}
	w.nMoved = count(n, cfg.MoveFrac, "MoveFrac")
	w.nHP = count(n, cfg.HPFrac, "HPFrac")
	w.moved = make([]int, 0, w.nMoved)
	w.hpChanged = make([]int, 0, w.nHP)
	for i := 0; i < n; i++ {
		w.X[i] = float32(w.r.Float64() * cfg.W)
		w.Y[i] = float32(w.r.Float64() * cfg.W)
		w.Angle[i] = float32(float64(w.r.Float64()*2) * math.Pi)
		w.HP[i] = 100
		w.Name[i] = "entity-" + strconv.Itoa(i)
	}
	for i := range w.perm {
		w.perm[i] = int32(i)
	}
	return w
}

func count(n int, frac float64, name string) int {
	// The conversion rounds the product as JavaScript does (it stops the
	// compiler from fusing it with the subtraction inside jsRound).
	k := jsRound(float64(float64(n) * frac))
	if !(k >= 0 && k <= float64(n)) {
		panic(fmt.Sprintf("w1: %s=%v gives %v entities per tick, want 0..%d", name, frac, k, n))
	}
	return int(k)
}

// Sample draws k distinct entity ids by a partial Fisher–Yates shuffle of
// the world's persistent permutation, advancing the world's PRNG exactly as
// the reference sample(k) does. It returns a newly allocated slice; Step uses
// AppendSample, which need not allocate. It panics if k is outside [0, N].
func (w *World) Sample(k int) []int {
	if k < 0 || k > w.cfg.N {
		panic(fmt.Sprintf("w1: Sample(%d) with N=%d", k, w.cfg.N))
	}
	return AppendSample(make([]int, 0, k), &w.r, w.perm, k)
}

// AppendSample draws k distinct elements of perm by a partial Fisher–Yates
// shuffle of the persistent permutation perm, advancing r exactly as the
// reference sample(k) does (one draw per element), appends them to dst in
// the order drawn and returns the extended slice. perm is permuted in place;
// the reference keeps it from call to call. k must be in [0, len(perm)].
// AppendSample does not allocate if dst has room for k more elements.
func AppendSample(dst []int, r *Rand, perm []int32, k int) []int {
	n := len(perm)
	for j := 0; j < k; j++ {
		i := j + int(math.Floor(r.Float64()*float64(n-j)))
		perm[j], perm[i] = perm[i], perm[j]
		dst = append(dst, int(perm[j]))
	}
	return dst
}

// Step advances the world by one tick and returns the ids that moved (x, y
// and angle changed) and the ids whose hp changed, in the order the
// reference generator produces them.
//
// The returned slices are backed by buffers owned by the World and reused
// by every call: they are only valid until the next call to Step, and must
// be copied if they are needed longer. Step does not allocate.
func (w *World) Step() (moved, hpChanged []int) {
	w.moved = AppendSample(w.moved[:0], &w.r, w.perm, w.nMoved)
	s, tu, maxXY := w.cfg.StepMax, w.cfg.Turn, w.maxXY
	for _, id := range w.moved {
		w.X[id], w.Y[id], w.Angle[id] = Move(&w.r, w.X[id], w.Y[id], w.Angle[id], s, tu, maxXY)
	}
	w.hpChanged = AppendSample(w.hpChanged[:0], &w.r, w.perm, w.nHP)
	for _, id := range w.hpChanged {
		w.HP[id] = int16(math.Floor(w.r.Float64() * 101))
	}
	w.Tick++
	return w.moved, w.hpChanged
}

// Move performs one reference move of an entity at (x, y, angle) and
// returns its new x, y and angle. It draws three values from r, for x, y and
// angle in that order: x += (2r()−1)·stepMax clamped to [0, maxXY], likewise
// y, and angle += (2r()−1)·turn wrapped once into [0, 2π), all in float64,
// then rounds each to float32 as the reference's Float32Array stores do. An
// angle that rounds up to float32(2π) becomes 0 (the reference's float32
// rounding guard).
func Move(r *Rand, x, y, angle float32, stepMax, turn, maxXY float64) (nx, ny, na float32) {
	// The explicit float64 conversions of the products prevent FMA fusion.
	x64 := float64(x) + float64(float64(r.Float64()*2-1)*stepMax)
	x64 = math.Min(math.Max(x64, 0), maxXY)
	y64 := float64(y) + float64(float64(r.Float64()*2-1)*stepMax)
	y64 = math.Min(math.Max(y64, 0), maxXY)
	a64 := float64(angle) + float64(float64(r.Float64()*2-1)*turn)
	if a64 < 0 {
		a64 += twoPi
	} else if a64 >= twoPi {
		a64 -= twoPi
	}
	na = float32(a64)
	if na >= twoPi32 { // float32 rounding guard
		na = 0
	}
	return float32(x64), float32(y64), na
}

// Client is an area-of-interest client: it sees the entities whose x and
// y lie within Half of (CX, CY), bounds inclusive.
type Client struct{ CX, CY, Half float64 }

// Clients returns c AOI clients whose centres are drawn, in order, from a
// fresh generator seeded with Config.ClientSeed (independent of the world's
// PRNG, so the result does not depend on the tick).
func (w *World) Clients(c int) []Client {
	r := Rand{a: w.cfg.ClientSeed}
	out := make([]Client, c)
	for i := range out {
		out[i].CX = r.Float64() * w.cfg.W
		out[i].CY = r.Float64() * w.cfg.W
		out[i].Half = w.cfg.AOIHalf
	}
	return out
}

// Visible reports whether entity id is inside cl's area of interest,
// comparing in float64 as the reference does.
func (w *World) Visible(cl Client, id int) bool {
	return math.Abs(float64(w.X[id])-cl.CX) <= cl.Half &&
		math.Abs(float64(w.Y[id])-cl.CY) <= cl.Half
}

// AppendVisible appends the ids visible to cl, in increasing order, to dst
// and returns the extended slice (a brute-force scan, like the reference
// query).
func (w *World) AppendVisible(dst []int, cl Client) []int {
	for i := 0; i < w.cfg.N; i++ {
		if w.Visible(cl, i) {
			dst = append(dst, i)
		}
	}
	return dst
}
