package crosslang_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/evanw/esbuild/pkg/api"

	"github.com/replicago/replica"
	"github.com/replicago/replica/auth"
	"github.com/replicago/replica/internal/demo"
	"github.com/replicago/replica/internal/esbuildgen"
	"github.com/replicago/replica/internal/tsnode"
	"github.com/replicago/replica/state"
	"github.com/replicago/replica/transport"
	"github.com/replicago/replica/wstransport"
)

// tsClient is the TypeScript client of resume_client.ts in a Node process.
type tsClient struct {
	t     *testing.T
	cmd   *exec.Cmd
	in    *os.File
	lines chan map[string]any
}

// startTSClient bundles resume_client.ts with the runtime (esbuild's Go
// API) and starts Node on it, connected to url. Without a Node that has
// WebSocket (Node 20 behind --experimental-websocket) the test skips, or
// fails when REPLICA_REQUIRE_NODE=1.
func startTSClient(t *testing.T, url string) *tsClient {
	t.Helper()
	node, err := exec.LookPath("node")
	if err == nil {
		err = exec.Command(node, "--experimental-websocket", "-e", "if (typeof WebSocket !== 'function') process.exit(1)").Run()
	}
	if err != nil {
		if os.Getenv("REPLICA_REQUIRE_NODE") == "1" {
			t.Fatalf("REPLICA_REQUIRE_NODE=1 but no Node with WebSocket: %v", err)
		}
		t.Skipf("no Node with WebSocket (%v); set REPLICA_REQUIRE_NODE=1 to make this a failure", err)
	}
	root, err := esbuildgen.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	js, err := esbuildgen.Build(api.BuildOptions{
		AbsWorkingDir: root,
		EntryPoints:   []string{"internal/crosslang/resume_client.ts"},
		Bundle:        true,
		Platform:      api.PlatformNode,
		Format:        api.FormatESModule,
		Target:        api.ES2022,
		Alias:         esbuildgen.RuntimeAlias,
		LogLevel:      api.LogLevelSilent,
		Outfile:       "resume_client.mjs",
	})
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "resume_client.mjs")
	if err := os.WriteFile(file, js, 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(node, "--experimental-websocket", "--no-warnings", file, url)
	cmd.Stderr = os.Stderr
	inR, inW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdin = inR
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	inR.Close()
	c := &tsClient{t: t, cmd: cmd, in: inW, lines: make(chan map[string]any, 1024)}
	go func() {
		defer close(c.lines)
		sc := bufio.NewScanner(out)
		sc.Buffer(nil, 1<<24)
		for sc.Scan() {
			var m map[string]any
			if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
				m = map[string]any{"error": fmt.Sprintf("not JSON: %q", sc.Text())}
			}
			c.lines <- m
		}
	}()
	t.Cleanup(func() {
		c.in.Close()
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			<-done
		}
	})
	return c
}

func (c *tsClient) send(cmd string) {
	c.t.Helper()
	if _, err := c.in.WriteString(cmd + "\n"); err != nil {
		c.t.Fatal(err)
	}
}

// next returns the next line that has key, failing on an error line; step
// runs while it waits (the server's tick).
func (c *tsClient) next(key string, step func()) map[string]any {
	c.t.Helper()
	deadline := time.After(30 * time.Second) // generous: the machine may be loaded
	for {
		select {
		case m, ok := <-c.lines:
			if !ok {
				c.t.Fatalf("node exited waiting for %q", key)
			}
			if e, ok := m["error"]; ok {
				c.t.Fatalf("node: %v", e)
			}
			if _, ok := m[key]; ok {
				return m
			}
		case <-deadline:
			c.t.Fatalf("no %q from node", key)
		case <-time.After(5 * time.Millisecond):
			if step != nil {
				step()
			}
		}
	}
}

// TestTSResume resumes a TypeScript client's session with the Go server
// over a real WebSocket (docs/protocol.md §10.5): the client joins and
// holds the world, its connection is dropped, the world changes (a bot
// hurt, one destroyed, one spawned), and Connection.reconnect resumes: the
// replica is kept, the catch-up tick brings it to the server's state, and
// its callbacks report only what changed meanwhile.
func TestTSResume(t *testing.T) {
	ln, err := wstransport.Listen("127.0.0.1:0", wstransport.Config{})
	if err != nil {
		t.Fatal(err)
	}
	var srv *replica.Server
	own := map[*replica.Conn]demo.Bot{}
	srv, err = replica.NewServer(replica.Config{
		Schema: demo.Schema(),
		Auth:   auth.Anonymous{},
		OnJoin: func(c *replica.Conn) {
			b, err := demo.SpawnBot(srv.Tracker())
			if err != nil {
				t.Error(err)
				return
			}
			b.SetName("own" + strconv.Itoa(len(own)))
			b.SetHp(100)
			srv.SetOwner(b.Entity(), c)
			own[c] = b
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go srv.Serve(ctx, ln)
	defer srv.Close()
	// Enough bots that the catch-up is smaller than the full state (else
	// the server sends the full state).
	var npcs []demo.Bot
	for i := range 20 {
		b, _ := demo.SpawnBot(srv.Tracker())
		b.SetHp(7)
		b.SetName("npc" + strconv.Itoa(i))
		npcs = append(npcs, b)
	}

	c := startTSClient(t, ln.Addr().String())
	// No tick until the client has registered its callbacks: the session
	// joins, and gets the full state, at the next tick.
	c.next("joined", nil)
	// sync ticks until the client has applied the server's last tick, and
	// checks that its replica is the server's.
	sync := func() []string {
		t.Helper()
		srv.Tick()
		want := strconv.FormatUint(srv.TickNumber(), 10)
		for c.next("tick", nil)["tick"] != want {
		}
		c.send("state")
		st := c.next("dump", nil)
		owned := func(e *state.Entity) bool { return srv.Owner(e) != nil && slices.Contains(srv.Conns(), srv.Owner(e)) }
		if got, want := st["dump"], tsnode.Canonical(srv.Tracker().AppendEntities(nil), owned); got != want {
			t.Fatalf("the TypeScript replica at tick %s:\n%s\nthe server's:\n%s", st["lastTick"], got, want)
		}
		var ev []string
		for _, e := range st["events"].([]any) {
			ev = append(ev, e.(string))
		}
		slices.Sort(ev)
		return ev
	}
	for len(srv.Conns()) < 1 {
		srv.Tick()
		time.Sleep(time.Millisecond)
	}
	// A new entity reports its create, then its non-zero fields as changes from zero.
	if ev := sync(); len(ev) != 42 || ev[0] != "create npc0" || ev[41] != "hp own0 0 100" {
		t.Fatalf("the first state: %d callbacks, want 21 creates and 21 hp changes: %q", len(ev), ev)
	}

	// The server drops the client, as a network failure would, and the
	// world changes while it is away.
	for _, sc := range srv.Conns() {
		sc.Close(transport.CloseNetworkError, "test drop")
	}
	srv.Tick()
	npcs[0].SetHp(3)
	srv.Tracker().Destroy(npcs[1].Entity())
	late, _ := demo.SpawnBot(srv.Tracker())
	late.SetName("late")
	srv.Tick()
	srv.Tick()

	c.send("reconnect")
	if m := c.next("reconnected", srv.Tick); m["resumed"] != true {
		t.Fatalf("reconnect: %v, want a resumed session", m)
	}
	for len(srv.Conns()) < 1 {
		srv.Tick()
		time.Sleep(time.Millisecond)
	}
	ev := sync()
	// Only what changed: npc0 hurt, npc1 gone, the late bot and the new
	// session's own bot created (a resumed session joins again).
	want := []string{"create late", "create own1", "destroy npc1", "hp npc0 7 3", "hp own1 0 100"}
	if !slices.Equal(ev, want) {
		t.Fatalf("callbacks of the catch-up: %q, want %q", ev, want)
	}
	// The resumed session goes on with updates.
	npcs[2].SetHp(1)
	if ev := sync(); !slices.Equal(ev, []string{"hp npc2 7 1"}) {
		t.Fatalf("callbacks after the catch-up: %q", ev)
	}
	c.send("quit")
}
