// Package replay records what a spectator of a replica server receives,
// and plays it back to clients as if they were watching live.
//
// # Recording
//
// [Record] connects to a server like a client, with its own connect
// token, and writes each TICK it receives, with the tick's segments, to a
// recording, and every K ticks a keyframe: its own replica encoded as the
// full state a joining spectator gets. The game decides what the recorder
// sees, as for any client: give its user no entity, and let it view the
// space to record (a room shows everything; in an AOI space, set a
// viewpoint with Server.SetViewpoint). The server needs no hook.
//
// # Playback
//
// A [Player] serves a recording through the session protocol: a client
// dials it as it would the server (client.Dial, or the TypeScript
// runtime), with the recorded schema or a compatible version of it, and
// gets the full state at the playhead, then the recorded ticks, byte for
// byte, as [Player.Step] or [Player.Run] plays them. [Player.Seek] moves
// the playhead: the player applies the ticks after the nearest keyframe
// to its own replica and sends every client RESYNC and the full state
// there, so a client's replica after a seek to tick T is the one a live
// spectator had after tick T.
//
// # Format
//
// A recording is a header (magic, format version, protocol version, tick
// rate, K, the server's client-view descriptor), records (kind, tick,
// length, messages, CRC-32), and at the end an index of the keyframes and
// a trailer pointing at it, so that a seek reads one keyframe and at most
// K−1 ticks. A recording without its index, from a recorder that died,
// is scanned instead. docs/replay.md describes it byte by byte. [Open]
// treats the file as untrusted: damage gives a [*FormatError] wrapping
// [ErrMagic], [ErrVersion], [ErrTruncated] or [ErrCorrupt], never a
// panic, and the player applies every tick to its own replica before it
// sends it, so a tick that does not decode stops playback rather than
// reaching the clients.
package replay
