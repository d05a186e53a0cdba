package demo

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/replicago/replica/replay"
)

// TestRunRecord records demo runs, in a room and in the AOI space, and
// plays the recordings through: every tick from the recorder's join to
// the last, and in a room every bot and a keyframe 5 seconds of ticks
// after the first.
func TestRunRecord(t *testing.T) {
	for _, room := range []bool{true, false} {
		file := filepath.Join(t.TempDir(), "run.rpl")
		var out strings.Builder
		cfg := DefaultConfig()
		cfg.Entities, cfg.Clients, cfg.Duration, cfg.Room = 40, 4, 2*time.Second, room
		if room {
			cfg.Duration = 6 * time.Second
		}
		cfg.HTTPAddr, cfg.WTAddr, cfg.Record = "", "", file
		rep, err := Run(context.Background(), cfg, &out)
		if err != nil {
			t.Fatalf("room %v: %v\n%s", room, err, out.String())
		}
		if !strings.Contains(out.String(), "record:  to tick ") {
			t.Errorf("room %v: the summary says nothing of the recording:\n%s", room, out.String())
		}
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		rd, err := replay.Open(strings.NewReader(string(b)), int64(len(b)))
		if err != nil {
			t.Fatal(err)
		}
		if rd.LastTick() != rep.Ticks || rd.FirstTick() > 5 {
			t.Errorf("room %v: recorded ticks %d..%d of %d", room, rd.FirstTick(), rd.LastTick(), rep.Ticks)
		}
		if k := rd.Keyframes(); room && (len(k) != 2 || k[1]-k[0] != 100) {
			t.Errorf("room %v: keyframes at %v, want the first tick and 100 ticks later", room, k)
		}
		p, err := replay.NewPlayer(rd, replay.PlayerConfig{})
		if err != nil {
			t.Fatal(err)
		}
		steps := 0
		for err = p.Step(); err == nil; err = p.Step() {
			steps++
		}
		if !errors.Is(err, io.EOF) || p.Tick() != rep.Ticks || steps != int(rd.LastTick()-rd.FirstTick()) {
			t.Errorf("room %v: played %d ticks to tick %d: %v", room, steps, p.Tick(), err)
		}
		if n := p.Replica().Len(); room && n != 40 || !room && n == 0 {
			t.Errorf("room %v: %d bots at the end", room, n)
		}
	}
}
