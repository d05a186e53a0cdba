package demo

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/replicago/replica/internal/web"
	"github.com/replicago/replica/transport"
	"github.com/replicago/replica/wstransport"
	"github.com/replicago/replica/wttransport"
)

// page is the demo's browser page: an HTTP server on Config.HTTPAddr that
// serves the page (package web) and WebSocket at /replica, and a
// WebTransport listener on Config.WTAddr with a rotating self-signed
// certificate whose hashes the page fetches. A browser that joins is a
// guest: the server gives it a bot, which it steers, and the verification
// rounds leave it alone.
type page struct {
	url  string // http://host:port/
	http *http.Server
	lns  []transport.Listener // WebSocket (the handler), then WebTransport if any
	wt   bool
}

// viewers numbers the browser pages' connect tokens, which the demo's
// authenticator takes as user IDs: the bots' names.
var viewers atomic.Int64

func (r *runner) servePage() (_ *page, err error) {
	hl, err := net.Listen("tcp", r.cfg.HTTPAddr)
	if err != nil {
		return nil, fmt.Errorf("HTTP listener: %w", err)
	}
	p := &page{url: "http://" + loopback(hl.Addr().String()) + "/"}
	defer func() {
		if err != nil {
			hl.Close()
			for _, ln := range p.lns {
				ln.Close()
			}
		}
	}()
	host := loopback(hl.Addr().String())
	ws := wstransport.NewHandler(wstransport.Config{URL: "ws://" + host + "/replica", ErrorLog: log.New(io.Discard, "", 0)})
	p.lns = append(p.lns, ws)
	pg := web.Page{
		Title:        "demo arena",
		WebSocketURL: "ws://" + host + "/replica",
		Schema:       Schema(),
		Token:        func() string { return fmt.Sprintf("viewer-%d", viewers.Add(1)) },
		World:        worldSize,
		MaxHP:        maxHP,
		Steer:        "steer",
	}
	if !r.cfg.Room {
		pg.View, pg.Radius = 2.4*r.cfg.Radius, r.cfg.Radius
	}
	if r.cfg.WTAddr != "" {
		certs := &wttransport.CertManager{}
		_, port, _ := net.SplitHostPort(hl.Addr().String())
		wtln, err := wttransport.Listen(r.cfg.WTAddr, wttransport.Config{TLS: certs.TLSConfig(), CheckOrigin: web.LoopbackOrigin(port)})
		if err != nil {
			return nil, fmt.Errorf("WebTransport listener: %w", err)
		}
		p.lns = append(p.lns, wtln)
		p.wt = true
		pg.WebTransportURL = "https://" + loopback(wtln.Addr().String()) + wttransport.DefaultPath
		pg.Certs = certs
	}
	h, err := web.Handler(pg)
	if err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	mux.Handle("/replica", ws)
	mux.Handle("/", h)
	p.http = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: time.Minute, ErrorLog: log.New(io.Discard, "", 0)}
	go func() {
		if err := p.http.Serve(hl); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Printf("demo: page server: %v", err)
		}
	}()
	return p, nil
}

func (p *page) transports() string {
	if p.wt {
		return "WebTransport, else WebSocket"
	}
	return "WebSocket"
}

func (p *page) close() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	p.http.Shutdown(ctx)
}
