package wstransport

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"io"
	"log"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/coder/websocket"

	"github.com/replicago/replica/transport"
	"github.com/replicago/replica/transport/transporttest"
)

func wsFactory(t *testing.T, server, client transport.Config) (transport.Listener, transport.Dialer) {
	ln, err := Listen("127.0.0.1:0", Config{Config: server, Path: "/replica"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	return ln, NewDialer(client)
}

func TestConformance(t *testing.T) {
	transporttest.Run(t, wsFactory)
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func accept(t *testing.T, ln transport.Listener) transport.Conn {
	t.Helper()
	c, err := ln.Accept(ctxT(t))
	if err != nil {
		t.Fatalf("Accept: %v", err)
	}
	t.Cleanup(func() { c.Close(transport.CloseNormal, "") })
	return c
}

func dial(t *testing.T, d transport.Dialer, addr string) transport.Conn {
	t.Helper()
	c, err := d.Dial(ctxT(t), addr)
	if err != nil {
		t.Fatalf("Dial(%q): %v", addr, err)
	}
	t.Cleanup(func() { c.Close(transport.CloseNormal, "") })
	return c
}

func roundTrip(t *testing.T, a, b transport.Conn) {
	t.Helper()
	for _, p := range [][2]transport.Conn{{a, b}, {b, a}} {
		if err := p[0].Send([]byte("ping")); err != nil {
			t.Fatalf("Send: %v", err)
		}
		msg, err := p[1].Receive(ctxT(t))
		if err != nil || string(msg) != "ping" {
			t.Fatalf("Receive = %q, %v; want ping", msg, err)
		}
	}
}

func TestListenAddr(t *testing.T) {
	ln, err := Listen("127.0.0.1:0", Config{Path: "/game"})
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	a := ln.Addr()
	if a.Network() != "ws" || !strings.HasPrefix(a.String(), "ws://127.0.0.1:") || !strings.HasSuffix(a.String(), "/game") {
		t.Fatalf("Addr = %s %q, want ws ws://127.0.0.1:port/game", a.Network(), a)
	}
	// The URL and host:port with the Dialer's Path both reach it.
	hostport := strings.TrimSuffix(strings.TrimPrefix(a.String(), "ws://"), "/game")
	for _, tc := range []struct {
		d    *Dialer
		addr string
	}{
		{&Dialer{}, a.String()},
		{&Dialer{Path: "/game"}, hostport},
		{&Dialer{}, "http://" + hostport + "/game"},
	} {
		c := dial(t, tc.d, tc.addr)
		s := accept(t, ln)
		roundTrip(t, c, s)
	}
	// So does the package-level Dial.
	c, err := Dial(ctxT(t), a.String(), transport.Config{})
	if err != nil {
		t.Fatal(err)
	}
	roundTrip(t, c, accept(t, ln))
	// Any other path is not found.
	_, err = (&Dialer{Path: "/other"}).Dial(ctxT(t), hostport)
	if err == nil || !strings.Contains(err.Error(), "404") {
		t.Fatalf("Dial to a wrong path = %v, want a 404 error", err)
	}
	// A plain HTTP request is refused without disturbing the listener.
	resp, err := http.Get("http://" + hostport + "/game")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUpgradeRequired {
		t.Fatalf("plain GET: %s, want 426", resp.Status)
	}
}

func TestHandlerMounted(t *testing.T) {
	h := NewHandler(Config{URL: "ws://example.invalid/play"})
	mux := http.NewServeMux()
	mux.Handle("/play", h)
	mux.HandleFunc("/health", func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("ok")) })
	srv := httptest.NewServer(mux)
	defer srv.Close()
	defer h.Close()

	if got := h.Addr().String(); got != "ws://example.invalid/play" {
		t.Fatalf("Handler Addr = %q, want Config.URL", got)
	}
	d := &Dialer{}
	c := dial(t, d, srv.URL+"/play")
	s := accept(t, h)
	roundTrip(t, c, s)
	if s.RemoteAddr().String() != c.LocalAddr().String() {
		t.Errorf("server RemoteAddr %v != client LocalAddr %v", s.RemoteAddr(), c.LocalAddr())
	}
	// The server's other routes still work.
	resp, err := http.Get(srv.URL + "/health")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("/health: %s", resp.Status)
	}

	// Closing the Handler refuses upgrades, keeps the connection and
	// returns Accept.
	h.Close()
	if _, err := h.Accept(ctxT(t)); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("Accept after Close = %v, want net.ErrClosed", err)
	}
	_, err = d.Dial(ctxT(t), srv.URL+"/play")
	if err == nil || !strings.Contains(err.Error(), "503") {
		t.Fatalf("Dial after Handler Close = %v, want 503", err)
	}
	roundTrip(t, c, s)
}

func TestNewListener(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l := NewListener(ln, Config{})
	defer l.Close()
	if want := "ws://" + ln.Addr().String() + "/"; l.Addr().String() != want {
		t.Fatalf("Addr = %q, want %q", l.Addr(), want)
	}
	c := dial(t, &Dialer{}, ln.Addr().String())
	s := accept(t, l)
	roundTrip(t, c, s)
	l.Close()
	if _, err := net.Dial("tcp", ln.Addr().String()); err == nil {
		t.Fatal("closing the listener left the net.Listener open")
	}
	roundTrip(t, c, s)
}

func TestOrigin(t *testing.T) {
	for _, tc := range []struct {
		name   string
		cfg    Config
		origin string
		ok     bool
	}{
		{"no origin (not a browser)", Config{}, "", true},
		{"cross origin refused", Config{}, "https://evil.example", false},
		{"listed origin", Config{OriginPatterns: []string{"*.itch.zone"}}, "https://html.itch.zone", true},
		{"unlisted origin", Config{OriginPatterns: []string{"*.itch.zone"}}, "https://evil.example", false},
		{"skip check", Config{InsecureSkipOriginCheck: true}, "https://evil.example", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ln, err := Listen("127.0.0.1:0", tc.cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer ln.Close()
			d := &Dialer{}
			if tc.origin != "" {
				d.Header = http.Header{"Origin": {tc.origin}}
			}
			c, err := d.Dial(ctxT(t), ln.Addr().String())
			if tc.ok != (err == nil) {
				t.Fatalf("Dial with Origin %q: %v, want ok=%v", tc.origin, err, tc.ok)
			}
			if c != nil {
				c.Close(transport.CloseNormal, "")
			}
		})
	}
}

// TestOriginLogged checks that a page refused for its origin is noted in
// ErrorLog, naming the origin and what to set, once in 10 seconds however
// many refusals come.
func TestOriginLogged(t *testing.T) {
	var buf bytes.Buffer
	var mu sync.Mutex
	ln, err := Listen("127.0.0.1:0", Config{ErrorLog: log.New(lockedWriter{&mu, &buf}, "", 0)})
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	d := &Dialer{Header: http.Header{"Origin": {"http://127.0.0.1:7790"}}}
	for range 3 {
		if c, err := d.Dial(ctxT(t), ln.Addr().String()); err == nil {
			c.Close(transport.CloseNormal, "")
			t.Fatal("a page of another port connected")
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if got := buf.String(); strings.Count(got, "\n") != 1 || !strings.Contains(got, `"127.0.0.1:7790"`) || !strings.Contains(got, "OriginPatterns") {
		t.Fatalf("log: %q; want one line naming the origin and OriginPatterns", got)
	}
}

// lockedWriter is a Writer safe for concurrent use.
type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (w lockedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.w.Write(p)
}

func TestCloseStatusMapping(t *testing.T) {
	for _, tc := range []struct {
		code   transport.CloseCode
		reason string
		status websocket.StatusCode
		wire   string
	}{
		{transport.CloseNormal, "", 4000, ""},
		{transport.CloseSlowConsumer, "queue", 4004, "queue"},
		{transport.CloseNetworkError, "x", 4011, "x"},
		{256, "app", 4256, "app"},
		{998, "", 4998, ""},
		{999, "r", 4999, "999:r"},
		{transport.MaxCloseCode, "max", 4999, "4095:max"},
	} {
		status, wire := closeStatus(tc.code, tc.reason)
		if status != tc.status || wire != tc.wire {
			t.Errorf("closeStatus(%d, %q) = %d, %q; want %d, %q", tc.code, tc.reason, status, wire, tc.status, tc.wire)
		}
		code, reason := closeCode(status, wire)
		if code != tc.code || reason != tc.reason {
			t.Errorf("closeCode(%d, %q) = %d, %q; want %d, %q", status, wire, code, reason, tc.code, tc.reason)
		}
	}
	// Statuses of other WebSocket peers (browsers, proxies, the library).
	for _, tc := range []struct {
		status websocket.StatusCode
		code   transport.CloseCode
	}{
		{websocket.StatusNormalClosure, transport.CloseNormal},
		{websocket.StatusNoStatusRcvd, transport.CloseNormal},
		{websocket.StatusGoingAway, transport.CloseGoingAway},
		{websocket.StatusServiceRestart, transport.CloseGoingAway},
		{websocket.StatusProtocolError, transport.CloseProtocolError},
		{websocket.StatusUnsupportedData, transport.CloseProtocolError},
		{websocket.StatusPolicyViolation, transport.ClosePolicyViolation},
		{websocket.StatusMessageTooBig, transport.CloseMessageTooLarge},
		{websocket.StatusInternalError, transport.CloseInternalError},
		{websocket.StatusBadGateway, transport.CloseNetworkError},
		{3000, transport.CloseProtocolError},
	} {
		if code, _ := closeCode(tc.status, "r"); code != tc.code {
			t.Errorf("closeCode(%d) = %v, want %v", tc.status, code, tc.code)
		}
	}
	// A malformed extended reason keeps the reason whole.
	if code, reason := closeCode(4999, "no code here"); code != 999 || reason != "no code here" {
		t.Errorf("closeCode(4999, malformed) = %d, %q", code, reason)
	}
}

func TestReasonTruncation(t *testing.T) {
	long := strings.Repeat("é", 100) // 200 bytes of 2-byte characters
	for _, code := range []transport.CloseCode{transport.CloseAuthFailed, 3000} {
		status, wire := closeStatus(code, long)
		if len(wire) > 123 || !utf8.ValidString(wire) {
			t.Fatalf("code %d: wire reason of %d bytes, valid UTF-8 %v", code, len(wire), utf8.ValidString(wire))
		}
		if _, r := closeCode(status, wire); !strings.HasPrefix(long, r) || len(r) < 100 {
			t.Fatalf("code %d: reason %q is not a long prefix of the original", code, r)
		}
	}
	if got := truncateReason("ab\xffc", 10); got != "ab\uFFFDc" {
		t.Errorf("truncateReason of invalid UTF-8 = %q", got)
	}

	// End to end: the peer gets the truncated reason, the closer keeps the
	// whole one.
	ln, d := wsFactory(t, transport.Config{}, transport.Config{})
	c := dial(t, d, ln.Addr().String())
	s := accept(t, ln)
	s.Close(transport.ClosePolicyViolation, long)
	select {
	case <-c.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("peer not closed")
	}
	code, reason, byPeer := c.CloseInfo()
	if code != transport.ClosePolicyViolation || !byPeer || len(reason) != 122 || !strings.HasPrefix(long, reason) {
		t.Fatalf("peer CloseInfo = %v, %q (%d bytes), %v", code, reason, len(reason), byPeer)
	}
	if _, reason, _ := s.CloseInfo(); reason != long {
		t.Fatalf("closer's CloseInfo reason was truncated: %d bytes", len(reason))
	}
}

// TestTextMessage: a text message is a protocol error.
func TestTextMessage(t *testing.T) {
	ln, err := Listen("127.0.0.1:0", Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	ws, _, err := websocket.Dial(ctxT(t), ln.Addr().String(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ws.CloseNow()
	s := accept(t, ln)
	if err := ws.Write(ctxT(t), websocket.MessageText, []byte("{}")); err != nil {
		t.Fatal(err)
	}
	_, err = s.Receive(ctxT(t))
	var ce *transport.CloseError
	if !errors.As(err, &ce) || ce.Code != transport.CloseProtocolError || ce.ByPeer {
		t.Fatalf("Receive after a text message = %v, want CloseProtocolError", err)
	}
	_, _, err = ws.Read(ctxT(t))
	if got := websocket.CloseStatus(err); got != 4000+websocket.StatusCode(transport.CloseProtocolError) {
		t.Fatalf("raw client read %v, want close status 4002", err)
	}
}

// TestRawPeerClose: a plain WebSocket peer (a browser) closing with a
// standard status, and dropping the TCP connection without a close frame.
func TestRawPeerClose(t *testing.T) {
	ln, err := Listen("127.0.0.1:0", Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()

	ws, _, err := websocket.Dial(ctxT(t), ln.Addr().String(), nil)
	if err != nil {
		t.Fatal(err)
	}
	s := accept(t, ln)
	go ws.Close(websocket.StatusGoingAway, "tab closed")
	_, err = s.Receive(ctxT(t))
	var ce *transport.CloseError
	if !errors.As(err, &ce) || ce.Code != transport.CloseGoingAway || ce.Reason != "tab closed" || !ce.ByPeer {
		t.Fatalf("Receive after a browser's close = %v, want CloseGoingAway by peer", err)
	}

	// No close frame: the TCP connection just ends.
	var raw net.Conn
	hc := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := net.Dial(network, addr)
		raw = c
		return c, err
	}}}
	ws, _, err = websocket.Dial(ctxT(t), ln.Addr().String(), &websocket.DialOptions{HTTPClient: hc})
	if err != nil {
		t.Fatal(err)
	}
	defer ws.CloseNow()
	s = accept(t, ln)
	raw.Close()
	_, err = s.Receive(ctxT(t))
	if !errors.As(err, &ce) || ce.Code != transport.CloseNetworkError || ce.ByPeer {
		t.Fatalf("Receive after the TCP connection ended = %v, want CloseNetworkError", err)
	}
}

// TestDialContextAfterDial: canceling Dial's context after it returned
// leaves the connection open.
func TestDialContextAfterDial(t *testing.T) {
	ln, d := wsFactory(t, transport.Config{}, transport.Config{})
	ctx, cancel := context.WithCancel(context.Background())
	c, err := d.Dial(ctx, ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(transport.CloseNormal, "")
	s := accept(t, ln)
	cancel()
	time.Sleep(20 * time.Millisecond)
	roundTrip(t, c, s)
}

// TestDialHooks: NetDial and HTTPClient.
func TestDialHooks(t *testing.T) {
	ln, _ := wsFactory(t, transport.Config{}, transport.Config{})
	dialed := 0
	d := &Dialer{NetDial: func(ctx context.Context, network, addr string) (net.Conn, error) {
		dialed++
		return (&net.Dialer{}).DialContext(ctx, network, addr)
	}}
	c := dial(t, d, ln.Addr().String())
	s := accept(t, ln)
	roundTrip(t, c, s)
	if dialed != 1 {
		t.Fatalf("NetDial called %d times, want 1", dialed)
	}

	d = &Dialer{HTTPClient: &http.Client{}}
	c = dial(t, d, ln.Addr().String())
	s = accept(t, ln)
	roundTrip(t, c, s)
	if c.RemoteAddr().String() != ln.Addr().String() {
		t.Errorf("with an HTTPClient, RemoteAddr = %v, want the URL %v", c.RemoteAddr(), ln.Addr())
	}
}

// TestLargeMessages: the read limit follows MaxMessageSize beyond the
// library's 32 KiB default.
func TestLargeMessages(t *testing.T) {
	cfg := transport.Config{MaxMessageSize: 4 << 20}
	ln, d := wsFactory(t, cfg, cfg)
	c := dial(t, d, ln.Addr().String())
	s := accept(t, ln)
	msg := bytes.Repeat([]byte("0123456789abcdef"), (4<<20)/16)
	if err := c.Send(msg); err != nil {
		t.Fatal(err)
	}
	got, err := s.Receive(ctxT(t))
	if err != nil || !bytes.Equal(got, msg) {
		t.Fatalf("4 MiB message: %d bytes, %v", len(got), err)
	}
}

// TestGoroutinesEnd: every goroutine of a connection ends after a close
// from either side, a close by the network, and a slow consumer.
func TestGoroutinesEnd(t *testing.T) {
	ln, d := wsFactory(t, transport.Config{}, transport.Config{SendQueueMessages: 4})
	before := runtime.NumGoroutine()
	for i := range 12 {
		c := dial(t, d, ln.Addr().String())
		s := accept(t, ln)
		roundTrip(t, c, s)
		switch i % 4 {
		case 0:
			c.Close(transport.CloseGoingAway, "")
		case 1:
			s.Close(transport.CloseIdleTimeout, "")
		case 2:
			c.Close(1, "")
			s.Close(2, "") // both at once
		case 3:
			for c.Send([]byte("x")) == nil { // the server never reads
			}
		}
		select {
		case <-c.Done():
		case <-time.After(10 * time.Second):
			t.Fatal("client not closed")
		}
		if i%4 != 3 {
			select {
			case <-s.Done():
			case <-time.After(10 * time.Second):
				t.Fatal("server not closed")
			}
		} else {
			s.Close(transport.CloseNormal, "") // the server gives up too
		}
	}
	deadline := time.Now().Add(15 * time.Second)
	for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if n := runtime.NumGoroutine(); n > before {
		buf := make([]byte, 1<<20)
		t.Fatalf("%d goroutines left over (before: %d):\n%s", n, before, buf[:runtime.Stack(buf, true)])
	}
}

func TestTLS(t *testing.T) {
	certPEM, keyPEM := selfSigned(t)
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := Listen("127.0.0.1:0", Config{
		TLSConfig: &tls.Config{Certificates: []tls.Certificate{cert}},
		Path:      "/secure",
		ErrorLog:  log.New(io.Discard, "", 0), // the refused handshake below
	})
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	if ln.Addr().Network() != "wss" || !strings.HasPrefix(ln.Addr().String(), "wss://") {
		t.Fatalf("Addr = %s %s, want wss", ln.Addr().Network(), ln.Addr())
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(certPEM)
	d := &Dialer{TLSConfig: &tls.Config{RootCAs: pool}, Path: "/secure"}
	c := dial(t, d, ln.Addr().String())
	s := accept(t, ln)
	roundTrip(t, c, s)
	// host:port with a TLSConfig dials wss.
	hostport := strings.TrimSuffix(strings.TrimPrefix(ln.Addr().String(), "wss://"), "/secure")
	c = dial(t, d, hostport)
	s = accept(t, ln)
	roundTrip(t, c, s)
	// Without the CA the handshake fails.
	if _, err := (&Dialer{}).Dial(ctxT(t), ln.Addr().String()); err == nil {
		t.Fatal("Dial without trusting the certificate succeeded")
	}
}

func selfSigned(t *testing.T) (certPEM, keyPEM []byte) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		Subject:      pkix.Name{CommonName: "replica test"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1)},
		KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IsCA:         true,

		BasicConstraintsValid: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder})
}

// TestListenerClosePending: connections upgraded and not yet accepted are
// closed with CloseGoingAway when the listener closes.
func TestListenerClosePending(t *testing.T) {
	ln, d := wsFactory(t, transport.Config{}, transport.Config{})
	c := dial(t, d, ln.Addr().String())
	// Upgraded: its handler is queuing it or has; either way Close ends it.
	ln.Close()
	select {
	case <-c.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("an unaccepted connection stayed open after the listener closed")
	}
	if code, reason, byPeer := c.CloseInfo(); code != transport.CloseGoingAway || !byPeer {
		t.Fatalf("CloseInfo = %v, %q, %v; want CloseGoingAway by peer", code, reason, byPeer)
	}
}
