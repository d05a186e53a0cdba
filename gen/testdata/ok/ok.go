// Package ok is a replicagen fixture that uses every kind, container, flag
// and quantization form.
package ok

import (
	"time"

	"github.com/replicago/replica"
)

// Team is a named basic type: accessors use it.
type Team uint8

// Target is declared as a replica.Ref, so it is a reference too.
type Target replica.Ref

// Score is an alias: accessors keep its name.
type Score = int32

// player is a controllable character.
//
//replica:class
type player struct {
	// alive says whether the player can act.
	alive  bool
	level  int8
	hp     int16 `replica:"vis=owner,life=persist"`
	xp     int32 `replica:"life=persist"`
	gold   int64 `replica:"vis=server,life=persist"`
	mood   uint8
	rank   uint16 `replica:"vis=others"`
	flags  uint32
	uid    uint64  `replica:"id=40,vis=all"`
	angle  float32 `replica:"quant=1/64,chan=unreliable,life=scene"` // angle in radians
	x, y   float32 `replica:"quant=0.25,min=-1024,max=1024,chan=unreliable"`
	speed  float32 `replica:"bits=8,min=0,max=10"`
	weight float64
	height float64 `replica:"quant=0.001"`
	name   string
	avatar []byte `replica:"life=process"`
	target replica.Ref
	aim    Target
	team   Team
	score  Score
	body   body
	buffs  []buff
	path   []float32 `replica:"quant=0.5"`
	tags   []string
	cds    map[string]float32 `replica:"quant=1/8"`
	scores map[Team]int32
	inv    map[uint32]item `replica:"bag,vis=owner"`
	byName map[string]item
	old    int16 `replica:"deprecated"`

	// Not replicated.
	cache   map[int]*time.Time `replica:"-"`
	created time.Time          `replica:"-"`
}

// projectile is a second class with an explicit class ID.
//
//replica:class id=7
type projectile struct {
	owner replica.Ref
	pos   vec `replica:"vis=others"`
	vel   vec
}

// body is nested level 1.
type body struct {
	pos   vec
	stats stats `replica:"vis=owner"`
}

// stats is nested level 2.
type stats struct {
	str, dex int16
	resist   resist
}

// resist is nested level 3.
type resist struct {
	fire, ice uint8
}

type vec struct {
	x, y, z float32 `replica:"quant=1/16"`
}

type buff struct {
	kind  uint16
	until int64
}

// item is a bag item.
type item struct {
	kind  uint16 `replica:"id=2"`
	count uint16 `replica:"id=1"`
	tags  []string
}

// notSpec is an unexported struct no class uses: not a spec.
type notSpec struct {
	n int
}
