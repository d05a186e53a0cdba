package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime"

	"github.com/replicago/replica/internal/bench"
)

func runBench(args []string) error {
	if persistScenario(args) {
		return errPersistMoved
	}
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	scenario := fs.String("scenario", "w1", "scenario to run: w1 (in-process encode and decode; with -aoi, a server with interest management), "+
		"w2 (the W2 zone on a server with interest management), clients (a server and real client connections over loopback) "+
		"joinstorm (clients dialing that server at -rate a second while it ticks), "+
		"or reconnect (W1 AOI and W2 clients resuming after gaps of 0.5, 2 and 10 s: catch-up against full state); "+
		"the persist scenario is replica-store's: go run ./cmd/replica-store bench -h")
	clients := fs.Int("clients", 1, "number of clients (w1 -aoi and clients: 100 unless given; w2: 500, one per player; joinstorm: 1000)")
	aoi := fs.Bool("aoi", false, "w1: AOI mode, on a replica.Server with interest management and in-memory clients")
	gomaxprocs := fs.Int("gomaxprocs", 0, "set runtime.GOMAXPROCS for the run (0: leave it)")
	cpuprofile := fs.String("cpuprofile", "", "w1 -aoi, w2: write a CPU profile of the measured ticks to this file (the timed section is labeled section=server)")
	memprofile := fs.String("memprofile", "", "w1 -aoi, w2: write a heap profile recording every allocation of the measured Server.Ticks, and only those, to this file "+
		"(go tool pprof -sample_index=alloc_objects -top FILE)")
	series := fs.String("series", "", "w1 -aoi, w2: write one CSV line per measured tick to this file (step, Server.Tick and clients' apply microseconds, bytes, collections)")
	rate := fs.Float64("rate", 800, "joinstorm: dials started per second")
	process := fs.Bool("process", false, "joinstorm: run the clients in a child process (ws only), apart from the server's scheduler and heap")
	addr := fs.String("addr", "", "joinstorm-clients: the server's address")
	quantized := fs.Bool("quantized", false, "w1: positions at 1/64 unit, angle in 12 bits")
	transportName := fs.String("transport", "ws", "clients, joinstorm: ws or quic")
	ticks := fs.Int("ticks", 200, "clients: measured ticks at 20 Hz, after the clients joined and 20 ticks of warm-up")
	asJSON := fs.Bool("json", false, "print one JSON object")
	clientKind := fs.String("client", "go", "w1 broadcast: go, or ts for the TypeScript client runtime in Node (one client)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if !set["clients"] {
		switch {
		case *scenario == "clients" || *scenario == "w1" && *aoi:
			*clients = 100
		case *scenario == "w2":
			*clients = 500
		case *scenario == "joinstorm":
			*clients = 1000
		}
	}
	if *clients < 1 {
		return fmt.Errorf("bench: -clients must be at least 1, got %d", *clients)
	}
	if *gomaxprocs < 0 {
		return fmt.Errorf("bench: -gomaxprocs must not be negative, got %d", *gomaxprocs)
	}
	if *gomaxprocs > 0 {
		defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(*gomaxprocs))
	}
	if *aoi && *scenario != "w1" {
		return fmt.Errorf("bench: -aoi is a mode of -scenario w1")
	}
	if (*cpuprofile != "" || *memprofile != "" || *series != "") && !(*scenario == "w1" && *aoi || *scenario == "w2") {
		return fmt.Errorf("bench: -cpuprofile, -memprofile and -series apply to -scenario w1 -aoi and -scenario w2")
	}
	if *clientKind != "go" && (*clientKind != "ts" || *scenario != "w1" || *aoi || set["clients"]) {
		return fmt.Errorf("bench: -client %s: want go, or ts with -scenario w1 in broadcast mode (one client)", *clientKind)
	}
	switch *scenario {
	case "w1", "w2":
		if *scenario == "w2" || *aoi {
			if *quantized {
				return fmt.Errorf("bench: -quantized applies to -scenario w1 without -aoi")
			}
			return runInterest(*scenario, bench.InterestConfig{Clients: *clients}, *cpuprofile, *memprofile, *series, *asJSON)
		}
		if *clientKind == "ts" && *scenario == "w1" {
			return runBenchTS(*quantized, *asJSON)
		}
		res, err := bench.RunW1(bench.W1Config{Clients: *clients, Quantized: *quantized})
		if err != nil {
			return err
		}
		if *asJSON {
			return json.NewEncoder(os.Stdout).Encode(res)
		}
		fmt.Printf("w1 broadcast clients=%d quantized=%v verified=%v reference=%v\n", res.Clients, res.Quantized, res.Verified, res.ReferenceOK)
		fmt.Printf("  %.1f B/client/tick, server %.1f/%.1f µs (p50/p99; encode %.1f/%.1f), client %.1f/%.1f µs, %.1f allocs/tick, %.0f B/entity\n",
			res.BytesPerClientTick, res.ServerUSPerTick.P50, res.ServerUSPerTick.P99, res.EncodeUSPerTick.P50, res.EncodeUSPerTick.P99,
			res.ClientUSPerTick.P50, res.ClientUSPerTick.P99, res.AllocsPerTick, res.BytesPerEntity)
		fmt.Printf("  %v\n", res.Machine)
		if !res.Verified {
			return fmt.Errorf("bench: w1 run did not verify")
		}
		return nil
	case "clients":
		if *transportName != "ws" && *transportName != "quic" {
			return fmt.Errorf("bench: -transport must be ws or quic, got %q", *transportName)
		}
		if *ticks < 1 {
			return fmt.Errorf("bench: -ticks must be at least 1, got %d", *ticks)
		}
		res, err := bench.RunClients(bench.ClientsConfig{Transport: *transportName, Clients: *clients, Measured: *ticks})
		if err != nil {
			return err
		}
		if *asJSON {
			return json.NewEncoder(os.Stdout).Encode(res)
		}
		fmt.Printf("clients %s broadcast clients=%d entities=%d ticks=%d at %d Hz (achieved %.1f Hz) verified=%v dropped=%d\n",
			res.Transport, res.Clients, res.Entities, res.Ticks, res.Hz, res.AchievedHz, res.Verified, res.Dropped)
		fmt.Printf("  server tick %.0f/%.0f µs (p50/p99; update %.0f/%.0f µs), %.0f B/client/s received (%.1f B/client/tick), joined in %.1fs\n",
			res.ServerUSPerTick.P50, res.ServerUSPerTick.P99, res.UpdateUSPerTick.P50, res.UpdateUSPerTick.P99,
			res.BytesPerClientPerSecond, res.BytesPerClientTick, res.JoinSeconds)
		if m := res.Memory; m != nil {
			fmt.Printf("  server memory per idle connection %.1f KiB: heap %.1f + stacks %.1f (%.1f goroutines) + goroutine records %.1f + half of %.1f shared; client side %.1f KiB\n",
				res.MemoryPerConnection/1024, m.ServerHeap/1024, m.ServerStack/1024, m.ServerGoroutines, m.ServerOther/1024, m.SharedHeap/1024,
				(m.ClientHeap+m.ClientStack)/1024)
		}
		if !res.Verified {
			return fmt.Errorf("bench: clients run did not verify")
		}
		return nil
	case "joinstorm":
		if *transportName != "ws" && *transportName != "quic" {
			return fmt.Errorf("bench: -transport must be ws or quic, got %q", *transportName)
		}
		if *rate <= 0 {
			return fmt.Errorf("bench: -rate must be positive, got %v", *rate)
		}
		cfg := bench.JoinStormConfig{Transport: *transportName, Clients: *clients, Rate: *rate}
		if *process {
			exe, err := os.Executable()
			if err != nil {
				return err
			}
			cfg.ClientsCommand = []string{exe, "bench", "-scenario", "joinstorm-clients"}
		}
		res, err := bench.RunJoinStorm(cfg)
		if err != nil {
			return err
		}
		if *asJSON {
			return json.NewEncoder(os.Stdout).Encode(res)
		}
		fmt.Printf("joinstorm %s clients=%d at %.0f/s (in a child process: %v) entities=%d at %d Hz verified=%v failed=%d dropped=%d\n",
			res.Transport, res.Clients, res.Rate, res.ClientsProcess, res.Entities, res.Hz, res.Verified, res.Failed, res.Dropped)
		fmt.Printf("  storm: %.0f joins/s, %d ticks in %.1fs (%.1f Hz, CPU %.0f%%), server tick %.0f/%.0f µs (p50/p99; CPU %.0f/%.0f µs); after: %.0f/%.0f µs; join latency %.1f/%.1f ms\n",
			res.JoinsPerSecond, res.StormTicks, res.StormSeconds, res.AchievedHz, 100*res.CPUUtilization, res.ServerUSPerTick.P50, res.ServerUSPerTick.P99,
			res.ServerCPUUSPerTick.P50, res.ServerCPUUSPerTick.P99,
			res.AfterUSPerTick.P50, res.AfterUSPerTick.P99, res.JoinLatencyUS.P50/1e3, res.JoinLatencyUS.P99/1e3)
		if !res.Verified {
			return fmt.Errorf("bench: joinstorm run did not verify")
		}
		return nil
	case "reconnect":
		res, err := bench.RunReconnect(bench.ReconnectConfig{})
		if err != nil {
			return err
		}
		if *asJSON {
			if err := json.NewEncoder(os.Stdout).Encode(res); err != nil {
				return err
			}
		} else {
			fmt.Printf("reconnect at %d Hz verified=%v %s\n", res.TickRate, res.Verified, res.VerifyError)
			for _, g := range res.Gaps {
				fmt.Printf("  %s gap %4.1f s: catch-up %8.1f B, full state %8.1f B (%.0f%%), %d catch-ups, %d full states, %.0f entities held\n",
					g.Workload, g.GapS, g.DeltaBytes, g.FullBytes, 100*g.DeltaBytes/max(g.FullBytes, 1), g.CatchUps, g.Fallbacks, g.VisiblePerClient)
			}
		}
		if !res.Verified {
			return fmt.Errorf("bench: reconnect run did not verify: %s", res.VerifyError)
		}
		return nil
	case "joinstorm-clients":
		// The clients of joinstorm -process, run by it.
		return bench.RunStormClients(*addr, *clients, *rate, os.Stdin, os.Stdout)
	default:
		return fmt.Errorf("bench: unknown scenario %q (known: w1, w2, clients, joinstorm, reconnect)", *scenario)
	}
}

// runInterest runs W1 in AOI mode or W2 on a server with interest
// management, and prints the result.
func runInterest(scenario string, cfg bench.InterestConfig, cpuprofile, memprofile, series string, asJSON bool) (err error) {
	var closers []*os.File
	create := func(name string) (io.Writer, error) {
		f, err := os.Create(name)
		if err != nil {
			return nil, err
		}
		closers = append(closers, f)
		return f, nil
	}
	defer func() {
		for _, f := range closers {
			if cerr := f.Close(); err == nil {
				err = cerr
			}
		}
	}()
	if cpuprofile != "" {
		if cfg.CPUProfile, err = create(cpuprofile); err != nil {
			return err
		}
	}
	if memprofile != "" {
		// No allocation before the measured ticks is recorded either: the
		// profile holds theirs alone.
		defer func(rate int) { runtime.MemProfileRate = rate }(runtime.MemProfileRate)
		runtime.MemProfileRate = 0
		if cfg.MemProfile, err = create(memprofile); err != nil {
			return err
		}
	}
	if series != "" {
		if cfg.Series, err = create(series); err != nil {
			return err
		}
	}
	run := bench.RunW1AOI
	if scenario == "w2" {
		run = bench.RunW2
	}
	res, err := run(cfg)
	if err != nil {
		return err
	}
	if asJSON {
		if err := json.NewEncoder(os.Stdout).Encode(res); err != nil {
			return err
		}
	} else {
		fmt.Printf("%s %s clients=%d entities=%d ticks=%d gomaxprocs=%d verified=%v reference=%v\n",
			res.Scenario, res.Mode, res.Clients, res.Entities, res.Ticks, res.GOMAXPROCS, res.Verified, res.ReferenceOK)
		if res.LOD != nil && !*res.LOD {
			fmt.Printf("  no distance level of detail: gear and emote go to every client that sees the player\n")
		}
		fmt.Printf("  %.1f B/client/tick (p99 %.0f), join %.0f B, server %.0f/%.0f µs (p50/p99; Server.Tick %.0f/%.0f), %.1f allocs/tick, "+
			"%.1f visible/client, %.0f B interest state/client\n",
			res.BytesPerClientTick, res.BytesPerClientTickP99, res.JoinBytes, res.ServerUSPerTick.P50, res.ServerUSPerTick.P99,
			res.TickUSPerTick.P50, res.TickUSPerTick.P99, res.AllocsPerTick, res.VisiblePerClient, res.InterestBytesPerClient)
		fmt.Printf("  %v\n", res.Machine)
	}
	if !res.Verified {
		return fmt.Errorf("bench: %s run did not verify: %s", scenario, res.VerifyError)
	}
	if !res.ReferenceOK {
		return fmt.Errorf("bench: %s run: the reference values differ: %v", scenario, res.Reference)
	}
	return nil
}

// errPersistMoved answers the persist scenario, which the replica-store
// command runs: it links the SQLite, PostgreSQL and Redis clients, which
// the demo does not need compiled.
var errPersistMoved = errors.New("bench: the persist scenario is in the replica-store command: go run ./cmd/replica-store bench -store sqlite|postgres|redis [-json]")

// persistScenario reports whether bench's arguments select the persist
// scenario.
func persistScenario(args []string) bool {
	for i, a := range args {
		if a == "-scenario=persist" || a == "--scenario=persist" ||
			(a == "-scenario" || a == "--scenario") && i+1 < len(args) && args[i+1] == "persist" {
			return true
		}
	}
	return false
}
