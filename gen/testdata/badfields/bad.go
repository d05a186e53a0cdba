// Package badfields is a replicagen fixture with one mistake per field.
package badfields

import (
	"time"

	"github.com/replicago/replica"
)

type Count int

//replica:class
type monster struct {
	ok     int32
	count  int
	arr    [4]float32
	ptr    *vec
	when   time.Time
	key    int32            `replica:"id=1,color=red"`
	vis    int32            `replica:"vis=public"`
	hpq    int16            `replica:"quant=0.5"`
	bits   float32          `replica:"bits=8"`
	bagged map[uint32]int32 `replica:"bag"`
	dup1   int32            `replica:"id=9"`
	dup2   int32            `replica:"id=9"`
	hp     int16
	Hp     int16
	vec
	boss    boss
	grid    [][]int32
	fkey    map[float32]int32
	named   Count
	fn      func()
	any     any
	anon    struct{ a int32 }
	missing Undefined
	ptrs    []*vec
	bagstr  map[string]vec `replica:"bag"`
	listbag []vec          `replica:"bag"`
	Pos     Point
	Vel     Vec
	home    Boss
	bossRef replica.Ref
	_       int32
	dupkey  int32 `replica:"vis=owner,vis=all"`
	novalue int32 `replica:"life"`
	badid   int32 `replica:"id=0"`
	u       uint
	skipped chan int `replica:"-"`
	axis    float32  `replica:"pos=z"`
	buffs   []buff
}

type vec struct {
	x, y float32
}

type buff struct {
	kind  uint8
	until int32 `replica:"life=scene"`
}

type Point struct {
	x, y float32
}

//replica:class
type boss struct {
	hp int32
}
