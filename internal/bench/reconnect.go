package bench

import (
	"context"
	"fmt"
	"math"
	"time"

	"github.com/replicago/replica"
	"github.com/replicago/replica/internal/bench/aoiarena"
	"github.com/replicago/replica/internal/bench/zone"
	"github.com/replicago/replica/internal/workload/w1"
	"github.com/replicago/replica/internal/workload/w2"
	"github.com/replicago/replica/transport"
)

// The reconnect scenario measures resuming (docs/protocol.md §10.5): in
// W1's AOI mode and in the W2 zone, a sample of clients loses its
// connection, the world runs on for a gap, and the clients reconnect
// (client.Conn.Reconnect). Each gets one catch-up tick instead of the full
// state; the scenario compares the two sizes.

// ReconnectConfig selects a reconnect run. Zero fields take the defaults.
type ReconnectConfig struct {
	Gaps    []float64 // seconds away; default 0.5, 2 and 10
	Sample  int       // clients dropped per gap; default 10
	W1      int       // W1 AOI clients; default 100
	W2      int       // W2 clients; default 500
	Warmup  int       // workload ticks before the first drop; default 20
	Workset string    // "w1", "w2" or "" for both
}

// ReconnectResult is the outcome of a reconnect run.
type ReconnectResult struct {
	Scenario string `json:"scenario"` // "reconnect"
	TickRate int    `json:"tick_rate"`
	// Gaps has one entry per workload and gap.
	Gaps []ReconnectGap `json:"gaps"`
	// Verified reports that after every reconnect every client's replica
	// held exactly what the workload says it sees (as in the interest
	// scenarios); VerifyError says why not.
	Verified    bool   `json:"verified"`
	VerifyError string `json:"verify_error,omitempty"`
}

// ReconnectGap is one workload's reconnects after one gap. Bytes are
// means over the sample's clients, of the first tick each was sent after
// reconnecting (the TICK message and its segments, as received).
type ReconnectGap struct {
	Workload string  `json:"workload"`
	GapS     float64 `json:"gap_s"`
	Clients  int     `json:"clients"`
	// DeltaBytes is what a resumed client received: the catch-up, or
	// the RESYNC and full state the server sent instead when that was
	// smaller. FullBytes is what the full state would have been
	// (the server's Stats.ResumeFullBytes), what a reconnect without
	// resuming receives.
	DeltaBytes float64 `json:"delta_bytes"`
	FullBytes  float64 `json:"full_bytes"`
	// CatchUps and Fallbacks count the sample's sessions sent a catch-up
	// and the full state.
	CatchUps  int `json:"catch_ups"`
	Fallbacks int `json:"fallbacks"`
	// VisiblePerClient is the mean number of entities the sample's
	// clients held before dropping.
	VisiblePerClient float64 `json:"visible_per_client"`
}

// RunReconnect runs the reconnect scenario.
func RunReconnect(cfg ReconnectConfig) (*ReconnectResult, error) {
	if len(cfg.Gaps) == 0 {
		cfg.Gaps = []float64{0.5, 2, 10}
	}
	if cfg.Sample <= 0 {
		cfg.Sample = 10
	}
	if cfg.W1 <= 0 {
		cfg.W1 = 100
	}
	if cfg.W2 <= 0 {
		cfg.W2 = w2.DefaultConfig().P
	}
	if cfg.Warmup <= 0 {
		cfg.Warmup = 20
	}
	res := &ReconnectResult{Scenario: "reconnect"}
	if cfg.Workset == "" || cfg.Workset == "w1" {
		w := &w1AOIWorld{world: w1.New(w1.DefaultConfig())}
		w.centres = w.world.Clients(cfg.W1)
		r, err := startInterest(aoiarena.Schema(), w, cfg.W1)
		if err != nil {
			return nil, err
		}
		err = r.reconnects("w1", cfg, res)
		r.close()
		if err != nil {
			return nil, err
		}
	}
	if cfg.Workset == "" || cfg.Workset == "w2" {
		wc := w2.DefaultConfig()
		if cfg.W2 > wc.P {
			return nil, fmt.Errorf("bench: W2 has %d players: %d clients", wc.P, cfg.W2)
		}
		w := &w2World{cfg: wc, world: w2.NewWorld(wc)}
		r, err := startInterest(zone.Schema(), w, cfg.W2)
		if err != nil {
			return nil, err
		}
		err = r.reconnects("w2", cfg, res)
		r.close()
		if err != nil {
			return nil, err
		}
	}
	res.Verified = res.VerifyError == ""
	return res, nil
}

// reconnects warms the run up, then for each gap drops a sample of
// clients, runs the workload for the gap and reconnects them.
func (r *interestRun) reconnects(workload string, cfg ReconnectConfig, res *ReconnectResult) error {
	away := make([]bool, len(r.clients))
	tick := func() error {
		r.world.step()
		r.srv.Tick()
		return r.appliedBut(away)
	}
	for range cfg.Warmup {
		if err := tick(); err != nil {
			return err
		}
	}
	rate := r.srv.TickRate()
	res.TickRate = rate
	n := min(cfg.Sample, len(r.clients))
	for g, gap := range cfg.Gaps {
		// A different sample each gap, spread over the clients.
		sample := make([]int, n)
		for k := range sample {
			sample[k] = (k*len(r.clients)/n + g) % len(r.clients)
		}
		out := ReconnectGap{Workload: workload, GapS: gap, Clients: n}
		for _, i := range sample {
			out.VisiblePerClient += float64(r.clients[i].conn.Replica().Len()) / float64(n)
			away[i] = true
			r.session(i).Close(transport.CloseNetworkError, "bench: dropped")
		}
		for range int(math.Round(gap * float64(rate))) {
			if err := tick(); err != nil {
				return err
			}
		}
		before := r.srv.Stats()
		received := make([]int64, n)
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel() // one per gap
		for k, i := range sample {
			cl := r.clients[i]
			if err := cl.conn.Reconnect(ctx); err != nil {
				return fmt.Errorf("bench: client %d reconnecting: %w", i, err)
			}
			received[k] = cl.stats.segments.Load() + cl.stats.headers.Load()
		}
		// The tick that admits a client sends it its first tick: its bytes
		// are counted once it has applied that tick, before the next.
		got := make([]int64, n)
		done := 0
		for deadline := time.Now().Add(time.Minute); done < n; {
			if err := tick(); err != nil {
				return err
			}
			for k, i := range sample {
				if !away[i] || r.session(i) == nil {
					continue
				}
				cl := r.clients[i]
				for cl.conn.LastTick() < r.srv.TickNumber() {
					if _, err := cl.conn.Wait(ctx); err != nil {
						return fmt.Errorf("bench: client %d after reconnecting: %w", i, err)
					}
				}
				got[k] = cl.stats.segments.Load() + cl.stats.headers.Load() - received[k]
				away[i] = false
				done++
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("bench: only %d of %d clients rejoined", done, n)
			}
			time.Sleep(time.Millisecond)
		}
		after := r.srv.Stats()
		for k, i := range sample {
			cl := r.clients[i]
			out.DeltaBytes += float64(got[k]) / float64(n)
			if cl.conn.Resumed() {
				continue
			}
			if res.VerifyError == "" {
				res.VerifyError = fmt.Sprintf("%s: client %d did not resume", workload, i)
			}
		}
		out.CatchUps = int(after.Resumes - before.Resumes)
		out.Fallbacks = int(after.ResumeFallbacks - before.ResumeFallbacks)
		out.FullBytes = float64(after.ResumeFullBytes-before.ResumeFullBytes) / float64(n)
		// The client counts the TICK's segments and header; the server
		// counts the same, and a RESYNC.
		if sent := float64(after.ResumeBytes-before.ResumeBytes)/float64(n) - float64(out.Fallbacks)/float64(n); math.Abs(sent-out.DeltaBytes) > 0.01 && res.VerifyError == "" {
			res.VerifyError = fmt.Sprintf("%s, gap %v s: clients received %.2f B a reconnect, the server sent %.2f B", workload, gap, out.DeltaBytes, sent)
		}
		if err := r.verify(); err != nil && res.VerifyError == "" {
			res.VerifyError = fmt.Sprintf("%s, gap %v s: %v", workload, gap, err)
		}
		out.DeltaBytes, out.FullBytes, out.VisiblePerClient = round2(out.DeltaBytes), round2(out.FullBytes), round2(out.VisiblePerClient)
		res.Gaps = append(res.Gaps, out)
	}
	return nil
}

// session returns client i's session on the server, or nil.
func (r *interestRun) session(i int) *replica.Conn {
	user := fmt.Sprintf("client-%d", i)
	for _, sc := range r.srv.Conns() {
		if sc.UserID() == user {
			return sc
		}
	}
	return nil
}
