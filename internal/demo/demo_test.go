package demo

import (
	"context"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/replicago/replica/codec"
)

func newSim(t testing.TB, cfg Config) *Sim {
	t.Helper()
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

var statusRE = regexp.MustCompile(`^t=(\d+)s clients=(\d+) entities=(\d+) tick p50=\d+\.\d\dms p99=\d+\.\d\dms  out=\d+(\.\d)? K?B/client/s  events=\d+/s verified=(ok|FAILED)( .*)?$`)

// TestStepVerifies runs two seconds of ticks by hand and checks, every
// tick, that every client matches the server's view for it, and that the
// arena does what the demo claims: bots die and respawn, inventories gain,
// change and lose items, and clients see it through their callbacks.
func TestStepVerifies(t *testing.T) {
	cfg := Config{Entities: 100, Clients: 20, Hz: 20, Seed: 1}
	s := newSim(t, cfg)
	if err := s.Verify(); err != nil {
		t.Fatalf("after joining: %v", err)
	}
	var lines []string
	for range 2 * cfg.Hz {
		if err := s.Step(); err != nil {
			t.Fatal(err)
		}
		err := s.Verify()
		if err != nil {
			t.Fatal(err)
		}
		if s.win.ticks == cfg.Hz {
			lines = append(lines, s.Status(err))
		}
	}
	for i, line := range lines {
		m := statusRE.FindStringSubmatch(line)
		if m == nil {
			t.Fatalf("status line %q does not match %v", line, statusRE)
		}
		if want := []string{strconv.Itoa(i + 1), "20", "100", "ok"}; m[1] != want[0] || m[2] != want[1] || m[3] != want[2] || m[5] != want[3] {
			t.Errorf("status line %q: want t=%ss clients=%s entities=%s verified=%s", line, want[0], want[1], want[2], want[3])
		}
	}
	if len(lines) != 2 {
		t.Fatalf("got %d status lines in 2 s of ticks, want 2", len(lines))
	}

	st := s.Stats()
	t.Logf("%+v", st)
	if st.Ticks != 40 || st.Verifications != 41 {
		t.Errorf("ticks %d, verifications %d; want 40 and 41", st.Ticks, st.Verifications)
	}
	if st.Destroyed == 0 || st.Spawned != cfg.Entities+st.Destroyed {
		t.Errorf("%d destroyed, %d spawned: want some bots to die and each to respawn", st.Destroyed, st.Spawned)
	}
	if s.tr.Len() != cfg.Entities {
		t.Errorf("server has %d bots, want %d", s.tr.Len(), cfg.Entities)
	}
	if st.BagAdds == 0 || st.BagUpdates == 0 || st.BagRemoves == 0 {
		t.Errorf("bags: %d adds, %d updates, %d removes; want each", st.BagAdds, st.BagUpdates, st.BagRemoves)
	}
	cb := st.Callbacks
	if want := int64(cfg.Clients * st.Destroyed); cb.Destroys != want {
		t.Errorf("clients saw %d destroys, want %d (every client, every death)", cb.Destroys, want)
	}
	if want := int64(cfg.Clients * st.Spawned); cb.Creates != want {
		t.Errorf("clients saw %d creates, want %d", cb.Creates, want)
	}
	// Inventories are owner-only: each client sees only its own bot's.
	if cb.ItemsAdded == 0 || cb.ItemsChanged == 0 || cb.ItemsRemoved == 0 || cb.HP == 0 || cb.Targets == 0 {
		t.Errorf("client callbacks %+v: want item adds, changes and removes, hp and target changes", cb)
	}
	if st.Bytes == 0 || st.JoinBytes == 0 {
		t.Errorf("no bytes counted: %+v", st)
	}
}

// TestDeterministic checks that a seed fixes the run.
func TestDeterministic(t *testing.T) {
	cfg := Config{Entities: 60, Clients: 5, Hz: 20, Seed: 7}
	a, b := newSim(t, cfg), newSim(t, cfg)
	for range 30 {
		if err := a.Step(); err != nil {
			t.Fatal(err)
		}
		if err := b.Step(); err != nil {
			t.Fatal(err)
		}
	}
	if sa, sb := a.Stats(), b.Stats(); sa != sb {
		t.Fatalf("same seed, different runs:\n%+v\n%+v", sa, sb)
	}
	ea, eb := a.tr.AppendEntities(nil), b.tr.AppendEntities(nil)
	for i := range ea {
		if ea[i].ID() != eb[i].ID() || !ea[i].Record.Equal(&eb[i].Record) {
			t.Fatalf("entity %d differs between runs with the same seed", ea[i].ID())
		}
	}
	cfg.Seed++
	c := newSim(t, cfg)
	for range 30 {
		if err := c.Step(); err != nil {
			t.Fatal(err)
		}
	}
	if c.Stats() == a.Stats() {
		t.Error("another seed gave the same run")
	}
}

// TestVerifyCatchesDivergence checks that Verify reports a client that
// missed a tick and a client that was sent a field it may not see.
func TestVerifyCatchesDivergence(t *testing.T) {
	cfg := Config{Entities: 10, Clients: 2, Hz: 20, Seed: 1}

	s := newSim(t, cfg)
	b := s.slots[5].b
	b.SetHp(b.Hp() - 1)
	s.tr.Commit() // a tick nobody receives
	err := s.Verify()
	if err == nil || !strings.Contains(err.Error(), "field hp: the client has") {
		t.Fatalf("missed tick: Verify = %v, want a difference in field hp", err)
	}

	// Client 0 owns slot 0. Sending it the shared PartOthers segment while
	// its own bot's bounty changed leaks the bounty to it.
	s = newSim(t, cfg)
	s.slots[0].b.SetBounty(3)
	cs := s.tr.Commit()
	var enc codec.Encoder
	all := enc.Delta(nil, cs, codec.PartAll, nil)
	others := enc.Delta(nil, cs, codec.PartOthers, nil)
	if err := s.players[0].r.Apply(all, others); err != nil {
		t.Fatal(err)
	}
	if err := s.players[1].r.Apply(all, others); err != nil {
		t.Fatal(err)
	}
	err = s.Verify()
	if err == nil || !strings.Contains(err.Error(), "client 0") || !strings.Contains(err.Error(), "field bounty (vis=others) leaked") {
		t.Fatalf("leak: Verify = %v, want client 0's bounty reported as leaked", err)
	}
}

// TestOwnBotLeftOutOfOthers drives a client's own bot into the PartOthers
// segment and checks that the Sim sends that client a segment without it.
func TestOwnBotLeftOutOfOthers(t *testing.T) {
	s := newSim(t, Config{Entities: 10, Clients: 2, Hz: 20, Seed: 1})
	s.slots[0].b.SetBounty(3)
	s.slots[1].b.SetBounty(4)
	if err := s.Step(); err != nil {
		t.Fatal(err)
	}
	if err := s.Verify(); err != nil {
		t.Fatal(err)
	}
	if got := s.Stats().OwnOthers; got < 2 {
		t.Fatalf("%d own-bot PartOthers segments, want one per client", got)
	}
	own := s.players[0].r.Entity(s.slots[0].b.ID())
	other := s.players[0].r.Entity(s.slots[1].b.ID())
	if b, _ := BotOf(own); b.Bounty() != 0 {
		t.Errorf("client 0 sees its own bounty %d", b.Bounty())
	}
	if b, _ := BotOf(other); b.Bounty() != s.slots[1].b.Bounty() {
		t.Errorf("client 0 sees client 1's bounty as %d, want %d", b.Bounty(), s.slots[1].b.Bounty())
	}
}

func TestConfigValidate(t *testing.T) {
	if err := DefaultConfig().Validate(); err != nil {
		t.Fatalf("default config: %v", err)
	}
	for _, tc := range []struct {
		change func(*Config)
		want   string
	}{
		{func(c *Config) { c.Clients, c.Entities = 60, 50 }, "need at least as many entities as clients"},
		{func(c *Config) { c.Entities = 0 }, "-entities must be at least 1"},
		{func(c *Config) { c.Entities = MaxEntities + 1 }, "-entities must be at most"},
		{func(c *Config) { c.Clients = 0 }, "-clients must be at least 1"},
		{func(c *Config) { c.Entities, c.Clients = MaxEntities, 50 }, "-entities × -clients must be at most"},
		{func(c *Config) { c.Hz = 0 }, "-hz must be between 1 and"},
		{func(c *Config) { c.Hz = MaxHz + 1 }, "-hz must be between 1 and"},
		{func(c *Config) { c.Duration = -time.Second }, "-duration must not be negative"},
	} {
		c := DefaultConfig()
		tc.change(&c)
		err := c.Validate()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: Validate = %v, want %q", c, err, tc.want)
		}
		if _, err := New(c); err == nil {
			t.Errorf("%+v: New accepted it", c)
		}
	}
}

// TestRunInterrupted checks that a cancelled run stops cleanly with a
// verified summary.
func TestRunInterrupted(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	var out strings.Builder
	if err := Run(ctx, Config{Entities: 20, Clients: 3, Hz: 20, Seed: 1}, &out); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"replica demo: 20 bots in a 1000×1000 arena, 3 clients, 20 Hz, seed 1, until interrupted",
		"in-process clients; network transports arrive with the runtime milestone",
		"stopped (interrupted) after 0s: 0 ticks",
		"verified ok (1 check)",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
}

// TestRunDuration runs the timed loop for one second of ticks at a high
// rate. Only the output's content is checked, not the timing.
func TestRunDuration(t *testing.T) {
	var out strings.Builder
	err := Run(context.Background(), Config{Entities: 30, Clients: 3, Hz: 100, Duration: time.Second, Seed: 1}, &out)
	if err != nil {
		t.Fatal(err)
	}
	var status []string
	for _, line := range strings.Split(out.String(), "\n") {
		if strings.HasPrefix(line, "t=") {
			status = append(status, line)
		}
	}
	if len(status) != 1 || !statusRE.MatchString(status[0]) || !strings.HasPrefix(status[0], "t=1s clients=3 entities=30 ") {
		t.Errorf("status lines %q, want one t=1s line", status)
	}
	if !strings.Contains(out.String(), "stopped (duration reached) after 1s: 100 ticks") {
		t.Errorf("summary missing:\n%s", out.String())
	}
}

// BenchmarkTick measures a full tick at the default size, with PartOthers
// shared (what the demo does) and encoded per client (the alternative).
// server-ms is the server's part: simulation, commit and encoding.
func BenchmarkTick(b *testing.B) {
	for _, perClient := range []bool{false, true} {
		name := "others=shared"
		if perClient {
			name = "others=perclient"
		}
		b.Run(name, func(b *testing.B) {
			s := newSim(b, DefaultConfig())
			s.othersPerClient = perClient
			var server time.Duration
			for b.Loop() {
				if err := s.Step(); err != nil {
					b.Fatal(err)
				}
				server += s.win.server[len(s.win.server)-1]
			}
			b.ReportMetric(float64(server.Microseconds())/1e3/float64(b.N), "server-ms/tick")
		})
	}
}
