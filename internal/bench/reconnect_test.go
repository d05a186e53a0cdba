package bench

import "testing"

// TestReconnectVerifies runs a short reconnect scenario: every dropped
// client resumes, ends equal to the workload's view, and is sent less
// than the full state.
func TestReconnectVerifies(t *testing.T) {
	res, err := RunReconnect(ReconnectConfig{Gaps: []float64{0.5, 3}, Sample: 3, W1: 20, W2: 40, Warmup: 5})
	if err != nil {
		t.Fatal(err)
	}
	if !res.Verified {
		t.Fatal(res.VerifyError)
	}
	if len(res.Gaps) != 4 {
		t.Fatalf("%d gap results, want 2 workloads × 2 gaps", len(res.Gaps))
	}
	for _, g := range res.Gaps {
		if g.CatchUps+g.Fallbacks != g.Clients || g.FullBytes <= 0 || g.DeltaBytes <= 0 || g.DeltaBytes > g.FullBytes {
			t.Errorf("%+v", g)
		}
	}
}
