package quicconn

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"time"
)

// Preamble is what a client writes first on the message stream: "rpl" and
// the framing version. It makes the stream visible to the server at once
// (QUIC announces a stream only with its first byte) and lets the server
// refuse clients that speak another framing.
var Preamble = [4]byte{'r', 'p', 'l', 1}

// errMalformed reports a frame header that is not a valid uvarint.
var errMalformed = errors.New("malformed frame header")

// tooLargeError reports a frame over the configured limit.
type tooLargeError struct{ size, limit uint64 }

func (e *tooLargeError) Error() string {
	return fmt.Sprintf("message of %d bytes over the %d byte limit", e.size, e.limit)
}

// readHeader reads a frame's uvarint length and checks it against limit as
// it goes, so a huge length is refused without reading all of it.
func readHeader(r io.ByteReader, limit int) (int, error) {
	var v uint64
	for shift := uint(0); ; shift += 7 {
		b, err := r.ReadByte()
		if err != nil {
			if shift > 0 && err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return 0, err
		}
		if shift == 63 && b > 1 {
			return 0, errMalformed
		}
		v |= uint64(b&0x7f) << shift
		if v > uint64(limit) {
			return 0, &tooLargeError{size: v, limit: uint64(limit)}
		}
		if b < 0x80 {
			return int(v), nil
		}
		if shift == 63 {
			return 0, errMalformed
		}
	}
}

// appendHeader appends the frame header for a payload of n bytes.
func appendHeader(b []byte, n int) []byte { return binary.AppendUvarint(b, uint64(n)) }

// deadliner is a stream with a read deadline.
type deadliner interface {
	SetReadDeadline(time.Time) error
}

// ReadPreamble reads and checks the client's preamble from str, waiting at
// most until deadline.
func ReadPreamble(str io.Reader, deadline time.Time) error {
	if d, ok := str.(deadliner); ok {
		d.SetReadDeadline(deadline)
		defer d.SetReadDeadline(time.Time{})
	}
	var p [len(Preamble)]byte
	if _, err := io.ReadFull(str, p[:]); err != nil {
		return err
	}
	if [3]byte(p[:3]) != [3]byte(Preamble[:3]) {
		return ErrNotReplica
	}
	if p[3] != Preamble[3] {
		return fmt.Errorf("%w: framing version %d, want %d", ErrIncompatible, p[3], Preamble[3])
	}
	return nil
}

// WritePreamble writes the client's preamble to str, waiting at most until
// deadline (none if zero).
func WritePreamble(str interface {
	io.Writer
	SetWriteDeadline(time.Time) error
}, deadline time.Time) error {
	str.SetWriteDeadline(deadline)
	defer str.SetWriteDeadline(time.Time{})
	_, err := str.Write(Preamble[:])
	return err
}

// Errors of ReadPreamble.
var (
	ErrNotReplica   = errors.New("stream does not start with the replica preamble")
	ErrIncompatible = errors.New("incompatible framing version")
)

// bodyStep is the most readBody allocates ahead of what has arrived.
const bodyStep = 64 << 10

// readBody reads a frame's body of n bytes, which the header declared.
// The memory follows what arrives, not what the header says: a body
// over bodyStep is read into a buffer that doubles as it fills, so that a
// peer that declares a large message and sends little of it (before the
// server's HELLO limit applies, say) costs what it sent, twice at most.
// A short body is io.ErrUnexpectedEOF, or the reader's error.
func readBody(r io.Reader, n int) ([]byte, error) {
	msg := make([]byte, 0, min(n, bodyStep))
	for len(msg) < n {
		if len(msg) == cap(msg) {
			msg = append(msg, make([]byte, min(2*cap(msg), n)-len(msg))...)[:len(msg)]
		}
		k, err := io.ReadFull(r, msg[len(msg):min(cap(msg), n)])
		msg = msg[:len(msg)+k]
		if err == io.EOF && len(msg) > 0 {
			err = io.ErrUnexpectedEOF
		}
		if err != nil {
			return nil, err
		}
	}
	return msg, nil
}
