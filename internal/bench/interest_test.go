package bench

import (
	"bytes"
	"context"
	"math"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/replicago/replica/session"
	"github.com/replicago/replica/transport"
)

// TestW1AOIVerifies runs W1's 600 ticks in AOI mode with 10 clients,
// checking every client after every tick, and the reference values.
func TestW1AOIVerifies(t *testing.T) {
	res, err := RunW1AOI(InterestConfig{Clients: 10, VerifyEveryTick: true})
	if err != nil {
		t.Fatal(err)
	}
	check(t, res)
}

// TestW2Verifies runs W2's 220 ticks with 40 of its 500 players
// connected, checking every client every tick, and the reference values.
func TestW2Verifies(t *testing.T) {
	var series bytes.Buffer
	res, err := RunW2(InterestConfig{Clients: 40, VerifyEveryTick: true, Series: &series})
	if err != nil {
		t.Fatal(err)
	}
	check(t, res)
	checkSeries(t, series.String(), res)
	if res.LOD == nil || !*res.LOD {
		t.Errorf("lod = %v, want true: gear and emote are sent within 50 units only, and verified so", res.LOD)
	}
}

// TestW2SteadyStateAllocs runs W2 as its benchmark does (500 clients,
// GOMAXPROCS=1) and checks that its 200 measured Server.Ticks allocate
// nothing (issue 10's target): the interest state's lists, the encoder's
// and the assemblers' buffers and the clients' messages reuse what the
// joins and the warm-up made. The workload is deterministic, and so is
// this count. When it fails, `replica bench -scenario w2 -gomaxprocs 1
// -memprofile FILE` records where the allocations are made.
func TestW2SteadyStateAllocs(t *testing.T) {
	if testing.Short() {
		t.Skip("a whole W2 run")
	}
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	res, err := RunW2(InterestConfig{})
	if err != nil {
		t.Fatal(err)
	}
	check(t, res)
	if res.tickAllocs != 0 {
		t.Errorf("%d allocations in %d measured ticks (%.2f a tick), want none", res.tickAllocs, res.Ticks-res.WarmupTicks, res.AllocsPerTick)
	}
}

func check(t *testing.T, res *InterestResult) {
	t.Helper()
	if !res.Verified {
		t.Errorf("%s: not verified: %s", res.Scenario, res.VerifyError)
	}
	if !res.ReferenceOK {
		t.Errorf("%s: reference values %v", res.Scenario, res.Reference)
	}
	if res.BytesPerClientTick <= 0 || res.JoinBytes <= 0 || res.VisiblePerClient <= 0 || res.InterestBytesPerClient <= 0 {
		t.Errorf("%s: nothing counted: %+v", res.Scenario, res)
	}
	checkMachine(t, res.Machine)
}

// checkMachine checks that a run measured the machine's speed before and
// after it.
func checkMachine(t *testing.T, m machineRuns) {
	t.Helper()
	for _, s := range []MachineSpeed{m.Before, m.After} {
		if s.MemNS <= 0 || s.CacheNS <= 0 || s.ALUNS <= 0 {
			t.Errorf("machine speed not measured: %+v", m)
		}
	}
	if _, err := os.Stat("/sys/kernel/mm/transparent_hugepage/enabled"); err == nil && !slices.Contains([]string{"always", "madvise", "never"}, m.THP) {
		t.Errorf("transparent huge page mode %q, want always, madvise or never", m.THP)
	}
}

// TestMachineString checks the text output's machine line.
func TestMachineString(t *testing.T) {
	m := machineRuns{Before: MachineSpeed{MemNS: 165.4, CacheNS: 31.2, ALUNS: 1.666}, After: MachineSpeed{MemNS: 170, CacheNS: 20, ALUNS: 1.64}, THP: "madvise"}
	want := "machine: memory 165/170 ns, 4 MiB 31/20 ns, ALU 1.67/1.64 ns (before/after), transparent huge pages madvise"
	if got := m.String(); got != want {
		t.Errorf("got  %q\nwant %q", got, want)
	}
	m.THP = ""
	if got := m.String(); strings.Contains(got, "huge") {
		t.Errorf("without a mode: %q", got)
	}
}

// TestBracketed checks the parse of Linux's transparent huge page
// setting.
func TestBracketed(t *testing.T) {
	for in, want := range map[string]string{
		"always [madvise] never\n": "madvise",
		"[always] madvise never":   "always",
		"always madvise [never]":   "never",
		"always madvise never":     "",
		"[always madvise never":    "",
		"":                         "",
	} {
		if got := bracketed([]byte(in)); got != want {
			t.Errorf("bracketed(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestGate checks that a gatedConn's reader parks while the gate is
// closed, receiving nothing sent meanwhile, and that the counts take the
// segments of each TICK only, the first TICK's as the join.
func TestGate(t *testing.T) {
	net := transport.NewMemNetwork()
	cl, srv := net.Pipe(transport.Config{}, transport.Config{})
	g, stats := newGate(), &tickCounts{}
	c := &gatedConn{Conn: cl, gate: g, stats: stats}
	got := make(chan []byte, 16)
	go func() {
		for {
			msg, err := c.Receive(context.Background())
			if err != nil {
				close(got)
				return
			}
			got <- msg
		}
	}()
	tick := func(segs ...[]byte) {
		t.Helper()
		if err := srv.Send(session.AppendTick(nil, &session.Tick{Tick: 1, Segments: len(segs)})); err != nil {
			t.Fatal(err)
		}
		for _, s := range segs {
			if err := srv.Send(s); err != nil {
				t.Fatal(err)
			}
		}
	}
	g.close()
	for g.parked.Load() < 1 {
		time.Sleep(time.Millisecond)
	}
	tick([]byte{1, 2, 3}, []byte{4})
	time.Sleep(20 * time.Millisecond)
	if len(got) != 0 || g.parked.Load() != 1 {
		t.Fatalf("received %d messages through a closed gate", len(got))
	}
	g.open()
	for range 3 {
		<-got
	}
	if err := srv.Send(session.AppendPing(nil, &session.Ping{Nonce: 1})); err != nil {
		t.Fatal(err)
	}
	tick([]byte{5, 6})
	for range 3 {
		<-got
	}
	if s, j := stats.segments.Load(), stats.join.Load(); s != 6 || j != 4 {
		t.Fatalf("segment bytes %d, join %d; want 6 and 4", s, j)
	}
	srv.Close(transport.CloseNormal, "")
	for range got {
	}
}

// BenchmarkW1AOI reports a whole W1 AOI run (100 clients) as benchmark
// metrics.
func BenchmarkW1AOI(b *testing.B) { benchInterest(b, RunW1AOI) }

// BenchmarkW2 reports a whole W2 run (500 clients) as benchmark metrics.
func BenchmarkW2(b *testing.B) { benchInterest(b, RunW2) }

func benchInterest(b *testing.B, run func(InterestConfig) (*InterestResult, error)) {
	var res *InterestResult
	for b.Loop() {
		var err error
		if res, err = run(InterestConfig{}); err != nil {
			b.Fatal(err)
		}
		if !res.Verified || !res.ReferenceOK {
			b.Fatalf("verified %v (%s), reference %v", res.Verified, res.VerifyError, res.Reference)
		}
	}
	b.ReportMetric(res.BytesPerClientTick, "B/client/tick")
	b.ReportMetric(res.ServerUSPerTick.P50, "server-µs/tick-p50")
	b.ReportMetric(res.ServerUSPerTick.P99, "server-µs/tick-p99")
	b.ReportMetric(res.AllocsPerTick, "server-allocs/tick")
	b.ReportMetric(res.InterestBytesPerClient, "interest-B/client")
}

// checkSeries checks InterestConfig.Series's CSV against the result: one
// line per measured tick in order, times that are positive, and bytes
// that add up to bytes_per_client_tick.
func checkSeries(t *testing.T, csv string, res *InterestResult) {
	t.Helper()
	lines := strings.Split(strings.TrimSuffix(csv, "\n"), "\n")
	if lines[0] != "tick,step_us,tick_us,apply_us,bytes,gc" {
		t.Fatalf("series header %q", lines[0])
	}
	lines = lines[1:]
	if want := res.Ticks - res.WarmupTicks; len(lines) != want {
		t.Fatalf("series: %d ticks, want %d", len(lines), want)
	}
	var sum int64
	for i, l := range lines {
		f := strings.Split(l, ",")
		if len(f) != 6 {
			t.Fatalf("series line %q: %d fields", l, len(f))
		}
		if tick, err := strconv.Atoi(f[0]); err != nil || tick != res.WarmupTicks+1+i {
			t.Fatalf("series line %d: tick %q, want %d", i, f[0], res.WarmupTicks+1+i)
		}
		for _, v := range f[1:4] {
			if x, err := strconv.ParseFloat(v, 64); err != nil || !(x > 0) {
				t.Fatalf("series line %q: time %q", l, v)
			}
		}
		b, err := strconv.ParseInt(f[4], 10, 64)
		if err != nil {
			t.Fatalf("series line %q: bytes: %v", l, err)
		}
		sum += b
	}
	per := float64(sum) / float64(res.Clients*len(lines))
	if math.Abs(per-res.BytesPerClientTick) > 0.005 {
		t.Errorf("series: %.4f bytes per client and tick, result %.2f", per, res.BytesPerClientTick)
	}
}
