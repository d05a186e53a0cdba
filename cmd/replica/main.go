// Command replica runs replica's demo and benchmarks, and plays recordings.
//
// Usage:
//
//	replica demo  [-entities N] [-clients N] [-hz N] [-duration D] [-seed N] [-ws-addr A] [-quic-addr A]
//	replica replay [-addr A] [-http A] [-speed X] [-loop] FILE
//	replica bench -scenario w1|clients|joinstorm [-clients N] [-rate N] [-process] [-quantized] [-transport ws|quic] [-ticks N] [-json]
//	replica store dump -store sqlite|postgres|redis -dsn DSN [-table PREFIX] [-key K] [-pretty]
package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
)

const usage = `usage:
  replica demo  [-entities N] [-clients N] [-hz N] [-duration D] [-seed N] [-ws-addr A] [-quic-addr A]
  replica replay [-addr A] [-http A] [-speed X] [-loop] FILE
  replica bench -scenario w1|clients|joinstorm [-clients N] [-rate N] [-process] [-quantized] [-transport ws|quic] [-ticks N] [-json]
  replica bench -scenario persist -store sqlite|postgres|redis [-dsn DSN] [-duration D] [-json]
  replica store dump -store sqlite|postgres|redis -dsn DSN [-table PREFIX] [-key K] [-pretty]

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
		err = runStore(args)
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
