package quictransport_test

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/quic-go/quic-go"

	"github.com/replicago/replica/internal/quicconn"
	"github.com/replicago/replica/quictransport"
	"github.com/replicago/replica/transport"
	"github.com/replicago/replica/transport/transporttest"
)

// loopPair connects a client and a server over loopback UDP.
func loopPair(t *testing.T, serverCfg, clientCfg quictransport.Config, d *quictransport.Dialer) (client, server transport.Conn) {
	t.Helper()
	ln, err := quictransport.Listen("127.0.0.1:0", serverCfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	if d == nil {
		d = &quictransport.Dialer{}
	}
	d.Config = clientCfg
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	accepted := make(chan transport.Conn, 1)
	go func() {
		c, _ := ln.Accept(ctx)
		accepted <- c
	}()
	client, err = d.Dial(ctx, ln.Addr().String())
	if err != nil {
		t.Fatalf("Dial: %v", err)
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

func devTLS(t *testing.T) (server, client *tls.Config) {
	t.Helper()
	s, c, err := quictransport.DevTLS()
	if err != nil {
		t.Fatal(err)
	}
	return s, c
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

// Every code, from either side, reaches the peer with its reason.
func TestCloseCodes(t *testing.T) {
	stls, ctls := devTLS(t)
	for _, code := range []transport.CloseCode{
		transport.CloseNormal, transport.CloseGoingAway, transport.CloseProtocolError,
		transport.CloseMessageTooLarge, transport.CloseSlowConsumer, transport.CloseIdleTimeout,
		transport.CloseHandshakeTimeout, transport.CloseAuthFailed, transport.CloseIncompatible,
		transport.ClosePolicyViolation, transport.CloseInternalError, transport.CloseNetworkError,
		256, transport.MaxCloseCode,
	} {
		for _, serverCloses := range []bool{false, true} {
			client, server := loopPair(t, quictransport.Config{TLS: stls}, quictransport.Config{TLS: ctls}, nil)
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

// A long reason is cut to MaxReasonLen bytes on a UTF-8 boundary, the same
// on both sides.
func TestCloseLongReason(t *testing.T) {
	stls, ctls := devTLS(t)
	client, server := loopPair(t, quictransport.Config{TLS: stls}, quictransport.Config{TLS: ctls}, nil)
	long := strings.Repeat("é", 1000) // 2 bytes each
	client.Close(transport.ClosePolicyViolation, long)
	want := long[:quicconn.MaxReasonLen]
	if got := waitClosed(t, client, "client", transport.ClosePolicyViolation, false); got != want {
		t.Errorf("closer reason has %d bytes, want %d", len(got), len(want))
	}
	if got := waitClosed(t, server, "server", transport.ClosePolicyViolation, true); got != want {
		t.Errorf("peer reason has %d bytes, want %d", len(got), len(want))
	}
}

// The client's socket failing under it is a network error, not the peer's
// close; the server then hears nothing and times out.
func TestCloseNetworkError(t *testing.T) {
	stls, ctls := devTLS(t)
	var pc net.PacketConn
	d := &quictransport.Dialer{PacketConn: func() (net.PacketConn, error) {
		var err error
		pc, err = net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
		return pc, err
	}}
	// The server's idle timeout runs from the handshake, over real
	// sockets: 2 s, so that no pause of a busy machine between the
	// handshake and pc.Close reaches it.
	client, server := loopPair(t,
		quictransport.Config{TLS: stls, IdleTimeout: 2 * time.Second},
		quictransport.Config{TLS: ctls}, d)
	pc.Close()
	waitClosed(t, client, "client", transport.CloseNetworkError, false)
	waitClosed(t, server, "server", transport.CloseIdleTimeout, false)
	if err := client.Send([]byte("x")); !errors.Is(err, transport.ErrClosed) {
		t.Errorf("Send = %v, want ErrClosed", err)
	}
}

// rawDial connects with quic-go directly, as a client that does not follow
// the protocol.
func rawDial(t *testing.T, addr string, ctls *tls.Config) *quic.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	qc, err := quic.DialAddr(ctx, addr, ctls, &quic.Config{EnableDatagrams: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { qc.CloseWithError(0, "") })
	return qc
}

// peerClose waits for qc to be closed by the peer and returns its code and
// reason.
func peerClose(t *testing.T, qc *quic.Conn) (quic.ApplicationErrorCode, string) {
	t.Helper()
	select {
	case <-qc.Context().Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the server did not close the connection")
	}
	e, ok := errors.AsType[*quic.ApplicationError](context.Cause(qc.Context()))
	if !ok || !e.Remote {
		t.Fatalf("connection closed by %v, want an application error from the server", context.Cause(qc.Context()))
	}
	return e.ErrorCode, e.ErrorMessage
}

// The server refuses a stream that does not start with the preamble, and
// one with another framing version.
func TestHandshakeRefusals(t *testing.T) {
	stls, ctls := devTLS(t)
	ln, err := quictransport.Listen("127.0.0.1:0", quictransport.Config{TLS: stls})
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	for _, tc := range []struct {
		preamble []byte
		want     transport.CloseCode
	}{
		{[]byte("GET / HTTP/1.1\r\n"), transport.CloseProtocolError},
		{[]byte{'r', 'p', 'l', 99}, transport.CloseIncompatible},
	} {
		qc := rawDial(t, ln.Addr().String(), ctls)
		str, err := qc.OpenStream()
		if err != nil {
			t.Fatal(err)
		}
		str.Write(tc.preamble)
		code, reason := peerClose(t, qc)
		if transport.CloseCode(code) != tc.want {
			t.Errorf("preamble %q: closed with (%v, %q), want %v", tc.preamble, transport.CloseCode(code), reason, tc.want)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if c, err := ln.Accept(ctx); err == nil {
		t.Errorf("Accept returned a connection that failed its handshake: %v", c.RemoteAddr())
	}
}

// A client that connects but never opens its message stream is closed with
// CloseHandshakeTimeout (in virtual time, over simnet).
func TestHandshakeTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := newSimLink(t, 10*time.Millisecond, 0)
		stls, ctls := simTLS(t)
		ln, err := quictransport.ListenPacket(l.server, quictransport.Config{TLS: stls, HandshakeTimeout: 4 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		qc, err := quic.Dial(context.Background(), l.client, simServerAddr, ctls, &quic.Config{})
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		code, _ := peerClose(t, qc)
		if transport.CloseCode(code) != transport.CloseHandshakeTimeout {
			t.Errorf("closed with %v, want CloseHandshakeTimeout", transport.CloseCode(code))
		}
		if d := time.Since(start); d < 3*time.Second || d > 5*time.Second {
			t.Errorf("closed after %v, want about 4s", d)
		}
	})
}

// A peer's application code beyond MaxCloseCode is a protocol error.
func TestCloseUnknownCode(t *testing.T) {
	stls, ctls := devTLS(t)
	ln, err := quictransport.Listen("127.0.0.1:0", quictransport.Config{TLS: stls})
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	qc := rawDial(t, ln.Addr().String(), ctls)
	str, err := qc.OpenStream()
	if err != nil {
		t.Fatal(err)
	}
	str.Write(quicconn.Preamble[:])
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	server, err := ln.Accept(ctx)
	if err != nil {
		t.Fatal(err)
	}
	qc.CloseWithError(70000, "huge")
	reason := waitClosed(t, server, "server", transport.CloseProtocolError, true)
	if !strings.Contains(reason, "huge") {
		t.Errorf("reason %q does not keep the peer's", reason)
	}
}

// Datagrams can be turned off; then both sides report no datagrams.
func TestDisableDatagrams(t *testing.T) {
	stls, ctls := devTLS(t)
	client, server := loopPair(t, quictransport.Config{TLS: stls}, quictransport.Config{TLS: ctls, DisableDatagrams: true}, nil)
	for _, c := range []transport.Conn{client, server} {
		if c.MaxDatagramSize() != 0 {
			t.Errorf("MaxDatagramSize = %d, want 0", c.MaxDatagramSize())
		}
		if err := c.SendDatagram([]byte("x")); !errors.Is(err, transport.ErrDatagramsUnsupported) {
			t.Errorf("SendDatagram = %v, want ErrDatagramsUnsupported", err)
		}
	}
	if got := client.MaxDatagramSize(); got != 0 {
		t.Errorf("MaxDatagramSize = %d", got)
	}
}

// With datagrams on, MaxDatagramSize is the 1150-byte cap.
func TestMaxDatagramSize(t *testing.T) {
	stls, ctls := devTLS(t)
	client, server := loopPair(t, quictransport.Config{TLS: stls}, quictransport.Config{TLS: ctls}, nil)
	for _, c := range []transport.Conn{client, server} {
		if got := c.MaxDatagramSize(); got != quicconn.MaxDatagramSize {
			t.Errorf("MaxDatagramSize = %d, want %d", got, quicconn.MaxDatagramSize)
		}
	}
}

// TestListenWithoutCertificate checks that a listener without a
// certificate fails with a nil listener, on a socket of its own or given.
func TestListenWithoutCertificate(t *testing.T) {
	ln, err := quictransport.Listen("127.0.0.1:0", quictransport.Config{})
	if ln != nil || err == nil || err.Error() != "quictransport: Config.TLS needs a certificate" {
		t.Fatalf("Listen: %v, %v", ln, err)
	}
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	if ln, err := quictransport.ListenPacket(pc, quictransport.Config{}); ln != nil || err == nil {
		t.Fatalf("ListenPacket: %v, %v", ln, err)
	}
}

// TestMaxPending fills the listener's MaxPending with connections that
// never open their message stream: the next one is closed with
// CloseServerBusy as it arrives, long before the HandshakeTimeout, and once
// the silent ones are gone a client connects again.
func TestMaxPending(t *testing.T) {
	stls, ctls := devTLS(t)
	const pending = 2
	ln, err := quictransport.Listen("127.0.0.1:0", quictransport.Config{TLS: stls, HandshakeTimeout: time.Minute, MaxPending: pending})
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	addr := ln.Addr().String()
	var silent []*quic.Conn
	for range pending {
		silent = append(silent, rawDial(t, addr, ctls))
	}
	// One more is refused, far within the minute of HandshakeTimeout.
	silent = transporttest.DialUntilRefused(t, silent, func() *quic.Conn { return rawDial(t, addr, ctls) }, func(qc *quic.Conn) bool {
		e, ok := errors.AsType[*quic.ApplicationError](context.Cause(qc.Context()))
		if !ok || !e.Remote {
			return false
		}
		if code := transport.CloseCode(e.ErrorCode); code != transport.CloseServerBusy {
			t.Fatalf("closed with %s, want %s", code, transport.CloseServerBusy)
		}
		return true
	})
	for _, qc := range silent {
		qc.CloseWithError(0, "")
	}
	// The silent ones gone (the server learns of their close), a client
	// connects.
	transporttest.Reconnects(t, ln, &quictransport.Dialer{Config: quictransport.Config{TLS: ctls}}, addr)
}
