package main

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/replicago/replica/client"
	"github.com/replicago/replica/internal/demo"
	"github.com/replicago/replica/transport"
	"github.com/replicago/replica/wstransport"
)

// syncBuilder is a strings.Builder safe for the replay's goroutines.
type syncBuilder struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuilder) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuilder) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestReplay records a short demo run with demo -record, serves it with
// replay, plays it to a Go client over WebSocket to the end and seeks
// back through a command.
func TestReplay(t *testing.T) {
	file := filepath.Join(t.TempDir(), "run.rpl")
	var stderr strings.Builder
	dcfg, err := parseDemoFlags([]string{"-entities", "30", "-clients", "2", "-duration", "1s", "-room", "-http", "", "-wt-addr", "", "-record", file}, &stderr)
	if err != nil {
		t.Fatal(err)
	}
	rep, err := demo.Run(context.Background(), dcfg, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := parseReplayFlags([]string{"-speed", "20", "-http", "127.0.0.1:0", file}, &stderr)
	if err != nil {
		t.Fatal(err)
	}
	addr := make(chan string, 1)
	cfg.listen = addr
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	in, cmds := io.Pipe()
	defer cmds.Close()
	var out syncBuilder
	done := make(chan error, 1)
	go func() { done <- serveReplay(ctx, cfg, in, &out) }()
	var url string
	select {
	case url = <-addr:
	case err := <-done:
		t.Fatalf("replay: %v\n%s", err, out.String())
	}
	c, err := client.Dial(ctx, wstransport.NewDialer(transport.Config{}), url, demo.Schema(), client.DialConfig{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	wait := func(what string, ok func() bool) {
		t.Helper()
		wctx, wcancel := context.WithTimeout(ctx, 20*time.Second)
		defer wcancel()
		for !ok() {
			if _, err := c.Wait(wctx); err != nil {
				t.Fatalf("%s: at tick %d: %v\n%s", what, c.LastTick(), err, out.String())
			}
		}
	}
	wait("the end", func() bool { return c.LastTick() == rep.Ticks })
	if n := c.Replica().Len(); n != 30 {
		t.Errorf("%d bots at the end, want 30", n)
	}
	for deadline := time.Now().Add(20 * time.Second); !strings.Contains(out.String(), fmt.Sprint("end of the recording at tick ", rep.Ticks)); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no end of the recording:\n%s", out.String())
		}
	}
	fmt.Fprintln(cmds, "pause")
	fmt.Fprintln(cmds, "seek 5")
	wait("seek", func() bool { return c.LastTick() == 5 })
	if n := c.Replica().Len(); n != 30 {
		t.Errorf("%d bots at tick 5, want 30", n)
	}
	for _, want := range []string{"ticks ", "Go clients: ws://", "watch in a browser:\nhttp://127.0.0.1:", "at tick 5"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

func TestParseReplayFlags(t *testing.T) {
	var stderr strings.Builder
	cfg, err := parseReplayFlags([]string{"-addr", "127.0.0.1:9000", "-http", "", "-speed", "2.5", "-loop", "x.rpl"}, &stderr)
	if err != nil || cfg.addr != "127.0.0.1:9000" || cfg.http != "" || cfg.speed != 2.5 || !cfg.loop || cfg.file != "x.rpl" {
		t.Fatalf("got %+v, %v", cfg, err)
	}
	for _, args := range [][]string{nil, {"a", "b"}, {"-speed", "0", "x"}, {"-speed", "NaN", "x"}} {
		if _, err := parseReplayFlags(args, &stderr); err == nil {
			t.Errorf("%q: no error", args)
		}
	}
}
