// Package session defines the messages a replica server and its clients
// exchange over a transport.Conn, and their encoding.
//
// Every message on the reliable stream starts with a one-byte type; the rest
// is a wire bit stream. A tick is a TICK message followed by its segments,
// each sent as its own raw message, so that a segment encoded once is
// handed to every client's connection without copying.
//
//	HELLO    c→s  protocol version, client's schema descriptor, connect token, decoder limits, resume block
//	WELCOME  s→c  protocol version, server's schema descriptor, session ID, user ID, tick rate, resume ticket
//	REFUSE   s→c  close code and message; the server then closes
//	TICK     s→c  tick number and segment count; that many segments follow
//	PING     both nonce
//	PONG     both nonce of the PING it answers
//	RPC      both entity ID, RPC ID, arguments (a standalone record)
//	RESYNC   s→c  the client fell behind: reset the replica; the next TICK is the full state
//
// docs/runtime.md describes the protocol; docs/protocol.md the segments.
package session

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math/bits"
	"unicode/utf8"

	"github.com/replicago/replica/codec"
	"github.com/replicago/replica/wire"
)

// ProtocolVersion is the version of the session protocol and segment
// format. Peers with different versions refuse each other.
const ProtocolVersion = 7

// TickFormatSince is the oldest protocol version whose TICKs and segments
// are ProtocolVersion's: version 7 changed WELCOME alone, so a recording
// of a version 6 session plays as it is.
const TickFormatSince = 6

// Type is a message type, the first byte of every non-segment message.
type Type uint8

// Message types.
const (
	TypeHello   Type = 1
	TypeWelcome Type = 2
	TypeRefuse  Type = 3
	TypeTick    Type = 4
	TypePing    Type = 5
	TypePong    Type = 6
	TypeRPC     Type = 7
	TypeResync  Type = 8
)

func (t Type) String() string {
	switch t {
	case TypeHello:
		return "HELLO"
	case TypeWelcome:
		return "WELCOME"
	case TypeRefuse:
		return "REFUSE"
	case TypeTick:
		return "TICK"
	case TypePing:
		return "PING"
	case TypePong:
		return "PONG"
	case TypeRPC:
		return "RPC"
	case TypeResync:
		return "RESYNC"
	}
	return fmt.Sprintf("type(%d)", uint8(t))
}

// Limits of what a message may carry; a peer that exceeds them is closed
// with a protocol error.
const (
	MaxDescriptor = 1 << 20 // bytes of a schema descriptor
	MaxToken      = 4096    // bytes of a connect token
	MaxText       = 1024    // bytes of a user ID or refusal message
	MaxSegments   = 16      // segments announced by one TICK
	MaxResume     = 1 << 13 // entities a resume block lists
)

// ClipText cuts s to at most MaxText bytes, on a UTF-8 boundary: a
// refusal message or user ID as a peer may send it.
func ClipText(s string) string {
	n := MaxText
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// MaxResumeBytes bounds the encoding of a resume block of at most
// MaxResume entities: 5 bytes an entity (the slot gaps of ascending slots
// below 2^24 average at most 20 bits at that count) and the header.
const MaxResumeBytes = 5*MaxResume + 64

// ErrMalformed wraps every decoding error of this package.
var ErrMalformed = errors.New("session: malformed message")

// Hello opens a session.
type Hello struct {
	Version    uint32
	Descriptor []byte // the client's schema, schema.AppendDescriptor
	Token      []byte
	// Limits are the client's decoder limits, sent with defaults applied,
	// so that a server can refuse a client that would refuse its ticks.
	Limits codec.Limits
	// Resume asks to resume an earlier session (docs/protocol.md §10.5);
	// nil for a new one.
	Resume *Resume
}

// A Ticket names a session the server may resume (docs/protocol.md
// §10.5). The zero Ticket is none.
type Ticket [2]uint64

// IsZero reports whether t is the zero Ticket.
func (t Ticket) IsZero() bool { return t == Ticket{} }

// Resume is what a reconnecting client tells the server so that it sends
// only what changed since the last tick the client applied.
type Resume struct {
	Ticket Ticket // the WELCOME's of the session to resume
	Tick   uint64 // the last tick the client applied
	Held   []Held // the entities its replica holds, by ascending slot; at most MaxResume
}

// Held is an entity a resuming client holds.
type Held struct {
	ID    uint32 // network ID: generation << 24 | slot
	Level uint8  // its level of detail, ≤ MaxLevel
	Owned bool
}

// Welcome accepts a session.
type Welcome struct {
	Version    uint32
	Descriptor []byte // the server's schema as clients see it
	Session    uint64
	UserID     string
	TickRate   uint32 // ticks per second
	Ticket     Ticket // to resume this session; zero if the server does not resume
	Resumed    bool   // the HELLO's Resume was accepted: the first TICK is a catch-up
	// MaxMessage is the largest message the client may send once joined
	// (replica's Config.MaxRPCBytes): a client refuses to send a larger
	// RPC, which would close its connection. 0: the server states none.
	MaxMessage uint32
}

// Refuse declines a session; Code is a transport.CloseCode.
type Refuse struct {
	Code    uint16
	Message string
}

// Tick announces one tick and the number of segment messages that follow,
// and names the entities whose ownership by this client the tick changes:
// Gained lists those it now owns (all it owns, in a full state), Lost those
// it owned and no longer does. IDs are network IDs (state.ID). Levels
// lists the entities whose level of detail the tick changes
// (docs/protocol.md §5.8).
type Tick struct {
	Tick     uint64
	Segments int
	Gained   []uint32
	Lost     []uint32
	Levels   []Level
}

// A Level is an entity's new level of detail in a [Tick].
type Level struct {
	ID    uint32
	Level uint8 // ≤ MaxLevel
}

// MaxLevel bounds a Level's level: schema.MaxBands.
const MaxLevel = 4

// MaxOwned bounds the IDs of each of Tick's lists.
const MaxOwned = 1 << 20

// RPC calls an RPC on an entity. Args is the argument record as
// codec.Encoder.AppendRecord writes it.
type RPC struct {
	Entity uint32
	RPC    uint32
	Args   []byte
}

// Resync tells a client that fell behind to reset its replica: the next
// tick is the full state.
type Resync struct{}

// AppendResync appends the encoding of a RESYNC to b.
func AppendResync(b []byte) []byte { return append(b, byte(TypeResync)) }

// Ping asks for a Pong with the same nonce.
type Ping struct{ Nonce uint64 }

// Pong answers a Ping.
type Pong struct{ Nonce uint64 }

// AppendHello appends the encoding of m to b.
func AppendHello(b []byte, m *Hello) []byte {
	var w wire.Writer
	w.U(uint64(m.Version), 0)
	w.Bytes(m.Descriptor)
	w.Bytes(m.Token)
	m.Limits.AppendTo(&w)
	w.Bool(m.Resume != nil)
	if r := m.Resume; r != nil {
		w.Bits(r.Ticket[0], 64)
		w.Bits(r.Ticket[1], 64)
		w.U(r.Tick, 8)
		w.U(uint64(len(r.Held)), 3)
		prev := int64(-1)
		for _, h := range r.Held {
			slot := int64(h.ID & (1<<24 - 1))
			w.U(uint64(slot-prev-1), 2)
			w.Bits(uint64(h.ID>>24), 8)
			w.U(uint64(h.Level), 0)
			w.Bool(h.Owned)
			prev = slot
		}
	}
	return append(append(b, byte(TypeHello)), w.Finish()...)
}

// AppendWelcome appends the encoding of m to b.
func AppendWelcome(b []byte, m *Welcome) []byte {
	var w wire.Writer
	w.U(uint64(m.Version), 0)
	w.Bytes(m.Descriptor)
	w.U(m.Session, 8)
	w.String(m.UserID)
	w.U(uint64(m.TickRate), 4)
	w.Bits(m.Ticket[0], 64)
	w.Bits(m.Ticket[1], 64)
	w.Bool(m.Resumed)
	w.U(uint64(m.MaxMessage), 8)
	return append(append(b, byte(TypeWelcome)), w.Finish()...)
}

// readResume reads a HELLO's resume block (AppendHello).
func readResume(r *wire.Reader) *Resume {
	m := &Resume{Ticket: Ticket{r.Bits(64), r.Bits(64)}, Tick: r.U(8)}
	// An entry is at least 13 bits: U(2) gap, 8 bits, U(0) level, a bit.
	n := r.Count(3, MaxResume, 13, "resumed entities")
	if n > 0 {
		m.Held = make([]Held, n)
	}
	prev := int64(-1)
	for i := 0; i < n && r.Err() == nil; i++ {
		gap := r.U(2)
		gen := r.Bits(8)
		level := r.U(0)
		owned := r.Bool()
		if r.Err() != nil {
			break
		}
		if gap >= 1<<24 || prev+1+int64(gap) >= 1<<24 {
			r.Fail(fmt.Errorf("%w: resumed entity slot beyond 2^24", wire.ErrMalformed))
			break
		}
		if level > MaxLevel {
			r.Fail(fmt.Errorf("%w: resumed entity level %d above %d", wire.ErrMalformed, level, MaxLevel))
			break
		}
		prev += 1 + int64(gap)
		m.Held[i] = Held{ID: uint32(gen)<<24 | uint32(prev), Level: uint8(level), Owned: owned}
	}
	return m
}

// AppendRefuse appends the encoding of m to b.
func AppendRefuse(b []byte, m *Refuse) []byte {
	var w wire.Writer
	w.U(uint64(m.Code), 4)
	w.String(m.Message)
	return append(append(b, byte(TypeRefuse)), w.Finish()...)
}

// AppendTick appends the encoding of m to b.
func AppendTick(b []byte, m *Tick) []byte {
	if len(m.Gained) == 0 && len(m.Lost) == 0 && len(m.Levels) == 0 && m.Tick < 1<<16 && m.Segments < 1<<8 {
		// Most TICKs: a tick number, a segment count and three empty
		// lists, at most 24 + 15 + 12 bits, packed in one word.
		v, n := uCode(m.Tick, 8)
		c, cn := uCode(uint64(m.Segments), 1)
		v |= c << n
		n += cn + 12 // three U(3) counts of 0: four 0 bits each
		b = append(b, byte(TypeTick))
		for i := uint(0); i < n; i += 8 {
			b = append(b, byte(v))
			v >>= 8
		}
		return b
	}
	return appendTick(b, m)
}

// uCode returns the U(k) code of u (docs/protocol.md §1.2) in the low n
// bits of v, for u of fewer than 32 bits and k < 32.
func uCode(u uint64, k uint) (v uint64, n uint) {
	b := uint(bits.Len64(u))
	if b <= k {
		return u << 1, k + 1 // a 0, then k bits of u
	}
	ones := b - k // that many 1s, a 0, then the low b−1 bits of u
	return 1<<ones - 1 | (u&(1<<(b-1)-1))<<(ones+1), 2*b - k
}

// appendTick is AppendTick for any TICK.
func appendTick(b []byte, m *Tick) []byte {
	b = append(b, byte(TypeTick))
	// Written in b's spare capacity, where there is enough: the append
	// below then copies the bits onto themselves, allocating nothing.
	var w wire.Writer
	w.Reset(b[len(b):])
	w.U(m.Tick, 8)
	w.U(uint64(m.Segments), 1)
	for _, ids := range [2][]uint32{m.Gained, m.Lost} {
		w.U(uint64(len(ids)), 3)
		for _, id := range ids {
			w.Bits(uint64(id), 32)
		}
	}
	w.U(uint64(len(m.Levels)), 3)
	for _, l := range m.Levels {
		w.Bits(uint64(l.ID), 32)
		w.U(uint64(l.Level), 0)
	}
	return append(b, w.Finish()...)
}

// AppendPing appends the encoding of m to b.
func AppendPing(b []byte, m *Ping) []byte {
	var w wire.Writer
	w.Bits(m.Nonce, 64)
	return append(append(b, byte(TypePing)), w.Finish()...)
}

// AppendPong appends the encoding of m to b.
func AppendPong(b []byte, m *Pong) []byte {
	var w wire.Writer
	w.Bits(m.Nonce, 64)
	return append(append(b, byte(TypePong)), w.Finish()...)
}

// AppendRPC appends the encoding of m to b. Its header is byte-aligned
// (type, entity ID as 4 little-endian bytes, RPC ID as a uvarint) so that
// the arguments follow as they are, without copying.
func AppendRPC(b []byte, m *RPC) []byte {
	b = append(b, byte(TypeRPC), byte(m.Entity), byte(m.Entity>>8), byte(m.Entity>>16), byte(m.Entity>>24))
	b = binary.AppendUvarint(b, uint64(m.RPC))
	return append(b, m.Args...)
}

// ParseRPC decodes an RPC message without copying: the returned Args
// aliases msg.
func ParseRPC(msg []byte) (RPC, error) {
	if len(msg) < 6 || Type(msg[0]) != TypeRPC {
		return RPC{}, fmt.Errorf("%w: not an RPC message", ErrMalformed)
	}
	m := RPC{Entity: binary.LittleEndian.Uint32(msg[1:5])}
	id, n := binary.Uvarint(msg[5:])
	var minimal [binary.MaxVarintLen64]byte
	if n <= 0 || id == 0 || id > 1<<32-1 || n != binary.PutUvarint(minimal[:], id) {
		return RPC{}, fmt.Errorf("%w: RPC ID", ErrMalformed) // absent, zero, too large or not minimal
	}
	m.RPC, m.Args = uint32(id), msg[5+n:]
	return m, nil
}

// Parse decodes a message. It returns one of *Hello, *Welcome, *Refuse,
// *Tick, *Ping, *Pong, *RPC or *Resync, or an error wrapping ErrMalformed. Byte slices in
// the result are copies: msg may be reused.
func Parse(msg []byte) (any, error) {
	if len(msg) == 0 {
		return nil, fmt.Errorf("%w: empty message", ErrMalformed)
	}
	if Type(msg[0]) == TypeRPC {
		m, err := ParseRPC(msg)
		if err != nil {
			return nil, err
		}
		m.Args = append([]byte{}, m.Args...)
		return &m, nil
	}
	if Type(msg[0]) == TypeResync {
		if len(msg) != 1 {
			return nil, fmt.Errorf("%w: RESYNC: trailing data", ErrMalformed)
		}
		return &Resync{}, nil
	}
	r := wire.NewReader(msg[1:])
	var m any
	switch t := Type(msg[0]); t {
	case TypeHello:
		h := &Hello{Version: u32(r, r.U(0))}
		if h.Version != ProtocolVersion && r.Err() == nil {
			// The rest has that version's layout: the receiver refuses
			// the version, not a malformed message.
			return h, nil
		}
		h.Descriptor = r.Bytes(MaxDescriptor)
		h.Token = r.Bytes(MaxToken)
		h.Limits = codec.ReadLimits(r)
		if r.Bool() {
			h.Resume = readResume(r)
		}
		m = h
	case TypeWelcome:
		v := &Welcome{Version: u32(r, r.U(0))}
		v.Descriptor = r.Bytes(MaxDescriptor)
		v.Session = r.U(8)
		v.UserID = r.String(MaxText)
		v.TickRate = u32(r, r.U(4))
		v.Ticket = Ticket{r.Bits(64), r.Bits(64)}
		v.Resumed = r.Bool()
		v.MaxMessage = u32(r, r.U(8))
		m = v
	case TypeRefuse:
		code := r.U(4)
		if code > 0xFFFF && r.Err() == nil {
			return nil, fmt.Errorf("%w: close code %d", ErrMalformed, code)
		}
		m = &Refuse{Code: uint16(code), Message: r.String(MaxText)}
	case TypeTick:
		k := readTick(r)
		m = &k
	case TypePing:
		m = &Ping{Nonce: r.Bits(64)}
	case TypePong:
		m = &Pong{Nonce: r.Bits(64)}
	default:
		return nil, fmt.Errorf("%w: unknown type %d", ErrMalformed, msg[0])
	}
	if err := end(r, Type(msg[0])); err != nil {
		return nil, err
	}
	return m, nil
}

// end checks that r read a whole message of type t without error.
func end(r *wire.Reader, t Type) error {
	if err := r.Err(); err != nil {
		return fmt.Errorf("%w: %s: %w", ErrMalformed, t, err)
	}
	if rem := r.Remaining(); rem >= 8 || r.Bits(uint(rem)) != 0 {
		return fmt.Errorf("%w: %s: trailing data", ErrMalformed, t)
	}
	return nil
}

// ParseTick decodes a TICK message as Parse does, without allocating for
// the message itself: a client's read loop parses one per tick.
func ParseTick(msg []byte) (Tick, error) {
	if len(msg) == 0 || Type(msg[0]) != TypeTick {
		return Tick{}, fmt.Errorf("%w: not a TICK", ErrMalformed)
	}
	var r wire.Reader
	r.Reset(msg[1:])
	k := readTick(&r)
	return k, end(&r, TypeTick)
}

// readTick reads a TICK's body; r holds the first error.
func readTick(r *wire.Reader) Tick {
	k := Tick{Tick: r.U(8)}
	k.Segments = r.Count(1, MaxSegments, 0, "segments")
	for _, ids := range [2]*[]uint32{&k.Gained, &k.Lost} {
		n := r.Count(3, MaxOwned, 32, "owned entities")
		if n > 0 {
			*ids = make([]uint32, n)
		}
		for i := 0; i < n && r.Err() == nil; i++ {
			(*ids)[i] = uint32(r.Bits(32))
		}
	}
	n := r.Count(3, MaxOwned, 33, "levels")
	if n > 0 {
		k.Levels = make([]Level, n)
	}
	for i := 0; i < n && r.Err() == nil; i++ {
		k.Levels[i].ID = uint32(r.Bits(32))
		if l := r.U(0); l > MaxLevel && r.Err() == nil {
			r.Fail(fmt.Errorf("level %d above %d", l, MaxLevel))
		} else {
			k.Levels[i].Level = uint8(l)
		}
	}
	return k
}

// u32 narrows a decoded number, failing r if it does not fit.
func u32(r *wire.Reader, v uint64) uint32 {
	if v > 1<<32-1 {
		r.Fail(fmt.Errorf("%w: %d does not fit 32 bits", wire.ErrMalformed, v))
	}
	return uint32(v)
}
