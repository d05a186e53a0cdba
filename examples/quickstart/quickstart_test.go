package quickstart_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/replicago/replica/internal/exampletest"
)

// TestQuickstart builds the quickstart's server and client as a user
// would, runs the server, issues a token with it, and plays a client
// session: the client finds the avatar it owns, fires three shots, sees
// its gold fall by three and leaves. A client with a bad token, or none, is refused
// and says why.
func TestQuickstart(t *testing.T) {
	bin := exampletest.Build(t, "server", "client")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	addr := exampletest.Serve(t, ctx, regexp.MustCompile(`serving on ws://([^/]+)/`), filepath.Join(bin, "server"), "-addr", "127.0.0.1:0")

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
