package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/replicago/replica/internal/demo"
)

const demoUsage = `usage: replica demo [-entities N] [-clients N] [-hz N] [-duration D] [-seed N]
                   [-radius R | -room] [-explain N] [-ws-addr A] [-quic-addr A]
                   [-http A] [-wt-addr A] [-record FILE]

Runs an arena of wandering, fighting bots on a replica.Server that listens
on WebSocket and QUIC, and connects -clients bot clients to it over
loopback sockets, half over each transport. The server moves every bot:
the NPCs and one bot per client, which that client owns. Each client
calls its own bot's emote RPC once a second.

Interest management (AOI) is on: the arena is 2000×2000 units and each
client sees only the bots within -radius of its own. -room puts every bot
in one room instead, where every client sees every bot.

Prints one status line per second: clients connected, entities, bots
visible per client (mean, min, max), the server's tick time, bytes each
client received, callbacks fired, RPCs handled and whether every client's
replica held exactly what the server says that client sees. -explain N
adds, under each status line, the server's explanation (Server.Explain)
of why the first client sees, or does not see, N bots. Ctrl-C stops it
cleanly (a second Ctrl-C kills it).

It also serves a page at the address it prints on a line of its own
(http://127.0.0.1:PORT/, -http): open it in a browser to watch the arena
live on a canvas, as the TypeScript client sees it over WebTransport (or
WebSocket, where WebTransport is missing), and to steer a bot of your own
with the arrow keys, WASD or the mouse. The page shows the bytes it
receives per second, the tick, the bots it sees and its decode time per
tick. -http "" serves no page; -wt-addr "" offers browsers WebSocket only.

-record FILE records the run as a spectator sees it (every bot with
-room; with AOI, the bots seen from the arena's centre), with a keyframe
every 5 seconds; "replica replay FILE" plays it back.

Flags:
`

func runDemo(args []string) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	// After the first signal, the default behaviour again: a second
	// Ctrl-C kills a shutdown that hangs.
	context.AfterFunc(ctx, stop)
	return demoMain(ctx, args, os.Stdout, os.Stderr)
}

// demoMain parses the demo's flags and runs it, writing its output to
// stdout and usage to stderr. Asking for help is not an error.
func demoMain(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	cfg, err := parseDemoFlags(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return nil
	}
	if err != nil {
		return err
	}
	_, err = demo.Run(ctx, cfg, stdout)
	return err
}

// parseDemoFlags turns the demo's arguments into a validated configuration.
func parseDemoFlags(args []string, stderr io.Writer) (demo.Config, error) {
	def := demo.DefaultConfig()
	fs := flag.NewFlagSet("demo", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), demoUsage)
		fs.PrintDefaults()
	}
	cfg := demo.Config{}
	fs.IntVar(&cfg.Entities, "entities", def.Entities, fmt.Sprintf("bots in the arena, NPCs plus one per client; 1 to %d", demo.MaxEntities))
	fs.IntVar(&cfg.Clients, "clients", def.Clients, fmt.Sprintf("bot clients, half over WebSocket and half over QUIC; 1 to %d and at most -entities", demo.MaxClients))
	fs.IntVar(&cfg.Hz, "hz", def.Hz, fmt.Sprintf("ticks per second, 1 to %d", demo.MaxHz))
	fs.DurationVar(&cfg.Duration, "duration", def.Duration, "how long to run, in simulated time, e.g. 30s; 0 runs until interrupted")
	fs.Uint64Var(&cfg.Seed, "seed", def.Seed, "seed of the simulation")
	fs.StringVar(&cfg.WSAddr, "ws-addr", def.WSAddr, "TCP address of the WebSocket listener")
	fs.StringVar(&cfg.QUICAddr, "quic-addr", def.QUICAddr, "UDP address of the QUIC listener")
	fs.StringVar(&cfg.HTTPAddr, "http", def.HTTPAddr, "TCP address of the browser page (and of WebSocket for it, at /replica); empty for no page")
	fs.StringVar(&cfg.WTAddr, "wt-addr", def.WTAddr, "UDP address of WebTransport for the browser page; empty for none")
	fs.Float64Var(&cfg.Radius, "radius", def.Radius, fmt.Sprintf("AOI radius: each client sees the bots this close to its own (hysteresis a tenth of it); more than 0, at most %d", demo.MaxRadius))
	fs.BoolVar(&cfg.Room, "room", def.Room, "no AOI: every bot in one room, every client sees every bot")
	fs.IntVar(&cfg.Explain, "explain", def.Explain, fmt.Sprintf("under each status line, explain why the first client sees or does not see this many bots; 0 to %d", demo.MaxExplain))
	fs.StringVar(&cfg.Record, "record", "", "record the run to this file, for replica replay")
	if err := parseFlags(fs, args); err != nil {
		return cfg, err
	}
	if fs.NArg() > 0 {
		return cfg, fmt.Errorf("demo: unexpected argument %q (flags go before arguments; see replica demo -h)", fs.Arg(0))
	}
	if cfg.Room {
		radius := false
		fs.Visit(func(f *flag.Flag) { radius = radius || f.Name == "radius" })
		if radius {
			return cfg, errors.New("demo: -radius is the AOI radius, and -room turns AOI off: give one or the other")
		}
	}
	if err := cfg.Validate(); err != nil {
		return cfg, fmt.Errorf("demo: %w", err)
	}
	return cfg, nil
}
