package bench

import (
	"errors"
	"os"
	"testing"

	"github.com/replicago/replica/internal/tsnode"
)

// TestW1TSVerifies runs a short W1 against the TypeScript runtime in Node,
// and a few steady ticks after it: the replica verifies against the server
// (after the warm-up, the run and the steady ticks) and the result is
// filled in.
func TestW1TSVerifies(t *testing.T) {
	res, err := RunW1TS(W1Config{Warmup: 5, Measured: 20, Steady: 10})
	if errors.Is(err, tsnode.ErrNoNode) && os.Getenv("REPLICA_REQUIRE_NODE") != "1" {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	if !res.Verified || res.Ticks != 25 || res.SteadyTicks != 10 || res.BytesPerClientTick <= 0 || res.ClientUSPerTick.P50 <= 0 || res.ClientUSPerTickSteady.P50 <= 0 || res.BundleBytes <= 0 || res.FullStateBytes <= 0 {
		t.Fatalf("result %+v", res)
	}
	checkMachine(t, res.Machine)
}
