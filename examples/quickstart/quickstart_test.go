package quickstart_test

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// TestQuickstart builds the quickstart's server and client as a user
// would, runs the server, issues a token with it, and plays a client
// session: the client finds the avatar it owns, fires three shots, sees
// its gold fall by three and leaves. A client with a bad token, or none, is refused
// and says why.
func TestQuickstart(t *testing.T) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		goTool = filepath.Join(os.Getenv("GOROOT"), "bin", "go")
	}
	bin := t.TempDir()
	for _, cmd := range []string{"server", "client"} {
		out, err := exec.Command(goTool, "build", "-o", filepath.Join(bin, cmd), "./"+cmd).CombinedOutput()
		if err != nil {
			t.Fatalf("go build ./%s: %v\n%s", cmd, err, out)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	srv := exec.CommandContext(ctx, filepath.Join(bin, "server"), "-addr", "127.0.0.1:0")
	stderr, err := srv.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { srv.Process.Kill(); srv.Wait() }()
	lines := bufio.NewScanner(stderr)
	var addr string
	for addr == "" && lines.Scan() {
		if m := regexp.MustCompile(`serving on ws://([^/]+)/`).FindStringSubmatch(lines.Text()); m != nil {
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

	token, err := exec.CommandContext(ctx, filepath.Join(bin, "server"), "-issue", "alice").Output()
	if err != nil {
		t.Fatalf("server -issue: %v", err)
	}
	out, err := exec.CommandContext(ctx, filepath.Join(bin, "client"), "-addr", addr, "-token", strings.TrimSpace(string(token))).CombinedOutput()
	if err != nil {
		t.Fatalf("client: %v\n%s", err, out)
	}
	for _, want := range []string{"I am alice: hp 100, gold 500", "gold 500 -> 499", "gold 498 -> 497", "fired 3 shots, 497 gold left; leaving"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("the client's output lacks %q:\n%s", want, out)
		}
	}

	out, err = exec.CommandContext(ctx, filepath.Join(bin, "client"), "-addr", addr, "-token", "00").CombinedOutput()
	if err == nil || !strings.Contains(string(out), "server refused the session: authentication failed") {
		t.Errorf("a client with a bad token: %v\n%s", err, out)
	}
	out, err = exec.CommandContext(ctx, filepath.Join(bin, "client"), "-addr", addr).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "-token is required") {
		t.Errorf("a client without a token: %v\n%s", err, out)
	}
}

// TestReadmeShowsQuickstart checks that the README's Quickstart shows the
// example's files as they are.
func TestReadmeShowsQuickstart(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, file := range []string{"game/game.go", "server/main.go", "client/main.go"} {
		src, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(readme), "```go\n"+string(src)+"```\n") {
			t.Errorf("README.md does not show examples/quickstart/%s as it is", file)
		}
	}
}
