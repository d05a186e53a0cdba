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

Runs an arena of wandering, fighting bots on an authoritative server and
replicates it every tick to clients that each own one bot. Server and
clients run in this process; network transports arrive with the runtime
milestone. Prints one status line per second and a summary at the end;
Ctrl-C stops it cleanly.

Flags:
`

func runDemo(args []string) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
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
	return demo.Run(ctx, cfg, stdout)
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
	fs.IntVar(&cfg.Entities, "entities", def.Entities, fmt.Sprintf("bots in the arena, 1 to %d", demo.MaxEntities))
	fs.IntVar(&cfg.Clients, "clients", def.Clients, "in-process clients, each owning one bot; at most -entities")
	fs.IntVar(&cfg.Hz, "hz", def.Hz, fmt.Sprintf("ticks per second, 1 to %d", demo.MaxHz))
	fs.DurationVar(&cfg.Duration, "duration", def.Duration, "how long to run, e.g. 30s; 0 runs until interrupted")
	fs.Uint64Var(&cfg.Seed, "seed", def.Seed, "seed of the deterministic simulation")
	if err := fs.Parse(args); err != nil {
		return cfg, err
	}
	if fs.NArg() > 0 {
		return cfg, fmt.Errorf("demo: unexpected argument %q (flags go before arguments; see replica demo -h)", fs.Arg(0))
	}
	if err := cfg.Validate(); err != nil {
		return cfg, fmt.Errorf("demo: %w", err)
	}
	return cfg, nil
}
