// Package codec is replica's wire format for state: it encodes a tick's
// changeset, or the full state of a set of entities, into segments, and
// decodes segments into a client's entity table, atomically. The format is
// specified bit for bit in docs/protocol.md, with golden vectors in
// testdata/ that the Go and TypeScript implementations share.
//
// Game code does not use this package: replica.Server encodes every tick
// and package client decodes it. Its types appear in the API in two
// places: [Limits], the decoder limits a client applies and a server
// respects (replica.Config.ClientLimits, client.DialConfig.Limits), and
// [DecodeError], which a rejected tick wraps.
//
// # Encoding
//
// An [Encoder] encodes a [state.Changeset] ([Encoder.Delta]) or entities
// whole ([Encoder.Full]) for one visibility partition, a [Part]: [PartAll]
// carries creates, destroys and the fields everyone sees, [PartOthers] the
// fields everyone but an entity's owner sees, [PartOwner] the fields only
// its owner sees. Each partition is encoded once per tick and its bytes
// shared by every client in its audience. Values are bit-packed: changes
// are grouped by class and set of changed fields, a number in an update
// travels as its delta from its value at the start of the tick, in a U(k)
// code whose k the encoder picks per group (package wire), and a container
// travels as operations or whole, whichever is smaller. An
// Encoder reuses its buffers and allocates nothing in steady state.
//
// When each client sees its own subset of the entities, a [Batch] encodes
// a tick's changes ([Encoder.DeltaBatch]) or full states
// ([Encoder.FullBatch]) once, as one piece per entity, and an [Assembler]
// builds each client's segments from the pieces of the entities it sees,
// at a cost proportional to those entities rather than to the tick.
//
// # Decoding
//
// A [Decoder] applies segments to a [state.Table] inside a [state.Txn].
// The sender's schema may be another compatible version of the client's:
// fields the client lacks are skipped, fields the sender lacks keep their
// zero values, and classes the client lacks are decoded with the sender's
// layout. Input is untrusted: every length and count is checked against
// the bits left and against [Limits], applied to decoded sizes, and a bad
// segment returns a [*DecodeError] saying where decoding stopped, so the
// caller rolls the transaction back. Nothing panics on bad input.
//
// Encoders and decoders are not safe for concurrent use.
package codec
