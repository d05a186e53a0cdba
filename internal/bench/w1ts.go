package bench

import (
	"bytes"
	"compress/gzip"
	"fmt"

	"github.com/replicago/replica/codec"
	"github.com/replicago/replica/internal/arena"
	"github.com/replicago/replica/internal/tsnode"
	"github.com/replicago/replica/internal/workload/w1"
)

// W1TSResult is the outcome of a W1 broadcast run with the TypeScript
// client runtime in Node.
type W1TSResult struct {
	Scenario  string `json:"scenario"`
	Mode      string `json:"mode"`
	Client    string `json:"client"`
	Quantized bool   `json:"quantized"`
	Ticks     int    `json:"ticks"`
	// SteadyTicks are played after Ticks and timed apart
	// (ClientUSPerTickSteady).
	SteadyTicks int `json:"steady_ticks"`
	// Verified: the Node replica's canonical dump equals the server's
	// entities after the warm-up, after the run and after the steady
	// ticks.
	Verified           bool    `json:"verified"`
	VerifyError        string  `json:"verify_error,omitempty"`
	BytesPerClientTick float64 `json:"bytes_per_client_tick"`
	// ClientUSPerTick is the TypeScript replica's applyTick (decode and
	// apply, callbacks none) of one tick in Node, timed inside Node, in a
	// fresh Node process: W1's 100 warm-up ticks are all its JIT gets.
	ClientUSPerTick Percentiles `json:"client_us_per_tick"`
	// ClientUSPerTickSteady is the same over the SteadyTicks after the
	// run, once Node's JIT has compiled the decoder with the whole run's
	// profile (its optimizing tiers come in over the first few hundred
	// ticks): what a long-lived client spends.
	ClientUSPerTickSteady Percentiles `json:"client_us_per_tick_steady"`
	// FullStateUS is the applyTick of the initial full state.
	FullStateUS    float64 `json:"full_state_us"`
	FullStateBytes int     `json:"full_state_bytes"`
	// BundleBytes is the runtime (ts/src, no generated types) bundled
	// for browsers by esbuild, minified.
	BundleBytes int `json:"bundle_bytes"`
	// BundleGzipBytes is that bundle gzipped (best compression), as a web
	// server sends it.
	BundleGzipBytes int `json:"bundle_gzip_bytes"`
	// Machine is the machine's speed just before Node applies the first
	// tick and just after the last: see MachineSpeed.
	Machine machineRuns `json:"machine"`
}

// RunW1TS runs W1 in broadcast mode against one TypeScript client: the Go
// server encodes each tick as for RunW1 and a Node process running the
// runtime (bundled from ts/src with esbuild) applies it. The replica is
// verified, by canonical dumps, against the server after the warm-up and
// at the end.
func RunW1TS(cfg W1Config) (*W1TSResult, error) {
	if cfg.Warmup <= 0 {
		cfg.Warmup = 100
	}
	if cfg.Measured <= 0 {
		cfg.Measured = 500
	}
	switch {
	case cfg.Steady == 0:
		cfg.Steady = 500
	case cfg.Steady < 0:
		cfg.Steady = 0
	}
	bundle := tsnode.RuntimeBundle()
	node, err := tsnode.Start()
	if err != nil {
		return nil, err
	}
	defer node.Close()
	world := w1.New(w1.DefaultConfig())
	units := make([]unit, len(world.X))
	s, err := newW1Server(world, cfg.Quantized, units)
	if err != nil {
		return nil, err
	}
	s.tr.Commit()
	res := &W1TSResult{Scenario: "w1", Mode: "broadcast", Client: "ts", Quantized: cfg.Quantized,
		Ticks: cfg.Warmup + cfg.Measured, SteadyTicks: cfg.Steady, BundleBytes: len(bundle), Verified: true}
	if res.BundleGzipBytes, err = gzipSize(bundle); err != nil {
		return nil, err
	}
	// The server's ticks, encoded once; the server's canonical state after
	// the warm-up, at the end of the run and after the steady ticks.
	full := s.enc.Full(nil, s.tr.AppendEntities(nil), codec.PartAll)
	res.FullStateBytes = len(full)
	last := res.Ticks + res.SteadyTicks
	ticks := make([][][]byte, last)
	want := make(map[int]string, 3)
	for tick := 1; tick <= last; tick++ {
		s.tick()
		segs := [][]byte{append([]byte(nil), s.buf...)}
		if !emptySegment(s.others) {
			segs = append(segs, append([]byte(nil), s.others...))
		}
		ticks[tick-1] = segs
		if tick > cfg.Warmup && tick <= res.Ticks {
			for _, seg := range segs {
				res.BytesPerClientTick += float64(len(seg))
			}
		}
		if tick == cfg.Warmup || tick == res.Ticks || tick == last {
			want[tick] = tsnode.Canonical(s.tr.AppendEntities(nil), nil)
		}
	}
	res.BytesPerClientTick /= float64(cfg.Measured)

	if err := node.Init(arena.Schema().AppendDescriptor(nil), nil); err != nil {
		return nil, err
	}
	d, err := node.Tick(nil, nil, nil, full)
	if err != nil {
		return nil, fmt.Errorf("initial state: %w", err)
	}
	res.FullStateUS = float64(d.Nanoseconds()) / 1e3
	var us, steady []float64
	res.Machine = startMachine()
	defer func() { res.Machine.After = measureMachine() }()
	for i, segs := range ticks {
		tick := i + 1
		d, err := node.Tick(nil, nil, nil, segs...)
		if err != nil {
			return nil, fmt.Errorf("tick %d: %w", tick, err)
		}
		switch {
		case tick > res.Ticks:
			steady = append(steady, float64(d.Nanoseconds())/1e3)
		case tick > cfg.Warmup:
			us = append(us, float64(d.Nanoseconds())/1e3)
		}
		if want, ok := want[tick]; ok {
			got, err := node.Dump()
			if err != nil {
				return nil, err
			}
			if got != want && res.Verified {
				res.Verified = false
				res.VerifyError = fmt.Sprintf("after tick %d: the TypeScript replica differs from the server: %s", tick, firstDiff(got, want))
			}
		}
	}
	res.ClientUSPerTick = percentiles(us)
	res.ClientUSPerTickSteady = percentiles(steady)
	return res, nil
}

// gzipSize returns the size of b compressed by gzip at its best level.
func gzipSize(b []byte) (int, error) {
	var buf bytes.Buffer
	w, err := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	if err != nil {
		return 0, err
	}
	if _, err := w.Write(b); err != nil {
		return 0, err
	}
	if err := w.Close(); err != nil {
		return 0, err
	}
	return buf.Len(), nil
}

// firstDiff describes the first line where two canonical dumps differ.
func firstDiff(got, want string) string {
	g, w := splitLines(got), splitLines(want)
	for i := range max(len(g), len(w)) {
		var a, b string
		if i < len(g) {
			a = g[i]
		}
		if i < len(w) {
			b = w[i]
		}
		if a != b {
			return fmt.Sprintf("line %d: got %q, want %q", i+1, a, b)
		}
	}
	return "equal"
}

func splitLines(s string) []string {
	var out []string
	for len(s) > 0 {
		i := 0
		for i < len(s) && s[i] != '\n' {
			i++
		}
		out = append(out, s[:i])
		if i < len(s) {
			i++
		}
		s = s[i:]
	}
	return out
}
