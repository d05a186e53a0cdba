// Package demo is replica's end-to-end demo: an arena of wandering,
// fighting bots on a replica.Server, replicated every tick to bot clients
// connected over real loopback sockets, half over WebSocket and half over
// QUIC.
//
// The server moves every bot: the NPCs and the one it spawns for each
// client that joins, which that client owns. The clients watch, and call
// their own bot's emote RPC once a second. Each client is a
// client.Conn on a goroutine of its own that applies ticks and counts the
// generated typed callbacks they fire.
//
// By default the bots live in an AOI space (interest management): each
// client views the arena from its own bot and sees only the bots within a
// radius of it. Config.Room puts them all in one room instead, where every
// client sees every bot.
//
// Every second the demo holds every client at the same tick, checks that
// what the server says the client sees (Server.Sees) follows the AOI rule,
// and compares the client's replica with exactly that: the bots it sees
// and no others, as it may see them (owner fields of its own bot only,
// others fields of the other bots only, server-only fields never).
//
// This file is the spec of the generated entity types. Use [Run] for the
// timed demo.
package demo

import "github.com/replicago/replica"

//go:generate go run github.com/replicago/replica/cmd/replicagen -ts

// bot is a wandering arena fighter.
//
// Position is quantized to 1/32 unit, 16 bits over the 2000-unit arena,
// and is what interest management reads (pos=x, pos=y); heading is
// quantized to 12 bits. Score and inventory are the owner's business;
// bounty (what killing the bot is worth) is shown to everyone else; mode is
// the AI state and never leaves the server. target refers to the bot being
// chased.
//
//replica:class id=1
type bot struct {
	x       float32 `replica:"quant=1/32,min=0,max=2000,pos=x"`
	y       float32 `replica:"quant=1/32,min=0,max=2000,pos=y"`
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

// emote is sent by a player's client to make its bot emote; seq numbers
// the client's calls, so tests can check that every call arrives once, in
// order.
//
//replica:rpc bot client
type emote struct {
	seq  uint32
	kind uint8
}

// steer is sent by the client that owns a bot to walk it to (x, y), arena
// units, where it holds for a moment before it wanders again: a browser
// viewer steers its bot with the keyboard or the mouse.
//
//replica:rpc bot client
type steer struct {
	x float32
	y float32
}

// hurt tells a player's client that its bot was hit, and by whom.
//
//replica:rpc bot server
type hurt struct {
	seq    uint32
	damage int16
	by     replica.Ref
}
