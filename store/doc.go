// Package store saves the persist fields of entities (those declared
// life=persist) and loads them back: the document codec, the Store
// interface that database adapters implement, and the write-behind
// Writer that a server's tick feeds. docs/persistence.md describes the
// document format, the evolution rules and the stores.
//
// # Documents
//
// A [Document] is one entity's stored state under a game key such as a
// player ID: its class, the tick it was taken at, the hash of the schema
// it was written with, and its data, which a [Codec] encodes. The data is
// self-describing and keyed by the fields' stable IDs, so a document
// written by an older build of the game loads in a newer one: fields
// appended since load at their defaults, fields deprecated or removed
// since are skipped, and a field whose kind changed incompatibly fails
// with an error wrapping [ErrIncompatible]. [AppendJSON] turns a document
// into readable JSON with the names of the descriptor stored beside it,
// without the game's code (`replica-store dump`).
//
// # Stores
//
// A [Store] loads documents by key, writes batches of them atomically (one
// transaction per [Batch]), deletes and scans them. Implementations live
// in adapter packages, so that only what a game uses is compiled in:
// sqlitestore (embedded, the default), pgstore (PostgreSQL) and
// redisstore (Redis). Package storetest is their conformance suite.
//
// # Saving behind the tick
//
// A [Writer] takes, at the end of each tick, the entities whose persist
// fields changed ([Codec.Changed] over the tick's state.Changeset),
// encodes them on the tick goroutine (only what changed, for an entity it
// already holds: a few hundred nanoseconds), and writes them in batches on
// its own goroutine, one transaction per flush, every
// WriterConfig.FlushInterval. The tick never waits on the database: a
// slow or failing one builds a backlog that the Writer retries and
// reports (Writer.Stats, ErrBacklog from End, the log); nothing is
// dropped. [Writer.Flush] and [Writer.Save] return once what was handed
// over is durable, and [Writer.Close] writes everything before it stops.
//
// # Loading at login
//
// [Store.Load] returns the document of a key, or an error wrapping
// [ErrNotFound] for a new player; [Codec.Restore] sets the persist fields
// of a freshly spawned entity from it and leaves the others at their
// defaults.
package store
