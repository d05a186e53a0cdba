package bench

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"runtime"
	"time"
)

// MachineSpeed is how fast the machine ran three fixed loops just before
// and just after a run: the same code's times differ with it, and on a
// shared or virtual machine it changes from minute to minute. A run's
// times are comparable with another's only when these are alike.
type MachineSpeed struct {
	// MemNS is the nanoseconds of one load of a chain of dependent loads
	// at random over 32 MiB: a cache miss, and mostly a TLB miss too.
	// W2's tick time follows it (docs/bench.md).
	MemNS float64 `json:"mem_ns"`
	// CacheNS is the same over 4 MiB, which the last-level cache of a
	// server CPU holds when nothing else uses it: with neighbours that
	// do, it approaches MemNS.
	CacheNS float64 `json:"cache_ns"`
	// ALUNS is the nanoseconds of one step of an integer loop that stays
	// in registers: the core's speed.
	ALUNS float64 `json:"alu_ns"`
}

// machineRuns is the speeds measured before and after a run, and the
// system's setting of transparent huge pages.
type machineRuns struct {
	Before MachineSpeed `json:"before"`
	After  MachineSpeed `json:"after"`
	// THP is Linux's transparent huge page mode (always, madvise or
	// never), "" where there is none. Go's heap gets huge pages only
	// with always (the runtime does not ask for them): with fewer TLB
	// misses, W2's tick is about a tenth faster (docs/bench.md), and
	// MemNS lower, as the chase's pages are huge too.
	THP string `json:"thp,omitempty"`
}

// startMachine returns the machine's speeds before a run and its huge
// page mode; the run sets After when it ends.
func startMachine() machineRuns {
	return machineRuns{Before: measureMachine(), THP: thpMode()}
}

// String describes the speeds and the huge page mode on one line, for
// the text output of replica bench.
func (m machineRuns) String() string {
	s := fmt.Sprintf("machine: memory %.0f/%.0f ns, 4 MiB %.0f/%.0f ns, ALU %.2f/%.2f ns (before/after)",
		m.Before.MemNS, m.After.MemNS, m.Before.CacheNS, m.After.CacheNS, m.Before.ALUNS, m.After.ALUNS)
	if m.THP != "" {
		s += ", transparent huge pages " + m.THP
	}
	return s
}

// thpMode returns the mode Linux's transparent huge pages are in, the
// word in brackets of /sys/kernel/mm/transparent_hugepage/enabled, or ""
// where the file is missing or unreadable.
func thpMode() string {
	b, err := os.ReadFile("/sys/kernel/mm/transparent_hugepage/enabled")
	if err != nil {
		return ""
	}
	return bracketed(b)
}

// bracketed returns the word between the first [ and the ] after it in
// b, or "".
func bracketed(b []byte) string {
	_, rest, ok := bytes.Cut(b, []byte("["))
	if !ok {
		return ""
	}
	word, _, ok := bytes.Cut(rest, []byte("]"))
	if !ok {
		return ""
	}
	return string(word)
}

// measureMachine times the loops of MachineSpeed. It allocates 36 MiB,
// collected before it returns.
func measureMachine() MachineSpeed {
	mem, p := chase(8<<20, 1<<21)   // 32 MiB
	cache, q := chase(1<<20, 1<<21) // 4 MiB
	const steps = 1 << 26
	x := uint64(p^q) | 1
	start := time.Now()
	for range steps {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
	}
	alu := time.Since(start)
	sink = x
	runtime.GC()
	return MachineSpeed{MemNS: mem, CacheNS: cache, ALUNS: round2(float64(alu.Nanoseconds()) / steps)}
}

// chase returns the nanoseconds of each of a chain of loads dependent loads through
// n uint32s (4n bytes) linked in one cycle in a random order, and where
// the chain ended.
func chase(n, loads int) (float64, uint32) {
	next := make([]uint32, n)
	for i := range next {
		next[i] = uint32(i)
	}
	// Sattolo's algorithm: a single cycle, so that each load's address
	// comes from the one before and the chain visits every element.
	r := rand.New(rand.NewPCG(1, 2))
	for i := n - 1; i > 0; i-- {
		j := r.IntN(i)
		next[i], next[j] = next[j], next[i]
	}
	p := uint32(0)
	for range n / 8 { // not timed: the chain's lines and pages come in as they will in the timed part
		p = next[p]
	}
	start := time.Now()
	for range loads {
		p = next[p]
	}
	return round2(float64(time.Since(start).Nanoseconds()) / float64(loads)), p
}

// sink keeps the integer loop's result, so that it is not left out.
var sink uint64
