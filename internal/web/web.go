// Package web serves replica's browser page: a canvas view of a running
// world, joined with the TypeScript client runtime (ts/src) over
// WebTransport or WebSocket. The page's script is bundled from ts/web and
// ts/src by esbuild (go generate runs ./bundle) and embedded, so a Go
// server serves it with no Node.
//
// The page fetches config.json, which this package writes for each
// request: where to connect, the current hashes of the WebTransport
// certificate (which rotates), the schema's client-view descriptor, a
// fresh connect token, and how to draw the world.
package web

import (
	"embed"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io/fs"
	"net/http"
	"net/url"

	"github.com/replicago/replica/schema"
	"github.com/replicago/replica/transport"
	"github.com/replicago/replica/wttransport"
)

//go:generate go run ./bundle

//go:embed static
var static embed.FS

// Page describes the server a page joins and how it draws its world.
type Page struct {
	Title string

	// WebSocketURL is where the page connects over WebSocket, such as
	// "ws://127.0.0.1:8080/". Required.
	WebSocketURL string
	// WebTransportURL is where the page connects over WebTransport, such
	// as "https://127.0.0.1:4433/replica"; empty for WebSocket only.
	WebTransportURL string
	// Certs publishes the hashes of the WebTransport certificate; nil
	// when the certificate is trusted by the browser as it is.
	Certs *wttransport.CertManager

	// Schema is the server's schema: the page's own is its client view.
	Schema *schema.Schema
	// Token returns the connect token of a page load.
	Token func() string

	World  float64 // side of the square world, in world units; the entities' x and y fields are in it
	View   float64 // span of the view around the viewer's own entity; 0 shows the whole world
	Radius float64 // the viewer's area of interest, drawn around its entity; 0 for none
	MaxHP  int     // the largest hp, for colours and bars
	// Steer names the client RPC, on the viewer's own entity, with
	// arguments x and y, that walks it there; empty for none.
	Steer string
}

// config is config.json; ts/web/app.ts reads it.
type config struct {
	Title      string   `json:"title"`
	WS         string   `json:"ws"`
	WT         string   `json:"wt"`
	Hashes     []string `json:"hashes"`
	Descriptor string   `json:"descriptor"`
	Token      string   `json:"token"`
	World      float64  `json:"world"`
	View       float64  `json:"view"`
	Radius     float64  `json:"radius"`
	Steer      string   `json:"steer"`
	MaxHP      int      `json:"maxHp"`
}

// Handler returns the HTTP handler of the page: "/" (index.html),
// "/app.js" and "/config.json".
func Handler(p Page) (http.Handler, error) {
	if p.WebSocketURL == "" || p.Schema == nil {
		return nil, errors.New("web: Page needs a WebSocketURL and a Schema")
	}
	view, err := p.Schema.ClientView()
	if err != nil {
		return nil, err
	}
	desc := base64.StdEncoding.EncodeToString(view.AppendDescriptor(nil))
	files, err := fs.Sub(static, "static")
	if err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	mux.Handle("GET /", http.FileServerFS(files))
	mux.HandleFunc("GET /config.json", func(w http.ResponseWriter, r *http.Request) {
		c := config{Title: p.Title, WS: p.WebSocketURL, WT: p.WebTransportURL, Hashes: []string{}, Descriptor: desc,
			World: p.World, View: p.View, Radius: p.Radius, Steer: p.Steer, MaxHP: max(p.MaxHP, 1)}
		if p.Token != nil {
			c.Token = p.Token()
		}
		if p.Certs != nil && p.WebTransportURL != "" {
			hashes, err := p.Certs.Hashes()
			if err != nil {
				http.Error(w, err.Error(), http.StatusInternalServerError)
				return
			}
			for _, h := range hashes {
				c.Hashes = append(c.Hashes, base64.StdEncoding.EncodeToString(h[:]))
			}
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-store")
		json.NewEncoder(w).Encode(c)
	})
	return mux, nil
}

// LoopbackOrigin returns a WebTransport origin check (Config.CheckOrigin)
// that accepts pages served over HTTP from a loopback address on TCP port
// port, and requests without an Origin (not from a browser). A page's
// origin is not the WebTransport listener's, which is another port and
// protocol, so the default check would refuse it.
func LoopbackOrigin(port string) func(*http.Request) bool {
	return func(r *http.Request) bool {
		o := r.Header.Get("Origin")
		if o == "" {
			return true
		}
		u, err := url.Parse(o)
		return err == nil && u.Scheme == "http" && u.Port() == port && transport.LoopbackHost(u.Hostname())
	}
}
