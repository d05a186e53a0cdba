package wire_test

import (
	"math/rand/v2"
	"testing"

	"github.com/replicago/replica/wire"
)

// readOneByOne is what Reader.Codes must be equivalent to.
func readOneByOne(r *wire.Reader, dst []uint64, codes []wire.Code) {
	for i := range dst {
		if c := codes[i%len(codes)]; c.Raw != 0 {
			dst[i] = r.Bits(uint(c.Raw))
		} else {
			dst[i] = r.U(uint(c.K))
		}
	}
}

// TestCodesRoundTrip reads rows of values written with mixed codes.
func TestCodesRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for iter := 0; iter < 2000; iter++ {
		codes := make([]wire.Code, 1+rng.IntN(12)) // more than 8 too: Codes reads those 8 at a time
		for i := range codes {
			if rng.IntN(4) == 0 {
				codes[i].Raw = uint8(1 + rng.IntN(64))
			} else {
				codes[i].K = uint8(rng.IntN(wire.MaxK + 1))
			}
		}
		want := make([]uint64, rng.IntN(100))
		var w wire.Writer
		skip := uint(rng.IntN(8))
		w.Bits(0, skip) // misalign
		for i := range want {
			c := codes[i%len(codes)]
			v := rng.Uint64() >> rng.IntN(64)
			if c.Raw != 0 {
				if c.Raw < 64 {
					v &= 1<<c.Raw - 1
				}
				w.Bits(v, uint(c.Raw))
			} else {
				w.U(v, uint(c.K))
			}
			want[i] = v
		}
		stream := w.Finish()
		r := wire.NewReader(stream)
		r.Bits(skip)
		r2 := *r
		got := make([]uint64, len(want))
		r.Codes(got, codes)
		if r.Err() != nil {
			t.Fatalf("iteration %d: %v", iter, r.Err())
		}
		for i := range want {
			if got[i] != want[i] {
				t.Fatalf("iteration %d: value %d = %#x, want %#x", iter, i, got[i], want[i])
			}
		}
		readOneByOne(&r2, got, codes)
		if r.Consumed() != r2.Consumed() || r.Remaining() != r2.Remaining() {
			t.Fatalf("iteration %d: Codes consumed %d, one by one %d", iter, r.Consumed(), r2.Consumed())
		}
	}
}

// FuzzCodes checks that Reader.Codes reads arbitrary input exactly as U
// and Bits one by one do: values, errors and position. data[0] is the
// number of codes, data[1] the number of values, then one byte per code
// (K, or a raw width with the top bit set), then the stream.
func FuzzCodes(f *testing.F) {
	f.Add([]byte{2, 10, 3, 0x80 | 32, 0x12, 0x34, 0x56, 0x78, 0x9a, 0xbc, 0xde, 0xf0, 0x11})
	f.Add([]byte{1, 200, 63, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff})
	f.Add([]byte{3, 7, 0, 64, 0x80 | 64, 1, 2, 3})
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) < 2 {
			return
		}
		nc, nv := int(data[0])%12+1, int(data[1]) // more than 8 codes too
		if len(data) < 2+nc {
			return
		}
		codes := make([]wire.Code, nc)
		for i, b := range data[2 : 2+nc] {
			if b&0x80 != 0 {
				codes[i].Raw = b & 0x7f % 65
			} else {
				codes[i].K = b % 66 // 64 and 65 are malformed
			}
		}
		stream := data[2+nc:]
		r, r2 := wire.NewReader(stream), wire.NewReader(stream)
		got, want := make([]uint64, nv), make([]uint64, nv)
		r.Codes(got, codes)
		readOneByOne(r2, want, codes)
		for i := range want {
			if got[i] != want[i] {
				t.Fatalf("value %d = %#x, want %#x", i, got[i], want[i])
			}
		}
		if (r.Err() == nil) != (r2.Err() == nil) || r.Consumed() != r2.Consumed() || r.Remaining() != r2.Remaining() {
			t.Fatalf("Codes: err %v, consumed %d; one by one: err %v, consumed %d", r.Err(), r.Consumed(), r2.Err(), r2.Consumed())
		}
		// The Readers must go on alike.
		if a, b := r.U(3), r2.U(3); a != b {
			t.Fatalf("next U = %#x, want %#x", a, b)
		}
	})
}

// BenchmarkCodes reads with one Codes call the values BenchmarkUEach
// writes (W1's float deltas: three columns of 22 to 28 bits), and values
// of a few bits each, such as the slot gaps of an ID block.
func BenchmarkCodes(b *testing.B) {
	wide, ks := benchCodes()
	small := make([]uint64, len(wide))
	for i := range small {
		small[i] = wide[i] & 7
	}
	for _, bc := range []struct {
		name  string
		vals  []uint64
		codes []wire.Code
	}{
		{"wide", wide, []wire.Code{{K: ks[0]}, {K: ks[1]}, {K: ks[2]}}},
		{"small", small, []wire.Code{{K: 2}}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			var w wire.Writer
			for i, v := range bc.vals {
				w.U(v, uint(bc.codes[i%len(bc.codes)].K))
			}
			stream := w.Finish()
			dst := make([]uint64, len(bc.vals))
			var r wire.Reader
			for b.Loop() {
				r.Reset(stream)
				r.Codes(dst, bc.codes)
			}
			if r.Err() != nil || dst[len(dst)-1] != bc.vals[len(dst)-1] {
				b.Fatalf("read %d, want %d (err %v)", dst[len(dst)-1], bc.vals[len(dst)-1], r.Err())
			}
		})
	}
}
