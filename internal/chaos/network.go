package chaos

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/quic-go/quic-go/testutils/simnet"
)

// A Profile is a set of impairments applied to every packet, in each
// direction independently.
type Profile struct {
	Name string
	// Latency is the one-way base delay of every packet (so the round
	// trip is at least twice this).
	Latency time.Duration
	// Jitter is an extra one-way delay drawn per packet, uniformly in
	// [0, Jitter). Packets sent close together can therefore overtake
	// each other: jitter reorders.
	Jitter time.Duration
	// Loss is the probability that a packet is dropped.
	Loss float64
	// Duplication is the probability that a packet that was not dropped
	// is delivered twice; each copy gets its own delay.
	Duplication float64
}

// The profiles of the runtime milestone's chaos requirement.
var (
	Unit   = Profile{Name: "unit", Jitter: 250 * time.Millisecond, Loss: 0.05, Duplication: 0.10}
	Brutal = Profile{Name: "brutal", Latency: time.Second, Jitter: 100 * time.Millisecond, Loss: 0.25, Duplication: 0.25}
)

// MaxRTT is the longest round trip the profile's delays alone produce.
func (p Profile) MaxRTT() time.Duration { return 2 * (p.Latency + p.Jitter) }

func (p Profile) String() string {
	return fmt.Sprintf("%s (latency %v, jitter %v, loss %g%%, duplication %g%%)",
		p.Name, p.Latency, p.Jitter, p.Loss*100, p.Duplication*100)
}

// A Network is a simulated packet network (quic-go's simnet) whose every
// packet suffers a Profile. Make it, its endpoints and Start it inside a
// testing/synctest bubble: its links run on timers, in virtual time.
//
// simnet v0.64.1 models per-link delay (NodeBiDiLinkSettings.Latency, or a
// per-packet LatencyFunc) and MTU, nothing else. So:
//
//   - latency and jitter are each endpoint's downlink LatencyFunc, which
//     returns Latency plus a uniform draw in [0, Jitter) from that
//     endpoint's PRNG; simnet's delivery queue, ordered by delivery time,
//     then reorders packets as real jitter does;
//   - loss and duplication are done by the Router (the hop between the
//     sender's uplink and the receiver's downlink), which wraps
//     simnet.PerfectRouter: it drops a packet with probability Loss and
//     otherwise forwards it, a second time with probability Duplication.
//     The router draws from the sender's PRNG.
//
// Every PRNG is a PCG seeded from the Network's seed and the endpoint's
// index, so each link draws the same sequence of decisions in every run.
// Which packet meets which draw still depends on how goroutines interleave
// (and QUIC packets are encrypted under fresh keys each run), so a run is
// reproducible in its statistics, not bit for bit.
type Network struct {
	profile Profile
	seed    uint64
	sim     simnet.Simnet
	router  *router
	eps     []*simnet.SimConn
	started bool
}

// NewNetwork returns a network with profile p and PRNG seed seed.
func NewNetwork(p Profile, seed uint64) *Network {
	r := &router{profile: p, seed: seed, rngs: map[string]*rand.Rand{}}
	return &Network{profile: p, seed: seed, sim: simnet.Simnet{Router: r}, router: r}
}

// Endpoint adds a node at addr and returns its packet conn. Add every
// endpoint before Start (simnet starts the links it knows of).
func (n *Network) Endpoint(addr *net.UDPAddr) *simnet.SimConn {
	if n.started {
		panic("chaos: Endpoint after Start")
	}
	i := uint64(len(n.eps))
	rng := rand.New(rand.NewPCG(n.seed, 2*i+1))
	var mu sync.Mutex
	p := n.profile
	latency := func(simnet.Packet) time.Duration {
		d := p.Latency
		if p.Jitter > 0 {
			mu.Lock()
			d += time.Duration(rng.Int64N(int64(p.Jitter)))
			mu.Unlock()
		}
		return d
	}
	n.router.addSource(addr, rand.New(rand.NewPCG(n.seed, 2*i+2)))
	c := n.sim.NewEndpoint(addr, simnet.NodeBiDiLinkSettings{LatencyFunc: latency})
	n.eps = append(n.eps, c)
	return c
}

// Start starts the links.
func (n *Network) Start() error {
	n.started = true
	return n.sim.Start()
}

// Close closes every endpoint and stops the links.
func (n *Network) Close() error {
	var errs []error
	for _, c := range n.eps {
		errs = append(errs, c.Close())
	}
	if n.started {
		errs = append(errs, n.sim.Close())
	}
	return errors.Join(errs...)
}

// Stats counts what the router did.
type Stats struct {
	Sent       int64 // packets handed to the router
	Dropped    int64 // of those, dropped
	Duplicated int64 // of those, delivered twice
}

func (s Stats) String() string {
	pct := func(n int64) float64 {
		if s.Sent == 0 {
			return 0
		}
		return 100 * float64(n) / float64(s.Sent)
	}
	return fmt.Sprintf("%d packets, %d dropped (%.1f%%), %d duplicated (%.1f%%)",
		s.Sent, s.Dropped, pct(s.Dropped), s.Duplicated, pct(s.Duplicated))
}

// Stats returns the packet counts so far.
func (n *Network) Stats() Stats {
	return Stats{Sent: n.router.sent.Load(), Dropped: n.router.dropped.Load(), Duplicated: n.router.duplicated.Load()}
}

// router drops and duplicates packets, then routes them like
// simnet.PerfectRouter.
type router struct {
	simnet.PerfectRouter
	profile Profile
	seed    uint64

	mu   sync.Mutex
	rngs map[string]*rand.Rand // by source address

	sent, dropped, duplicated atomic.Int64
}

func (r *router) addSource(addr net.Addr, rng *rand.Rand) {
	r.mu.Lock()
	r.rngs[addr.String()] = rng
	r.mu.Unlock()
}

func (r *router) SendPacket(p simnet.Packet) error {
	r.mu.Lock()
	rng := r.rngs[p.From.String()]
	if rng == nil { // a source we did not make: give it a stream of its own
		rng = rand.New(rand.NewPCG(r.seed, uint64(len(r.rngs))<<32))
		r.rngs[p.From.String()] = rng
	}
	drop := rng.Float64() < r.profile.Loss
	dup := !drop && rng.Float64() < r.profile.Duplication
	r.mu.Unlock()

	r.sent.Add(1)
	if drop {
		r.dropped.Add(1)
		return nil
	}
	if dup {
		r.duplicated.Add(1)
		q := p
		q.Data = slices.Clone(p.Data)
		if err := r.PerfectRouter.SendPacket(q); err != nil {
			return err
		}
	}
	return r.PerfectRouter.SendPacket(p)
}
