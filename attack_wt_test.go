package replica_test

// Attacks on the WebTransport edge by a raw client: quic-go and
// webtransport-go dial, and the client writes the preamble and frames of
// docs/protocol.md §10.1 by hand.

import (
	"context"
	"crypto/tls"
	"errors"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/quic-go/quic-go"
	"github.com/quic-go/quic-go/http3"
	"github.com/quic-go/webtransport-go"

	"github.com/replicago/replica"
	"github.com/replicago/replica/internal/demo"
	"github.com/replicago/replica/session"
	"github.com/replicago/replica/transport"
	"github.com/replicago/replica/transport/transporttest"
	"github.com/replicago/replica/wttransport"
)

// wtRig starts a rig on a WebTransport listener on loopback.
func wtRig(t *testing.T, cfg replica.Config, handshake time.Duration) (*rig, *events) {
	t.Helper()
	ln, dialer := wtListen(t, handshake)
	return logRig(t, ln, dialer, cfg)
}

// wtListen listens for WebTransport on loopback with a new development
// certificate and HandshakeTimeout handshake (0: the default), until the
// test ends, and returns a dialer that trusts the certificate.
func wtListen(t *testing.T, handshake time.Duration) (transport.Listener, *wttransport.Dialer) {
	t.Helper()
	cert, hash, err := wttransport.GenerateCert(0, "localhost", "127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	ln, err := wttransport.Listen("127.0.0.1:0", wttransport.Config{TLS: &tls.Config{Certificates: []tls.Certificate{cert}}, HandshakeTimeout: handshake})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	return ln, &wttransport.Dialer{CertHashes: [][32]byte{hash}}
}

// wtRaw opens a WebTransport session at addr with webtransport-go alone,
// trusting any certificate, and no stream in it.
func wtRaw(t *testing.T, addr string) (*quic.Conn, *webtransport.Session) {
	t.Helper()
	qc := wtQUIC(t, addr)
	_, sess := wtSession(t, qc, addr)
	return qc, sess
}

// wtQUIC opens a QUIC connection to addr as an HTTP/3 client does, and
// nothing on it.
func wtQUIC(t *testing.T, addr string) *quic.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	qc, err := quic.DialAddr(ctx, addr, &tls.Config{InsecureSkipVerify: true, NextProtos: []string{http3.NextProtoH3}},
		&quic.Config{EnableDatagrams: true, EnableStreamResetPartialDelivery: true, MaxIdleTimeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { qc.CloseWithError(0, "") })
	return qc
}

// wtSession opens a WebTransport session on qc.
func wtSession(t *testing.T, qc *quic.Conn, addr string) (*webtransport.ClientConn, *webtransport.Session) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cc, err := (&webtransport.Transport{}).NewClientConn(qc)
	if err != nil {
		t.Fatal(err)
	}
	_, sess, err := cc.Dial(ctx, "https://"+addr+wttransport.DefaultPath, nil)
	if err != nil {
		t.Fatal(err)
	}
	return cc, sess
}

// wtClosed waits up to bound for the server to close sess and returns
// the code of its close.
func wtClosed(t *testing.T, sess *webtransport.Session, bound time.Duration) transport.CloseCode {
	t.Helper()
	select {
	case <-sess.Context().Done():
	case <-time.After(bound):
		t.Fatalf("the server has not closed the session after %v", bound)
	}
	// A closed session answers OpenStream with its close.
	var se *webtransport.SessionError
	if _, err := sess.OpenStream(); !errors.As(err, &se) || !se.Remote {
		t.Fatalf("session ended with %v, want a close from the server", err)
	}
	return transport.CloseCode(se.ErrorCode)
}

// TestAttackWebTransportHandshake leaves a WebTransport handshake
// unfinished at each of its steps: a QUIC connection that never sends its
// CONNECT, a session that never opens its message stream, a preamble cut
// short. Each is closed within wttransport's HandshakeTimeout (the
// session with code 6); a second session on a connection is refused; the
// honest client is served throughout.
func TestAttackWebTransportHandshake(t *testing.T) {
	const bound = 30 * time.Second
	r, _ := wtRig(t, replica.Config{}, 2*time.Second)
	addr := r.ln.Addr().String()
	good := r.dial("good")
	r.tickUntilJoined(1)

	// The attackers at once: each waits out a timeout of its own.
	t.Run("attackers", func(t *testing.T) {
		t.Run("no session", func(t *testing.T) {
			t.Parallel()
			qc := wtQUIC(t, addr)
			select {
			case <-qc.Context().Done():
			case <-time.After(bound):
				t.Fatalf("a connection without a session is still open after %v", bound)
			}
			var ae *quic.ApplicationError
			if err := context.Cause(qc.Context()); !errors.As(err, &ae) || !ae.Remote {
				t.Fatalf("connection ended with %v, want a close from the server", err)
			}
		})
		t.Run("no message stream", func(t *testing.T) {
			t.Parallel()
			_, sess := wtRaw(t, addr)
			if code := wtClosed(t, sess, bound); code != transport.CloseHandshakeTimeout {
				t.Fatalf("closed with %s, want %s", code, transport.CloseHandshakeTimeout)
			}
		})
		t.Run("preamble cut short", func(t *testing.T) {
			t.Parallel()
			_, sess := wtRaw(t, addr)
			str, err := sess.OpenStream()
			if err != nil {
				t.Fatal(err)
			}
			if _, err := str.Write(preamble[:3]); err != nil {
				t.Fatal(err)
			}
			if code := wtClosed(t, sess, bound); code != transport.CloseHandshakeTimeout {
				t.Fatalf("closed with %s, want %s", code, transport.CloseHandshakeTimeout)
			}
		})
		t.Run("second session", func(t *testing.T) {
			t.Parallel()
			qc := wtQUIC(t, addr)
			cc, _ := wtSession(t, qc, addr)
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			rsp, _, err := cc.Dial(ctx, "https://"+addr+wttransport.DefaultPath, nil)
			if err == nil || rsp == nil || rsp.StatusCode != http.StatusServiceUnavailable {
				t.Fatalf("a second session on the connection: %v (response %v), want 503", err, rsp)
			}
		})
	})
	settle(t, r, good)
}

// TestAttackWebTransportStreams has a client open, beside its message
// stream, every bidirectional and unidirectional stream WebTransport lets
// it (QUIC's limits: 100 of each by default) and write to each until flow
// control stops it. The server resets every one of them (the protocol has
// one stream), so that none holds what the client wrote: each write ends
// with the server's reset, the server's heap stays bounded while the
// attacker is connected, the attacker, which sends nothing on its message
// stream, is closed as idle (code 5), and the honest client is served.
func TestAttackWebTransportStreams(t *testing.T) {
	r, ev := wtRig(t, replica.Config{IdleTimeout: 3 * time.Second}, 0)
	good := r.dial("good")
	r.tickUntilJoined(1)
	before := heapAfterGC()
	_, sess := wtRaw(t, r.ln.Addr().String())
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	str, err := sess.OpenStreamSync(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := str.Write(append(preamble, frame(handHello(session.ProtocolVersion, demo.Schema().AppendDescriptor(nil), []byte("streams")))...)); err != nil {
		t.Fatal(err)
	}
	r.tickUntilJoined(2)
	var opened, written, refused atomic.Int64
	var writers sync.WaitGroup
	chunk := make([]byte, 16<<10)
	fill := func(w interface {
		Write([]byte) (int, error)
		SetWriteDeadline(time.Time) error
	}) {
		opened.Add(1)
		writers.Go(func() {
			var se *webtransport.StreamError
			if err := writeAll(w, chunk, time.Now().Add(10*time.Second), &written); errors.As(err, &se) && se.Remote {
				refused.Add(1)
			}
		})
	}
	for range 1000 {
		bidi, err := sess.OpenStream()
		if err == nil {
			fill(bidi)
		}
		uni, err2 := sess.OpenUniStream()
		if err2 == nil {
			fill(uni)
		}
		if err != nil && err2 != nil {
			break
		}
	}
	var peak uint64
	deadline := time.Now().Add(time.Minute)
	for n := 0; sess.Context().Err() == nil; n++ {
		if time.Now().After(deadline) {
			t.Fatalf("the attacker is still connected after a minute (%d streams, %d KiB written)", opened.Load(), written.Load()>>10)
		}
		r.srv.Tick()
		if _, err := good.Poll(); err != nil {
			t.Fatalf("the honest client: %v", err)
		}
		if n%25 == 0 {
			peak = max(peak, heapAfterGC())
		}
		time.Sleep(20 * time.Millisecond)
	}
	writers.Wait()
	t.Logf("%d streams opened, %d refused, %d KiB written to them; heap %d KiB before, at most %d KiB while the attacker was connected",
		opened.Load(), refused.Load(), written.Load()>>10, before>>10, peak>>10)
	if refused.Load() != opened.Load() {
		t.Errorf("%d of %d streams beside the message stream reset by the server", refused.Load(), opened.Load())
	}
	if peak > before+32<<20 {
		t.Errorf("heap grew by %d KiB while a client held streams open", (peak-before)>>10)
	}
	// A closed session answers OpenStream with its close.
	var se *webtransport.SessionError
	if _, err := sess.OpenStream(); !errors.As(err, &se) || !se.Remote || transport.CloseCode(se.ErrorCode) != transport.CloseIdleTimeout {
		t.Fatalf("session ended with %v, want the server's close with %s", err, transport.CloseIdleTimeout)
	}
	waitLeftWithin(t, r, ev, "streams", transport.CloseIdleTimeout, time.Minute)
	settle(t, r, good)
}

// TestAttackWebTransportPending fills a WebTransport listener's MaxPending
// with QUIC connections that never ask for a session: the next one is
// closed as it arrives (H3_EXCESSIVE_LOAD), long before the handshake
// timeout, and once the silent ones are gone a client connects again.
func TestAttackWebTransportPending(t *testing.T) {
	const pending = 2
	cert, hash, err := wttransport.GenerateCert(0, "localhost", "127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	ln, err := wttransport.Listen("127.0.0.1:0", wttransport.Config{TLS: &tls.Config{Certificates: []tls.Certificate{cert}},
		HandshakeTimeout: time.Minute, MaxPending: pending})
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	addr := ln.Addr().String()
	var silent []*quic.Conn
	for range pending {
		silent = append(silent, wtQUIC(t, addr))
	}
	// One more is refused, far within the minute of HandshakeTimeout.
	silent = transporttest.DialUntilRefused(t, silent, func() *quic.Conn { return wtQUIC(t, addr) }, func(qc *quic.Conn) bool {
		var ae *quic.ApplicationError
		if !errors.As(context.Cause(qc.Context()), &ae) || !ae.Remote {
			return false
		}
		if ae.ErrorCode != quic.ApplicationErrorCode(http3.ErrCodeExcessiveLoad) {
			t.Fatalf("closed with %#x, want H3_EXCESSIVE_LOAD", uint64(ae.ErrorCode))
		}
		return true
	})
	for _, qc := range silent {
		qc.CloseWithError(0, "")
	}
	transporttest.Reconnects(t, ln, &wttransport.Dialer{CertHashes: [][32]byte{hash}}, addr)
}

// TestAttackWebTransportOrphanStreams opens, on a QUIC connection to the
// WebTransport listener that never sends its CONNECT, a hundred
// WebTransport streams naming a session that does not exist, and writes
// to them until the server's flow control stops it. The server holds such
// streams unread for a while (in case the CONNECT is late), so what it
// lets the client write is what it buffers: within the connection's
// receive window, 128 KiB, not quic-go's default 576 KiB (a client doing
// this over MaxPending connections pinned about 0.8 GiB). The writes stop
// half a second after the first stream opens: the server drops such
// streams after a second, and their data then frees room in the window
// for more, so what it takes later is not what it holds at once.
func TestAttackWebTransportOrphanStreams(t *testing.T) {
	r, _ := wtRig(t, replica.Config{}, 0)
	qc := wtQUIC(t, r.ln.Addr().String())
	var written atomic.Int64
	var writers sync.WaitGroup
	chunk := make([]byte, 16<<10)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	stop := time.Now().Add(500 * time.Millisecond)
	for range 100 {
		if time.Now().After(stop) {
			break
		}
		str, err := qc.OpenUniStreamSync(ctx)
		if err != nil {
			break
		}
		// A WebTransport stream (type 0x54) of session 400, as varints.
		if _, err := str.Write([]byte{0x40, 0x54, 0x41, 0x90}); err != nil {
			break
		}
		writers.Go(func() { writeAll(str, chunk, stop, &written) })
	}
	writers.Wait()
	t.Logf("%d KiB written to streams of no session", written.Load()>>10)
	if w := written.Load(); w > 256<<10 {
		t.Errorf("the server took %d KiB on streams of no session, want its 128 KiB window at most", w>>10)
	}
}

// writeAll writes chunk to w again and again, adding what it wrote to
// written, until a write fails (the peer's flow control holding it past
// the deadline, or a reset), and returns that error.
func writeAll(w interface {
	Write([]byte) (int, error)
	SetWriteDeadline(time.Time) error
}, chunk []byte, deadline time.Time, written *atomic.Int64) error {
	w.SetWriteDeadline(deadline)
	for {
		n, err := w.Write(chunk)
		written.Add(int64(n))
		if err != nil {
			return err
		}
	}
}
