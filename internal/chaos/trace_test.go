package chaos_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/quic-go/quic-go"
	"github.com/quic-go/quic-go/qlog"
	"github.com/quic-go/quic-go/qlogwriter"
)

// cwndTrace records the congestion window and RTT of the server's QUIC
// connections (from qlog's recovery:metrics_updated events), to explain a
// client falling behind: a reliable stream carries at most about one
// congestion window per round trip.
type cwndTrace struct {
	mu    sync.Mutex
	conns []*connTrace
}

type connTrace struct {
	mu      sync.Mutex
	samples []cwndSample // in time order
	srtt    time.Duration
}

type cwndSample struct {
	at   time.Time
	cwnd int
}

// tracer returns a quic.Config.Tracer that records into t, server side
// only.
func (t *cwndTrace) tracer() func(context.Context, bool, quic.ConnectionID) qlogwriter.Trace {
	return func(_ context.Context, isClient bool, _ quic.ConnectionID) qlogwriter.Trace {
		if isClient {
			return nil
		}
		c := &connTrace{}
		t.mu.Lock()
		t.conns = append(t.conns, c)
		t.mu.Unlock()
		return c
	}
}

func (c *connTrace) AddProducer() qlogwriter.Recorder { return c }
func (c *connTrace) SupportsSchemas(string) bool      { return true }
func (c *connTrace) Close() error                     { return nil }

func (c *connTrace) RecordEvent(e qlogwriter.Event) {
	m, ok := e.(qlog.MetricsUpdated)
	if !ok {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if m.CongestionWindow != 0 {
		c.samples = append(c.samples, cwndSample{time.Now(), m.CongestionWindow})
	}
	if m.SmoothedRTT != 0 {
		c.srtt = m.SmoothedRTT
	}
}

// meanCwnd returns the time-weighted mean congestion window over
// [from, to), or 0 if none was recorded by then.
func (c *connTrace) meanCwnd(from, to time.Time) float64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	var sum float64
	cur := 0
	at := from
	for _, s := range c.samples {
		if !s.at.After(from) {
			cur = s.cwnd
			continue
		}
		if !s.at.Before(to) {
			break
		}
		sum += float64(cur) * s.at.Sub(at).Seconds()
		cur, at = s.cwnd, s.at
	}
	sum += float64(cur) * to.Sub(at).Seconds()
	return sum / to.Sub(from).Seconds()
}

// summary describes each server connection's congestion window over
// [from, to) and the throughput it allows.
func (t *cwndTrace) summary(from, to time.Time) string {
	t.mu.Lock()
	defer t.mu.Unlock()
	var parts []string
	for _, c := range t.conns {
		w := c.meanCwnd(from, to)
		c.mu.Lock()
		srtt := c.srtt
		c.mu.Unlock()
		if w == 0 || srtt == 0 {
			continue
		}
		parts = append(parts, fmt.Sprintf("%.0f B / %v = %.1f kB/s", w, srtt.Round(time.Millisecond), w/srtt.Seconds()/1000))
	}
	return "server mean cwnd / smoothed RTT per connection: " + strings.Join(parts, "; ")
}
