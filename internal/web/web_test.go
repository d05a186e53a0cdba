package web_test

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/replicago/replica/internal/demo"
	"github.com/replicago/replica/internal/web"
	"github.com/replicago/replica/schema"
	"github.com/replicago/replica/wttransport"
)

func get(t *testing.T, h http.Handler, path string) *http.Response {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", path, nil))
	return rec.Result()
}

func TestHandler(t *testing.T) {
	certs := &wttransport.CertManager{}
	n := 0
	h, err := web.Handler(web.Page{
		Title:           "arena",
		WebSocketURL:    "ws://127.0.0.1:1/replica",
		WebTransportURL: "https://127.0.0.1:2/replica",
		Certs:           certs,
		Schema:          demo.Schema(),
		Token:           func() string { n++; return "viewer-" + string(rune('0'+n)) },
		World:           2000,
		MaxHP:           100,
		Steer:           "steer",
	})
	if err != nil {
		t.Fatal(err)
	}
	// The page and its script are the committed files.
	for path, file := range map[string]string{"/": "static/index.html", "/app.js": "static/app.js"} {
		res := get(t, h, path)
		body, _ := io.ReadAll(res.Body)
		want, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		if res.StatusCode != 200 || !bytes.Equal(body, want) {
			t.Errorf("GET %s: %d, %d bytes, want the %d bytes of %s", path, res.StatusCode, len(body), len(want), file)
		}
	}

	var c struct {
		WS, WT, Descriptor, Token, Steer string
		Hashes                           []string
		World                            float64
		MaxHP                            int `json:"maxHp"`
	}
	res := get(t, h, "/config.json")
	if cc := res.Header.Get("Cache-Control"); cc != "no-store" {
		t.Errorf("config.json Cache-Control %q: the hashes rotate, it must not be cached", cc)
	}
	if err := json.NewDecoder(res.Body).Decode(&c); err != nil {
		t.Fatal(err)
	}
	if c.WS != "ws://127.0.0.1:1/replica" || c.WT != "https://127.0.0.1:2/replica" || c.Token != "viewer-1" || c.Steer != "steer" || c.World != 2000 || c.MaxHP != 100 {
		t.Errorf("config.json = %+v", c)
	}
	hashes, err := certs.Hashes()
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Hashes) != len(hashes) || c.Hashes[0] != base64.StdEncoding.EncodeToString(hashes[0][:]) {
		t.Errorf("hashes %v, want the certificate manager's %x", c.Hashes, hashes)
	}
	// The page's schema is the client view of the server's: no
	// server-only field, the RPCs there.
	desc, err := base64.StdEncoding.DecodeString(c.Descriptor)
	if err != nil {
		t.Fatal(err)
	}
	view, err := demo.Schema().ClientView()
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(desc, view.AppendDescriptor(nil)) {
		t.Error("descriptor is not the client view's")
	}
	s, err := schema.DecodeDescriptor(desc)
	if err != nil {
		t.Fatal(err)
	}
	bot := s.Class(1)
	var names []string
	for _, f := range bot.Fields {
		names = append(names, f.Name)
	}
	for _, r := range bot.RPCs {
		names = append(names, "rpc:"+r.Name)
	}
	if got := strings.Join(names, " "); strings.Contains(got, "mode") || !strings.Contains(got, "rpc:steer") {
		t.Errorf("the page's bot has %s; want no server-only mode, and the steer RPC", got)
	}
	// Each page load gets its own token.
	json.NewDecoder(get(t, h, "/config.json").Body).Decode(&c)
	if c.Token != "viewer-2" {
		t.Errorf("second token %q", c.Token)
	}

	if _, err := web.Handler(web.Page{Schema: demo.Schema()}); err == nil {
		t.Error("a page with no WebSocket URL")
	}
}

func TestLoopbackOrigin(t *testing.T) {
	check := web.LoopbackOrigin("8080")
	for origin, want := range map[string]bool{
		"":                             true, // not a browser
		"http://127.0.0.1:8080":        true,
		"http://localhost:8080":        true,
		"http://[::1]:8080":            true,
		"http://127.0.0.2:8080":        true,
		"http://127.0.0.1:8081":        false,
		"https://127.0.0.1:8080":       false,
		"http://127.evil.example:8080": false,
		"http://10.0.0.1:8080":         false,
		"http://example.com:8080":      false,
		"null":                         false,
	} {
		r := httptest.NewRequest("CONNECT", "https://127.0.0.1:4433/replica", nil)
		if origin != "" {
			r.Header.Set("Origin", origin)
		}
		if got := check(r); got != want {
			t.Errorf("Origin %q: %v, want %v", origin, got, want)
		}
	}
}

// The bundler and esbuild stay out of the replica binary.
func TestNoBundlerInBinary(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "github.com/replicago/replica/cmd/replica").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	if strings.Contains(string(out), "esbuild") {
		t.Error("cmd/replica depends on esbuild")
	}
}
