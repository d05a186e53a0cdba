package wire_test

import (
	"bytes"
	"errors"
	"math"
	"math/bits"
	"math/rand/v2"
	"testing"

	"github.com/replicago/replica/wire"
)

// boundaries returns 0, 1, 2^b−1 and 2^b for every bit length b, and the
// largest uint64: every value where the U(k) code changes shape.
func boundaries() []uint64 {
	vs := []uint64{0, 1, math.MaxUint64, math.MaxUint64 - 1}
	for b := uint(1); b < 64; b++ {
		vs = append(vs, 1<<b-1, 1<<b, 1<<b+1)
	}
	vs = append(vs, 1<<63)
	return vs
}

func TestBitsRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	type op struct {
		v uint64
		n uint
	}
	var ops []op
	for n := uint(0); n <= 64; n++ {
		ops = append(ops, op{math.MaxUint64, n}, op{0, n}, op{rng.Uint64(), n})
	}
	for range 2000 {
		ops = append(ops, op{rng.Uint64(), uint(rng.IntN(65))})
	}
	var w wire.Writer
	total := 0
	for _, o := range ops {
		w.Bits(o.v, o.n)
		total += int(o.n)
		if w.BitLen() != total {
			t.Fatalf("BitLen = %d after writing %d bits", w.BitLen(), total)
		}
	}
	buf := w.Finish()
	if len(buf) != (total+7)/8 {
		t.Fatalf("Finish gave %d bytes for %d bits", len(buf), total)
	}
	r := wire.NewReader(buf)
	read := 0
	for i, o := range ops {
		want := o.v
		if o.n < 64 {
			want &= 1<<o.n - 1
		}
		if got := r.Bits(o.n); got != want {
			t.Fatalf("op %d: Bits(%d) = %#x, want %#x", i, o.n, got, want)
		}
		read += int(o.n)
		if r.Consumed() != read {
			t.Fatalf("op %d: Consumed = %d, want %d", i, r.Consumed(), read)
		}
	}
	if err := r.Err(); err != nil {
		t.Fatal(err)
	}
	if rem := r.Remaining(); rem != len(buf)*8-total || rem >= 8 {
		t.Fatalf("Remaining = %d after reading %d of %d bytes", rem, total, len(buf))
	}
	if pad := r.Bits(uint(r.Remaining())); pad != 0 {
		t.Fatalf("padding = %#x, want 0", pad)
	}
}

func TestBool(t *testing.T) {
	pattern := []bool{true, false, false, true, true, true, false, true, false, false, true}
	var w wire.Writer
	for range 13 { // 143 bits: crosses several 64-bit flushes
		for _, b := range pattern {
			w.Bool(b)
		}
	}
	r := wire.NewReader(w.Finish())
	for i := range 13 * len(pattern) {
		if got, want := r.Bool(), pattern[i%len(pattern)]; got != want {
			t.Fatalf("bit %d = %v, want %v", i, got, want)
		}
	}
	if r.Err() != nil {
		t.Fatal(r.Err())
	}
}

func TestUAllK(t *testing.T) {
	vals := boundaries()
	for k := uint(0); k <= wire.MaxK; k++ {
		var w wire.Writer
		// A 3-bit prefix misaligns every code relative to the 64-bit
		// accumulator, so codes straddle flushes in many positions.
		w.Bits(5, 3)
		for _, v := range vals {
			before := w.BitLen()
			w.U(v, k)
			if got, want := w.BitLen()-before, wire.ULen(v, k); got != want {
				t.Fatalf("k=%d v=%#x: wrote %d bits, ULen says %d", k, v, got, want)
			}
		}
		r := wire.NewReader(w.Finish())
		if r.Bits(3) != 5 {
			t.Fatalf("k=%d: prefix lost", k)
		}
		for _, v := range vals {
			before := r.Consumed()
			if got := r.U(k); got != v {
				t.Fatalf("k=%d: U = %#x, want %#x (err %v)", k, got, v, r.Err())
			}
			if got, want := r.Consumed()-before, wire.ULen(v, k); got != want {
				t.Fatalf("k=%d v=%#x: read %d bits, ULen says %d", k, v, got, want)
			}
		}
		if r.Err() != nil || r.Remaining() >= 8 {
			t.Fatalf("k=%d: err %v, %d bits left", k, r.Err(), r.Remaining())
		}
	}
}

// TestULenFormula checks ULen against the definition in the package
// documentation rather than against the writer.
func TestULenFormula(t *testing.T) {
	for k := uint(0); k <= wire.MaxK; k++ {
		for _, v := range boundaries() {
			b := uint(bits.Len64(v))
			var want int
			switch {
			case b <= k:
				want = 1 + int(k)
			case b == 64:
				want = int(b-k) + int(b-1) // no terminator
			default:
				want = int(b-k) + 1 + int(b-1)
			}
			if got := wire.ULen(v, k); got != want {
				t.Fatalf("ULen(%#x, %d) = %d, want %d", v, k, got, want)
			}
		}
	}
}

func TestURandom(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	type op struct {
		v uint64
		k uint
	}
	ops := make([]op, 5000)
	var w wire.Writer
	for i := range ops {
		// Values of every bit length, not just huge ones.
		ops[i] = op{rng.Uint64() >> rng.IntN(65), uint(rng.IntN(64))}
		w.U(ops[i].v, ops[i].k)
	}
	r := wire.NewReader(w.Finish())
	for i, o := range ops {
		if got := r.U(o.k); got != o.v {
			t.Fatalf("op %d: U(%d) = %#x, want %#x", i, o.k, got, o.v)
		}
	}
}

func TestSigned(t *testing.T) {
	vals := []int64{0, 1, -1, 2, -2, 63, -64, 64, -65, math.MaxInt32, math.MinInt32,
		math.MaxInt64, math.MinInt64, math.MaxInt64 - 1, math.MinInt64 + 1, 1 << 62, -(1 << 62)}
	for _, v := range vals {
		if got := wire.Unzigzag(wire.Zigzag(v)); got != v {
			t.Fatalf("Unzigzag(Zigzag(%d)) = %d", v, got)
		}
	}
	// Small magnitudes map to small codes.
	for i, v := range []int64{0, -1, 1, -2, 2, -3} {
		if got := wire.Zigzag(v); got != uint64(i) {
			t.Errorf("Zigzag(%d) = %d, want %d", v, got, i)
		}
	}
	if got := wire.Zigzag(math.MinInt64); got != math.MaxUint64 {
		t.Errorf("Zigzag(MinInt64) = %#x", got)
	}
	for k := uint(0); k <= wire.MaxK; k++ {
		var w wire.Writer
		for _, v := range vals {
			w.S(v, k)
		}
		r := wire.NewReader(w.Finish())
		for _, v := range vals {
			if got := r.S(k); got != v {
				t.Fatalf("k=%d: S = %d, want %d", k, got, v)
			}
		}
	}
}

func TestBytesAndStrings(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	var payloads [][]byte
	for _, n := range []int{0, 1, 7, 8, 9, 15, 16, 17, 63, 64, 65, 300} {
		p := make([]byte, n)
		for i := range p {
			p[i] = byte(rng.Uint32())
		}
		payloads = append(payloads, p)
	}
	for shift := uint(0); shift < 8; shift++ {
		var w wire.Writer
		w.Bits(0x55, shift) // vary the alignment of every payload
		for i, p := range payloads {
			if i%2 == 0 {
				w.Bytes(p)
			} else {
				w.String(string(p))
			}
		}
		buf := w.Finish()
		r := wire.NewReader(buf)
		r.Bits(shift)
		for i, p := range payloads {
			if i%2 == 0 {
				got := r.Bytes(1 << 20)
				if !bytes.Equal(got, p) || got == nil {
					t.Fatalf("shift %d payload %d: Bytes = %x, want %x", shift, i, got, p)
				}
			} else if got := r.String(1 << 20); got != string(p) {
				t.Fatalf("shift %d payload %d: String = %x, want %x", shift, i, got, p)
			}
		}
		if r.Err() != nil || r.Remaining() >= 8 {
			t.Fatalf("shift %d: err %v, %d bits left", shift, r.Err(), r.Remaining())
		}
		// SkipBytes consumes exactly what Bytes would.
		r.Reset(buf)
		r.Bits(shift)
		for range payloads {
			r.SkipBytes(1 << 20)
		}
		if r.Err() != nil || r.Remaining() >= 8 {
			t.Fatalf("shift %d: SkipBytes: err %v, %d bits left", shift, r.Err(), r.Remaining())
		}
	}
}

func TestStringEqualsBytesEncoding(t *testing.T) {
	for _, s := range []string{"", "a", "hello, world", "0123456789abcdefXYZ"} {
		for shift := uint(0); shift < 8; shift++ {
			var a, b wire.Writer
			a.Bits(1, shift)
			b.Bits(1, shift)
			a.String(s)
			b.Bytes([]byte(s))
			if x, y := a.Finish(), b.Finish(); !bytes.Equal(x, y) {
				t.Fatalf("%q shift %d: String %x, Bytes %x", s, shift, x, y)
			}
		}
	}
}

// TestAppend appends a stream, or the start of one, after a few bits and
// reads it back.
func TestAppend(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	for iter := range 500 {
		// The source stream: random bits of random total length.
		nbits := rng.IntN(400)
		if iter < 130 {
			nbits = iter // every small length, including 0 and 64, 128
		}
		src := make([]bool, nbits)
		var sw wire.Writer
		for i := range src {
			src[i] = rng.IntN(2) == 1
			sw.Bool(src[i])
		}
		if sw.BitLen() != nbits {
			t.Fatal("source BitLen")
		}
		srcBuf := sw.Finish()
		if iter%2 == 1 {
			// Only the start of a longer stream: the bits after it
			// must not leak in.
			for range rng.IntN(10) {
				srcBuf = append(srcBuf, byte(rng.Uint32()))
			}
			if cut := rng.IntN(nbits + 1); cut < nbits {
				srcBuf[cut/8] |= ^byte(0) << (cut % 8)
				nbits, src = cut, src[:cut]
			}
		}
		prefix := rng.IntN(70)
		var w wire.Writer
		pre := make([]bool, prefix)
		for i := range pre {
			pre[i] = rng.IntN(2) == 1
			w.Bool(pre[i])
		}
		w.Append(srcBuf, nbits)
		w.Bits(0b101, 3) // something after the appended bits
		if w.BitLen() != prefix+nbits+3 {
			t.Fatalf("iter %d: BitLen = %d, want %d", iter, w.BitLen(), prefix+nbits+3)
		}
		r := wire.NewReader(w.Finish())
		for i, b := range append(pre, src...) {
			if r.Bool() != b {
				t.Fatalf("iter %d (prefix %d, nbits %d): bit %d differs", iter, prefix, nbits, i)
			}
		}
		if r.Bits(3) != 0b101 || r.Err() != nil {
			t.Fatalf("iter %d: trailer lost", iter)
		}
	}
}

func TestWriterReset(t *testing.T) {
	var w wire.Writer
	w.U(12345, 3)
	first := append([]byte(nil), w.Finish()...)
	w.Reset(w.Finish())
	if w.BitLen() != 0 {
		t.Fatalf("BitLen after Reset = %d", w.BitLen())
	}
	w.U(12345, 3)
	if got := w.Finish(); !bytes.Equal(got, first) {
		t.Fatalf("after Reset: %x, want %x", got, first)
	}
	// Reset keeps what precedes the slice it is given.
	buf := []byte{0xAA, 0xBB}
	w.Reset(buf[2:])
	w.Bits(0x1, 8)
	if got := append(buf, w.Finish()...); !bytes.Equal(got, []byte{0xAA, 0xBB, 0x01}) {
		t.Fatalf("got %x", got)
	}
}

func bruteBestK(hist *[65]uint32) (uint, uint64) {
	best, bestCost := uint(0), uint64(math.MaxUint64)
	for k := uint(0); k <= wire.MaxK; k++ {
		var cost uint64
		for b, c := range hist {
			if c == 0 {
				continue
			}
			v := uint64(0)
			if b > 0 {
				v = 1 << (b - 1) // any value of bit length b
			}
			cost += uint64(wire.ULen(v, k)) * uint64(c)
		}
		if cost < bestCost {
			best, bestCost = k, cost
		}
	}
	return best, bestCost
}

func TestBestK(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	for iter := range 3000 {
		var hist [65]uint32
		switch iter % 4 {
		case 0: // a few bit lengths
			for range 1 + rng.IntN(4) {
				hist[rng.IntN(65)] += uint32(1 + rng.IntN(100))
			}
		case 1: // clustered around one length
			c := rng.IntN(65)
			for range 50 {
				b := c + rng.IntN(7) - 3
				if b >= 0 && b <= 64 {
					hist[b]++
				}
			}
		case 2: // dense
			for b := range hist {
				hist[b] = uint32(rng.IntN(5))
			}
		case 3: // a single value, possibly 64 bits long
			hist[64-rng.IntN(3)] = uint32(1 + rng.IntN(3))
		}
		want, _ := bruteBestK(&hist)
		if got := wire.BestK(&hist); got != want {
			t.Fatalf("iter %d: BestK = %d, brute force %d for %v", iter, got, want, hist)
		}
	}
	var empty [65]uint32
	if got := wire.BestK(&empty); got != 0 {
		t.Fatalf("BestK(empty) = %d", got)
	}
}

func TestReaderTruncated(t *testing.T) {
	r := wire.NewReader(nil)
	if r.Bits(1) != 0 || !errors.Is(r.Err(), wire.ErrTruncated) {
		t.Fatalf("Bits on empty input: err %v", r.Err())
	}
	// Exactly the available bits succeed, one more fails.
	r = wire.NewReader([]byte{0xFF, 0x01})
	if got := r.Bits(9); got != 0x1FF || r.Err() != nil {
		t.Fatalf("Bits(9) = %#x, err %v", got, r.Err())
	}
	if r.Bits(7) != 0 || r.Err() != nil {
		t.Fatal("the padding bits are readable")
	}
	if r.Bits(1) != 0 || !errors.Is(r.Err(), wire.ErrTruncated) {
		t.Fatalf("read past the end: err %v", r.Err())
	}
	// A U code whose prefix never ends.
	r = wire.NewReader([]byte{0xFF, 0xFF})
	if r.U(2) != 0 || !errors.Is(r.Err(), wire.ErrTruncated) {
		t.Fatalf("U on all ones: err %v", r.Err())
	}
	// A U code whose payload is cut off.
	var w wire.Writer
	w.U(1<<40, 0)
	buf := w.Finish()
	r = wire.NewReader(buf[:len(buf)-2])
	if r.U(0); !errors.Is(r.Err(), wire.ErrTruncated) {
		t.Fatalf("U with cut payload: err %v", r.Err())
	}
	// A 64-bit read that straddles the end.
	r = wire.NewReader(make([]byte, 7))
	if r.Bits(64) != 0 || !errors.Is(r.Err(), wire.ErrTruncated) {
		t.Fatalf("Bits(64) of 56 bits: err %v", r.Err())
	}
	// Byte strings whose length exceeds the input.
	w = wire.Writer{}
	w.Bytes([]byte("hello"))
	buf = w.Finish()
	for _, f := range []func(*wire.Reader){
		func(r *wire.Reader) { r.Bytes(100) },
		func(r *wire.Reader) { r.String(100) },
		func(r *wire.Reader) { r.SkipBytes(100) },
	} {
		r = wire.NewReader(buf[:3])
		f(r)
		if !errors.Is(r.Err(), wire.ErrTruncated) {
			t.Fatalf("short byte string: err %v", r.Err())
		}
	}
	// A byte-aligned string cut short.
	w = wire.Writer{}
	w.Bits(0, 3)
	w.U(3, 4) // 5 bits: the string starts byte aligned
	w.Bits(0x414243, 24)
	buf = w.Finish()
	r = wire.NewReader(buf[:3])
	if s := r.String(100); s != "" || r.Err() == nil {
		t.Fatalf("String of a cut aligned payload = %q, err %v", s, r.Err())
	}
}

func TestReaderMalformed(t *testing.T) {
	r := wire.NewReader([]byte{0, 0, 0})
	if r.U(wire.MaxK+1) != 0 || !errors.Is(r.Err(), wire.ErrMalformed) {
		t.Fatalf("U(64): err %v", r.Err())
	}
}

func TestReaderCount(t *testing.T) {
	enc := func(n uint64, k uint, pad int) []byte {
		var w wire.Writer
		w.U(n, k)
		for range pad {
			w.Bits(0, 8)
		}
		return w.Finish()
	}
	// Within the limit and the input.
	r := wire.NewReader(enc(5, 3, 5))
	if got := r.Count(3, 5, 8, "things"); got != 5 || r.Err() != nil {
		t.Fatalf("Count = %d, err %v", got, r.Err())
	}
	// Over the limit.
	r = wire.NewReader(enc(6, 3, 100))
	if got := r.Count(3, 5, 8, "things"); got != 0 || !errors.Is(r.Err(), wire.ErrLimit) {
		t.Fatalf("Count over the limit = %d, err %v", got, r.Err())
	}
	// More items than the remaining bits can hold.
	r = wire.NewReader(enc(6, 3, 5))
	if got := r.Count(3, 100, 8, "things"); got != 0 || !errors.Is(r.Err(), wire.ErrTruncated) {
		t.Fatalf("Count beyond the input = %d, err %v", got, r.Err())
	}
	// minBits 0 disables the input check.
	r = wire.NewReader(enc(1000, 3, 0))
	if got := r.Count(3, 1000, 0, "things"); got != 1000 || r.Err() != nil {
		t.Fatalf("Count without minBits = %d, err %v", got, r.Err())
	}
	// A truncated count.
	r = wire.NewReader(nil)
	if got := r.Count(3, 100, 1, "things"); got != 0 || !errors.Is(r.Err(), wire.ErrTruncated) {
		t.Fatalf("Count on empty input = %d, err %v", got, r.Err())
	}
}

// TestReaderCountOverflow shows that Count's input check overflows when
// the limit is large: n·minBits wraps around and a count of 2^61 eight-bit
// items passes against a 17-byte input. Bytes then tries to allocate 2^61
// bytes and panics. Decoders pass configurable limits (codec.Limits) as max,
// so a generous configuration turns this into a remote crash.
func TestReaderCountOverflow(t *testing.T) {
	var w wire.Writer
	w.U(1<<61, 4)
	buf := w.Finish()
	r := wire.NewReader(buf)
	// Where int has 32 bits, 2^61 is over the limit itself.
	want := wire.ErrTruncated
	if math.MaxInt < 1<<61 {
		want = wire.ErrLimit
	}
	if got := r.Count(4, math.MaxInt, 8, "byte length"); got != 0 || !errors.Is(r.Err(), want) {
		t.Errorf("Count(2^61 items of 8 bits) in a %d-bit input = %d, err %v; want 0, %v",
			len(buf)*8, got, r.Err(), want)
	}
	r = wire.NewReader(buf)
	func() {
		defer func() {
			if p := recover(); p != nil {
				t.Errorf("Bytes(MaxInt) on a lying length panicked: %v", p)
			}
		}()
		if b := r.Bytes(math.MaxInt); b != nil || r.Err() == nil {
			t.Errorf("Bytes(MaxInt) on a lying length: %d bytes, err %v", len(b), r.Err())
		}
	}()
}

func TestReaderSticky(t *testing.T) {
	var w wire.Writer
	w.U(7, 2)
	w.Bits(0xABCD, 16)
	w.String("xyz")
	buf := w.Finish()

	r := wire.NewReader(buf)
	r.U(70) // malformed parameter
	first := r.Err()
	if !errors.Is(first, wire.ErrMalformed) {
		t.Fatalf("err %v", first)
	}
	if r.Remaining() != 0 {
		t.Fatalf("Remaining after an error = %d", r.Remaining())
	}
	consumed := r.Consumed()
	// Every later read returns zero values and keeps the first error.
	if r.Bits(16) != 0 || r.Bool() || r.U(2) != 0 || r.S(2) != 0 ||
		r.Count(2, 10, 1, "x") != 0 || r.Bytes(10) != nil || r.String(10) != "" {
		t.Fatal("a read after an error returned data")
	}
	r.SkipBytes(10)
	r.Fail(errors.New("second"))
	if r.Err() != first {
		t.Fatalf("error replaced: %v", r.Err())
	}
	if r.Consumed() != consumed {
		t.Fatalf("Consumed moved after the error: %d → %d", consumed, r.Consumed())
	}

	// Fail on a healthy reader records the error and stops reading.
	r = wire.NewReader(buf)
	r.U(2)
	mine := errors.New("semantic")
	r.Fail(mine)
	if r.Err() != mine || r.Bits(1) != 0 || r.Remaining() != 0 {
		t.Fatalf("Fail: err %v", r.Err())
	}

	// Reset clears the error.
	r.Reset(buf)
	if r.Err() != nil || r.U(2) != 7 || r.Bits(16) != 0xABCD || r.String(3) != "xyz" {
		t.Fatalf("after Reset: err %v", r.Err())
	}
}

func TestStringLimit(t *testing.T) {
	var w wire.Writer
	w.String("abcdef")
	buf := w.Finish()
	r := wire.NewReader(buf)
	if s := r.String(5); s != "" || !errors.Is(r.Err(), wire.ErrLimit) {
		t.Fatalf("String(5) of 6 bytes = %q, err %v", s, r.Err())
	}
	r = wire.NewReader(buf)
	if s := r.String(6); s != "abcdef" {
		t.Fatalf("String(6) = %q, err %v", s, r.Err())
	}
}

// TestPeek checks that Peek shows the bits the next reads return, without
// consuming them, at every alignment and near the end of the input, where
// the missing bits read as zero.
func TestPeek(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	buf := make([]byte, 40)
	for i := range buf {
		buf[i] = byte(rng.Uint32())
	}
	for skip := 0; skip <= len(buf)*8; skip++ {
		for _, n := range []uint{1, 7, 8, 13, 31, 55, 56} {
			r := wire.NewReader(buf)
			for s := skip; s > 0; s -= min(s, 56) {
				r.Bits(uint(min(s, 56)))
			}
			got := r.Peek(n)
			if again := r.Peek(n); again != got {
				t.Fatalf("skip %d: Peek(%d) = %#x, then %#x", skip, n, got, again)
			}
			if r.Consumed() != skip {
				t.Fatalf("skip %d: Peek(%d) consumed: at bit %d", skip, n, r.Consumed())
			}
			// What Bits reads, with zeros past the end.
			have := uint(min(int(n), len(buf)*8-skip))
			want := r.Bits(have)
			if r.Err() != nil || got != want {
				t.Fatalf("skip %d: Peek(%d) = %#x, Bits(%d) = %#x, err %v", skip, n, got, have, want, r.Err())
			}
		}
	}
	// After an error, every bit reads as zero.
	r := wire.NewReader([]byte{0xFF})
	r.Bits(9)
	if got := r.Peek(8); got != 0 || r.Err() == nil {
		t.Fatalf("Peek after an error = %#x, err %v", got, r.Err())
	}
}
