package bench

import (
	"testing"

	"github.com/replicago/replica/codec"
	"github.com/replicago/replica/internal/workload/w1"
)

// BenchmarkW1HotEncode encodes one W1 tick's PartAll segment repeatedly
// from the same changeset: the encoder's own cost, caches warm.
func BenchmarkW1HotEncode(b *testing.B) {
	s, err := newW1Server(w1.New(w1.DefaultConfig()), false, make([]unit, 1000))
	if err != nil {
		b.Fatal(err)
	}
	s.encode()
	s.mutate()
	cs := s.tr.Commit()
	b.ReportAllocs()
	for b.Loop() {
		s.buf = s.enc.Delta(s.buf[:0], cs, codec.PartAll, nil)
	}
}
