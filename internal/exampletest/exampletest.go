// Package exampletest builds and runs the examples' commands as a user
// would, for the examples' tests.
package exampletest

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"testing"
)

// Build builds the commands of the current directory's subdirectories
// cmds with the go tool, into a temporary directory it returns.
func Build(t *testing.T, cmds ...string) string {
	t.Helper()
	goTool, err := exec.LookPath("go")
	if err != nil {
		goTool = filepath.Join(os.Getenv("GOROOT"), "bin", "go")
	}
	bin := t.TempDir()
	for _, cmd := range cmds {
		out, err := exec.Command(goTool, "build", "-o", filepath.Join(bin, cmd), "./"+cmd).CombinedOutput()
		if err != nil {
			t.Fatalf("go build ./%s: %v\n%s", cmd, err, out)
		}
	}
	return bin
}

// Serve starts the server command at path with args, reads its standard
// error until a line matches served, whose first group it returns (the
// address it serves on), and keeps reading it. The server is killed when
// the test ends or ctx is done.
func Serve(t *testing.T, ctx context.Context, served *regexp.Regexp, path string, args ...string) string {
	t.Helper()
	srv := exec.CommandContext(ctx, path, args...)
	stderr, err := srv.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Process.Kill(); srv.Wait() })
	lines := bufio.NewScanner(stderr)
	var addr string
	for addr == "" && lines.Scan() {
		if m := served.FindStringSubmatch(lines.Text()); m != nil {
			addr = m[1]
		}
	}
	if addr == "" {
		t.Fatal("the server never said where it serves")
	}
	go func() {
		for lines.Scan() { // keep the pipe drained
		}
	}()
	return addr
}
