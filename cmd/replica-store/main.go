// Command replica-store reads and measures replica's persistence stores
// (SQLite, PostgreSQL, Redis). It is apart from the replica command so
// that `go run ./cmd/replica demo` does not compile the three database
// clients.
//
// Usage:
//
//	replica-store dump -store sqlite|postgres|redis -dsn DSN [-table PREFIX] [-key K] [-pretty]
//	replica-store bench -store sqlite|postgres|redis [-dsn DSN] [-duration D] [-flush D] [-json]
package main

import (
	"errors"
	"flag"
	"fmt"
	"os"

	"github.com/redis/go-redis/v9/logging"
)

const usage = `usage:
  replica-store dump -store sqlite|postgres|redis -dsn DSN [-table PREFIX] [-key K] [-pretty]
  replica-store bench -store sqlite|postgres|redis [-dsn DSN] [-duration D] [-flush D] [-json]

dump prints the stored documents as JSON; bench saves W2's 500 players
behind a 20 Hz tick and checks the store against the world.
Run "replica-store <command> -h" for the flags of a command.
`

func main() {
	// go-redis logs each failed dial to stderr on its own; the command
	// reports the error it ends with, once.
	logging.Disable()
	if len(os.Args) < 2 {
		fmt.Fprint(os.Stderr, usage)
		os.Exit(2)
	}
	var err error
	switch cmd, args := os.Args[1], os.Args[2:]; cmd {
	case "dump":
		err = runDump(args)
	case "bench":
		err = runBench(args)
	case "help", "-h", "-help", "--help":
		fmt.Print(usage)
		return
	default:
		fmt.Fprintf(os.Stderr, "replica-store: unknown command %q\n\n%s", cmd, usage)
		os.Exit(2)
	}
	if errors.Is(err, flag.ErrHelp) {
		return // the flag package printed the usage
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "replica-store:", err)
		os.Exit(1)
	}
}
