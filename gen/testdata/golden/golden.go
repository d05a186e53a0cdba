// Package golden is a replicagen fixture whose generated output is
// committed: TestGenerateGolden compares the generator's output with it
// byte for byte, so every change to the emitted code shows in review.
package golden

import "github.com/replicago/replica"

// Kind is a named basic type.
type Kind uint8

// hero is a class using every kind of accessor.
//
//replica:class id=1
type hero struct {
	alive  bool
	hp     int16   `replica:"vis=owner"`
	gold   int64   `replica:"vis=server,life=persist"`
	angle  float32 `replica:"bits=12,min=0,max=6.2816513263917"`
	x      float32 `replica:"quant=1/64,min=-512,max=512,chan=unreliable"`
	speed  float64
	name   string
	avatar []byte
	target replica.Ref
	kind   Kind
	pos    vec
	path   []vec
	tags   []string
	scores map[string]int32 `replica:"vis=others"`
	inv    map[uint32]item  `replica:"bag,vis=owner"`
	old    int32            `replica:"deprecated"`
}

type vec struct {
	x, y float32
}

// item is an inventory item.
type item struct {
	kind  Kind
	count int16
	pos   vec
}

// fire shoots from the hero's position: an RPC the owning client calls,
// with scalar arguments only.
//
//replica:rpc hero client
type fire struct {
	x, y   float32 `replica:"quant=1/64"`
	weapon Kind
	label  string
	target replica.Ref
}

// hit tells the clients that see a hero that it took damage.
//
//replica:rpc hero server id=5
type hit struct {
	damage int16
	from   replica.Ref
	fx     []byte
}

// aim is an RPC with a nested struct argument: the functions take an Aim.
//
//replica:rpc hero client
type aim struct {
	at    vec
	tags  []string
	power float32 `replica:"bits=8,min=0,max=1"`
}

//replica:rpc hero server
type taunt struct{}
