package replica_test

// Attacks on the QUIC edge by a raw client: quic-go dials, and the client
// writes the preamble and frames of docs/protocol.md §10.1 by hand (a
// LEB128 length, then the payload), to send what quictransport's dialer
// never does. Each attack runs beside an honest client, which the server
// must keep serving, over real UDP sockets on loopback: the waits are
// eventual, with generous bounds.

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/quic-go/quic-go"

	"github.com/replicago/replica"
	"github.com/replicago/replica/internal/demo"
	"github.com/replicago/replica/quictransport"
	"github.com/replicago/replica/session"
	"github.com/replicago/replica/transport"
)

// quicRig starts a rig on a QUIC listener on loopback, with the server's
// handshake timeouts (replica's and the transport's) set to handshake, and
// returns the client TLS configuration a raw client dials with.
func quicRig(t *testing.T, cfg replica.Config, handshake time.Duration) (*rig, *events, *tls.Config) {
	t.Helper()
	serverTLS, clientTLS, err := quictransport.DevTLS()
	if err != nil {
		t.Fatal(err)
	}
	ln, err := quictransport.Listen("127.0.0.1:0", quictransport.Config{TLS: serverTLS, HandshakeTimeout: handshake})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	cfg.HandshakeTimeout = handshake
	r, ev := logRig(t, ln, &quictransport.Dialer{Config: quictransport.Config{TLS: clientTLS}}, cfg)
	return r, ev, clientTLS
}

// quicRaw dials addr with quic-go alone (ALPN "replica", no keep-alive of
// its own: the server's keep-alive PINGs, which quic-go acknowledges, keep
// the connection from QUIC's idle timeout).
func quicRaw(t *testing.T, addr string, clientTLS *tls.Config) *quic.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	qc, err := quic.DialAddr(ctx, addr, clientTLS, &quic.Config{EnableDatagrams: true, MaxIdleTimeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { qc.CloseWithError(0, "") })
	return qc
}

// quicStream opens the message stream on qc and writes p on it.
func quicStream(t *testing.T, qc *quic.Conn, p []byte) *quic.Stream {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	str, err := qc.OpenStreamSync(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := str.Write(p); err != nil {
		t.Fatal(err)
	}
	return str
}

// frame is one message as §10.1 frames it on QUIC: a LEB128 length, then
// the payload.
func frame(p []byte) []byte { return append(binary.AppendUvarint(nil, uint64(len(p))), p...) }

var preamble = []byte{0x72, 0x70, 0x6c, 0x01} // "rpl", framing version 1

// quicClosed waits up to bound for the server to close qc and returns the
// application error code of its CONNECTION_CLOSE.
func quicClosed(t *testing.T, qc *quic.Conn, bound time.Duration) transport.CloseCode {
	t.Helper()
	select {
	case <-qc.Context().Done():
	case <-time.After(bound):
		t.Fatalf("the server has not closed the connection after %v", bound)
	}
	var ae *quic.ApplicationError
	if err := context.Cause(qc.Context()); !errors.As(err, &ae) || !ae.Remote {
		t.Fatalf("connection ended with %v, want a CONNECTION_CLOSE from the server", err)
	}
	return transport.CloseCode(ae.ErrorCode)
}

// TestAttackQUICFrames sends, before or instead of a HELLO, what a QUIC
// client library never writes: a frame header announcing more than the
// HELLO limit, a frame left half sent, a header that never ends, a
// preamble cut short, no stream at all. Each attacker is closed with the
// code the protocol names, within the handshake timeouts, and the honest
// client beside it is served throughout.
func TestAttackQUICFrames(t *testing.T) {
	const handshake = 2 * time.Second
	const bound = 30 * time.Second // the handshake timeout, the 2 s flush and a loaded machine
	r, _, clientTLS := quicRig(t, replica.Config{}, handshake)
	addr := r.ln.Addr().String()
	good := r.dial("good")
	r.tickUntilJoined(1)

	// The attackers at once: each waits out a timeout of its own.
	t.Run("attackers", func(t *testing.T) {
		t.Run("length over the HELLO limit", func(t *testing.T) {
			t.Parallel()
			// 16 MiB announced, nothing after: the header alone is refused,
			// before the handshake timeout and without waiting for a payload.
			qc := quicRaw(t, addr, clientTLS)
			quicStream(t, qc, append(preamble, binary.AppendUvarint(nil, 16<<20)...))
			start := time.Now()
			if code := quicClosed(t, qc, bound); code != transport.CloseMessageTooLarge {
				t.Fatalf("closed with %s, want %s", code, transport.CloseMessageTooLarge)
			}
			t.Logf("closed after %v", time.Since(start))
		})
		t.Run("frame never finished", func(t *testing.T) {
			t.Parallel()
			// A HELLO-sized frame announced, 10 bytes of it sent, then silence:
			// the handshake timeout ends it (REFUSE 6).
			qc := quicRaw(t, addr, clientTLS)
			quicStream(t, qc, append(append(preamble, binary.AppendUvarint(nil, 1000)...), make([]byte, 10)...))
			if code := quicClosed(t, qc, bound); code != transport.CloseHandshakeTimeout {
				t.Fatalf("closed with %s, want %s", code, transport.CloseHandshakeTimeout)
			}
		})
		t.Run("header that never ends", func(t *testing.T) {
			t.Parallel()
			// Continuation bytes of a length that adds nothing: malformed once
			// past the 64 bits a length may take, not read forever.
			qc := quicRaw(t, addr, clientTLS)
			hdr := make([]byte, 64)
			for i := range hdr {
				hdr[i] = 0x80
			}
			quicStream(t, qc, append(preamble, hdr...))
			if code := quicClosed(t, qc, bound); code != transport.CloseProtocolError {
				t.Fatalf("closed with %s, want %s", code, transport.CloseProtocolError)
			}
		})
		t.Run("preamble cut short", func(t *testing.T) {
			t.Parallel()
			qc := quicRaw(t, addr, clientTLS)
			quicStream(t, qc, preamble[:2])
			if code := quicClosed(t, qc, bound); code != transport.CloseHandshakeTimeout {
				t.Fatalf("closed with %s, want %s", code, transport.CloseHandshakeTimeout)
			}
		})
		t.Run("no stream", func(t *testing.T) {
			t.Parallel()
			qc := quicRaw(t, addr, clientTLS)
			if code := quicClosed(t, qc, bound); code != transport.CloseHandshakeTimeout {
				t.Fatalf("closed with %s, want %s", code, transport.CloseHandshakeTimeout)
			}
		})
		t.Run("streams beyond the message stream", func(t *testing.T) {
			t.Parallel()
			// The server admits one bidirectional stream and no unidirectional
			// one: a second is not even opened (QUIC's stream limit, which the
			// server would enforce by closing the connection).
			qc := quicRaw(t, addr, clientTLS)
			str := quicStream(t, qc, append(preamble, frame(handHello(session.ProtocolVersion, demo.Schema().AppendDescriptor(nil), []byte("streams")))...))
			if msg := readFrame(t, str); msg[0] != byte(session.TypeWelcome) {
				t.Fatalf("got message type %d, want a WELCOME", msg[0])
			}
			if _, err := qc.OpenStream(); err == nil {
				t.Fatal("a second bidirectional stream was opened")
			}
			if _, err := qc.OpenUniStream(); err == nil {
				t.Fatal("a unidirectional stream was opened")
			}
			qc.CloseWithError(0, "")
		})
	})
	settle(t, r, good)
}

// readFrame reads one §10.1 frame from str.
func readFrame(t *testing.T, str *quic.Stream) []byte {
	t.Helper()
	str.SetReadDeadline(time.Now().Add(20 * time.Second))
	var n uint64
	for shift := 0; ; shift += 7 {
		var b [1]byte
		if _, err := str.Read(b[:]); err != nil {
			t.Fatalf("reading a frame header: %v", err)
		}
		n |= uint64(b[0]&0x7f) << shift
		if b[0] < 0x80 {
			break
		}
	}
	if n == 0 || n > 1<<20 {
		t.Fatalf("frame of %d bytes", n)
	}
	p := make([]byte, n)
	for off := 0; off < len(p); {
		k, err := str.Read(p[off:])
		if err != nil {
			t.Fatalf("reading a frame: %v", err)
		}
		off += k
	}
	return p
}

// TestAttackQUICDatagramFlood has a joined client send datagrams as fast
// as it can, 1150 bytes each, and nothing on its message stream. The
// server reads no datagram (they carry no session message yet, §10.1):
// what it holds of them stays bounded while the flood goes on (quic-go
// keeps at most 128 per connection), they are no sign of life to the
// session, which closes the client with code 5 (idle timeout) although
// datagrams keep coming, and the honest client is served meanwhile.
func TestAttackQUICDatagramFlood(t *testing.T) {
	const idle = 8 * time.Second
	r, ev, clientTLS := quicRig(t, replica.Config{IdleTimeout: idle}, 10*time.Second)
	good := r.dial("good")
	r.tickUntilJoined(1)
	before := heapAfterGC()

	qc := quicRaw(t, r.ln.Addr().String(), clientTLS)
	str := quicStream(t, qc, append(preamble, frame(handHello(session.ProtocolVersion, demo.Schema().AppendDescriptor(nil), []byte("flood")))...))
	if msg := readFrame(t, str); msg[0] != byte(session.TypeWelcome) {
		t.Fatalf("got message type %d, want a WELCOME", msg[0])
	}
	r.tickUntilJoined(2)
	// The server's messages are read and dropped, so that flow control
	// never stalls it: this client is idle, not slow.
	go func() {
		buf := make([]byte, 32<<10)
		for {
			if _, err := str.Read(buf); err != nil {
				return
			}
		}
	}()
	// The flood: as fast as quic-go sends, for idle/4 (up to 256 MiB),
	// then one datagram every 20 ms until the server closes.
	var sent atomic.Int64
	flooded := make(chan struct{})
	go func() {
		dgram := make([]byte, 1150)
		rand.Read(dgram)
		end := time.Now().Add(idle / 4)
		flooding := true
		for qc.Context().Err() == nil {
			if qc.SendDatagram(dgram) == nil {
				sent.Add(int64(len(dgram)))
			}
			if flooding && (time.Now().After(end) || sent.Load() > 256<<20) {
				close(flooded)
				flooding = false
			}
			if !flooding {
				time.Sleep(20 * time.Millisecond)
			}
		}
	}()
	for done := false; !done; {
		select {
		case <-flooded:
			done = true
		case <-time.After(20 * time.Millisecond):
			r.srv.Tick()
		}
	}
	during := heapAfterGC()
	t.Logf("%d MiB of datagrams sent; heap %d KiB before, %d KiB with the flooding client connected", sent.Load()>>20, before>>10, during>>10)
	if qc.Context().Err() != nil {
		t.Fatalf("the flooding client was closed before the flood ended: %v", context.Cause(qc.Context()))
	}
	if during > before+16<<20 {
		t.Errorf("heap %d KiB with the flooding client connected, %d KiB before: the datagrams are held", during>>10, before>>10)
	}
	waitLeftWithin(t, r, ev, "flood", transport.CloseIdleTimeout, time.Minute)
	if code := quicClosed(t, qc, 30*time.Second); code != transport.CloseIdleTimeout {
		t.Fatalf("closed with %s, want %s", code, transport.CloseIdleTimeout)
	}
	settle(t, r, good)
}

// TestAttackNeverReadsQUIC is the client that completes its handshake,
// keeps sending PINGs (so it is never idle) and never reads again, over
// QUIC and WebTransport, whose backlog counts only the server's own send
// queue: flow control stalls the server's writer once the client's stream
// window is full, the queue grows past LagBytes, the server pauses the
// client and drops it as a slow consumer (code 4) after LagTimeout. The
// heap stays bounded meanwhile and the honest client is served.
func TestAttackNeverReadsQUIC(t *testing.T) {
	cfg := replica.Config{LagBytes: 256 << 10, LagTimeout: 500 * time.Millisecond}
	t.Run("quic", func(t *testing.T) {
		r, ev, _ := quicRig(t, cfg, 10*time.Second)
		runNeverReads(t, r, ev)
	})
	t.Run("webtransport", func(t *testing.T) {
		r, ev := wtRig(t, cfg, 0)
		runNeverReads(t, r, ev)
	})
}

func runNeverReads(t *testing.T, r *rig, ev *events) {
	good := r.dial("good")
	r.tickUntilJoined(1)
	before := heapAfterGC()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	tc, err := r.dialer.Dial(ctx, r.ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer tc.Close(transport.CloseNormal, "")
	tc.Send(handHello(session.ProtocolVersion, demo.Schema().AppendDescriptor(nil), []byte("sloth")))
	if msg, err := tc.Receive(ctx); err != nil || msg[0] != byte(session.TypeWelcome) {
		t.Fatalf("no WELCOME: %v", err)
	}
	pingForever(tc, 50*time.Millisecond) // and nothing received again
	b, err := demo.SpawnBot(r.srv.Tracker())
	if err != nil {
		t.Fatal(err)
	}
	// 8 KiB of changes a tick, to 64 MiB: far more than the stream
	// windows, the send queue and LagBytes together.
	name := make([]byte, 8<<10)
	var peak uint64
	deadline := time.Now().Add(2 * time.Minute)
	for sent := 0; ; sent += len(name) {
		name[sent/len(name)%len(name)]++
		b.SetName(string(name))
		r.srv.Tick()
		if code, ok := ev.left("sloth"); ok {
			if code != transport.CloseSlowConsumer {
				t.Fatalf("server dropped the client that reads nothing with %s, want %s", code, transport.CloseSlowConsumer)
			}
			t.Logf("dropped after %d KiB of ticks", sent>>10)
			break
		}
		if sent > 64<<20 || time.Now().After(deadline) {
			t.Fatalf("the client that reads nothing is still connected after %d KiB of ticks: stats %+v", sent>>10, r.srv.Stats())
		}
		if sent%(1<<20) == 0 {
			peak = max(peak, heapAfterGC())
			waitTick(t, good, r.srv.TickNumber())
		}
		time.Sleep(2 * time.Millisecond)
	}
	t.Logf("heap %d KiB before, at most %d KiB while the client was connected", before>>10, peak>>10)
	if peak > before+32<<20 {
		t.Errorf("heap grew by %d KiB while a client read nothing", (peak-before)>>10)
	}
	if st := r.srv.Stats(); st.Paused == 0 {
		t.Fatalf("dropped without a pause: stats %+v", st)
	}
	select {
	case <-tc.Done():
	case <-time.After(30 * time.Second):
		t.Fatal("the client's connection is still open 30 s after the server dropped it")
	}
	if code, reason, byPeer := tc.CloseInfo(); code != transport.CloseSlowConsumer || !byPeer {
		t.Fatalf("the client's connection closed with %s %q (by peer %v), want %s from the server", code, reason, byPeer, transport.CloseSlowConsumer)
	}
	settle(t, r, good)
}
