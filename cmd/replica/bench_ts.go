package main

import (
	"encoding/json"
	"fmt"
	"os"

	"github.com/replicago/replica/internal/bench"
)

// runBenchTS runs `replica bench -scenario w1 -client ts`: W1 broadcast to
// one TypeScript client runtime in Node (see bench.RunW1TS).
func runBenchTS(quantized, asJSON bool) error {
	res, err := bench.RunW1TS(bench.W1Config{Quantized: quantized})
	if err != nil {
		return err
	}
	if asJSON {
		if err := json.NewEncoder(os.Stdout).Encode(res); err != nil {
			return err
		}
	} else {
		fmt.Printf("w1 broadcast client=ts (Node) quantized=%v ticks=%d verified=%v\n", res.Quantized, res.Ticks, res.Verified)
		fmt.Printf("  %.1f B/client/tick, TS client decode+apply %.1f/%.1f µs (p50/p99; %.1f/%.1f in the %d ticks after), full state %d B in %.0f µs\n",
			res.BytesPerClientTick, res.ClientUSPerTick.P50, res.ClientUSPerTick.P99, res.ClientUSPerTickSteady.P50, res.ClientUSPerTickSteady.P99,
			res.SteadyTicks, res.FullStateBytes, res.FullStateUS)
		fmt.Printf("  runtime bundle (esbuild, browser, minified) %d B, %d B gzipped\n", res.BundleBytes, res.BundleGzipBytes)
		fmt.Printf("  %v\n", res.Machine)
	}
	if !res.Verified {
		return fmt.Errorf("bench: w1 -client ts did not verify: %s", res.VerifyError)
	}
	return nil
}
