// Command replicagen generates typed, change-tracking entity types from the
// spec structs of a Go package.
//
// Put this line in a file of the package that declares the specs:
//
//	//go:generate go run github.com/replicago/replica/cmd/replicagen
//
// replicagen writes <package>_replica.go beside the specs and keeps the
// stable class and field IDs in replica.lock.json, which belongs in version
// control. With -ts it also writes <package>_replica.ts, typed classes for
// the TypeScript client runtime (ts/, package @replicago/replica) with the
// schema's descriptor embedded:
//
//	//go:generate go run github.com/replicago/replica/cmd/replicagen -ts
//
// A game's client is usually its own npm project, apart from the Go
// package: -tsout writes the file there instead, where the project's
// TypeScript compiler resolves the runtime's package and compiles the file
// as the project's own modules (outside the project, tsc with "module":
// "nodenext" finds no @replicago/replica and takes the file for CommonJS):
//
//	//go:generate go run github.com/replicago/replica/cmd/replicagen -tsout ../../web/src
//
// See package github.com/replicago/replica/gen for the spec conventions
// and the tag grammar.
//
// Usage:
//
//	replicagen [-check] [-force] [-ts] [-tsout dir] [-tsimport module] [dir]
//
// The flags are:
//
//	-ts
//		Also write <package>_replica.ts for TypeScript clients (see
//		gen.Package.GenerateTS).
//	-tsout dir
//		Write <package>_replica.ts into dir, relative to the package
//		directory, instead of the package directory; implies -ts. The
//		directory must exist: replicagen creates nothing else.
//	-tsimport module
//		The module the TypeScript file imports the runtime from
//		(default @replicago/replica).
//	-check
//		Write nothing; fail if a generated file (the TypeScript one
//		included, in its -tsout directory) or the lock file is out of
//		date. For CI.
//	-force
//		Accept schema changes that break clients built against the locked
//		schema (a field whose type or quantization changed, an ID that
//		belonged to another field, an RPC whose direction or arguments
//		changed) and rewrite the lock file.
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/replicago/replica/gen"
)

func main() {
	check := flag.Bool("check", false, "write nothing; fail if generated files are out of date")
	force := flag.Bool("force", false, "accept incompatible schema changes and rewrite the lock file")
	ts := flag.Bool("ts", false, "also write <package>_replica.ts, typed classes for the TypeScript client runtime")
	tsOut := flag.String("tsout", "", "write <package>_replica.ts into this directory, relative to the package directory (implies -ts; it must exist)")
	tsImport := flag.String("tsimport", "", "with -ts: the module to import the runtime from (default @replicago/replica)")
	flag.Usage = func() {
		fmt.Fprintf(os.Stderr, "usage: replicagen [-check] [-force] [-ts] [-tsout dir] [-tsimport module] [dir]\n")
		flag.PrintDefaults()
	}
	flag.Parse()
	if flag.NArg() > 1 {
		flag.Usage()
		os.Exit(2)
	}
	dir := "."
	if flag.NArg() == 1 {
		dir = flag.Arg(0)
	}
	p, err := gen.Load(gen.Config{Dir: dir, Force: *force, Check: *check})
	if err == nil {
		for _, n := range p.Notes {
			fmt.Fprintln(os.Stderr, &gen.Error{Pos: n.Pos, Msg: "note: " + n.Msg})
		}
		err = p.Write(*check)
		if err == nil && (*ts || *tsOut != "") {
			err = p.WriteTS(*check, gen.TSOptions{Import: *tsImport, Dir: *tsOut})
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
