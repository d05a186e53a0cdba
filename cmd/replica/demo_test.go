package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/replicago/replica/internal/demo"
)

func TestParseDemoFlags(t *testing.T) {
	var stderr strings.Builder
	cfg, err := parseDemoFlags(nil, &stderr)
	if err != nil || cfg != demo.DefaultConfig() {
		t.Fatalf("no flags: %+v, %v; want the defaults %+v", cfg, err, demo.DefaultConfig())
	}
	cfg, err = parseDemoFlags([]string{"-entities", "40", "-clients", "4", "-hz", "30", "-duration", "3s", "-seed", "9",
		"-ws-addr", "0.0.0.0:8080", "-quic-addr", "[::1]:4433", "-radius", "120.5", "-explain", "5", "-http", "127.0.0.1:8000", "-wt-addr", ""}, &stderr)
	want := demo.Config{Entities: 40, Clients: 4, Hz: 30, Duration: 3 * time.Second, Seed: 9, WSAddr: "0.0.0.0:8080", QUICAddr: "[::1]:4433",
		HTTPAddr: "127.0.0.1:8000", Radius: 120.5, Explain: 5}
	if err != nil || cfg != want {
		t.Fatalf("got %+v, %v; want %+v", cfg, err, want)
	}
	// AOI is the default; -room is the old behaviour.
	if def := demo.DefaultConfig(); def.Entities != 500 || def.Clients != 50 || def.Hz != 20 || def.Duration != 0 ||
		def.Room || def.Radius != 250 || def.Explain != 0 {
		t.Errorf("defaults %+v, want 500 entities, 50 clients, 20 Hz, no duration, AOI radius 250, no explanations", def)
	}
	cfg, err = parseDemoFlags([]string{"-room", "-explain", "2"}, &stderr)
	want = demo.DefaultConfig()
	want.Room, want.Explain = true, 2
	if err != nil || cfg != want {
		t.Fatalf("-room: got %+v, %v; want %+v", cfg, err, want)
	}
	if cfg, err = parseDemoFlags([]string{"-room=false", "-radius", "2000"}, &stderr); err != nil || cfg.Room || cfg.Radius != 2000 {
		t.Fatalf("-room=false -radius 2000: got %+v, %v", cfg, err)
	}
}

func TestParseDemoFlagsErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-clients", "60", "-entities", "50"}, "need at least as many entities as clients"},
		{[]string{"-clients", "501"}, "need at least as many entities as clients"}, // 500 entities by default
		{[]string{"-clients", "1001", "-entities", "2000"}, "-clients must be at most 1000, got 1001"},
		{[]string{"-entities", "0"}, "-entities must be at least 1"},
		{[]string{"-clients", "0"}, "-clients must be at least 1"},
		{[]string{"-clients", "-3"}, "-clients must be at least 1"},
		{[]string{"-hz", "0"}, "-hz must be between 1 and 1000, got 0"},
		{[]string{"-duration", "-1s"}, "-duration must not be negative"},
		{[]string{"-duration", "soon"}, `invalid value "soon" for flag -duration`},
		{[]string{"-ws-addr", "8080"}, `-ws-addr must be host:port, got "8080"`},
		{[]string{"-quic-addr", "localhost"}, `-quic-addr must be host:port, got "localhost"`},
		{[]string{"-http", "8000"}, `-http must be host:port or empty, got "8000"`},
		{[]string{"-wt-addr", "x"}, `-wt-addr must be host:port or empty, got "x"`},
		{[]string{"-radius", "0"}, "-radius must be more than 0 and at most 2000 (the arena's side), got 0"},
		{[]string{"-radius", "-10"}, "-radius must be more than 0"},
		{[]string{"-radius", "2500"}, "-radius must be more than 0 and at most 2000 (the arena's side), got 2500"},
		{[]string{"-radius", "NaN"}, "-radius must be more than 0 and at most 2000 (the arena's side), got NaN"},
		{[]string{"-radius", "far"}, `invalid value "far" for flag -radius`},
		{[]string{"-room", "-radius", "100"}, "-radius is the AOI radius, and -room turns AOI off: give one or the other"},
		{[]string{"-radius", "250", "-room"}, "give one or the other"},
		{[]string{"-explain", "-1"}, "-explain must be between 0 and 20, got -1"},
		{[]string{"-explain", "21"}, "-explain must be between 0 and 20, got 21"},
		{[]string{"-explain", "some"}, `invalid value "some" for flag -explain`},
		{[]string{"-bogus"}, "flag provided but not defined: -bogus"},
		{[]string{"5s"}, `unexpected argument "5s"`},
	} {
		var stderr strings.Builder
		_, err := parseDemoFlags(tc.args, &stderr)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: error %v, want %q", tc.args, err, tc.want)
		}
	}
}

// TestDemoHelp checks that -h prints the usage and is not an error.
func TestDemoHelp(t *testing.T) {
	var stdout, stderr strings.Builder
	if err := demoMain(context.Background(), []string{"-h"}, &stdout, &stderr); err != nil {
		t.Fatalf("-h: %v", err)
	}
	for _, want := range []string{"usage: replica demo", "-entities", "-clients", "-hz", "-duration", "-seed",
		"-ws-addr", "-quic-addr", "-radius", "-room", "-explain", "WebSocket and QUIC", "emote RPC once a second",
		"Interest management (AOI) is on", "bots\nvisible per client", "Server.Explain", "Ctrl-C", "-http", "-wt-addr", "steer a bot"} {
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("usage lacks %q:\n%s", want, stderr.String())
		}
	}
	if stdout.Len() != 0 {
		t.Errorf("-h wrote to stdout: %q", stdout.String())
	}
}

// TestDemoInterrupted runs the command with an interrupted context: it
// prints the header and a verified summary and succeeds.
func TestDemoInterrupted(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	var stdout, stderr strings.Builder
	if err := demoMain(ctx, []string{"-entities", "30", "-clients", "3"}, &stdout, &stderr); err != nil {
		t.Fatal(err)
	}
	out := stdout.String()
	for _, want := range []string{"30 bots", "Interest: AOI, each client sees the bots within 250 units", "listening on ws://127.0.0.1:", "stopped (interrupted)", "verified ok"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

// TestDemoRoomInterrupted runs the command with -room: one room, where
// every client sees every bot.
func TestDemoRoomInterrupted(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	var stdout, stderr strings.Builder
	if err := demoMain(ctx, []string{"-entities", "30", "-clients", "3", "-room"}, &stdout, &stderr); err != nil {
		t.Fatal(err)
	}
	out := stdout.String()
	for _, want := range []string{"30 bots", "Interest: one room (-room), every client sees every bot.", "stopped (interrupted)", "verified ok", "views:   one room"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}
