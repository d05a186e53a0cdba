package wire

import (
	"encoding/binary"
	"fmt"
	"math/bits"
)

// A Reader decodes a bit stream written by [Writer].
//
// Errors are sticky: after the first failure every read returns zero and
// [Reader.Err] reports the cause. Decoders check Err at their commit points
// and bound every count they read with [Reader.Count], so a lying length can
// neither loop for long nor allocate much before it is caught.
type Reader struct {
	buf []byte
	pos int    // next byte of buf to load into acc
	acc uint64 // loaded bits, least significant first; above n, zero or a copy of buf[pos:]
	n   uint   // number of valid bits in acc, at most 63
	err error
	at  int // bits consumed when err was recorded
}

// NewReader returns a Reader over b.
func NewReader(b []byte) *Reader {
	r := new(Reader)
	r.Reset(b)
	return r
}

// Reset starts reading b from its first bit.
func (r *Reader) Reset(b []byte) {
	*r = Reader{buf: b}
}

// Err returns the first error the Reader met, or nil.
func (r *Reader) Err() error { return r.err }

// Fail records err as the Reader's error unless one is already recorded.
// Decoders use it to report semantic errors through the same sticky path.
func (r *Reader) Fail(err error) {
	if r.err == nil {
		r.err, r.at = err, r.Consumed()
	}
	r.n, r.acc, r.pos = 0, 0, len(r.buf)
}

// Remaining returns the number of unread bits, including the zero padding of
// the last byte.
func (r *Reader) Remaining() int {
	if r.err != nil {
		return 0
	}
	return (len(r.buf)-r.pos)*8 + int(r.n)
}

// Consumed returns the number of bits read so far: after an error, those
// read before it.
func (r *Reader) Consumed() int {
	if r.err != nil {
		return r.at
	}
	return 8*r.pos - int(r.n) // the bytes loaded less the bits buffered
}

// topUp loads the word at buf[pos:] (pos+8 ≤ len(buf)) into acc above its
// n buffered bits and keeps the whole bytes that fit: afterwards at least
// 56 bits are buffered. It returns the new pos, acc and n.
func topUp(buf []byte, pos int, acc uint64, n uint) (int, uint64, uint) {
	acc |= binary.LittleEndian.Uint64(buf[pos:]) << (n & 63)
	take := (63 - n) >> 3 // whole bytes that fit
	return pos + int(take), acc, n + take<<3
}

func (r *Reader) fill() {
	if r.pos+8 <= len(r.buf) {
		r.pos, r.acc, r.n = topUp(r.buf, r.pos, r.acc, r.n)
		return
	}
	for r.n <= 55 && r.pos < len(r.buf) { // n stays below 64, for Codes
		r.acc |= uint64(r.buf[r.pos]) << r.n
		r.pos++
		r.n += 8
	}
}

// Bits reads n bits (n ≤ 64).
func (r *Reader) Bits(n uint) uint64 {
	if n == 0 || r.err != nil {
		return 0
	}
	if n > 56 {
		lo := r.Bits(32)
		return lo | r.Bits(n-32)<<32
	}
	if r.n < n {
		r.fill()
		if r.n < n {
			r.Fail(ErrTruncated)
			return 0
		}
	}
	v := r.acc & (1<<n - 1)
	r.acc >>= n
	r.n -= n
	return v
}

// Peek returns the next n bits (n ≤ 56) as Bits would read them, without
// consuming them. Bits past the end of the input, and every bit after an
// error, read as zero; Peek itself never fails.
func (r *Reader) Peek(n uint) uint64 {
	if r.n < n {
		r.fill()
	}
	return r.acc & (1<<(n&63) - 1)
}

// Bool reads one bit.
func (r *Reader) Bool() bool { return r.Bits(1) == 1 }

// U reads a value written with the U(k) code.
func (r *Reader) U(k uint) uint64 {
	if r.err != nil {
		return 0
	}
	// Fast path: the whole code is in the accumulator, or in it once
	// topped up.
	if k <= MaxK {
		v, w := peekCode(r.acc, uint8(k)+1)
		if w > r.n {
			if r.pos+8 <= len(r.buf) {
				r.pos, r.acc, r.n = topUp(r.buf, r.pos, r.acc, r.n)
			} else {
				r.fill()
			}
			v, w = peekCode(r.acc, uint8(k)+1)
		}
		if w <= r.n {
			r.acc >>= w & 63
			r.n -= w
			return v
		}
	}
	if k > MaxK {
		r.Fail(fmt.Errorf("%w: code parameter %d", ErrMalformed, k))
		return 0
	}
	// Count the leading one bits (at most 64−k of them).
	maxOnes := 64 - k
	var ones uint
	for {
		if r.n == 0 {
			r.fill()
			if r.n == 0 {
				r.Fail(ErrTruncated)
				return 0
			}
		}
		t := uint(bits.TrailingZeros64(^r.acc))
		if t > r.n {
			t = r.n
		}
		if ones+t >= maxOnes {
			t = maxOnes - ones
			r.acc >>= t
			r.n -= t
			ones = maxOnes
			break
		}
		ones += t
		r.acc >>= t
		r.n -= t
		if r.n > 0 {
			// The next bit is the 0 terminator.
			r.acc >>= 1
			r.n--
			break
		}
	}
	if ones == 0 {
		return r.Bits(k)
	}
	b := k + ones
	v := r.Bits(b - 1)
	if r.err != nil {
		return 0
	}
	return 1<<(b-1) | v
}

// S reads a signed value written with [Writer.S].
func (r *Reader) S(k uint) int64 { return Unzigzag(r.U(k)) }

// Count reads a U(k) count and checks it against max and against the bits
// left in the input, assuming each counted item takes at least minBits bits.
// On failure it records an error wrapping ErrLimit or ErrTruncated and
// returns 0.
func (r *Reader) Count(k uint, max int, minBits int, what string) int {
	n := r.U(k)
	if r.err != nil {
		return 0
	}
	if n > uint64(max) {
		r.Fail(fmt.Errorf("%w: %s %d > %d", ErrLimit, what, n, max))
		return 0
	}
	if minBits > 0 && n > uint64(r.Remaining())/uint64(minBits) {
		r.Fail(fmt.Errorf("%w: %s %d needs more bits than remain", ErrTruncated, what, n))
		return 0
	}
	return int(n)
}

// Bytes reads a length-prefixed byte string of at most max bytes into a new
// slice.
func (r *Reader) Bytes(max int) []byte {
	n := r.Count(4, max, 8, "byte length")
	if r.err != nil {
		return nil
	}
	p := make([]byte, n)
	r.raw(p)
	return p
}

// String reads a length-prefixed string of at most max bytes.
func (r *Reader) String(max int) string {
	n := r.Count(4, max, 8, "string length")
	if r.err != nil || n == 0 {
		return ""
	}
	p := make([]byte, n)
	r.raw(p)
	return string(p)
}

// SkipBytes skips a length-prefixed byte string of at most max bytes.
func (r *Reader) SkipBytes(max int) {
	n := r.Count(4, max, 8, "byte length")
	for ; n >= 7; n -= 7 {
		r.Bits(56)
	}
	r.Bits(uint(n) * 8)
}

func (r *Reader) raw(p []byte) {
	if r.n == 0 && r.err == nil {
		// Byte aligned with nothing buffered: copy directly.
		if len(r.buf)-r.pos < len(p) {
			r.Fail(ErrTruncated)
			return
		}
		copy(p, r.buf[r.pos:])
		r.pos += len(p)
		// Bits of acc above n may hold a copy of the bytes just copied
		// (fill loads whole words): drop them.
		r.acc = 0
		return
	}
	for i := range p {
		p[i] = byte(r.Bits(8))
	}
}

// A Code says how one value of a sequence read by [Reader.Codes] is
// written.
type Code struct {
	K   uint8 // the parameter of a U(K) code
	Raw uint8 // if nonzero, the value is instead Raw bits (at most 64), as Bits reads it
}

// Codes reads len(dst) values into dst, value i written with code
// codes[i%len(codes)]: the rows of a table of values whose columns have
// fixed codes. It is the same as calling U or Bits for each value, errors
// included, but keeps the bit buffer in registers, which is what decoders'
// inner loops want.
func (r *Reader) Codes(dst []uint64, codes []Code) {
	if len(codes) == 0 {
		return
	}
	i, j := r.codesBuffered(dst, codes)
	// The rest one by one: the last bytes of the input, a code longer
	// than what one load buffers, or an error.
	for ; i < len(dst); i++ {
		if c := codes[j]; c.Raw != 0 {
			dst[i] = r.Bits(uint(c.Raw))
		} else {
			dst[i] = r.U(uint(c.K))
		}
		if j++; j == len(codes) {
			j = 0
		}
	}
}

// codesBuffered is the fast loop of Codes: it reads values while each is
// wholly in a buffer topped up a word at a time, and returns the index of
// the first value it did not read and of that value's code.
func (r *Reader) codesBuffered(dst []uint64, codes []Code) (i, j int) {
	// The codes, a byte each (see peekCode), in one word that the loop
	// shifts down a code at a time; rows of more than 8 values go 8 at a
	// time.
	if len(codes) > 8 {
		for i < len(dst) {
			m := min(len(codes)-j, len(dst)-i, 8)
			n, _ := r.codesBuffered(dst[i:i+m], codes[j:j+m])
			if i += n; n < m {
				return i, j + n
			}
			if j += m; j == len(codes) {
				j = 0
			}
		}
		return i, j
	}
	var row uint64
	for j, c := range codes {
		if c.K > MaxK || c.Raw > 63 {
			return 0, 0 // malformed or too wide for one load: one by one
		}
		b := uint64(c.K) + 1
		if c.Raw != 0 {
			b = 0x80 | uint64(c.Raw)
		}
		row |= b << (8 * j)
	}
	// Fewer than 64 bits are ever buffered, so the shifts below can be
	// masked. The buffer is topped up a word at a time when it is below
	// half full or the next value is not wholly in it: values of a few
	// bits take several from one load.
	buf, pos, acc, n := r.buf, r.pos, r.acc, r.n
loop:
	for next := row; i < len(dst); i++ {
		if n < 32 && pos+8 <= len(buf) {
			// Below half: top up before decoding, so that wide
			// values are decoded once, not again after a load.
			pos, acc, n = topUp(buf, pos, acc, n)
		}
		v, w := peekCode(acc, uint8(next))
		if w > n {
			switch {
			case pos+8 <= len(buf):
				pos, acc, n = topUp(buf, pos, acc, n)
			case pos < len(buf):
				// The last bytes of the input.
				acc |= loadTail(buf[pos:]) << (n & 63)
				take := min((63-n)>>3, uint(len(buf)-pos))
				pos += int(take)
				n += take << 3
			default:
				break loop
			}
			if v, w = peekCode(acc, uint8(next)); w > n {
				break
			}
		}
		acc >>= w & 63
		n -= w
		dst[i] = v
		if next >>= 8; next == 0 {
			next = row
		}
	}
	r.pos, r.acc, r.n = pos, acc, n
	return i, i % len(codes)
}

// loadTail returns the bytes of b, fewer than 8, as a little-endian word.
func loadTail(b []byte) uint64 {
	var w uint64
	for i, c := range b {
		w |= uint64(c) << (8 * (i & 7))
	}
	return w
}

// peekCode returns the value at the start of acc of code c and its length
// in bits. c is 0x80 | Raw for raw bits (Raw at most 63), else K+1. A U
// code of 63 leading ones or more has a length over 63: longer than acc
// holds.
func peekCode(acc uint64, c uint8) (v uint64, w uint) {
	if c&0x80 != 0 {
		w = uint(c & 63)
		return acc & (1<<w - 1), w
	}
	// As in U, with nz = 1 if there are leading ones, else 0. The top
	// bit set caps ones at 63.
	ones := uint(bits.TrailingZeros64(^acc | 1<<63))
	nz := (ones + 63) >> 6
	b := uint(c) - 1 + ones - nz // payload bits
	return acc>>((ones+1)&63)&(1<<(b&63)-1) | uint64(nz)<<(b&63), ones + 1 + b
}
