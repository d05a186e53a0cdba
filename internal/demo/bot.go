// Package demo is replica's end-to-end demo: an arena of wandering bots on
// an authoritative server, replicated every tick to clients that each own
// one bot.
//
// Server and clients run in one process; network transports arrive with
// the runtime milestone. Everything between the game code and the clients'
// callbacks is the real thing: generated entity types (this file is their
// spec), change tracking in a state.Tracker, per-partition delta encoding
// with codec.Encoder, and per client a client.Replica that decodes each
// tick atomically and runs the generated typed callbacks.
//
// Use [Run] for the timed demo and [New] with [Sim.Step] to drive it tick
// by tick.
package demo

import "github.com/replicago/replica"

//go:generate go run github.com/replicago/replica/cmd/replicagen

// bot is a wandering arena fighter.
//
// Position is quantized to 1/64 unit and heading to 12 bits. Score and
// inventory are the owner's business; bounty (what killing the bot is
// worth) is shown to everyone else; mode is the AI state and never leaves
// the server. target refers to the bot being chased.
//
//replica:class id=1
type bot struct {
	x, y    float32 `replica:"quant=1/64,min=0,max=1000"`
	heading float32 `replica:"bits=12,min=0,max=6.2816513263917"`
	hp      int16
	name    string
	score   int32 `replica:"vis=owner"`
	bounty  int16 `replica:"vis=others"`
	target  replica.Ref
	mode    uint8           `replica:"vis=server"`
	inv     map[uint32]item `replica:"bag,vis=owner"`
}

// item is a stack of one kind of pickup in a bot's inventory.
type item struct {
	kind  uint8
	count int16
}
