package wstransport

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"

	"github.com/coder/websocket"

	"github.com/replicago/replica/transport"
)

// A Dialer dials WebSocket connections. The zero Dialer is ready to use; a
// Dialer must not be copied after its first Dial.
type Dialer struct {
	// Config configures the connections.
	Config transport.Config

	// Path is the URL path dialed when Dial is given "host:port" rather
	// than a URL. The default is "/".
	Path string

	// TLSConfig, if set, makes "host:port" dial wss rather than ws, and
	// configures TLS for both (unless HTTPClient is set).
	TLSConfig *tls.Config

	// Header holds extra handshake request headers, such as Origin or
	// User-Agent.
	Header http.Header

	// HTTPClient, if set, makes the handshake request; it must speak
	// HTTP/1.1. NetDial and TLSConfig's use for the handshake are then
	// ignored, and the connections' LocalAddr is unknown.
	HTTPClient *http.Client

	// NetDial, if set, opens the connections to the server (to its proxy,
	// if the environment names one) instead of a net.Dialer with TCP
	// keep-alive.
	NetDial func(ctx context.Context, network, addr string) (net.Conn, error)

	once   sync.Once
	client *http.Client
}

// NewDialer returns a Dialer of connections configured with cfg.
func NewDialer(cfg transport.Config) *Dialer {
	return &Dialer{Config: cfg}
}

// Dial connects with a zero Dialer configured with cfg; see Dialer.Dial.
func Dial(ctx context.Context, addr string, cfg transport.Config) (transport.Conn, error) {
	return NewDialer(cfg).Dial(ctx, addr)
}

// captureKey is the context key under which Dial learns the socket that
// the HTTP client opens.
type captureKey struct{}

type capture struct {
	mu   sync.Mutex
	conn net.Conn
}

// Dial connects to addr: a ws:// or wss:// URL (http:// and https:// work
// too), such as a listener's Addr().String(), or "host:port" to dial
// d.Path there. ctx bounds the dial and the handshake only.
func (d *Dialer) Dial(ctx context.Context, addr string) (transport.Conn, error) {
	u := addr
	if !strings.Contains(addr, "://") {
		scheme, path := "ws", d.Path
		if d.TLSConfig != nil {
			scheme = "wss"
		}
		if path == "" {
			path = "/"
		}
		u = scheme + "://" + addr + path
	}
	capt := new(capture)
	ctx = context.WithValue(ctx, captureKey{}, capt)
	ws, resp, err := websocket.Dial(ctx, u, &websocket.DialOptions{
		HTTPClient:      d.httpClient(),
		HTTPHeader:      d.Header,
		CompressionMode: websocket.CompressionDisabled,
	})
	if err != nil {
		if resp != nil {
			return nil, fmt.Errorf("wstransport: dial %s: %s: %w", u, resp.Status, err)
		}
		return nil, fmt.Errorf("wstransport: dial %s: %w", u, err)
	}
	var local, remote net.Addr = unknownAddr{}, &Addr{URL: u}
	capt.mu.Lock()
	if capt.conn != nil {
		local, remote = capt.conn.LocalAddr(), capt.conn.RemoteAddr()
	}
	capt.mu.Unlock()
	return newConn(ws, nil, d.Config.WithDefaults(), local, remote), nil
}

func (d *Dialer) httpClient() *http.Client {
	if d.HTTPClient != nil {
		return d.HTTPClient
	}
	d.once.Do(func() {
		dial := d.NetDial
		if dial == nil {
			nd := &net.Dialer{KeepAliveConfig: keepAlive}
			dial = nd.DialContext
		}
		d.client = &http.Client{Transport: &http.Transport{
			Proxy: http.ProxyFromEnvironment,
			DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
				c, err := dial(ctx, network, addr)
				if err == nil {
					if capt, ok := ctx.Value(captureKey{}).(*capture); ok {
						capt.mu.Lock()
						if capt.conn == nil {
							capt.conn = c
						}
						capt.mu.Unlock()
					}
				}
				return c, err
			},
			TLSClientConfig:   d.TLSConfig,
			DisableKeepAlives: true,
		}}
	})
	return d.client
}

// unknownAddr stands for an address the transport cannot learn.
type unknownAddr struct{}

func (unknownAddr) Network() string { return "tcp" }
func (unknownAddr) String() string  { return "unknown" }
