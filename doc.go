// Package replica is a framework for server-authoritative state
// replication in multiplayer games.
//
// Game teams declare entity classes once, as Go structs with replica tags,
// and run replicagen to generate typed accessors. The server mutates
// entities through generated setters; every change is recorded in a tick
// changeset, encoded once per visibility partition and applied atomically by
// clients, which then fire callbacks.
//
// # Layout
//
// The packages follow the data flow of a tick:
//
//   - schema: declared classes, field flags, stable IDs, slot layout and the
//     schema descriptor.
//   - gen and cmd/replicagen: the generator that turns spec structs into
//     typed entity types.
//   - state: entity records, change tracking and the tick changeset.
//   - codec: full-state and delta encoding of a changeset per visibility
//     partition, and the decoder that applies it atomically.
//   - client: the client-side replica with callbacks.
//   - wire: the bit-level primitives every encoder and decoder uses.
//
// docs/protocol.md specifies the wire format.
package replica
