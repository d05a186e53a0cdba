package zone_test

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/replicago/replica/internal/exampletest"
)

// TestZone builds the zone example's server and client as a user would,
// runs the server and two players, alice and bob, who walk to opposite
// corners: each sees some of the field's 400 monsters but not all of
// them, before and after walking, and sees the other's hero across the
// field (they are in one party), but not its emote, a field of level of
// detail sent within 40 units. Each stays 5 s after its last report,
// so that the other, started at about the same time, still sees it.
func TestZone(t *testing.T) {
	bin := exampletest.Build(t, "server", "client")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	addr := exampletest.Serve(t, ctx, regexp.MustCompile(`serving on ws://([^/]+)/: 400 monsters`), filepath.Join(bin, "server"), "-addr", "127.0.0.1:0")

	players := []struct{ name, x, y string }{{"alice", "200", "200"}, {"bob", "1800", "1800"}}
	outs := make([]string, len(players))
	var wg sync.WaitGroup
	for i, p := range players {
		token, err := exec.CommandContext(ctx, filepath.Join(bin, "server"), "-issue", p.name).Output()
		if err != nil {
			t.Fatalf("server -issue: %v", err)
		}
		wg.Go(func() {
			out, err := exec.CommandContext(ctx, filepath.Join(bin, "client"), "-addr", addr,
				"-token", strings.TrimSpace(string(token)), "-x", p.x, "-y", p.y,
				"-linger", "100").CombinedOutput() // in the world while the other reports
			if err != nil {
				t.Errorf("client %s: %v\n%s", p.name, err, out)
			}
			outs[i] = string(out)
		})
	}
	wg.Wait()
	report := regexp.MustCompile(`(at start|after walking to \(\d+, \d+\)): I am (\w+) at \((\d+), (\d+)\), gold 50; I see (\d+) monsters \((\d+) bosses\) and 1 heroes: (\w+) at`)
	for i, p := range players {
		other := players[1-i].name
		reports := report.FindAllStringSubmatch(outs[i], -1)
		if len(reports) != 2 {
			t.Fatalf("%s's output lacks its two reports:\n%s", p.name, outs[i])
		}
		seen := 0
		for _, r := range reports {
			n, _ := strconv.Atoi(r[5])
			seen += n
			if r[2] != p.name || r[7] != other {
				t.Errorf("%s reports %s seeing %s, want %s seeing %s", p.name, r[2], r[7], p.name, other)
			}
			if n >= 400 {
				t.Errorf("%s %s sees %d monsters: all of the field's, not those around it", p.name, r[1], n)
			}
		}
		if seen == 0 {
			t.Errorf("%s saw no monster:\n%s", p.name, outs[i])
		}
		if after := reports[1]; after[3] != p.x || after[4] != p.y {
			t.Errorf("%s ended at (%s, %s), want (%s, %s)", p.name, after[3], after[4], p.x, p.y)
		}
		// Across the field, the other's emote (lod=40) is not sent.
		if !strings.Contains(outs[i], fmt.Sprintf("(%s, %s), emote unknown (beyond 40)", players[1-i].x, players[1-i].y)) {
			t.Errorf("%s knows the emote of %s across the field:\n%s", p.name, other, outs[i])
		}
	}
}
