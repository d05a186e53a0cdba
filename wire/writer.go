package wire

import (
	"encoding/binary"
	"math/bits"
	"slices"
)

// A Writer appends a bit stream to a caller-owned buffer. The zero value is
// ready to use. Writers never fail: every value is representable.
type Writer struct {
	buf []byte
	acc uint64 // pending bits, least significant first
	n   uint   // number of pending bits in acc, always < 64
}

// Reset discards the stream and reuses buf's storage for the next one.
func (w *Writer) Reset(buf []byte) {
	w.buf, w.acc, w.n = buf[:0], 0, 0
}

// BitLen returns the number of bits written so far.
func (w *Writer) BitLen() int { return len(w.buf)*8 + int(w.n) }

// Bits writes the low n bits of v (n ≤ 64).
//
// Shift counts that are known to be below 64 are masked with 63 here and
// below: Go defines shifts by 64 or more, so an unmasked variable shift
// costs a compare and a select besides the shift instruction.
func (w *Writer) Bits(v uint64, n uint) {
	v &= ^uint64(0) >> (64 - n) // Go shifts ≥ 64 give 0, so n = 0 masks all
	if w.n+n < 64 {
		w.acc |= v << (w.n & 63) // w.n < 64
		w.n += n
		return
	}
	w.spill(v, n)
}

// spill writes n bits of v that do not fit in the accumulator: it flushes 8
// bytes and keeps the bits of v that did not fit.
func (w *Writer) spill(v uint64, n uint) {
	if n == 0 {
		return
	}
	if cap(w.buf)-len(w.buf) < 8 {
		w.grow(8)
	}
	a := w.acc | v<<(w.n&63)
	w.buf = append(w.buf, byte(a), byte(a>>8), byte(a>>16), byte(a>>24),
		byte(a>>32), byte(a>>40), byte(a>>48), byte(a>>56))
	// Keep the bits of v that did not go out: v >> (64 − w.n), which is
	// 0 when w.n = 0. Shifting by 1 and then by 63 − w.n says the same
	// with both counts below 64.
	w.acc = v >> 1 >> ((63 - w.n) & 63)
	w.n = w.n + n - 64
}

// Bool writes one bit.
func (w *Writer) Bool(b bool) {
	var v uint64
	if b {
		v = 1
	}
	w.Bits(v, 1)
}

// U writes n with the U(k) code (see the package documentation).
func (w *Writer) U(n uint64, k uint) {
	v, total := uCode(n, k)
	if total > 64 {
		w.uLong(n, k)
		return
	}
	// Bits, by hand: this is the hottest path of every encoder. Here
	// 1 ≤ total ≤ 64, and v has no bits above total.
	if w.n+total < 64 {
		w.acc |= v << (w.n & 63)
		w.n += total
		return
	}
	w.spill(v, total)
}

// UEach writes codes[i] with U(ks[i]) for each i in turn, exactly as that
// sequence of U calls would but with less work per value (see packU). ks
// must be as long as codes.
func (w *Writer) UEach(codes []uint64, ks []uint8) {
	ks = ks[:len(codes)]
	for len(codes) > 0 {
		n := w.uRun(codes, ks)
		if n == len(codes) {
			return
		}
		// A code longer than 56 bits stopped the run.
		w.U(codes[n], uint(ks[n]))
		codes, ks = codes[n+1:], ks[n+1:]
	}
}

// UEachRuns writes the codes as UEach does, in runs of per codes, each
// run from a byte boundary: before each, the stream is padded with zero
// bits to one, as Bits(0, 8−BitLen()%8) would. It appends to marks the
// bit offsets (BitLen) at which each run starts and ends, two per run,
// and returns marks. per must be positive and divide len(codes), and ks
// be as long as codes.
func (w *Writer) UEachRuns(codes []uint64, ks []uint8, per int, marks []int) []int {
	ks = ks[:len(codes)]
	for len(codes) > 0 {
		// A few runs at a time, so that the room uRuns makes for the
		// worst case stays small: the buffer grows with what is written.
		m := len(codes)
		if m > 64 {
			m = max(per, 64-64%per)
		}
		var n int
		n, marks = w.uRuns(codes[:m], ks[:m], per, marks)
		if n == m {
			codes, ks = codes[m:], ks[m:]
			continue
		}
		// A code longer than 56 bits stopped the run, after its
		// start was marked: the rest of it, then the next runs.
		run := n - n%per
		for i := n; i < run+per; i++ {
			w.U(codes[i], uint(ks[i]))
		}
		marks = append(marks, w.BitLen())
		codes, ks = codes[run+per:], ks[run+per:]
	}
	return marks
}

// uRuns is UEachRuns for the codes up to the first one longer than 56
// bits, as packU does: it returns how many codes it wrote, having marked
// the start of the run of the code that stopped it, if one did.
func (w *Writer) uRuns(codes []uint64, ks []uint8, per int, marks []int) (int, []int) {
	// Each code completes at most 7 bytes and each run pads at most 1;
	// the last store writes 8 more.
	w.grow(7*len(codes) + len(codes)/per + 16)
	base := len(w.buf)
	out := w.buf[base:cap(w.buf)]
	// Complete the bytes already pending so that fewer than 8 bits are.
	binary.LittleEndian.PutUint64(out, w.acc)
	pos := int(w.n >> 3)
	acc := w.acc >> (w.n &^ 7 & 63)
	used := w.n & 7
	ks = ks[:len(codes)]
	n := 0
	for r := 0; r < len(codes); r += per {
		if used > 0 {
			// The pending bits are stored already, with zeros after
			// them: the padding.
			pos, acc, used = pos+1, 0, 0
		}
		marks = append(marks, 8*(base+pos))
		end := min(r+per, len(codes))
		for i := r; i < end; i++ {
			v, total := uCode(codes[i], uint(ks[i]))
			if total > 56 {
				w.buf, w.acc, w.n = w.buf[:base+pos], acc, used
				return i, marks
			}
			acc |= v << (used & 63) // used < 8
			binary.LittleEndian.PutUint64(out[pos:pos+8:pos+8], acc)
			used += total // < 64
			pos += int(used >> 3)
			acc >>= used &^ 7 & 63
			used &= 7
		}
		n = end
		marks = append(marks, 8*(base+pos)+int(used))
	}
	w.buf, w.acc, w.n = w.buf[:base+pos], acc, used
	return n, marks
}

// uRun is UEach for the codes up to the first one longer than 56 bits. It
// returns how many codes it wrote.
func (w *Writer) uRun(codes []uint64, ks []uint8) int {
	// Each code completes at most 7 bytes; the last store writes 8 more.
	w.grow(7*len(codes) + 16)
	n, pos, acc, used := packU(w.buf[len(w.buf):cap(w.buf)], codes, ks, w.acc, w.n)
	w.buf, w.acc, w.n = w.buf[:len(w.buf)+pos], acc, used
	return n
}

// packU appends the codes to the stream whose pending bits are acc and
// used and whose next byte goes to out[0], up to the first code longer
// than 56 bits. It returns how many codes it wrote, how many bytes of out
// it completed and the pending bits. out must have room for 7 bytes per
// code and 16 more.
//
// Its loop makes no calls and takes no data-dependent branches: it keeps
// fewer than 8 pending bits, adds a code of at most 56 bits to them, stores
// all 64 and advances past the bytes that are complete. The bytes after
// those are stored again by the next code. Being a function of its
// arguments alone keeps few values live in the loop, so that they all
// stay in registers.
func packU(out []byte, codes []uint64, ks []uint8, acc uint64, used uint) (n, pos int, _ uint64, _ uint) {
	// Complete the bytes already pending so that fewer than 8 bits are.
	binary.LittleEndian.PutUint64(out, acc)
	pos = int(used >> 3)
	acc >>= used &^ 7 & 63
	used &= 7
	ks = ks[:len(codes)]
	for i, u := range codes {
		v, total := uCode(u, uint(ks[i]))
		if total > 56 {
			return i, pos, acc, used
		}
		acc |= v << (used & 63) // used < 8
		binary.LittleEndian.PutUint64(out[pos:pos+8:pos+8], acc)
		used += total // < 64
		pos += int(used >> 3)
		acc >>= used &^ 7 & 63
		used &= 7
	}
	return len(codes), pos, acc, used
}

// uCode returns the U(k) code of n in the low total bits of v, with no bits
// above them, if the code is at most 64 bits long. A total above 64 means
// a longer code, which uLong writes; v is then meaningless.
func uCode(n uint64, k uint) (v uint64, total uint) {
	b := uint(bits.Len64(n))
	// Both forms are computed and one is selected without a branch: which
	// form a value takes is data-dependent and mispredicts about half the
	// time on real data. For b > k: (b−k) ones, the 0 terminator, then the
	// low b−1 bits of n, which is ((low<<1 | 1) << ones) − 1 with low = n
	// less its top bit. For b ≤ k the first form is garbage and is
	// replaced.
	//
	// Where the first form is used, b ≥ 1 and total ≤ 64 bounds ones by
	// 32, so the shift counts can be masked with 63 (see Bits).
	ones := b - k
	low := n &^ (1 << ((b - 1) & 63))
	v = (low<<1|1)<<(ones&63) - 1
	total = ones + b
	if b <= k {
		v, total = n<<1, k+1 // a 0 bit, then n
	}
	return v, total
}

// uLong writes a U code longer than 64 bits in two parts.
func (w *Writer) uLong(n uint64, k uint) {
	b := uint(bits.Len64(n))
	ones := b - k
	if b < 64 {
		w.Bits(1<<ones-1, ones+1) // ones, then the 0 terminator
	} else {
		w.Bits(1<<ones-1, ones) // no terminator at b = 64
	}
	w.Bits(n, b-1) // the top bit is implied
}

// S writes a signed value with the U(k) code of its zigzag form.
func (w *Writer) S(v int64, k uint) { w.U(Zigzag(v), k) }

// Bytes writes a length with U(4) followed by the bytes.
func (w *Writer) Bytes(p []byte) {
	w.U(uint64(len(p)), 4)
	w.raw(p)
}

// String writes s exactly like [Writer.Bytes].
func (w *Writer) String(s string) {
	w.U(uint64(len(s)), 4)
	for len(s) >= 8 {
		w.Bits(uint64(s[0])|uint64(s[1])<<8|uint64(s[2])<<16|uint64(s[3])<<24|
			uint64(s[4])<<32|uint64(s[5])<<40|uint64(s[6])<<48|uint64(s[7])<<56, 64)
		s = s[8:]
	}
	for i := 0; i < len(s); i++ {
		w.Bits(uint64(s[i]), 8)
	}
}

func (w *Writer) raw(p []byte) {
	if w.n == 0 {
		w.grow(len(p))
		w.buf = append(w.buf, p...)
		return
	}
	for len(p) >= 8 {
		w.Bits(uint64(p[0])|uint64(p[1])<<8|uint64(p[2])<<16|uint64(p[3])<<24|
			uint64(p[4])<<32|uint64(p[5])<<40|uint64(p[6])<<48|uint64(p[7])<<56, 64)
		p = p[8:]
	}
	for _, c := range p {
		w.Bits(uint64(c), 8)
	}
}

// Append copies the first nbits bits of src, a stream produced by another
// Writer, onto this one. The bits of src after them are ignored.
func (w *Writer) Append(src []byte, nbits int) {
	// Fewer than 64 bits with 8 bytes to load, as an encoded entity's
	// values mostly are: one field, by hand, as in U.
	if uint(nbits) < 64 && len(src) >= 8 {
		n := uint(nbits)
		v := binary.LittleEndian.Uint64(src) & (1<<n - 1)
		if w.n+n < 64 {
			w.acc |= v << (w.n & 63)
			w.n += n
			return
		}
		w.spill(v, n)
		return
	}
	w.appendLong(src, nbits)
}

// appendLong is Append for 64 bits or more, or a src shorter than 8
// bytes.
func (w *Writer) appendLong(src []byte, nbits int) {
	for nbits >= 64 {
		w.spill(binary.LittleEndian.Uint64(src), 64) // 64 bits never fit
		src, nbits = src[8:], nbits-64
	}
	if nbits > 0 {
		// The rest in one field: Bits drops the bits above nbits.
		var v uint64
		if len(src) >= 8 {
			v = binary.LittleEndian.Uint64(src)
		} else {
			for i := len(src) - 1; i >= 0; i-- {
				v = v<<8 | uint64(src[i])
			}
		}
		w.Bits(v, uint(nbits))
	}
}

// grow makes room for n more bytes in w's buffer, when it must grow to
// twice what it then needs, and 1 KiB at least: a buffer reused stream
// after stream then reaches twice the size of the largest within a few
// streams, and seldom grows again.
func (w *Writer) grow(n int) {
	if cap(w.buf)-len(w.buf) < n {
		w.buf = slices.Grow(w.buf, max(len(w.buf)+2*n, 1<<10))
	}
}

// Finish flushes the pending bits, padding the last byte with zeros, and
// returns the stream. The Writer may be reused after Reset.
func (w *Writer) Finish() []byte {
	w.grow(8)
	// All 8 bytes of the accumulator at once: it has no bits above the
	// pending ones, so the bytes past them are zero padding.
	l := len(w.buf)
	binary.LittleEndian.PutUint64(w.buf[l:l+8], w.acc)
	w.buf = w.buf[:l+int(w.n+7)/8]
	w.acc, w.n = 0, 0
	return w.buf
}
