package bench

import "testing"

// TestJoinStormVerifies runs a small join storm: every client must join
// and end with the server's entities.
func TestJoinStormVerifies(t *testing.T) {
	res, err := RunJoinStorm(JoinStormConfig{Transport: "ws", Clients: 20, Rate: 200, After: 5})
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
