// Package state holds replica's entities and records what changes to them:
// the runtime beneath the types replicagen generates.
//
// Game code rarely uses this package directly. It works with generated
// types (Player, its setters and container wrappers), which are small
// handles over an [Entity] or a [Handle] of this package, and meets state
// only where those types meet the runtime: a generated SpawnPlayer takes
// the server's [*Tracker], Player.Entity returns the [*Entity] that
// replica.Server.SetOwner takes, and [ID] is an entity's network ID.
// Packages replica, codec and client are built on it.
//
// # Server side
//
// A [Tracker] owns the server's entities. [Tracker.Spawn] creates an
// entity of a class, [Tracker.Destroy] removes it, [Tracker.Entity] finds
// one by ID. Every write through a generated setter (a [Handle], or a
// [ListHandle], [MapHandle] or [BagHandle] for containers) is recorded in
// the current tick: numeric writes coalesce to the last value, lists record
// operations, maps and bags record per-key changes. [Tracker.Commit] ends
// the tick and returns its [Changeset]: per entity ([Change]), whether it
// was created or destroyed, which leaves changed and, for containers,
// which operations or keys. The changeset is the one input of everything
// that reads a tick (the network encoder of package codec; later
// persistence, history and replays) and stays valid until the next Commit.
// replica.Server commits at every tick: game code on a server never calls
// Commit.
//
// A Tracker refuses writes that its clients would refuse to decode (a
// string or container over [Limits], or nesting too deep); the entity
// keeps its old value and [Tracker.TakeRefusals] reports the refusal.
// replica.Server sets the limits from its Config.ClientLimits.
//
// # Client side
//
// A [Table] is a client's set of entities. It changes only through a
// [Txn], which applies one tick atomically: the codec decoder writes into
// it, [Txn.Commit] keeps the changes and returns the [Event]s callbacks
// report, [Txn.Rollback] undoes them all. Package client wraps a Table in
// its Replica.
//
// # Values
//
// An [Entity] is a [Record] of its class plus its network ID. A record
// stores the values of one struct (an entity, a nested struct inline, a
// list element, a map value or a bag item) in one block of memory, numbers
// packed at their natural width and read back in the 64-bit stored
// representation of docs/protocol.md §4.1 (quantized floats as their
// integer codes). [List], [Map] and [Bag] are the containers, [Value] one
// of their elements or keys.
//
// [ID] is generation<<24 | slot: a slot is reused only after the tick that
// freed it is committed, and each reuse bumps its generation, so a stale
// ID names no entity rather than the wrong one.
//
// Nothing in this package is safe for concurrent use: a Tracker belongs to
// the server's tick goroutine, a Table to the client goroutine that
// applies ticks.
package state
