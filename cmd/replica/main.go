// Command replica runs replica's demo and benchmarks, and plays recordings.
//
// Usage:
//
//	replica demo  [-entities N] [-clients N] [-hz N] [-duration D] [-seed N] [-ws-addr A] [-quic-addr A]
//	replica replay [-addr A] [-http A] [-speed X] [-loop] FILE
//	replica bench -scenario w1|w2|clients|joinstorm|reconnect [-aoi] [-gomaxprocs N] [-clients N] [-rate N] [-process] [-quantized] [-transport ws|quic] [-ticks N] [-json]
//
// The stores' commands (dump, the persist benchmark) are replica-store's.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
)

const usage = `usage:
  replica demo  [-entities N] [-clients N] [-hz N] [-duration D] [-seed N] [-radius R | -room] [-explain N]
                [-ws-addr A] [-quic-addr A] [-http A] [-wt-addr A] [-record FILE]
  replica replay [-addr A] [-http A] [-speed X] [-loop] FILE
  replica bench -scenario w1|w2|clients|joinstorm|reconnect [-aoi] [-client go|ts] [-gomaxprocs N] [-clients N]
                [-rate N] [-process] [-quantized] [-transport ws|quic] [-ticks N] [-json]

The stores' commands (dump, the persist benchmark) are replica-store's:
go run ./cmd/replica-store -h

Run "replica <command> -h" for the flags of a command.
`

func main() {
	if len(os.Args) < 2 {
		fmt.Fprint(os.Stderr, usage)
		os.Exit(2)
	}
	var err error
	switch cmd, args := os.Args[1], os.Args[2:]; cmd {
	case "demo":
		err = runDemo(args)
	case "bench":
		err = runBench(args)
	case "replay":
		err = runReplay(args)
	case "store":
		err = errors.New("store: the store commands are in replica-store: go run ./cmd/replica-store dump -store sqlite|postgres|redis -dsn DSN")
	case "help", "-h", "-help", "--help":
		fmt.Print(usage)
		return
	default:
		fmt.Fprintf(os.Stderr, "replica: unknown command %q\n\n%s", cmd, usage)
		os.Exit(2)
	}
	if errors.Is(err, flag.ErrHelp) {
		return // the flag package printed the usage
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "replica:", err)
		os.Exit(1)
	}
}

// parseFlags parses a command's flags. A mistake is one line of error,
// naming the command's -h, rather than the flag package's error followed
// by the whole usage; -h prints the usage and returns flag.ErrHelp.
func parseFlags(fs *flag.FlagSet, args []string) error {
	out := fs.Output()
	fs.SetOutput(io.Discard)
	err := fs.Parse(args)
	fs.SetOutput(out)
	switch {
	case errors.Is(err, flag.ErrHelp):
		fs.Usage()
		return err
	case err != nil:
		return fmt.Errorf("%s: %v (see replica %s -h)", fs.Name(), err, fs.Name())
	}
	return nil
}
