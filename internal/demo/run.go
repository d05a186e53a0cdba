package demo

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"time"
)

// Config selects a demo run.
type Config struct {
	Entities int           // bots in the arena
	Clients  int           // in-process clients, each owning one bot
	Hz       int           // ticks per second
	Duration time.Duration // how long to run; 0 runs until the context is done
	Seed     uint64        // seed of the deterministic simulation
}

// Bounds of a Config. Every client holds a copy of every bot, at about
// 1.3 KB a copy, so MaxCopies bounds Entities × Clients.
const (
	MaxEntities = 50000
	MaxCopies   = 1000000
	MaxHz       = 1000
)

// DefaultConfig returns the configuration of "replica demo" without flags.
func DefaultConfig() Config {
	return Config{Entities: 500, Clients: 50, Hz: 20, Seed: 1}
}

// Validate reports the first problem with c. Messages name the fields by
// their command-line flags.
func (c Config) Validate() error {
	switch {
	case c.Entities < 1:
		return fmt.Errorf("-entities must be at least 1, got %d", c.Entities)
	case c.Entities > MaxEntities:
		return fmt.Errorf("-entities must be at most %d, got %d", MaxEntities, c.Entities)
	case c.Clients < 1:
		return fmt.Errorf("-clients must be at least 1, got %d", c.Clients)
	case c.Clients > c.Entities:
		return fmt.Errorf("need at least as many entities as clients, each client owns a bot: -clients %d > -entities %d", c.Clients, c.Entities)
	case c.Entities*c.Clients > MaxCopies:
		return fmt.Errorf("-entities × -clients must be at most %d, got %d × %d: every client holds a copy of every bot", MaxCopies, c.Entities, c.Clients)
	case c.Hz < 1 || c.Hz > MaxHz:
		return fmt.Errorf("-hz must be between 1 and %d, got %d", MaxHz, c.Hz)
	case c.Duration < 0:
		return fmt.Errorf("-duration must not be negative, got %v", c.Duration)
	}
	return nil
}

// ticks returns the number of ticks Duration lasts, at least one, or 0
// for no limit.
func (c Config) ticks() uint64 {
	if c.Duration <= 0 {
		return 0
	}
	return uint64(max(1, math.Ceil(c.Duration.Seconds()*float64(c.Hz))))
}

// ErrVerify is returned (wrapped) by Run when a client's table differs from
// the server's state for that client.
var ErrVerify = errors.New("verification failed")

// Run runs the demo of cfg at its tick rate until cfg.Duration of ticks
// has run or ctx is done, writing a header, one status line per second and
// a summary to w. Stopping through ctx is not an error. Run verifies every
// client each second and at the end; a difference is returned as an error
// wrapping ErrVerify that describes it.
func Run(ctx context.Context, cfg Config, w io.Writer) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	fmt.Fprint(w, intro(cfg)) // before the clients join, which takes a moment with many
	s, err := New(cfg)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "join: full state %s/client\n", kb(float64(s.stats.JoinBytes)/float64(cfg.Clients)))
	limit := cfg.ticks()
	t := time.NewTicker(time.Second / time.Duration(cfg.Hz))
	defer t.Stop()
	started := time.Now()
	s.win.start = started
	reason := "duration reached"
	for limit == 0 || s.stats.Ticks < limit {
		if ctx.Err() != nil {
			reason = "interrupted"
			break
		}
		select {
		case <-ctx.Done():
			continue
		case <-t.C:
		}
		if err := s.Step(); err != nil {
			return err
		}
		if s.win.ticks == cfg.Hz {
			verr := s.Verify()
			fmt.Fprintln(w, s.Status(verr))
			if verr != nil {
				return fmt.Errorf("%w %v", ErrVerify, verr)
			}
		}
	}
	verr := s.Verify()
	fmt.Fprint(w, s.Summary(time.Since(started), reason, verr))
	if verr != nil {
		return fmt.Errorf("%w %v", ErrVerify, verr)
	}
	return nil
}

// intro describes the run of c.
func intro(c Config) string {
	until := "until interrupted (Ctrl-C)"
	if c.Duration > 0 {
		until = "for " + c.Duration.String()
	}
	var b strings.Builder
	fmt.Fprintf(&b, "replica demo: %d bots in a %d×%d arena, %d clients, %d Hz, seed %d, %s\n",
		c.Entities, worldSize, worldSize, c.Clients, c.Hz, c.Seed, until)
	b.WriteString("in-process clients; network transports arrive with the runtime milestone. Generated entities,\n")
	b.WriteString("change tracking, the encoder and each client's replica (decoder and callbacks) are the real ones;\n")
	b.WriteString("every second each client's replica is checked against the server's view for that client.\n")
	return b.String()
}

// Status returns the status line of the ticks since the last one and
// starts a new window. verr is the result of the verification that goes
// with it.
func (s *Sim) Status(verr error) string {
	w := &s.win
	secs := float64(max(w.ticks, 1)) / float64(s.cfg.Hz)
	slices.Sort(w.server)
	verified := "ok"
	if verr != nil {
		verified = "FAILED"
	}
	line := fmt.Sprintf("t=%s clients=%d entities=%d tick p50=%.2fms p99=%.2fms  out=%s/client/s  events=%d/s verified=%s",
		simTime(s.stats.Ticks, s.cfg.Hz), len(s.players), s.tr.Len(),
		ms(percentile(w.server, 0.50)), ms(percentile(w.server, 0.99)),
		kb(float64(w.bytes)/float64(len(s.players))/secs),
		int64(math.Round(float64(w.events)/secs)), verified)
	// The ticker drops ticks the process cannot keep up with: say so.
	if wall := time.Since(w.start).Seconds(); wall > 1.2*secs && secs > 0 {
		line += fmt.Sprintf("  (behind: %.1fs of ticks took %.1fs)", secs, wall)
	}
	s.stats.Bytes += w.bytes
	*w = window{server: w.server[:0], start: time.Now()}
	return line
}

// Summary describes the whole run: elapsed is the wall time it took, why
// it stopped and verr the final verification.
func (s *Sim) Summary(elapsed time.Duration, why string, verr error) string {
	st := s.Stats()
	var b strings.Builder
	result := fmt.Sprintf("verified ok (%d %s)", st.Verifications, plural(st.Verifications, "check"))
	if verr != nil {
		result = fmt.Sprintf("verification FAILED after %d good checks", st.Verifications)
	}
	fmt.Fprintf(&b, "stopped (%s) after %s: %d ticks in %.1fs, %s\n",
		why, simTime(st.Ticks, s.cfg.Hz), st.Ticks, elapsed.Seconds(), result)
	fmt.Fprintf(&b, "  bots:    %d destroyed and respawned (%d in fights, %d by hazards), %d retargets\n",
		st.Destroyed, st.Kills, st.Destroyed-st.Kills, st.Retargets)
	fmt.Fprintf(&b, "  bags:    %d items added, %d counts changed, %d items removed\n",
		st.BagAdds, st.BagUpdates, st.BagRemoves)
	secs := float64(max(st.Ticks, 1)) / float64(s.cfg.Hz)
	fmt.Fprintf(&b, "  traffic: %s/client/s on average, %s/client to join; %d PartOthers segments encoded for one client (own bot left out)\n",
		kb(float64(st.Bytes)/float64(len(s.players))/secs), kb(float64(st.JoinBytes)/float64(len(s.players))), st.OwnOthers)
	ev := &st.Callbacks
	fmt.Fprintf(&b, "  events:  %d client callbacks: %d creates, %d destroys, %d hp, %d target, %d score, %d/%d/%d items added/changed/removed\n",
		ev.Total(), ev.Creates, ev.Destroys, ev.HP, ev.Targets, ev.Scores, ev.ItemsAdded, ev.ItemsChanged, ev.ItemsRemoved)
	fmt.Fprintf(&b, "  timing:  server tick p50=%.2fms p99=%.2fms; client apply p50=%.2fms p99=%.2fms per client per tick\n",
		s.run.quantile(0.50), s.run.quantile(0.99), s.apply.quantile(0.50), s.apply.quantile(0.99))
	return b.String()
}

// Stats returns the counters so far.
func (s *Sim) Stats() Stats {
	st := s.stats
	st.Bytes += s.win.bytes // the window not yet reported
	for _, p := range s.players {
		st.Callbacks.add(p.ev)
	}
	return st
}

func plural(n int, word string) string {
	if n == 1 {
		return word
	}
	return word + "s"
}

func simTime(ticks uint64, hz int) string {
	if ticks%uint64(hz) == 0 {
		return fmt.Sprintf("%ds", ticks/uint64(hz))
	}
	return fmt.Sprintf("%.2fs", float64(ticks)/float64(hz))
}

// kb formats a byte count in kilobytes (1000 bytes), or bytes below 1 KB.
func kb(n float64) string {
	if n < 1000 {
		return fmt.Sprintf("%.0f B", n)
	}
	return fmt.Sprintf("%.1f KB", n/1000)
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1e3 }

// percentile returns the nearest-rank p-percentile of sorted v.
func percentile(v []time.Duration, p float64) time.Duration {
	if len(v) == 0 {
		return 0
	}
	i := int(math.Ceil(p*float64(len(v)))) - 1
	return v[max(i, 0)]
}

// histogram counts durations in 10 µs buckets up to 1 s, for run-long
// percentiles in constant space.
type histogram struct {
	n      int64
	counts []uint32
	max    int64 // µs
}

const histBucket = 10 // µs

func (h *histogram) add(d time.Duration) {
	us := d.Microseconds()
	if h.counts == nil {
		h.counts = make([]uint32, 1e6/histBucket+1)
	}
	h.counts[min(us/histBucket, int64(len(h.counts)-1))]++
	h.n++
	h.max = max(h.max, us)
}

// quantile returns the q-quantile in milliseconds, at the upper edge of
// its bucket.
func (h *histogram) quantile(q float64) float64 {
	if h.n == 0 {
		return 0
	}
	rank := max(int64(math.Ceil(q*float64(h.n))), 1)
	var seen int64
	for i, c := range h.counts {
		if seen += int64(c); seen >= rank {
			return math.Min(float64((i+1)*histBucket), float64(h.max)) / 1e3
		}
	}
	return float64(h.max) / 1e3
}
