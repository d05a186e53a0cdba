package wttransport_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/quic-go/quic-go"
	"github.com/quic-go/quic-go/http3"
	"github.com/quic-go/webtransport-go"

	"github.com/replicago/replica/internal/quicconn"
	"github.com/replicago/replica/transport"
	"github.com/replicago/replica/wttransport"
)

type testServer struct {
	ln   transport.Listener
	hash [32]byte
	tls  *tls.Config
}

func newServer(t *testing.T, cfg wttransport.Config) *testServer {
	t.Helper()
	cert, hash, err := wttransport.GenerateCert(0)
	if err != nil {
		t.Fatal(err)
	}
	cfg.TLS = &tls.Config{Certificates: []tls.Certificate{cert}}
	ln, err := wttransport.Listen("127.0.0.1:0", cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	return &testServer{ln: ln, hash: hash, tls: cfg.TLS}
}

func (s *testServer) dialer() *wttransport.Dialer {
	return &wttransport.Dialer{CertHashes: [][32]byte{s.hash}}
}

// pair dials s with d (and addr, if not empty) and accepts.
func (s *testServer) pair(t *testing.T, d *wttransport.Dialer, addr string) (client, server transport.Conn) {
	t.Helper()
	if addr == "" {
		addr = s.ln.Addr().String()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	accepted := make(chan transport.Conn, 1)
	go func() {
		c, _ := s.ln.Accept(ctx)
		accepted <- c
	}()
	client, err := d.Dial(ctx, addr)
	if err != nil {
		t.Fatalf("Dial(%s): %v", addr, err)
	}
	server = <-accepted
	if server == nil {
		t.Fatal("Accept failed")
	}
	t.Cleanup(func() {
		client.Close(transport.CloseNormal, "")
		server.Close(transport.CloseNormal, "")
	})
	return client, server
}

func waitClosed(t *testing.T, c transport.Conn, who string, code transport.CloseCode, byPeer bool) string {
	t.Helper()
	select {
	case <-c.Done():
	case <-time.After(10 * time.Second):
		t.Fatalf("%s: not closed", who)
	}
	gc, reason, gp := c.CloseInfo()
	if gc != code || gp != byPeer {
		t.Errorf("%s: CloseInfo = (%v, %q, byPeer %v), want (%v, byPeer %v)", who, gc, reason, gp, code, byPeer)
	}
	return reason
}

func TestCloseCodes(t *testing.T) {
	s := newServer(t, wttransport.Config{})
	for _, code := range []transport.CloseCode{
		transport.CloseNormal, transport.CloseGoingAway, transport.CloseProtocolError,
		transport.CloseMessageTooLarge, transport.CloseSlowConsumer, transport.CloseIdleTimeout,
		transport.CloseHandshakeTimeout, transport.CloseAuthFailed, transport.CloseIncompatible,
		transport.ClosePolicyViolation, transport.CloseInternalError, transport.CloseNetworkError,
		256, transport.MaxCloseCode,
	} {
		for _, serverCloses := range []bool{false, true} {
			client, server := s.pair(t, s.dialer(), "")
			closer, peer := client, server
			if serverCloses {
				closer, peer = server, client
			}
			reason := "reason for " + code.String()
			closer.Close(code, reason)
			if got := waitClosed(t, closer, "closer", code, false); got != reason {
				t.Errorf("closer reason %q, want %q", got, reason)
			}
			if got := waitClosed(t, peer, "peer", code, true); got != reason {
				t.Errorf("peer reason %q, want %q", got, reason)
			}
		}
	}
}

func TestCloseLongReason(t *testing.T) {
	s := newServer(t, wttransport.Config{})
	client, server := s.pair(t, s.dialer(), "")
	long := strings.Repeat("é", 1000)
	server.Close(transport.ClosePolicyViolation, long)
	want := long[:quicconn.MaxReasonLen]
	if got := waitClosed(t, client, "client", transport.ClosePolicyViolation, true); got != want {
		t.Errorf("peer reason has %d bytes, want %d", len(got), len(want))
	}
}

// After a session close, both QUIC connections end: the receiver closes
// its own at once.
func TestCloseEndsQUICConnection(t *testing.T) {
	s := newServer(t, wttransport.Config{})
	var pc net.PacketConn
	d := s.dialer()
	d.PacketConn = func() (net.PacketConn, error) {
		var err error
		pc, err = net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
		return pc, err
	}
	client, _ := s.pair(t, d, "")
	client.Close(transport.CloseGoingAway, "bye")
	// The dialer closes its socket when the QUIC connection ends.
	deadline := time.Now().Add(5 * time.Second)
	for {
		_, err := pc.WriteTo([]byte("x"), s.ln.Addr())
		if errors.Is(err, net.ErrClosed) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the client's QUIC connection did not end after the session closed")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestCloseNetworkError(t *testing.T) {
	// The server's idle timeout runs from the handshake, over real
	// sockets: 2 s, so that no pause of a busy machine between the
	// handshake and pc.Close reaches it.
	s := newServer(t, wttransport.Config{IdleTimeout: 2 * time.Second})
	var pc net.PacketConn
	d := s.dialer()
	d.PacketConn = func() (net.PacketConn, error) {
		var err error
		pc, err = net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
		return pc, err
	}
	client, server := s.pair(t, d, "")
	pc.Close()
	waitClosed(t, client, "client", transport.CloseNetworkError, false)
	waitClosed(t, server, "server", transport.CloseIdleTimeout, false)
}

// rawSession opens a WebTransport session with webtransport-go directly.
func rawSession(t *testing.T, s *testServer, path string, hdr http.Header) (*http.Response, *webtransport.Session, error) {
	t.Helper()
	tr := &webtransport.Transport{
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true},
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	rsp, sess, err := tr.Dial(ctx, "https://"+s.ln.Addr().String()+path, hdr)
	if sess != nil {
		t.Cleanup(func() { sess.CloseWithError(0, "") })
	}
	return rsp, sess, err
}

// A session whose first stream does not carry the preamble is closed with
// CloseProtocolError in the session close.
func TestBadPreamble(t *testing.T) {
	s := newServer(t, wttransport.Config{})
	_, sess, err := rawSession(t, s, wttransport.DefaultPath, nil)
	if err != nil {
		t.Fatal(err)
	}
	str, err := sess.OpenStream()
	if err != nil {
		t.Fatal(err)
	}
	str.Write([]byte("hello there"))
	select {
	case <-sess.Context().Done():
	case <-time.After(10 * time.Second):
		t.Fatal("session not closed")
	}
	_, err = sess.AcceptStream(context.Background())
	e, ok := errors.AsType[*webtransport.SessionError](err)
	if !ok || !e.Remote || transport.CloseCode(e.ErrorCode) != transport.CloseProtocolError {
		t.Fatalf("session closed with %v, want a session error with CloseProtocolError", err)
	}
}

// Closing the QUIC connection without closing the session is the peer
// going away.
func TestQUICCloseWithoutSessionClose(t *testing.T) {
	s := newServer(t, wttransport.Config{})
	cert := s.tls.Certificates[0]
	pool := x509.NewCertPool()
	pool.AddCert(cert.Leaf)
	var qconn *quic.Conn
	tr := &webtransport.Transport{
		TLSClientConfig: &tls.Config{RootCAs: pool},
		DialAddr: func(ctx context.Context, addr string, tlsCfg *tls.Config, cfg *quic.Config) (*quic.Conn, error) {
			qc, err := quic.DialAddr(ctx, addr, tlsCfg, cfg)
			qconn = qc
			return qc, err
		},
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	accepted := make(chan transport.Conn, 1)
	go func() {
		c, _ := s.ln.Accept(ctx)
		accepted <- c
	}()
	_, sess, err := tr.Dial(ctx, "https://"+s.ln.Addr().String()+wttransport.DefaultPath, nil)
	if err != nil {
		t.Fatal(err)
	}
	str, err := sess.OpenStream()
	if err != nil {
		t.Fatal(err)
	}
	str.Write(quicconn.Preamble[:])
	server := <-accepted
	if server == nil {
		t.Fatal("Accept failed")
	}
	defer server.Close(0, "")
	qconn.CloseWithError(quic.ApplicationErrorCode(http3.ErrCodeNoError), "")
	waitClosed(t, server, "server", transport.CloseGoingAway, true)
}

func TestPathAndFallback(t *testing.T) {
	s := newServer(t, wttransport.Config{
		Path: "/game",
		Fallback: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(http.StatusTeapot)
		}),
	})
	d := s.dialer()
	d.Config.Path = "/game"
	s.pair(t, d, "")
	s.pair(t, s.dialer(), "https://"+s.ln.Addr().String()+"/game")

	// The default path is not served here.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if c, err := s.dialer().Dial(ctx, s.ln.Addr().String()); err == nil {
		c.Close(0, "")
		t.Fatal("Dial to the wrong path succeeded")
	} else if !strings.Contains(err.Error(), "418") {
		t.Errorf("Dial to another path: %v, want the fallback's 418", err)
	}
}

func TestCheckOrigin(t *testing.T) {
	s := newServer(t, wttransport.Config{})
	d := s.dialer()
	d.Header = http.Header{"Origin": {"https://evil.example"}}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if c, err := d.Dial(ctx, s.ln.Addr().String()); err == nil {
		c.Close(0, "")
		t.Fatal("a foreign origin was accepted by the default CheckOrigin")
	}

	s = newServer(t, wttransport.Config{CheckOrigin: func(r *http.Request) bool {
		return r.Header.Get("Origin") == "http://localhost:8080"
	}})
	d = s.dialer()
	d.Header = http.Header{"Origin": {"http://localhost:8080"}}
	s.pair(t, d, "")
}

func TestGenerateCert(t *testing.T) {
	cert, hash, err := wttransport.GenerateCert(0, "game.example", "10.1.2.3")
	if err != nil {
		t.Fatal(err)
	}
	leaf := cert.Leaf
	if _, ok := leaf.PublicKey.(*ecdsa.PublicKey); !ok {
		t.Errorf("key is %T, want ECDSA", leaf.PublicKey)
	}
	if v := leaf.NotAfter.Sub(leaf.NotBefore); v > wttransport.MaxCertValidity {
		t.Errorf("validity %v over 14 days", v)
	}
	if time.Now().Before(leaf.NotBefore) || time.Now().After(leaf.NotAfter) {
		t.Error("certificate not valid now")
	}
	if hash != wttransport.CertHash(cert) || hash == [32]byte{} {
		t.Error("hash mismatch")
	}
	if err := leaf.VerifyHostname("game.example"); err != nil {
		t.Error(err)
	}
	if err := leaf.VerifyHostname("10.1.2.3"); err != nil {
		t.Error(err)
	}
	if _, _, err := wttransport.GenerateCert(15 * 24 * time.Hour); err == nil {
		t.Error("a 15-day certificate was generated")
	}
}

// The dialer checks certificate hashes as browsers do.
func TestCertHashes(t *testing.T) {
	s := newServer(t, wttransport.Config{})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	wrong := &wttransport.Dialer{CertHashes: [][32]byte{{1, 2, 3}}}
	if c, err := wrong.Dial(ctx, s.ln.Addr().String()); err == nil {
		c.Close(0, "")
		t.Fatal("Dial accepted a certificate matching no hash")
	}
	// Several hashes, as during a rotation.
	two := &wttransport.Dialer{CertHashes: [][32]byte{{1, 2, 3}, s.hash}}
	s.pair(t, two, "")

	// A certificate valid for too long is refused even when its hash
	// matches.
	long, err := quicconn.SelfSigned([]string{"localhost", "127.0.0.1"}, 30*24*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := wttransport.Listen("127.0.0.1:0", wttransport.Config{TLS: &tls.Config{Certificates: []tls.Certificate{long}}})
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	d := &wttransport.Dialer{CertHashes: [][32]byte{wttransport.CertHash(long)}}
	if c, err := d.Dial(ctx, ln.Addr().String()); err == nil {
		c.Close(0, "")
		t.Fatal("Dial accepted a 30-day certificate by hash")
	} else if !strings.Contains(err.Error(), "14 days") {
		t.Errorf("Dial: %v, want the validity refusal", err)
	}

	// With a normal TLS config the dialer verifies as usual.
	pool := x509.NewCertPool()
	pool.AddCert(s.tls.Certificates[0].Leaf)
	s.pair(t, &wttransport.Dialer{Config: wttransport.Config{TLS: &tls.Config{RootCAs: pool}}}, "")
}

func TestMaxDatagramSize(t *testing.T) {
	s := newServer(t, wttransport.Config{})
	client, server := s.pair(t, s.dialer(), "")
	for _, c := range []transport.Conn{client, server} {
		if got := c.MaxDatagramSize(); got != quicconn.MaxDatagramSize {
			t.Errorf("MaxDatagramSize = %d, want %d", got, quicconn.MaxDatagramSize)
		}
	}
}

// TestListenWithoutCertificate checks that a listener without a
// certificate fails with a nil listener, on a socket of its own or given.
func TestListenWithoutCertificate(t *testing.T) {
	ln, err := wttransport.Listen("127.0.0.1:0", wttransport.Config{})
	if ln != nil || err == nil || err.Error() != "wttransport: Config.TLS needs a certificate" {
		t.Fatalf("Listen: %v, %v", ln, err)
	}
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	if ln, err := wttransport.ListenPacket(pc, wttransport.Config{}); ln != nil || err == nil {
		t.Fatalf("ListenPacket: %v, %v", ln, err)
	}
}
