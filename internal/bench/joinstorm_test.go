package bench

import (
	"flag"
	"fmt"
	"os"
	"testing"
)

// TestMain runs the clients of TestJoinStormProcess when the test binary
// is started as its child.
func TestMain(m *testing.M) {
	if os.Getenv("REPLICA_BENCH_STORM_CLIENTS") == "1" {
		fs := flag.NewFlagSet("joinstorm-clients", flag.ExitOnError)
		addr := fs.String("addr", "", "")
		clients := fs.Int("clients", 0, "")
		rate := fs.Float64("rate", 0, "")
		fs.Parse(os.Args[1:])
		if err := RunStormClients(*addr, *clients, *rate, os.Stdin, os.Stdout); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// TestJoinStormVerifies runs a small join storm: every client must join
// and end with the server's entities.
func TestJoinStormVerifies(t *testing.T) {
	res, err := RunJoinStorm(JoinStormConfig{Transport: "ws", Clients: 20, Rate: 200, After: 5})
	checkStorm(t, res, err)
}

// TestJoinStormProcess runs the clients of a small storm in a child
// process, which verifies their replicas by digest.
func TestJoinStormProcess(t *testing.T) {
	t.Setenv("REPLICA_BENCH_STORM_CLIENTS", "1")
	res, err := RunJoinStorm(JoinStormConfig{Transport: "ws", Clients: 20, Rate: 200, After: 5, ClientsCommand: []string{os.Args[0]}})
	checkStorm(t, res, err)
	if !res.ClientsProcess {
		t.Error("the clients did not run in a child process")
	}
}

func checkStorm(t *testing.T, res *JoinStormResult, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%+v", *res)
	if !res.Verified || res.Failed != 0 || res.Dropped != 0 {
		t.Fatalf("verified=%v, %d clients failed, %d dropped", res.Verified, res.Failed, res.Dropped)
	}
	if res.Entities != 1000 || res.StormTicks < 1 || res.ServerUSPerTick.P50 <= 0 || res.JoinLatencyUS.P50 <= 0 {
		t.Errorf("entities %d, %d storm ticks, tick %+v, join latency %+v", res.Entities, res.StormTicks, res.ServerUSPerTick, res.JoinLatencyUS)
	}
}
