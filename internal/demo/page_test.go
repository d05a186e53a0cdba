package demo

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"math"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/replicago/replica/client"
	"github.com/replicago/replica/transport"
	"github.com/replicago/replica/wstransport"
	"github.com/replicago/replica/wttransport"
)

// TestRunPage runs the demo with its browser page and joins it as a page
// does, from config.json: once over WebTransport with the published
// certificate hashes and once over the page's WebSocket. Each viewer gets
// a bot of its own and steers it, and the status lines count the viewers
// as guests.
func TestRunPage(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Entities, cfg.Clients, cfg.Duration, cfg.Room = 30, 2, 10*time.Second, true
	pr, pw := io.Pipe()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, err := Run(ctx, cfg, pw)
		pw.CloseWithError(err)
		done <- err
	}()
	lines := bufio.NewScanner(pr)
	var pageURL string
	for pageURL == "" && lines.Scan() {
		if regexp.MustCompile(`^http://127\.0\.0\.1:\d+/$`).MatchString(lines.Text()) {
			pageURL = lines.Text()
		}
	}
	if pageURL == "" {
		t.Fatalf("no page address on a line of its own: %v", lines.Err())
	}
	guests := make(chan string, 100)
	go func() {
		for lines.Scan() {
			if strings.Contains(lines.Text(), "guests)") {
				guests <- lines.Text()
			}
		}
	}()

	res, err := http.Get(pageURL + "config.json")
	if err != nil {
		t.Fatal(err)
	}
	var c struct {
		WS, WT, Token, Steer string
		Hashes               []string
	}
	if err := json.NewDecoder(res.Body).Decode(&c); err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if c.Steer != "steer" || len(c.Hashes) == 0 || !strings.HasPrefix(c.WT, "https://127.0.0.1:") || c.WS != "ws"+strings.TrimPrefix(pageURL, "http")+"replica" {
		t.Fatalf("config.json %+v", c)
	}
	var hashes [][32]byte
	for _, h := range c.Hashes {
		b, err := base64.StdEncoding.DecodeString(h)
		if err != nil || len(b) != 32 {
			t.Fatalf("hash %q", h)
		}
		hashes = append(hashes, [32]byte(b))
	}
	origin := http.Header{"Origin": {strings.TrimSuffix(pageURL, "/")}}
	dialers := map[string]struct {
		d    transport.Dialer
		addr string
	}{
		"WebTransport": {&wttransport.Dialer{CertHashes: hashes, Header: origin}, strings.TrimSuffix(strings.TrimPrefix(c.WT, "https://"), wttransport.DefaultPath)},
		"WebSocket":    {wstransport.NewDialer(transport.Config{}), c.WS},
	}
	for name, d := range dialers {
		dctx, dcancel := context.WithTimeout(ctx, 10*time.Second)
		conn, err := client.Dial(dctx, d.d, d.addr, Schema(), client.DialConfig{Token: []byte("viewer-" + name)})
		dcancel()
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		mine := BotView{}
		OnBotOwnership(conn.Replica(), func(b BotView, owned bool) {
			if owned {
				mine = b
			}
		})
		// Steer the bot 40 units along x, once it is known, and wait for
		// it to get there.
		var gx, gy float32
		steered := false
		deadline := time.Now().Add(20 * time.Second)
		for {
			wctx, wcancel := context.WithDeadline(ctx, deadline)
			_, err := conn.Wait(wctx)
			wcancel()
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			if !mine.Valid() {
				continue
			}
			if mine.Name() != "viewer-"+name {
				t.Fatalf("%s: own bot named %q", name, mine.Name())
			}
			if !steered {
				gx, gy = mine.X()+40, mine.Y()
				if gx > worldSize {
					gx -= 80
				}
				if err := mine.Steer(conn, gx, gy); err != nil {
					t.Fatal(err)
				}
				steered = true
			}
			if math.Hypot(float64(mine.X()-gx), float64(mine.Y()-gy)) < 0.5 {
				break
			}
		}
		conn.Close()
	}
	select {
	case line := <-guests:
		if !strings.Contains(line, "verified=ok") {
			t.Errorf("status with guests: %s", line)
		}
	case <-time.After(20 * time.Second):
		t.Error("no status line counted a guest")
	}
	cancel()
	go io.Copy(io.Discard, pr)
	if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
		t.Fatal(err)
	}
}
