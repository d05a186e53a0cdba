package wstransport

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"

	"github.com/replicago/replica/transport"
)

// errListenerClosed is what Accept returns once the listener is closed.
var errListenerClosed = fmt.Errorf("wstransport: listener closed: %w", net.ErrClosed)

// A Handler upgrades HTTP requests to WebSocket connections and is the
// transport.Listener that accepts them. Mount it on an http.Server at the
// path clients dial; the server must speak HTTP/1.1 to the client (a
// WebSocket upgrade needs a hijackable connection). Close stops the
// upgrades (later requests get 503 Service Unavailable) without touching
// the server or the connections already accepted.
type Handler struct {
	cfg  Config
	opts websocket.AcceptOptions
	addr net.Addr

	conns chan *conn
	done  chan struct{}

	mu     sync.Mutex
	closed bool
	err    error // why Accept fails once closed

	originLogged atomic.Int64 // when a refused origin was last logged, Unix nanoseconds
}

// NewHandler returns a Handler for connections configured with cfg. Its
// Addr is cfg.URL; cfg.Path, TLSConfig and HandshakeTimeout are the
// http.Server's business and ignored; ErrorLog receives only the notes of
// pages refused for their origin.
func NewHandler(cfg Config) *Handler {
	cfg = cfg.withDefaults()
	return &Handler{
		cfg: cfg,
		opts: websocket.AcceptOptions{
			OriginPatterns:     cfg.OriginPatterns,
			InsecureSkipVerify: cfg.InsecureSkipOriginCheck,
			CompressionMode:    websocket.CompressionDisabled,
		},
		addr:  &Addr{URL: cfg.URL},
		conns: make(chan *conn, cfg.AcceptBacklog),
		done:  make(chan struct{}),
	}
}

// ServeHTTP upgrades r to a WebSocket connection and queues it for Accept.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if h.isClosed() {
		http.Error(w, "listener closed", http.StatusServiceUnavailable)
		return
	}
	ws, err := websocket.Accept(w, r, &h.opts)
	if err != nil {
		// Accept wrote the response. A page refused for its origin is
		// a configuration a developer must see (a page served from
		// another port is another origin), not the page's business: it
		// is logged, at most every 10 seconds.
		if r.Header.Get("Origin") != "" && strings.Contains(err.Error(), "not authorized") {
			h.logOrigin(err)
		}
		return
	}
	var local net.Addr
	if a, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr); ok {
		local = a
	} else {
		local = &Addr{URL: h.cfg.URL}
	}
	nc, _ := r.Context().Value(netConnKey{}).(net.Conn)
	c := newConn(ws, nc, h.cfg.Config, local, parseAddr(r.RemoteAddr))
	select {
	case h.conns <- c:
		// Close may have drained the queue before c went in (select picks
		// at random when both cases are ready): drain again, so that no
		// connection waits in a queue nobody reads.
		if h.isClosed() {
			h.drain()
		}
	case <-h.done:
		c.Close(transport.CloseGoingAway, "listener closed")
	}
}

// originLogEvery spaces the notes of refused origins, so that a page
// retrying, or anyone sending such requests, cannot flood the log.
const originLogEvery = 10 * time.Second

func (h *Handler) logOrigin(err error) {
	now, last := time.Now().UnixNano(), h.originLogged.Load()
	if now-last < int64(originLogEvery) || !h.originLogged.CompareAndSwap(last, now) {
		return
	}
	logf := log.Printf
	if h.cfg.ErrorLog != nil {
		logf = h.cfg.ErrorLog.Printf
	}
	logf("wstransport: a page was refused (403): %v; list the page's host in wstransport.Config.OriginPatterns", err)
}

type netConnKey struct{}

// ConnContext is for the ConnContext field of an http.Server on which a
// Handler is mounted: it lets the Handler's connections count the bytes
// in the kernel's send queue in their backlog (transport.Backlogger), so
// that a client that stops reading shows as behind while the kernel still
// buffers for it. Listen and NewListener set it.
func ConnContext(ctx context.Context, c net.Conn) context.Context {
	return context.WithValue(ctx, netConnKey{}, c)
}

// drain closes, with CloseGoingAway, the connections upgraded and queued
// for an Accept that will not come.
func (h *Handler) drain() {
	for {
		select {
		case c := <-h.conns:
			c.Close(transport.CloseGoingAway, "listener closed")
		default:
			return
		}
	}
}

// parseAddr returns the net.Addr of an http.Request's RemoteAddr.
func parseAddr(s string) net.Addr {
	if ap, err := netip.ParseAddrPort(s); err == nil {
		return net.TCPAddrFromAddrPort(ap)
	}
	return &Addr{URL: s}
}

// Accept returns the next upgraded connection.
func (h *Handler) Accept(ctx context.Context) (transport.Conn, error) {
	select {
	case c := <-h.conns:
		return c, nil
	case <-h.done:
		h.mu.Lock()
		defer h.mu.Unlock()
		return nil, h.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// Addr returns the URL clients dial: Config.URL, for a Handler.
func (h *Handler) Addr() net.Addr { return h.addr }

// Close stops accepting connections and closes, with CloseGoingAway, those
// upgraded and not yet accepted. Established connections stay open.
func (h *Handler) Close() error {
	h.shutdown(errListenerClosed)
	return nil
}

func (h *Handler) isClosed() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.closed
}

func (h *Handler) shutdown(err error) {
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		return
	}
	h.closed, h.err = true, err
	close(h.done)
	h.mu.Unlock()
	h.drain()
}

// listener is a Handler with its own http.Server.
type listener struct {
	*Handler
	srv *http.Server
}

// Listen listens on the TCP address addr and serves WebSocket connections
// at cfg.Path, over TLS if cfg.TLSConfig is set.
func Listen(addr string, cfg Config) (transport.Listener, error) {
	lc := net.ListenConfig{KeepAliveConfig: keepAlive}
	ln, err := lc.Listen(context.Background(), "tcp", addr)
	if err != nil {
		return nil, err
	}
	return NewListener(ln, cfg), nil
}

// NewListener serves WebSocket connections at cfg.Path on ln, over TLS if
// cfg.TLSConfig is set, until the returned listener is closed. It takes
// ln over: closing the listener closes ln.
func NewListener(ln net.Listener, cfg Config) transport.Listener {
	cfg = cfg.withDefaults()
	scheme := "ws"
	if cfg.TLSConfig != nil {
		tc := cfg.TLSConfig.Clone()
		tc.NextProtos = []string{"http/1.1"}
		ln = tls.NewListener(ln, tc)
		scheme = "wss"
	}
	if cfg.URL == "" {
		cfg.URL = scheme + "://" + ln.Addr().String() + cfg.Path
	}
	h := NewHandler(cfg)
	path := cfg.Path
	l := &listener{Handler: h}
	l.srv = &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path != path {
				http.NotFound(w, r)
				return
			}
			h.ServeHTTP(w, r)
		}),
		ConnContext:       ConnContext,
		ConnState:         limitPending(cfg.MaxPending),
		ReadHeaderTimeout: cfg.HandshakeTimeout,
		// A connection a request did not upgrade (a 404, a refused
		// upgrade) has no business here: it goes once idle this long,
		// where by default it would stay for good.
		IdleTimeout:    cfg.HandshakeTimeout,
		MaxHeaderBytes: 16 << 10,
		ErrorLog:       cfg.ErrorLog,
	}
	go func() {
		err := l.srv.Serve(ln)
		if !errors.Is(err, http.ErrServerClosed) {
			h.shutdown(fmt.Errorf("wstransport: serving %s: %w", ln.Addr(), err))
		}
	}()
	return l
}

// limitPending returns an http.Server ConnState hook that closes a new
// connection while max others have not finished their upgrade: each
// counts from its arrival until the WebSocket library takes it over
// (hijacked) or it closes.
func limitPending(max int) func(net.Conn, http.ConnState) {
	var pending atomic.Int64
	return func(c net.Conn, st http.ConnState) {
		switch st {
		case http.StateNew:
			if pending.Add(1) > int64(max) {
				c.Close() // it still ends as StateClosed, which counts it out
			}
		case http.StateHijacked, http.StateClosed:
			pending.Add(-1)
		}
	}
}

// Close stops accepting: it closes the net.Listener, lets upgrades in
// flight finish (their connections then close with CloseGoingAway, like
// any upgraded and unaccepted one), and after a second closes the
// connections still in their HTTP handshake. Established connections stay
// open: http.Server does not track hijacked (WebSocket) connections.
func (l *listener) Close() error {
	l.Handler.Close()
	// Close alone would also cut a connection whose 101 response is out
	// but which the WebSocket library has not hijacked yet: its client
	// would see EOF instead of the close frame.
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	err := l.srv.Shutdown(ctx)
	if err != nil {
		err = l.srv.Close()
	}
	if errors.Is(err, net.ErrClosed) {
		err = nil
	}
	return err
}
