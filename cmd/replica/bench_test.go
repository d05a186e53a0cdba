package main

import (
	"runtime"
	"strings"
	"testing"
)

// TestBenchFlagErrors checks the flag combinations the interest scenarios
// refuse, before anything runs, and that a refused run leaves GOMAXPROCS
// as it was.
func TestBenchFlagErrors(t *testing.T) {
	procs := runtime.GOMAXPROCS(0)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-scenario", "w2", "-aoi"}, "-aoi is a mode of -scenario w1"},
		{[]string{"-scenario", "w1", "-aoi", "-quantized"}, "-quantized applies to -scenario w1 without -aoi"},
		{[]string{"-scenario", "clients", "-cpuprofile", "x"}, "-cpuprofile, -memprofile and -series apply to"},
		{[]string{"-scenario", "w1", "-memprofile", "x"}, "-cpuprofile, -memprofile and -series apply to"},
		{[]string{"-scenario", "joinstorm", "-series", "x"}, "-cpuprofile, -memprofile and -series apply to"},
		{[]string{"-scenario", "w2", "-gomaxprocs", "-1"}, "-gomaxprocs must not be negative"},
		{[]string{"-scenario", "w2", "-gomaxprocs", "1", "-aoi"}, "-aoi is a mode of -scenario w1"},
		{[]string{"-scenario", "w3"}, "unknown scenario"},
		{[]string{"-scenario", "w1", "-client", "ts", "-aoi"}, "-client ts: want go, or ts with -scenario w1 in broadcast mode"},
		{[]string{"-scenario", "w2", "-client", "ts"}, "-client ts: want go, or ts with -scenario w1"},
		{[]string{"-scenario", "w1", "-client", "ts", "-clients", "2"}, "(one client)"},
		{[]string{"-scenario", "w1", "-client", "rust"}, "-client rust: want go"},
		{[]string{"-json", "-scenario", "persist"}, "go run ./cmd/replica-store bench"},
		{[]string{"-scenario=persist"}, "go run ./cmd/replica-store bench"},
	} {
		err := runBench(tc.args)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: error %v, want %q", tc.args, err, tc.want)
		}
		if n := runtime.GOMAXPROCS(0); n != procs {
			t.Errorf("%v: GOMAXPROCS %d after the run, want %d", tc.args, n, procs)
		}
	}
}
