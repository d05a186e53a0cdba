package bench

import (
	"github.com/replicago/replica/internal/workload/w1"
	"testing"
	"time"

	"github.com/replicago/replica/internal/arena"
	"github.com/replicago/replica/state"
)

// BenchmarkSetter measures one tracked float32 setter on a live entity.
func BenchmarkSetter(b *testing.B) {
	tr := state.NewTracker(arena.Schema())
	units := make([]arena.Unit, 1000)
	for i := range units {
		units[i], _ = arena.SpawnUnit(tr)
	}
	tr.Commit()
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		units[(i*7919)%1000].SetX(float32(i))
		i++
		if i%300 == 0 {
			tr.Commit()
		}
	}
}

// BenchmarkW1Encode measures commit and encode of one W1 tick, without
// the workload step and the setters (reported as encode-ns/tick).
func BenchmarkW1Encode(b *testing.B) {
	s, err := newW1Server(w1.New(w1.DefaultConfig()), false, make([]unit, 1000))
	if err != nil {
		b.Fatal(err)
	}
	s.encode()
	var encode time.Duration
	for b.Loop() {
		s.mutate()
		start := time.Now()
		s.encode()
		encode += time.Since(start)
	}
	b.ReportMetric(float64(encode.Nanoseconds())/float64(b.N), "encode-ns/tick")
}
