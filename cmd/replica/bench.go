package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"

	"github.com/replicago/replica/internal/bench"
)

func runBench(args []string) error {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	scenario := fs.String("scenario", "w1", "scenario to run: w1")
	clients := fs.Int("clients", 1, "number of clients")
	quantized := fs.Bool("quantized", false, "w1: positions at 1/64 unit, angle in 12 bits")
	asJSON := fs.Bool("json", false, "print one JSON object")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *clients < 1 {
		return fmt.Errorf("bench: -clients must be at least 1, got %d", *clients)
	}
	switch *scenario {
	case "w1":
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
		if !res.Verified {
			return fmt.Errorf("bench: w1 run did not verify")
		}
		return nil
	default:
		return fmt.Errorf("bench: unknown scenario %q (known: w1)", *scenario)
	}
}
