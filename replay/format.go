package replay

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"slices"

	"github.com/replicago/replica/session"
)

// FormatVersion is the version of the recording file format (docs/replay.md).
const FormatVersion = 1

// magic opens every recording; trailerMagic closes one that was finished.
var (
	magic        = []byte("RPLREC\r\n")
	trailerMagic = []byte("RPLEND\r\n")
)

// Record kinds.
const (
	KindTick     = 1 // a tick as the recorder received it: its changes
	KindKeyframe = 2 // the full state after a tick
	kindIndex    = 3 // the keyframe index, last
)

// Limits of what a recording may hold, checked before anything is
// allocated.
const (
	// MaxRecordBytes bounds one record's body: at most 16 segments
	// (session.MaxSegments) of a client's default MaxSegmentBytes each,
	// and the TICK message.
	MaxRecordBytes = (session.MaxSegments + 1) << 20
	trailerLen     = 16 // index offset (8 bytes LE) and trailerMagic
)

// Errors of reading a recording. Every error Open and the Reader's
// methods return for bad input is a *FormatError wrapping one of them.
var (
	ErrMagic     = errors.New("replay: not a recording")
	ErrVersion   = errors.New("replay: unsupported format or protocol version")
	ErrTruncated = errors.New("replay: recording truncated")
	ErrCorrupt   = errors.New("replay: recording corrupt")
	ErrNoTick    = errors.New("replay: tick not in the recording")
)

// A FormatError reports where in a recording reading failed.
type FormatError struct {
	Offset int64 // byte offset of the header or record that failed
	Err    error // one of the sentinel errors, possibly wrapping more
}

func (e *FormatError) Error() string { return fmt.Sprintf("%v at byte %d", e.Err, e.Offset) }
func (e *FormatError) Unwrap() error { return e.Err }

func formatErr(off int64, sentinel error, format string, args ...any) error {
	if format == "" {
		return &FormatError{Offset: off, Err: sentinel}
	}
	return &FormatError{Offset: off, Err: fmt.Errorf("%w: "+format, append([]any{sentinel}, args...)...)}
}

// Header is what a recording says before its records.
type Header struct {
	Protocol   uint32 // session.ProtocolVersion of the recorded session
	TickRate   uint32 // the recorded server's ticks per second
	Keyframe   uint32 // K: a keyframe every K ticks
	Descriptor []byte // the recorded server's schema as clients see it (WELCOME)
}

// A Frame is one tick as a session carries it: the TICK message and the
// segments it announces.
type Frame struct {
	Tick     uint64
	Messages [][]byte // TICK, then its segments
}

// appendFrame appends the body of a record holding f's messages.
func appendFrame(b []byte, msgs [][]byte) []byte {
	b = binary.AppendUvarint(b, uint64(len(msgs)))
	for _, m := range msgs {
		b = binary.AppendUvarint(b, uint64(len(m)))
		b = append(b, m...)
	}
	return b
}

// parseFrame decodes a record body into its messages and checks that the
// first is a TICK of the record's tick announcing the others. The
// messages alias body.
func parseFrame(tick uint64, body []byte) ([][]byte, error) {
	n, k := binary.Uvarint(body)
	if k <= 0 || n == 0 || n > session.MaxSegments+1 {
		return nil, fmt.Errorf("message count")
	}
	body = body[k:]
	msgs := make([][]byte, 0, n)
	for range n {
		l, k := binary.Uvarint(body)
		if k <= 0 || l > uint64(len(body)-k) {
			return nil, fmt.Errorf("message length")
		}
		msgs = append(msgs, body[k:k+int(l)])
		body = body[k+int(l):]
	}
	if len(body) != 0 {
		return nil, fmt.Errorf("trailing bytes")
	}
	m, err := session.Parse(msgs[0])
	if err != nil {
		return nil, err
	}
	t, ok := m.(*session.Tick)
	switch {
	case !ok:
		return nil, fmt.Errorf("first message is not a TICK")
	case t.Tick != tick:
		return nil, fmt.Errorf("TICK %d in the record of tick %d", t.Tick, tick)
	case t.Segments != len(msgs)-1:
		return nil, fmt.Errorf("TICK announces %d segments, the record holds %d", t.Segments, len(msgs)-1)
	}
	return msgs, nil
}

// A Writer writes a recording: the header, then records in tick order,
// then, at Close, the keyframe index.
type Writer struct {
	w        io.Writer
	off      int64
	last     uint64 // the last record's tick
	lastKind byte
	any      bool
	index    []indexEntry
	err      error
	closed   bool
	buf, hdr []byte
}

type indexEntry struct {
	tick uint64
	off  int64
}

// NewWriter writes h to w and returns a Writer for the records.
func NewWriter(w io.Writer, h Header) (*Writer, error) {
	if len(h.Descriptor) > session.MaxDescriptor {
		return nil, fmt.Errorf("replay: descriptor of %d bytes over %d", len(h.Descriptor), session.MaxDescriptor)
	}
	b := append([]byte{}, magic...)
	b = binary.AppendUvarint(b, FormatVersion)
	b = binary.AppendUvarint(b, uint64(h.Protocol))
	b = binary.AppendUvarint(b, uint64(h.TickRate))
	b = binary.AppendUvarint(b, uint64(h.Keyframe))
	b = binary.AppendUvarint(b, uint64(len(h.Descriptor)))
	b = append(b, h.Descriptor...)
	b = binary.LittleEndian.AppendUint32(b, crc32.ChecksumIEEE(b))
	wr := &Writer{w: w}
	if err := wr.write(b); err != nil {
		return nil, err
	}
	return wr, nil
}

func (w *Writer) write(b []byte) error {
	if w.err != nil {
		return w.err
	}
	n, err := w.w.Write(b)
	w.off += int64(n)
	if err != nil {
		w.err = fmt.Errorf("replay: writing the recording: %w", err)
	}
	return w.err
}

// record writes one record: kind, tick, body length, body, CRC-32 of all
// of them.
func (w *Writer) record(kind byte, tick uint64, body []byte) error {
	b := append(w.hdr[:0], kind)
	b = binary.AppendUvarint(b, tick)
	b = binary.AppendUvarint(b, uint64(len(body)))
	crc := crc32.Update(crc32.ChecksumIEEE(b), crc32.IEEETable, body)
	w.hdr = b
	if err := w.write(b); err != nil {
		return err
	}
	if err := w.write(body); err != nil {
		return err
	}
	return w.write(binary.LittleEndian.AppendUint32(nil, crc))
}

// Tick writes the messages of tick n: its TICK message and segments.
// Ticks come in increasing order; a keyframe of a tick follows its tick.
func (w *Writer) Tick(n uint64, msgs [][]byte) error { return w.frame(KindTick, n, msgs) }

// Keyframe writes the full state after tick n: a TICK message of tick n
// and full-state segments.
func (w *Writer) Keyframe(n uint64, msgs [][]byte) error { return w.frame(KindKeyframe, n, msgs) }

func (w *Writer) frame(kind byte, n uint64, msgs [][]byte) error {
	if w.closed {
		return errors.New("replay: Writer closed")
	}
	if w.any && (n < w.last || n == w.last && (kind == KindTick || w.lastKind == KindKeyframe)) {
		return fmt.Errorf("replay: tick %d after %d", n, w.last)
	}
	if !w.any && kind != KindKeyframe {
		return errors.New("replay: a recording starts with a keyframe")
	}
	w.buf = appendFrame(w.buf[:0], msgs)
	if len(w.buf) > MaxRecordBytes {
		return fmt.Errorf("replay: record of tick %d: %d bytes over %d", n, len(w.buf), MaxRecordBytes)
	}
	if kind == KindKeyframe {
		w.index = append(w.index, indexEntry{n, w.off})
	}
	w.any, w.last, w.lastKind = true, n, kind
	return w.record(kind, n, w.buf)
}

// Close writes the keyframe index and the trailer. It does not close the
// underlying writer.
func (w *Writer) Close() error {
	if w.closed {
		return w.err
	}
	w.closed = true
	at := w.off
	b := binary.AppendUvarint(nil, uint64(len(w.index)))
	var pt uint64
	var po int64
	for _, e := range w.index {
		b = binary.AppendUvarint(b, e.tick-pt)
		b = binary.AppendUvarint(b, uint64(e.off-po))
		pt, po = e.tick, e.off
	}
	if err := w.record(kindIndex, 0, b); err != nil {
		return err
	}
	return w.write(append(binary.LittleEndian.AppendUint64(nil, uint64(at)), trailerMagic...))
}

// A Reader reads a recording from an io.ReaderAt. Its methods may be
// called from one goroutine at a time.
type Reader struct {
	r      io.ReaderAt
	size   int64
	h      Header
	first  int64        // offset of the first record
	end    int64        // offset after the last tick or keyframe record
	index  []indexEntry // keyframes, by tick
	last   uint64       // the last tick recorded
	hdrBuf [2 * binary.MaxVarintLen64]byte
}

// Open reads the header and the keyframe index of the recording of size
// bytes in r. A recording without its index (its recorder stopped before
// Close) is scanned record by record instead.
func Open(r io.ReaderAt, size int64) (*Reader, error) {
	rd := &Reader{r: r, size: size}
	if err := rd.readHeader(); err != nil {
		return nil, err
	}
	if err := rd.readIndex(); err != nil {
		return nil, err
	}
	return rd, nil
}

// Header returns the recording's header.
func (r *Reader) Header() Header { return r.h }

// FirstTick and LastTick return the first and last tick recorded.
func (r *Reader) FirstTick() uint64 { return r.index[0].tick }
func (r *Reader) LastTick() uint64  { return r.last }

// Keyframes returns the ticks of the keyframes.
func (r *Reader) Keyframes() []uint64 {
	out := make([]uint64, len(r.index))
	for i, e := range r.index {
		out[i] = e.tick
	}
	return out
}

func (r *Reader) readHeader() error {
	n := min(r.size, int64(len(magic)+5*binary.MaxVarintLen64+session.MaxDescriptor+4))
	if n < int64(len(magic)) {
		// An empty file, or a start of the magic, is a recording whose
		// recorder died before its first write reached the file.
		b := make([]byte, n)
		if _, err := r.r.ReadAt(b, 0); (err == nil || err == io.EOF) && bytes.HasPrefix(magic, b) {
			return formatErr(0, ErrTruncated, "header")
		}
		return formatErr(0, ErrMagic, "")
	}
	b := make([]byte, min(n, int64(len(magic)+5*binary.MaxVarintLen64)))
	if _, err := r.r.ReadAt(b, 0); err != nil && err != io.EOF {
		return formatErr(0, ErrTruncated, "%v", err)
	}
	if !bytes.Equal(b[:len(magic)], magic) {
		return formatErr(0, ErrMagic, "")
	}
	p := b[len(magic):]
	var v [5]uint64
	for i := range v {
		x, k := binary.Uvarint(p)
		if k <= 0 {
			return formatErr(0, ErrTruncated, "header")
		}
		v[i], p = x, p[k:]
		if i == 0 && x != FormatVersion {
			return formatErr(0, ErrVersion, "format version %d, this reader reads %d", x, FormatVersion)
		}
		if i == 1 && (x < session.TickFormatSince || x > session.ProtocolVersion) {
			return formatErr(0, ErrVersion, "protocol version %d, this player plays %d to %d", x, session.TickFormatSince, session.ProtocolVersion)
		}
		if i > 1 && x > 1<<32-1 {
			return formatErr(0, ErrCorrupt, "header field %d", x)
		}
	}
	if v[4] > session.MaxDescriptor {
		return formatErr(0, ErrCorrupt, "descriptor of %d bytes", v[4])
	}
	at := int64(len(b) - len(p))
	total := at + int64(v[4]) + 4
	if total > r.size {
		return formatErr(0, ErrTruncated, "header")
	}
	full := make([]byte, total)
	if _, err := r.r.ReadAt(full, 0); err != nil && err != io.EOF {
		return formatErr(0, ErrTruncated, "%v", err)
	}
	if crc32.ChecksumIEEE(full[:total-4]) != binary.LittleEndian.Uint32(full[total-4:]) {
		return formatErr(0, ErrCorrupt, "header checksum")
	}
	r.h = Header{Protocol: uint32(v[1]), TickRate: uint32(v[2]), Keyframe: uint32(v[3]),
		Descriptor: full[at : at+int64(v[4])]}
	r.first = total
	return nil
}

// recordAt reads the record at off: its kind, tick and body, and the
// offset of the next record.
func (r *Reader) recordAt(off int64) (kind byte, tick uint64, body []byte, next int64, err error) {
	if off >= r.size {
		return 0, 0, nil, 0, formatErr(off, ErrTruncated, "record expected")
	}
	hb := r.hdrBuf[:min(int64(len(r.hdrBuf)), r.size-off)]
	if _, err := r.r.ReadAt(hb, off); err != nil && err != io.EOF {
		return 0, 0, nil, 0, formatErr(off, ErrTruncated, "%v", err)
	}
	kind = hb[0]
	if kind < KindTick || kind > kindIndex {
		return 0, 0, nil, 0, formatErr(off, ErrCorrupt, "record kind %d", kind)
	}
	p := hb[1:]
	tick, k1 := binary.Uvarint(p)
	if k1 <= 0 {
		return 0, 0, nil, 0, formatErr(off, ErrTruncated, "record header")
	}
	n, k2 := binary.Uvarint(p[k1:])
	if k2 <= 0 {
		return 0, 0, nil, 0, formatErr(off, ErrTruncated, "record header")
	}
	if n > MaxRecordBytes {
		return 0, 0, nil, 0, formatErr(off, ErrCorrupt, "record of %d bytes", n)
	}
	hl := int64(1 + k1 + k2)
	if hl+int64(n)+4 > r.size-off {
		return 0, 0, nil, 0, formatErr(off, ErrTruncated, "record of %d bytes", n)
	}
	buf := make([]byte, hl+int64(n)+4)
	if _, err := r.r.ReadAt(buf, off); err != nil && err != io.EOF {
		return 0, 0, nil, 0, formatErr(off, ErrTruncated, "%v", err)
	}
	body = buf[hl : hl+int64(n)]
	if crc32.ChecksumIEEE(buf[:hl+int64(n)]) != binary.LittleEndian.Uint32(buf[hl+int64(n):]) {
		return 0, 0, nil, 0, formatErr(off, ErrCorrupt, "record checksum")
	}
	return kind, tick, body, off + int64(len(buf)), nil
}

// readIndex reads the index the trailer points at, or, without a
// trailer, scans the records.
func (r *Reader) readIndex() error {
	if r.size-r.first >= trailerLen {
		t := make([]byte, trailerLen)
		if _, err := r.r.ReadAt(t, r.size-trailerLen); err != nil && err != io.EOF {
			return formatErr(r.size-trailerLen, ErrTruncated, "%v", err)
		}
		if bytes.Equal(t[8:], trailerMagic) {
			return r.readTrailer(int64(binary.LittleEndian.Uint64(t[:8])))
		}
	}
	return r.scan()
}

func (r *Reader) readTrailer(at int64) error {
	if at < r.first || at > r.size-trailerLen {
		return formatErr(r.size-trailerLen, ErrCorrupt, "index offset %d", at)
	}
	kind, _, body, next, err := r.recordAt(at)
	if err != nil {
		return err
	}
	if kind != kindIndex || next != r.size-trailerLen {
		return formatErr(at, ErrCorrupt, "index record")
	}
	n, k := binary.Uvarint(body)
	if k <= 0 || n == 0 || n > uint64(len(body)) {
		return formatErr(at, ErrCorrupt, "index length")
	}
	body = body[k:]
	r.index = make([]indexEntry, 0, n)
	var tick uint64
	off := int64(0)
	for i := range n {
		dt, k1 := binary.Uvarint(body)
		if k1 <= 0 {
			return formatErr(at, ErrCorrupt, "index entry %d", i)
		}
		do, k2 := binary.Uvarint(body[k1:])
		if k2 <= 0 || do > uint64(at) || (i > 0 && (dt == 0 || do == 0)) || tick+dt < tick {
			return formatErr(at, ErrCorrupt, "index entry %d", i)
		}
		tick, off = tick+dt, off+int64(do)
		if off < r.first || off >= at {
			return formatErr(at, ErrCorrupt, "index entry %d", i)
		}
		r.index = append(r.index, indexEntry{tick, off})
		body = body[k1+k2:]
	}
	if len(body) != 0 {
		return formatErr(at, ErrCorrupt, "index trailing bytes")
	}
	if r.index[0].off != r.first {
		return formatErr(at, ErrCorrupt, "first record is not a keyframe")
	}
	r.end = at
	// The last tick: that of the last record, which follows the last
	// keyframe.
	return r.walk(r.index[len(r.index)-1].off, func(_ byte, tick uint64, _ []byte, _ int64) error {
		r.last = tick
		return nil
	})
}

// walk reads the records from off to the end, checking their order, and
// calls fn for each.
func (r *Reader) walk(off int64, fn func(kind byte, tick uint64, body []byte, off int64) error) error {
	var prev uint64
	started := false
	var prevKind byte
	for off < r.end {
		kind, tick, body, next, err := r.recordAt(off)
		if err != nil {
			return err
		}
		switch {
		case kind == kindIndex && r.end == r.size && off > r.first:
			// Scanning a recording whose trailer is missing or cut:
			// the records end at the index.
			r.end = off
			return nil
		case kind == kindIndex:
			return formatErr(off, ErrCorrupt, "index before the end")
		case started && (tick < prev || tick == prev && (kind == KindTick || prevKind == KindKeyframe)):
			return formatErr(off, ErrCorrupt, "tick %d after %d", tick, prev)
		}
		if err := fn(kind, tick, body, off); err != nil {
			return err
		}
		started, prev, prevKind, off = true, tick, kind, next
	}
	return nil
}

// scan builds the index by reading every record of a recording that has
// no trailer.
func (r *Reader) scan() error {
	r.end = r.size
	err := r.walk(r.first, func(kind byte, tick uint64, _ []byte, off int64) error {
		if len(r.index) == 0 && kind != KindKeyframe {
			return formatErr(off, ErrCorrupt, "first record is not a keyframe")
		}
		if kind == KindKeyframe {
			r.index = append(r.index, indexEntry{tick, off})
		}
		r.last = tick
		return nil
	})
	if err != nil {
		return err
	}
	if len(r.index) == 0 {
		return formatErr(r.first, ErrTruncated, "no records")
	}
	return nil
}

// A Cursor reads a recording's records in order from a keyframe.
type Cursor struct {
	r    *Reader
	off  int64
	prev uint64
	kind byte
}

// keyframeAt returns the index of the last keyframe at or before tick, or
// −1.
func (r *Reader) keyframeAt(tick uint64) int {
	i, found := slices.BinarySearchFunc(r.index, tick, func(e indexEntry, t uint64) int {
		switch {
		case e.tick < t:
			return -1
		case e.tick > t:
			return 1
		}
		return 0
	})
	if found {
		return i
	}
	return i - 1
}

// Seek returns the keyframe at or before tick and a Cursor at the records
// after it.
func (r *Reader) Seek(tick uint64) (Frame, *Cursor, error) {
	i := r.keyframeAt(tick)
	if i < 0 || tick > r.last {
		return Frame{}, nil, formatErr(r.first, ErrNoTick, "tick %d outside %d..%d", tick, r.FirstTick(), r.last)
	}
	e := r.index[i]
	kind, t, body, next, err := r.recordAt(e.off)
	if err != nil {
		return Frame{}, nil, err
	}
	if kind != KindKeyframe || t != e.tick {
		return Frame{}, nil, formatErr(e.off, ErrCorrupt, "index entry of tick %d points at another record", e.tick)
	}
	msgs, err := parseFrame(t, body)
	if err != nil {
		return Frame{}, nil, formatErr(e.off, ErrCorrupt, "%v", err)
	}
	return Frame{Tick: t, Messages: msgs}, &Cursor{r: r, off: next, prev: t, kind: KindKeyframe}, nil
}

// Next returns the next record: its kind and frame. At the end of the
// recording it returns io.EOF.
func (c *Cursor) Next() (kind byte, f Frame, err error) {
	if c.off >= c.r.end {
		return 0, Frame{}, io.EOF
	}
	kind, t, body, next, err := c.r.recordAt(c.off)
	if err != nil {
		return 0, Frame{}, err
	}
	switch {
	case kind == kindIndex:
		return 0, Frame{}, formatErr(c.off, ErrCorrupt, "index before the end")
	case t < c.prev || t == c.prev && (kind == KindTick || c.kind == KindKeyframe):
		return 0, Frame{}, formatErr(c.off, ErrCorrupt, "tick %d after %d", t, c.prev)
	}
	msgs, err := parseFrame(t, body)
	if err != nil {
		return 0, Frame{}, formatErr(c.off, ErrCorrupt, "%v", err)
	}
	c.off, c.prev, c.kind = next, t, kind
	return kind, Frame{Tick: t, Messages: msgs}, nil
}
