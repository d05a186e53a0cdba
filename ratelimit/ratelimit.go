// Package ratelimit limits how often a connection may do something, such as
// call RPCs, and decides when a client that keeps trying is flooding and
// should be kicked.
//
// Nothing here reads a clock: every call takes the current time, so limits
// are deterministic in tests and follow virtual time under testing/synctest
// when the caller passes time.Now(). Nothing allocates, and nothing is safe
// for concurrent use: a limiter belongs to one connection and is used by the
// goroutine that reads from it.
//
// # RPC floods
//
// The server keeps one Limiter per connection and asks it about every
// client→server RPC before decoding it:
//
//	ok, kick := c.rpcLimit.Allow(time.Now())
//	switch {
//	case kick:
//		c.conn.Close(transport.ClosePolicyViolation, "RPC flood")
//		return
//	case !ok:
//		continue // drop this call; the client is over its rate
//	}
//	// dispatch the call
//
// A Limiter refuses calls beyond a token bucket of Policy.Rate calls per
// second with bursts of Policy.Burst, and it forgives refusals at
// Policy.MaxRefusals per Policy.Window: a client that runs a little over its
// rate is throttled, and one that keeps sending far over it is kicked. With
// refusals forgiven at g = MaxRefusals/Window per second, a client sending
// R calls per second has its calls refused at f = R - Rate per second once
// its burst is spent, after Burst/f seconds, and it is kicked
// about MaxRefusals/(f - g) seconds later if f > g; if f < g it is never
// kicked, only throttled. In particular a client
// sending at least Rate + 2·MaxRefusals/Window calls per second is kicked
// within Window + Burst/f. With the defaults (MaxRefusals 50, Window 1 s), a
// limit of 20 calls per second and a burst of 20, a client sending 120 or
// more calls per second is kicked within 1.2 s, one sending 10,000 per
// second within 10 ms, and one sending under 70 per second never.
package ratelimit

import "time"

// Bucket is a token bucket: it holds up to burst tokens, gains rate tokens
// per second, and each allowed event takes one. It starts full. Bucket is a
// small value with no pointers; copy it to snapshot it. The zero Bucket
// refuses everything: use New.
type Bucket struct {
	rate    float64 // tokens per second
	burst   float64 // capacity
	tokens  float64
	last    time.Time // when tokens was computed
	started bool      // last is set
}

// New returns a full bucket of capacity burst that refills at rate tokens
// per second. A burst below 1 is 1. A rate that is not positive (NaN
// included) never refills; +Inf refills completely whenever time advances.
func New(rate float64, burst int) Bucket {
	if !(rate > 0) {
		rate = 0
	}
	b := float64(max(burst, 1))
	return Bucket{rate: rate, burst: b, tokens: b}
}

// Allow reports whether one event may happen at now, and takes a token if
// so. It is AllowN(now, 1).
func (b *Bucket) Allow(now time.Time) bool {
	return b.AllowN(now, 1)
}

// AllowN reports whether n events may happen at now, and takes n tokens if
// so; it takes none otherwise. n <= 0 is always allowed, and n above the
// burst never is. Time going backwards adds no tokens (and the bucket waits
// for it to catch up).
func (b *Bucket) AllowN(now time.Time, n int) bool {
	b.refill(now)
	if n <= 0 {
		return true
	}
	if f := float64(n); b.tokens >= f {
		b.tokens -= f
		return true
	}
	return false
}

// Tokens returns how many tokens the bucket holds at now, which is not
// necessarily a whole number, without taking any.
func (b Bucket) Tokens(now time.Time) float64 {
	b.refill(now)
	return b.tokens
}

func (b *Bucket) refill(now time.Time) {
	if !b.started {
		b.started, b.last = true, now
		return
	}
	if d := now.Sub(b.last); d > 0 {
		b.tokens = min(b.tokens+d.Seconds()*b.rate, b.burst)
		b.last = now
	}
}

// Defaults of Policy.
const (
	DefaultMaxRefusals = 50
	DefaultWindow      = time.Second
)

// Policy configures a Limiter.
type Policy struct {
	// Rate is how many calls per second are allowed in the long run.
	Rate float64
	// Burst is how many calls may come at once; below 1 means 1. Make it
	// at least 2: with a burst of 1, tokens earned while the bucket is
	// full are lost, so a client sending faster than Rate gets fewer than
	// Rate calls per second through and more refusals than the package
	// doc's timing says.
	Burst int
	// MaxRefusals is how many refused calls are tolerated in a row before
	// the client is kicked; 0 or less means DefaultMaxRefusals.
	MaxRefusals int
	// Window is the time over which MaxRefusals refusals are forgiven:
	// the tolerance refills at MaxRefusals per Window. 0 or less means
	// DefaultWindow.
	Window time.Duration
}

// Limiter is a Bucket of calls plus flood detection: refused calls are
// counted against a second bucket, of MaxRefusals refusals refilled at
// MaxRefusals per Window, and a refusal that finds it empty means the
// client is flooding. See the package doc for the timing this gives.
type Limiter struct {
	calls    Bucket
	refusals Bucket
	kicked   bool
}

// NewLimiter returns a Limiter that enforces p.
func NewLimiter(p Policy) Limiter {
	if p.MaxRefusals <= 0 {
		p.MaxRefusals = DefaultMaxRefusals
	}
	if p.Window <= 0 {
		p.Window = DefaultWindow
	}
	return Limiter{
		calls:    New(p.Rate, p.Burst),
		refusals: New(float64(p.MaxRefusals)/p.Window.Seconds(), p.MaxRefusals),
	}
}

// Allow reports whether one call may go ahead at now (ok) and whether the
// client is flooding and should be disconnected (kick), with
// transport.ClosePolicyViolation. Once kick is reported, every later call
// reports (false, true).
func (l *Limiter) Allow(now time.Time) (ok, kick bool) { return l.AllowN(now, 1) }

// AllowN is Allow for a call that weighs n calls (a large one, say): it
// takes n of the Rate's tokens, or refuses it as one refused call. A
// weight above the burst counts as the burst, so that the call can go
// through once the bucket is full.
func (l *Limiter) AllowN(now time.Time, n int) (ok, kick bool) {
	switch {
	case l.kicked:
		return false, true
	case l.calls.AllowN(now, min(n, max(int(l.calls.burst), 1))):
		return true, false
	case l.refusals.Allow(now):
		return false, false
	}
	l.kicked = true
	return false, true
}

// Kicked reports whether Allow has reported a kick.
func (l *Limiter) Kicked() bool { return l.kicked }
