// Package game declares the quickstart's replicated classes. replicagen
// turns the unexported specs into the exported types of game_replica.go.
package game

import "github.com/replicago/replica"

//go:generate go run github.com/replicago/replica/cmd/replicagen

// player is a controllable character.
//
//replica:class
type player struct {
	x, y   float32 `replica:"quant=1/64,min=0,max=4096"`
	hp     int16
	gold   int32 `replica:"vis=owner,life=persist"` // only its owner sees it
	name   string
	target replica.Ref
	inv    map[uint32]item `replica:"bag,vis=owner"`
}

// item is a stack of one kind of thing in a player's inventory.
type item struct {
	kind  uint8
	count int16
}

// fire is called by a player's client to shoot at a point.
//
//replica:rpc player client
type fire struct {
	x, y float32 `replica:"quant=1/64"`
}
