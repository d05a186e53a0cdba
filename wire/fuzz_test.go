package wire_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"testing"

	"github.com/replicago/replica/wire"
)

// readerOps are the operations FuzzReader drives a Reader with, one per
// pair of (opcode, argument) bytes.
const readerOps = 10

// sampleStream returns a stream that uses every writer method.
func sampleStream() []byte {
	var w wire.Writer
	w.U(3, 2)
	w.Bits(0xDEADBEEF, 32)
	w.Bool(true)
	w.S(-12345, 4)
	w.String("hello")
	w.Bytes([]byte{1, 2, 3, 4, 5, 6, 7, 8, 9})
	w.U(1<<63, 0)
	w.U(7, 63)
	return w.Finish()
}

// FuzzReader reads arbitrary input with an arbitrary sequence of
// operations. data[0] says how many (opcode, argument) pairs follow; the
// rest is the stream. The Reader must never panic, never read past its
// input, bound every count and keep its first error.
func FuzzReader(f *testing.F) {
	stream := sampleStream()
	ops := []byte{2, 2, 0, 32, 1, 0, 3, 4, 6, 255, 5, 255, 2, 0, 2, 63, 8, 0}
	f.Add(append([]byte{byte(len(ops) / 2)}, append(ops, stream...)...))
	f.Add(append([]byte{4, 4, 2, 7, 200, 5, 50, 6, 1}, stream...))
	f.Add([]byte{3, 2, 0, 2, 0, 2, 0, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF})
	f.Add([]byte{2, 0, 64, 0, 64, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10})
	f.Add([]byte{1, 2, 64, 0})
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) == 0 {
			return
		}
		nops := min(int(data[0]), (len(data)-1)/2)
		ops, stream := data[1:1+2*nops], data[1+2*nops:]
		r := wire.NewReader(stream)
		var firstErr error
		lastConsumed := 0
		for i := 0; i < len(ops); i += 2 {
			op, arg := ops[i]%readerOps, ops[i+1]
			remBefore := r.Remaining()
			failed := r.Err() != nil
			switch op {
			case 0:
				n := uint(arg) % 65
				v := r.Bits(n)
				if n < 64 && v>>n != 0 {
					t.Fatalf("Bits(%d) = %#x has too many bits", n, v)
				}
				if failed && v != 0 {
					t.Fatalf("Bits after an error = %#x", v)
				}
			case 1:
				if b := r.Bool(); failed && b {
					t.Fatal("Bool after an error = true")
				}
			case 2:
				k := uint(arg) % 66 // 64 and 65 are malformed
				if v := r.U(k); failed && v != 0 {
					t.Fatalf("U after an error = %#x", v)
				}
				if k > wire.MaxK && r.Err() == nil {
					t.Fatalf("U(%d) accepted", k)
				}
			case 3:
				if v := r.S(uint(arg) % 64); failed && v != 0 {
					t.Fatalf("S after an error = %d", v)
				}
			case 4:
				max, minBits := int(arg)*7, int(arg%9)
				n := r.Count(uint(arg)%64, max, minBits, "items")
				if n < 0 || n > max {
					t.Fatalf("Count = %d outside 0..%d", n, max)
				}
				if r.Err() == nil && n*minBits > remBefore {
					t.Fatalf("Count = %d items of %d bits with %d bits left", n, minBits, remBefore)
				}
				if r.Err() != nil && n != 0 {
					t.Fatalf("failed Count returned %d", n)
				}
			case 5:
				max := int(arg) * 3
				b := r.Bytes(max)
				if len(b) > max || len(b)*8 > remBefore {
					t.Fatalf("Bytes(%d) returned %d bytes with %d bits left", max, len(b), remBefore)
				}
			case 6:
				max := int(arg) * 3
				s := r.String(max)
				if len(s) > max || len(s)*8 > remBefore {
					t.Fatalf("String(%d) returned %d bytes with %d bits left", max, len(s), remBefore)
				}
				if r.Err() != nil && s != "" {
					t.Fatalf("failed String returned %q", s)
				}
			case 7:
				r.SkipBytes(int(arg) * 3)
			case 8:
				if rem := r.Remaining(); rem > 0 && r.Err() == nil {
					r.Bits(uint(min(rem, int(arg)%65)))
				}
			case 9:
				if arg == 0xEE {
					r.Fail(errors.New("injected"))
				}
			}
			err := r.Err()
			switch {
			case firstErr == nil && err != nil:
				firstErr = err
				if !errors.Is(err, wire.ErrTruncated) && !errors.Is(err, wire.ErrLimit) &&
					!errors.Is(err, wire.ErrMalformed) && err.Error() != "injected" {
					t.Fatalf("unexpected error %v", err)
				}
			case firstErr != nil && err != firstErr:
				t.Fatalf("error changed from %v to %v", firstErr, err)
			}
			if err != nil {
				if r.Remaining() != 0 {
					t.Fatalf("Remaining = %d after an error", r.Remaining())
				}
			} else if r.Consumed()+r.Remaining() != 8*len(stream) {
				t.Fatalf("Consumed %d + Remaining %d != %d bits", r.Consumed(), r.Remaining(), 8*len(stream))
			}
			if r.Consumed() < lastConsumed || r.Consumed() > 8*len(stream) {
				t.Fatalf("Consumed went from %d to %d of %d bits", lastConsumed, r.Consumed(), 8*len(stream))
			}
			lastConsumed = r.Consumed()
		}
	})
}

// A roundTripOp is one value FuzzRoundTrip writes and expects back.
type roundTripOp struct {
	code byte
	v    uint64
	k    uint
	p    []byte
	n    int // bits, for Append
}

// parseRoundTrip turns fuzz input into a sequence of writes: an opcode
// byte, then what the opcode needs.
func parseRoundTrip(data []byte) []roundTripOp {
	next := func(n int) []byte {
		n = min(n, len(data))
		p := data[:n]
		data = data[n:]
		return p
	}
	u64 := func() uint64 {
		var b [8]byte
		copy(b[:], next(8))
		return binary.LittleEndian.Uint64(b[:])
	}
	var ops []roundTripOp
	for len(data) > 0 && len(ops) < 512 {
		op := roundTripOp{code: next(1)[0]}
		arg := uint(op.code >> 3)
		switch op.code % 7 {
		case 0: // Bits: width from the opcode, 0..64
			op.k = arg * 65 / 32
			op.v = u64()
		case 1: // Bool
			op.v = uint64(arg & 1)
		case 2: // U: k 0..31 from the opcode, the value shifted to vary its length
			op.k = arg
			op.v = u64() >> (u64() % 65)
		case 3: // U with a large k
			op.k = 32 + arg
			op.v = u64()
		case 4: // S
			op.k = arg * 2
			op.v = u64() >> (arg % 8)
		case 5: // Bytes or String
			op.p = append([]byte(nil), next(int(arg))...)
		case 6: // Append: the next bytes as a stream, arg*5 bits of it at most
			op.p = append([]byte(nil), next(int(arg+7)/8*5)...)
			op.n = min(int(arg)*5, len(op.p)*8)
		}
		ops = append(ops, op)
	}
	return ops
}

// FuzzRoundTrip writes a sequence of values derived from the input and
// reads them back: every value must come back unchanged and the bit count
// of every write must be what ULen and the format predict.
func FuzzRoundTrip(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte{0x00, 1, 2, 3, 4, 5, 6, 7, 8})
	f.Add([]byte{0xF8, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x02, 9, 9, 9, 9, 9, 9, 9, 9, 0, 0, 0, 0, 0, 0, 0, 0})
	f.Add([]byte{0x03, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFB, 1, 0, 0, 0, 0, 0, 0, 0x80})
	f.Add([]byte{0x2D, 'h', 'e', 'l', 'l', 'o', 0x09, 0x36, 0xAA, 0x55, 0xAA, 0x55, 0xAA, 0x55, 0xFF})
	f.Add(append([]byte{0x04}, sampleStream()...))
	f.Fuzz(func(t *testing.T, data []byte) {
		ops := parseRoundTrip(data)
		var w wire.Writer
		for i, op := range ops {
			before := w.BitLen()
			want := 0
			switch op.code % 7 {
			case 0:
				w.Bits(op.v, op.k)
				want = int(op.k)
			case 1:
				w.Bool(op.v == 1)
				want = 1
			case 2, 3:
				w.U(op.v, op.k)
				want = wire.ULen(op.v, op.k)
			case 4:
				w.S(int64(op.v), op.k)
				want = wire.ULen(wire.Zigzag(int64(op.v)), op.k)
			case 5:
				if op.code&1 == 0 {
					w.Bytes(op.p)
				} else {
					w.String(string(op.p))
				}
				want = wire.ULen(uint64(len(op.p)), 4) + 8*len(op.p)
			case 6:
				w.Append(op.p, op.n)
				want = op.n
			}
			if got := w.BitLen() - before; got != want {
				t.Fatalf("op %d (%+v): wrote %d bits, want %d", i, op, got, want)
			}
		}
		total := w.BitLen()
		buf := w.Finish()
		if len(buf) != (total+7)/8 {
			t.Fatalf("%d bytes for %d bits", len(buf), total)
		}
		r := wire.NewReader(buf)
		for i, op := range ops {
			switch op.code % 7 {
			case 0:
				want := op.v
				if op.k < 64 {
					want &= 1<<op.k - 1
				}
				if got := r.Bits(op.k); got != want {
					t.Fatalf("op %d: Bits(%d) = %#x, want %#x", i, op.k, got, want)
				}
			case 1:
				if got := r.Bool(); got != (op.v == 1) {
					t.Fatalf("op %d: Bool = %v", i, got)
				}
			case 2, 3:
				if got := r.U(op.k); got != op.v {
					t.Fatalf("op %d: U(%d) = %#x, want %#x", i, op.k, got, op.v)
				}
			case 4:
				if got := r.S(op.k); got != int64(op.v) {
					t.Fatalf("op %d: S(%d) = %d, want %d", i, op.k, got, int64(op.v))
				}
			case 5:
				if op.code&1 == 0 {
					if got := r.Bytes(len(op.p)); !bytes.Equal(got, op.p) {
						t.Fatalf("op %d: Bytes = %x, want %x", i, got, op.p)
					}
				} else if got := r.String(len(op.p)); got != string(op.p) {
					t.Fatalf("op %d: String = %x, want %x", i, got, op.p)
				}
			case 6:
				for j := 0; j < op.n; j++ {
					want := op.p[j/8]>>(j%8)&1 == 1
					if got := r.Bool(); got != want {
						t.Fatalf("op %d: appended bit %d = %v", i, j, got)
					}
				}
			}
		}
		if r.Err() != nil {
			t.Fatalf("read back: %v", r.Err())
		}
		if r.Consumed() != total {
			t.Fatalf("read %d bits, wrote %d", r.Consumed(), total)
		}
		if rem := r.Remaining(); rem >= 8 || r.Bits(uint(rem)) != 0 {
			t.Fatalf("padding: %d bits, not zero", rem)
		}
	})
}
