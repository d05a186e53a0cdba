// Package v1 is version 1 of the schemas the codec property test runs on.
// Its classes use every value kind, container, visibility and quantization
// form; package v2 evolves them compatibly.
package v1

//go:generate go run github.com/replicago/replica/cmd/replicagen -ts

import "github.com/replicago/replica"

// team is a named basic type: accessors use it.
type team uint8

// More named types, of other underlying kinds.
type (
	label  string
	meters float32
	flag   bool
	big    int64
)

// hero is a class with one field of every kind.
//
//replica:class id=1
type hero struct {
	alive   bool
	i8      int8  `replica:"vis=others"`
	i16     int16 `replica:"vis=owner,life=persist"`
	i32     int32 `replica:"life=scene"`
	i64     int64 `replica:"vis=server,life=persist"`
	u8      uint8
	u16     uint16 `replica:"chan=unreliable"`
	u32     uint32 `replica:"life=process"`
	u64     uint64
	f32     float32 `replica:"chan=unreliable"`
	f64     float64 `replica:"vis=owner"`
	qb      float32 `replica:"quant=0.25,min=-100,max=100"`
	qbits   float64 `replica:"bits=10,min=0,max=1,vis=others"`
	qu      float32 `replica:"quant=1/64,chan=unreliable"`
	qu64    float64 `replica:"quant=0.001"`
	name    string
	blob    []byte `replica:"vis=owner,life=process"`
	target  replica.Ref
	side    team
	body    body
	scores  []int32
	path    []float32 `replica:"quant=0.5"`
	angles  []float32 `replica:"bits=8,min=0,max=6.375,vis=others"`
	tags    []string  `replica:"vis=owner"`
	blobs   [][]byte
	buffs   []buff
	cds     map[string]float32 `replica:"quant=1/8"`
	byLevel map[int16]string
	counts  map[uint64]int64 `replica:"vis=server"`
	byName  map[string]buff  `replica:"vis=others"`
	inv     map[uint32]item  `replica:"bag,vis=owner"`
	dropped int16
	old     int32   `replica:"vis=owner"`
	qwide   float64 `replica:"bits=32,min=-1,max=1"`
	sides   []team
	teams   map[team]team
	bins    map[int32][]byte `replica:"vis=owner"`
	flags   map[uint16]bool  `replica:"vis=others"`
	zones   map[int8]float64 `replica:"bits=12,min=-1,max=1"`
	ws      []float64
	toggles []bool
	refs    map[string]replica.Ref
	stash   map[int16]item
	loadout []item `replica:"vis=others"`
}

// missile is a second class.
//
//replica:class id=2
type missile struct {
	shooter replica.Ref
	pos     vec `replica:"vis=others"`
	vel     vec
	ttl     float32 `replica:"bits=6,min=0,max=63"`
	hits    map[int64]uint8
	effects map[int8]item `replica:"bag"`
	secret  string        `replica:"vis=server"`
	alias   label
	dist    meters `replica:"quant=1/8"`
	lit     flag
	credits big           `replica:"vis=owner"`
	crew    map[team]buff `replica:"bag"`
	labels  map[label]meters
	dists   []meters `replica:"bits=8,min=0,max=100"`
}

// body is nested level 1.
type body struct {
	pos   vec
	stats stats  `replica:"vis=owner"`
	mark  uint16 `replica:"vis=others"`
}

// stats is nested level 2.
type stats struct {
	str, dex int16
	hist     []int8
	resist   resist
	kv       map[uint8]int32
	gear     map[uint16]buff `replica:"bag"`
}

// resist is nested level 3.
type resist struct {
	fire uint8
	ice  uint8  `replica:"vis=others"`
	gm   string `replica:"vis=server"`
}

type vec struct {
	x, y float32 `replica:"quant=1/16"`
	z    float64
}

type buff struct {
	kind  uint16
	until int64
	note  string `replica:"vis=server"`
}

// item is a bag item with a nested struct, a list, a map and a bag.
type item struct {
	kind  uint16
	count int32
	pos   vec
	tags  []string
	mods  map[string]int16
	sub   map[uint8]buff `replica:"bag"`
}
