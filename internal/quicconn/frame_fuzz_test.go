package quicconn

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"testing"
)

// FuzzReadHeader checks readHeader, the decoder of the message stream's
// frame lengths (what a QUIC or WebTransport peer sends before each
// message), against encoding/binary's uvarint reader: a length within the
// limit is the uvarint's value and consumes its bytes; one over the limit
// is a *tooLargeError as soon as the bytes read exceed it; a uvarint
// longer than 64 bits is errMalformed; a stream that ends within the
// header is io.EOF before its first byte and io.ErrUnexpectedEOF after.
func FuzzReadHeader(f *testing.F) {
	for _, n := range []uint64{0, 1, 127, 128, 1 << 20, 1<<63 - 1, 1<<64 - 1} {
		f.Add(binary.AppendUvarint(nil, n), uint32(1<<20))
	}
	f.Add([]byte{}, uint32(10))
	f.Add([]byte{0x80}, uint32(10))
	f.Add(bytes.Repeat([]byte{0x80}, 11), uint32(1<<31))
	f.Fuzz(func(t *testing.T, in []byte, limit uint32) {
		// A buffer that takes all of in at its first fill, so that what
		// readHeader consumed is what the buffer no longer holds (with
		// bufio's default 4,096 bytes, a longer input is read in part).
		br := bufio.NewReaderSize(bytes.NewReader(in), len(in)+16)
		n, err := readHeader(br, int(limit))
		v, rerr := binary.ReadUvarint(bufio.NewReader(bytes.NewReader(in)))
		var tl *tooLargeError
		switch {
		case err == nil:
			if rerr != nil || v != uint64(n) || v > uint64(limit) {
				t.Fatalf("readHeader = %d; the uvarint is %d, %v (limit %d)", n, v, rerr, limit)
			}
			if used := len(in) - br.Buffered(); used != uvarintLen(in) {
				t.Fatalf("readHeader consumed %d bytes of %x", used, in)
			}
		case errors.As(err, &tl):
			if tl.limit != uint64(limit) || tl.size <= uint64(limit) {
				t.Fatalf("tooLargeError %+v with limit %d", tl, limit)
			}
			if rerr == nil && v <= uint64(limit) {
				t.Fatalf("readHeader refused %x as too large; it is %d, within %d", in, v, limit)
			}
		case errors.Is(err, errMalformed):
			if !errors.Is(rerr, errOverflow) {
				t.Fatalf("readHeader calls %x malformed; binary.ReadUvarint says %v", in, rerr)
			}
		case err == io.EOF:
			if len(in) != 0 {
				t.Fatalf("io.EOF from %x", in)
			}
		case err == io.ErrUnexpectedEOF:
			if rerr != io.ErrUnexpectedEOF {
				t.Fatalf("io.ErrUnexpectedEOF from %x; binary.ReadUvarint says %v", in, rerr)
			}
		default:
			t.Fatalf("readHeader(%x) = %v", in, err)
		}
	})
}

// errOverflow is binary.ReadUvarint's error for a uvarint beyond 64 bits.
var errOverflow = func() error {
	_, err := binary.ReadUvarint(bytes.NewReader(bytes.Repeat([]byte{0xff}, 11)))
	return err
}()

// uvarintLen returns the bytes of the uvarint at the start of b (a valid
// one), which may be longer than the value's minimal encoding: 0x80 0x00
// is a 0 of two bytes.
func uvarintLen(b []byte) int {
	for i, c := range b {
		if c < 0x80 {
			return i + 1
		}
	}
	return len(b)
}
