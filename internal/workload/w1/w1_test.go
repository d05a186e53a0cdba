package w1

import (
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"math"
	"os"
	"strconv"
	"strings"
	"testing"
)

func f32(v float32) string { return strconv.FormatFloat(float64(v), 'g', -1, 32) }

func TestEntity0After600Ticks(t *testing.T) {
	w := New(DefaultConfig())
	for i := 0; i < 600; i++ {
		w.Step()
	}
	if w.Tick != 600 {
		t.Fatalf("Tick = %d, want 600", w.Tick)
	}
	if got, want := f32(w.X[0]), "640.8127"; got != want {
		t.Errorf("x[0] = %s, want %s", got, want)
	}
	if got, want := f32(w.Y[0]), "12.208303"; got != want {
		t.Errorf("y[0] = %s, want %s", got, want)
	}
	if got, want := f32(w.Angle[0]), "3.2121308"; got != want {
		t.Errorf("angle[0] = %s, want %s", got, want)
	}
	if got, want := w.HP[0], int16(21); got != want {
		t.Errorf("hp[0] = %d, want %d", got, want)
	}
	if got, want := w.Name[0], "entity-0"; got != want {
		t.Errorf("name[0] = %q, want %q", got, want)
	}
}

func TestConstants(t *testing.T) {
	// Math.fround(2*Math.PI) == 6.2831854820251465 in the reference.
	if got := float64(twoPi32); got != 6.2831854820251465 {
		t.Errorf("twoPi32 = %v", got)
	}
	w := New(DefaultConfig())
	if w.nMoved != 100 || w.nHP != 10 {
		t.Errorf("per-tick counts = %d, %d, want 100, 10", w.nMoved, w.nHP)
	}
	if w.maxXY != 999.999 {
		t.Errorf("maxXY = %v, want 999.999", w.maxXY)
	}
	for _, c := range []struct{ in, want float64 }{
		{0.5, 1}, {1.5, 2}, {2.5, 3}, {-0.5, -0}, {-1.5, -1}, {0.49999999999999994, 0}, {100.00000000000001, 100},
	} {
		if got := jsRound(c.in); got != c.want {
			t.Errorf("jsRound(%v) = %v, want %v", c.in, got, c.want)
		}
	}
}

// stateHash is FNV-1a 64 over the little-endian bytes of the x, y, angle
// (float32 bit patterns) and hp arrays, in that order; gen_golden.mjs
// computes the same over the reference's typed arrays.
func stateHash(w *World) string {
	h := fnv.New64a()
	var b []byte
	for _, a := range [][]float32{w.X, w.Y, w.Angle} {
		for _, v := range a {
			b = binary.LittleEndian.AppendUint32(b, math.Float32bits(v))
		}
	}
	for _, v := range w.HP {
		b = binary.LittleEndian.AppendUint16(b, uint16(v))
	}
	h.Write(b)
	return fmt.Sprintf("%016x", h.Sum64())
}

// parseFloat parses a JavaScript shortest round-trip decimal; the result is
// the exact float64 the reference printed.
func parseFloat(t *testing.T, s string) float64 {
	t.Helper()
	v, err := strconv.ParseFloat(s, 64)
	if err != nil {
		t.Fatalf("bad float %q in golden: %v", s, err)
	}
	return v
}

func sameFloat(a, b float64) bool { return math.Float64bits(a) == math.Float64bits(b) }

// TestGolden replays testdata/golden.txt, produced from the reference
// generator by testdata/gen_golden.mjs (see there for the line format).
func TestGolden(t *testing.T) {
	data, err := os.ReadFile("testdata/golden.txt")
	if err != nil {
		t.Fatal(err)
	}
	var lines [][]string
	for _, l := range strings.Split(string(data), "\n") {
		if f := strings.Fields(l); len(f) > 0 {
			lines = append(lines, f)
		}
	}

	// Replay the world once, recording what the golden file may ask about.
	w := New(DefaultConfig())
	hashes := map[int]string{0: stateHash(w)}
	ids := map[string]string{}
	for tick := 1; tick <= 600; tick++ {
		moved, hp := w.Step()
		if tick == 1 {
			ids["moved 1"] = fmt.Sprint(moved)
			ids["hpchanged 1"] = fmt.Sprint(hp)
		}
		hashes[tick] = stateHash(w)
	}
	clients := w.Clients(100)

	kinds := map[string]int{}
	for _, f := range lines {
		kinds[f[0]]++
		if len(f) < 2 {
			t.Fatalf("short golden line %q", f)
		}
		switch f[0] {
		case "rand":
			seed, _ := strconv.ParseUint(f[1], 10, 32)
			r := NewRand(uint32(seed))
			for i, s := range f[2:] {
				if got, want := r.Float64(), parseFloat(t, s); !sameFloat(got, want) {
					t.Errorf("rand seed %d output %d = %v, want %v", seed, i, got, want)
				}
			}
		case "tick":
			n, _ := strconv.Atoi(f[1])
			if got, ok := hashes[n]; !ok || got != f[2] {
				t.Errorf("state hash after tick %d = %s, want %s", n, got, f[2])
			}
		case "moved", "hpchanged":
			key := f[0] + " " + f[1]
			if got, want := ids[key], "["+strings.Join(f[2:], " ")+"]"; got != want {
				t.Errorf("%s ids = %s, want %s", key, got, want)
			}
		case "client":
			c, _ := strconv.Atoi(f[1])
			if c >= len(clients) || len(f) != 6 {
				t.Fatalf("bad client line %q", f)
			}
			cl := clients[c]
			if !sameFloat(cl.CX, parseFloat(t, f[2])) || !sameFloat(cl.CY, parseFloat(t, f[3])) ||
				!sameFloat(cl.Half, parseFloat(t, f[4])) {
				t.Errorf("client %d = %+v, want %v", c, cl, f[2:5])
			}
			n := 0
			for id := range w.X {
				if w.Visible(cl, id) {
					n++
				}
			}
			if got := len(w.AppendVisible(nil, cl)); got != n {
				t.Errorf("client %d: AppendVisible found %d, Visible %d", c, got, n)
			}
			if want, _ := strconv.Atoi(f[5]); n != want {
				t.Errorf("client %d sees %d entities at tick 600, want %d", c, n, want)
			}
		default:
			t.Fatalf("unknown golden line %q", f)
		}
	}
	if kinds["rand"] != 2 || kinds["tick"] != 6 || kinds["moved"] != 1 || kinds["hpchanged"] != 1 || kinds["client"] != 100 {
		t.Errorf("golden file incomplete: %v", kinds)
	}
}

func TestSampleDistinct(t *testing.T) {
	w := New(DefaultConfig())
	ids := w.Sample(1000)
	seen := make([]bool, 1000)
	for _, id := range ids {
		if seen[id] {
			t.Fatalf("duplicate id %d", id)
		}
		seen[id] = true
	}
}

func TestStepAllocs(t *testing.T) {
	w := New(DefaultConfig())
	for i := 0; i < 10; i++ {
		w.Step()
	}
	if n := testing.AllocsPerRun(1000, func() { w.Step() }); n != 0 {
		t.Errorf("Step allocates %v times per call, want 0", n)
	}
}

func BenchmarkStep(b *testing.B) {
	w := New(DefaultConfig())
	b.ReportAllocs()
	for b.Loop() {
		w.Step()
	}
}
