package bench

import (
	"testing"

	"github.com/replicago/replica/internal/workload/w1"
)

// TestW1Verifies runs a short W1 in both modes and checks that every
// client's replica equals the server's entities.
func TestW1Verifies(t *testing.T) {
	for _, q := range []bool{false, true} {
		res, err := RunW1(W1Config{Clients: 3, Quantized: q, Warmup: 5, Measured: 45})
		if err != nil {
			t.Fatal(err)
		}
		if !res.Verified {
			t.Fatalf("quantized=%v: clients diverged from the server", q)
		}
		if res.BytesPerClientTick <= 0 || res.FullStateBytes <= 0 {
			t.Fatalf("quantized=%v: no bytes counted: %+v", q, res)
		}
		checkMachine(t, res.Machine)
	}
}

// BenchmarkW1 reports the W1 figures as benchmark metrics.
func BenchmarkW1(b *testing.B) {
	for _, q := range []bool{false, true} {
		name := "lossless"
		if q {
			name = "quantized"
		}
		b.Run(name, func(b *testing.B) {
			var res *W1Result
			for b.Loop() {
				var err error
				res, err = RunW1(W1Config{Clients: 100, Quantized: q})
				if err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(res.BytesPerClientTick, "B/client/tick")
			b.ReportMetric(res.ServerUSPerTick.P50, "server-µs/tick-p50")
			b.ReportMetric(res.ClientUSPerTick.P50, "client-µs/tick-p50")
			b.ReportMetric(res.AllocsPerTick, "server-allocs/tick")
		})
	}
}

// BenchmarkW1ServerTick measures one W1 server tick: the workload step,
// the generated setters, commit and the encode for every partition.
func BenchmarkW1ServerTick(b *testing.B) {
	s, err := newW1Server(w1.New(w1.DefaultConfig()), false, make([]unit, 1000))
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		s.tick()
	}
}

// BenchmarkW1ClientApply measures decoding and applying one W1 tick.
func BenchmarkW1ClientApply(b *testing.B) {
	s, err := newW1Server(w1.New(w1.DefaultConfig()), false, make([]unit, 1000))
	if err != nil {
		b.Fatal(err)
	}
	s.encode()
	join := append([]byte(nil), s.buf...)
	ticks := make([][]byte, 1000)
	for i := range ticks {
		s.tick()
		ticks[i] = append([]byte(nil), s.buf...)
	}
	var c client
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		if i%len(ticks) == 0 {
			b.StopTimer()
			if c, err = newClient(); err == nil {
				err = c.apply(join)
			}
			if err != nil {
				b.Fatal(err)
			}
			b.StartTimer()
		}
		if err := c.apply(ticks[i%len(ticks)]); err != nil {
			b.Fatal(err)
		}
	}
}
