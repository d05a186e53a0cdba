package ratelimit

import (
	"math"
	"math/rand/v2"
	"testing"
	"testing/synctest"
	"time"
)

var t0 = time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)

func TestBucketBurstThenRate(t *testing.T) {
	b := New(10, 5)
	for i := range 5 {
		if !b.Allow(t0) {
			t.Fatalf("call %d of the burst refused", i)
		}
	}
	if b.Allow(t0) {
		t.Fatal("call beyond the burst allowed")
	}
	// 10/s: one token per 100 ms.
	if b.Allow(t0.Add(99 * time.Millisecond)) {
		t.Fatal("allowed before a token was earned")
	}
	if !b.Allow(t0.Add(100 * time.Millisecond)) {
		t.Fatal("refused after a token was earned")
	}
	// A long pause refills to the burst, no more.
	now := t0.Add(time.Hour)
	if got := b.Tokens(now); got != 5 {
		t.Fatalf("Tokens after an hour = %v, want 5", got)
	}
	n := 0
	for b.Allow(now) {
		n++
	}
	if n != 5 {
		t.Fatalf("%d calls allowed after a long pause, want 5", n)
	}
}

func TestBucketSustainedRate(t *testing.T) {
	// Calls every 1 ms against 50/s for 10 s: about 50·10 + burst pass.
	b := New(50, 10)
	allowed := 0
	for i := range 10_000 {
		if b.Allow(t0.Add(time.Duration(i) * time.Millisecond)) {
			allowed++
		}
	}
	if want := 50*10 + 10; allowed < want-1 || allowed > want {
		t.Fatalf("allowed %d, want about %d", allowed, want)
	}
}

func TestAllowN(t *testing.T) {
	b := New(1, 10)
	if !b.AllowN(t0, 0) || !b.AllowN(t0, -3) {
		t.Fatal("n <= 0 refused")
	}
	if b.AllowN(t0, 11) {
		t.Fatal("n over the burst allowed")
	}
	if !b.AllowN(t0, 7) {
		t.Fatal("7 of 10 refused")
	}
	if b.AllowN(t0, 4) {
		t.Fatal("4 allowed with 3 left")
	}
	if got := b.Tokens(t0); got != 3 {
		t.Fatalf("a refused AllowN took tokens: %v left, want 3", got)
	}
	if !b.AllowN(t0.Add(time.Second), 4) {
		t.Fatal("4 refused with 4 left")
	}
}

func TestBucketEdgeCases(t *testing.T) {
	var zero Bucket
	if zero.Allow(t0) || zero.Allow(t0.Add(time.Hour)) {
		t.Error("the zero Bucket allowed a call")
	}
	for _, rate := range []float64{0, -1, math.NaN(), math.Inf(-1)} {
		b := New(rate, 2)
		if !b.Allow(t0) || !b.Allow(t0) || b.Allow(t0.Add(time.Hour)) {
			t.Errorf("rate %v: want the burst and then nothing", rate)
		}
	}
	inf := New(math.Inf(1), 2)
	if !inf.Allow(t0) || !inf.Allow(t0) || inf.Allow(t0) || !inf.Allow(t0.Add(time.Nanosecond)) {
		t.Error("rate +Inf: want the burst, then a full refill when time advances")
	}
	if got := inf.Tokens(t0.Add(time.Hour)); got != 2 {
		t.Errorf("rate +Inf: %v tokens, want 2", got)
	}
	small := New(1, 0) // burst below 1 is 1
	if !small.Allow(t0) || small.Allow(t0) {
		t.Error("burst 0: want one call")
	}
}

func TestBucketClockBackwards(t *testing.T) {
	b := New(10, 1)
	b.Allow(t0)
	// Going back then forward again must not mint tokens twice.
	if b.Allow(t0.Add(-time.Hour)) {
		t.Fatal("allowed when the clock went back")
	}
	if b.Allow(t0.Add(50 * time.Millisecond)) {
		t.Fatal("allowed half a token after the clock went back")
	}
	if !b.Allow(t0.Add(100 * time.Millisecond)) {
		t.Fatal("refused a token earned since the latest time")
	}
}

// TestBucketIsAValue: copying a Bucket snapshots it.
func TestBucketIsAValue(t *testing.T) {
	a := New(1, 1)
	c := a
	if !a.Allow(t0) || a.Allow(t0) {
		t.Fatal("a")
	}
	if !c.Allow(t0) {
		t.Fatal("the copy shares state with the original")
	}
}

// simulate sends calls at the given times against a Limiter and returns how
// many were allowed and refused, and when it was kicked (-1 if never).
func simulate(p Policy, times func(i int) time.Duration, until time.Duration) (allowed, refused int, kickedAt time.Duration) {
	l := NewLimiter(p)
	for i := 0; ; i++ {
		at := times(i)
		if at > until {
			return allowed, refused, -1
		}
		ok, kick := l.Allow(t0.Add(at))
		switch {
		case kick:
			if ok || !l.Kicked() {
				panic("kick with ok, or Kicked false")
			}
			return allowed, refused, at
		case ok:
			allowed++
		default:
			refused++
		}
	}
}

func every(perSecond float64) func(int) time.Duration {
	return func(i int) time.Duration { return time.Duration(float64(i) * float64(time.Second) / perSecond) }
}

var rpcPolicy = Policy{Rate: 20, Burst: 20}

// TestFloodKickedWithin2s is the runtime requirement: a client sending
// 10,000 RPCs per second at a limit of 20 per second is kicked within 2 s
// of simulated time (in fact within 10 ms).
func TestFloodKickedWithin2s(t *testing.T) {
	allowed, refused, at := simulate(rpcPolicy, every(10_000), 2*time.Second)
	if at < 0 {
		t.Fatalf("not kicked within 2 s (%d allowed, %d refused)", allowed, refused)
	}
	if at > 10*time.Millisecond {
		t.Errorf("kicked after %v, want within 10 ms", at)
	}
	if allowed > rpcPolicy.Burst+1 || refused != DefaultMaxRefusals {
		t.Errorf("%d allowed and %d refused before the kick; want about %d and %d", allowed, refused, rpcPolicy.Burst, DefaultMaxRefusals)
	}
	t.Logf("kicked after %v: %d allowed, %d refused", at, allowed, refused)
}

// TestHonestClientNeverKicked: a client at 15 RPCs per second, under the
// limit of 20, is never refused nor kicked, whether it sends evenly or with
// jitter.
func TestHonestClientNeverKicked(t *testing.T) {
	const span = 10 * time.Minute
	allowed, refused, at := simulate(rpcPolicy, every(15), span)
	if at >= 0 || refused > 0 {
		t.Fatalf("steady 15/s: kicked at %v, %d refused", at, refused)
	}
	if want := int(span.Seconds()*15) + 1; allowed != want {
		t.Fatalf("steady 15/s: %d allowed, want %d", allowed, want)
	}

	// Exponential gaps with a mean of 1/15 s: bursty, but under the rate.
	rng := rand.New(rand.NewPCG(1, 2))
	var at2 time.Duration
	jitter := func(int) time.Duration {
		at2 += time.Duration(rng.ExpFloat64() / 15 * float64(time.Second))
		return at2
	}
	_, refused, at = simulate(rpcPolicy, jitter, span)
	if at >= 0 {
		t.Fatalf("jittery 15/s: kicked at %v", at)
	}
	t.Logf("jittery 15/s for %v: %d refused, not kicked", span, refused)
}

// TestKickTiming checks the bounds of the package doc: under Rate +
// MaxRefusals/Window a client is only throttled; at or over Rate +
// 2·MaxRefusals/Window it is kicked within Window + Burst/(R - Rate).
func TestKickTiming(t *testing.T) {
	for _, p := range []Policy{
		rpcPolicy,
		{Rate: 20, Burst: 1},
		{Rate: 100, Burst: 200, MaxRefusals: 10, Window: 500 * time.Millisecond},
		{Rate: 5, Burst: 5, MaxRefusals: 200, Window: 4 * time.Second},
	} {
		maxRefusals, window := DefaultMaxRefusals, DefaultWindow
		if p.MaxRefusals > 0 {
			maxRefusals, window = p.MaxRefusals, p.Window
		}
		g := float64(maxRefusals) / window.Seconds()
		under := []float64{p.Rate / 2, p.Rate, p.Rate + g/2, p.Rate + 0.98*g}
		if p.Burst < 2 {
			under = under[:2] // see Policy.Burst
		}
		for _, r := range under {
			if _, _, at := simulate(p, every(r), 5*time.Minute); at >= 0 {
				t.Errorf("%+v: a client at %v/s was kicked after %v", p, r, at)
			}
		}
		for _, r := range []float64{p.Rate + 2*g, p.Rate + 3*g, 10 * (p.Rate + 2*g), 1e5} {
			f := r - p.Rate
			bound := window + time.Duration(float64(max(p.Burst, 1))/f*float64(time.Second))
			_, _, at := simulate(p, every(r), time.Minute)
			if at < 0 || at > bound {
				t.Errorf("%+v: a client at %v/s was kicked after %v, want within %v", p, r, at, bound)
			}
		}
	}
}

// TestModerateOverrunThrottled: a client at twice the limit is throttled to
// the limit but not kicked.
func TestModerateOverrunThrottled(t *testing.T) {
	allowed, refused, at := simulate(rpcPolicy, every(40), time.Minute)
	if at >= 0 {
		t.Fatalf("kicked at %v", at)
	}
	if want := 20*60 + 20; allowed < want-2 || allowed > want+1 || refused == 0 {
		t.Fatalf("%d allowed, %d refused; want about %d allowed", allowed, refused, want)
	}
}

// TestRefusalsForgiven: bursts of refusals, each under MaxRefusals and
// spaced by Window, never add up to a kick.
func TestRefusalsForgiven(t *testing.T) {
	l := NewLimiter(Policy{Rate: 1, Burst: 1, MaxRefusals: 10, Window: time.Second})
	now := t0
	for range 100 {
		for i := range 11 { // 1 allowed (the token earned meanwhile), then 10 refused
			ok, kick := l.Allow(now)
			if kick {
				t.Fatal("kicked")
			}
			if ok != (i == 0) {
				t.Fatalf("call %d: ok = %v", i, ok)
			}
		}
		now = now.Add(time.Second)
	}
	// One more refusal in the same instant is one too many.
	if ok, kick := l.Allow(now.Add(-time.Second)); ok || !kick {
		t.Fatalf("the 11th refusal in a row: ok=%v kick=%v, want a kick", ok, kick)
	}
	if ok, kick := l.Allow(now.Add(time.Hour)); ok || !kick || !l.Kicked() {
		t.Fatal("the kick is not sticky")
	}
}

// TestSynctest drives a Limiter from time.Now() in a synctest bubble, as
// the session layer does: the flood is kicked within 2 s of virtual time.
func TestSynctest(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := NewLimiter(rpcPolicy)
		start := time.Now()
		for {
			if _, kick := l.Allow(time.Now()); kick {
				break
			}
			time.Sleep(100 * time.Microsecond) // 10,000 calls per second
		}
		if d := time.Since(start); d >= 2*time.Second {
			t.Fatalf("kicked after %v", d)
		}
	})
}

func TestZeroAllocs(t *testing.T) {
	b := New(1000, 10)
	l := NewLimiter(rpcPolicy)
	now := t0
	if n := testing.AllocsPerRun(1000, func() {
		now = now.Add(time.Millisecond)
		b.Allow(now)
		b.AllowN(now, 2)
		l.Allow(now)
		_ = New(5, 5)
		_ = NewLimiter(rpcPolicy)
	}); n != 0 {
		t.Fatalf("%v allocations per run, want 0", n)
	}
}

func BenchmarkBucketAllow(b *testing.B) {
	bk := New(1e6, 100)
	now := t0
	b.ReportAllocs()
	for b.Loop() {
		now = now.Add(time.Microsecond)
		bk.Allow(now)
	}
}

func BenchmarkLimiterAllow(b *testing.B) {
	for _, c := range []struct {
		name string
		step time.Duration
	}{{"allowed", time.Second}, {"refused", time.Nanosecond}} {
		b.Run(c.name, func(b *testing.B) {
			l := NewLimiter(Policy{Rate: 1, Burst: 1, MaxRefusals: math.MaxInt32})
			now := t0
			b.ReportAllocs()
			for b.Loop() {
				now = now.Add(c.step)
				l.Allow(now)
			}
		})
	}
}

// TestLimiterAllowN checks weighed calls: a call of weight n takes n
// tokens, a refused one counts as one refusal, a weight over the burst
// goes through once the bucket is full, and the rate in weight bounds a
// stream of heavy calls as it bounds light ones.
func TestLimiterAllowN(t *testing.T) {
	t0 := time.Unix(0, 0)
	l := NewLimiter(Policy{Rate: 10, Burst: 20})
	if ok, _ := l.AllowN(t0, 15); !ok {
		t.Fatal("a call of weight 15 refused with 20 tokens")
	}
	if ok, kick := l.AllowN(t0, 6); ok || kick {
		t.Fatalf("a call of weight 6 with 5 tokens left: ok %v kick %v, want refused", ok, kick)
	}
	if ok, _ := l.AllowN(t0, 5); !ok {
		t.Fatal("a call of weight 5 refused with 5 tokens")
	}
	// Over the burst: allowed once the bucket has refilled, as one of
	// weight Burst.
	if ok, _ := l.AllowN(t0.Add(time.Second), 1000); ok {
		t.Fatal("a call over the burst allowed with 10 tokens")
	}
	if ok, _ := l.AllowN(t0.Add(3*time.Second), 1000); !ok {
		t.Fatal("a call over the burst refused with a full bucket")
	}
	// Calls of weight 5, 10 a second, for a minute: about Rate/5 a
	// second go through, and the client, refused 8 times a second, is
	// never kicked (the tolerance refills at 50 a second).
	l = NewLimiter(Policy{Rate: 10, Burst: 20})
	allowed := 0
	for i := range 600 {
		ok, kick := l.AllowN(t0.Add(time.Duration(i)*100*time.Millisecond), 5)
		if kick {
			t.Fatalf("kicked at call %d", i)
		}
		if ok {
			allowed++
		}
	}
	if want := 20/5 + 60*10/5; allowed < want-2 || allowed > want+1 {
		t.Errorf("%d calls of weight 5 allowed in 60 s, want about %d", allowed, want)
	}
}
