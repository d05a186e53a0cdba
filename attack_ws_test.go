package replica_test

// Attacks on the WebSocket edge by a raw client: after the upgrade
// (wsUpgrade), frames are written by hand (RFC 6455 §5.2, masked as a
// client's must be) to send what no WebSocket library would, over real
// sockets on loopback, beside an honest client the server must keep
// serving. The waits are eventual, with generous bounds.

import (
	"context"
	"encoding/binary"
	"errors"
	"io"
	"os"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/replicago/replica"
	"github.com/replicago/replica/internal/demo"
	"github.com/replicago/replica/session"
	"github.com/replicago/replica/transport"
	"github.com/replicago/replica/wstransport"
)

// WebSocket opcodes.
const (
	wsContinuation = 0x0
	wsText         = 0x1
	wsBinary       = 0x2
	wsPing         = 0x9
)

// wsFrame returns a client frame: FIN if fin, the opcode, a masking key
// and the masked payload.
func wsFrame(opcode byte, fin bool, payload []byte) []byte {
	b := []byte{opcode}
	if fin {
		b[0] |= 0x80
	}
	switch n := len(payload); {
	case n < 126:
		b = append(b, 0x80|byte(n))
	case n < 1<<16:
		b = append(b, 0x80|126)
		b = binary.BigEndian.AppendUint16(b, uint16(n))
	default:
		b = append(b, 0x80|127)
		b = binary.BigEndian.AppendUint64(b, uint64(n))
	}
	key := [4]byte{0x37, 0xfa, 0x21, 0x3d}
	b = append(b, key[:]...)
	for i, c := range payload {
		b = append(b, c^key[i%4])
	}
	return b
}

// TestAttackWebSocketFrames sends, in place of a HELLO, frames a
// WebSocket library does not: a message begun and continued by empty
// fragments forever, a HELLO as a text message, a HELLO in one-byte
// fragments. The first is closed by the handshake timeout (status 4006)
// although frames keep coming, the second as a protocol error (4002), the
// third is a HELLO like any other and welcomed; the honest client is
// served throughout.
func TestAttackWebSocketFrames(t *testing.T) {
	r, _ := wsLogRig(t, replica.Config{HandshakeTimeout: 2 * time.Second}, wstransport.Config{})
	good := r.dial("good")
	r.tickUntilJoined(1)
	hello := handHello(session.ProtocolVersion, demo.Schema().AppendDescriptor(nil), []byte("fragments"))

	t.Run("endless empty fragments", func(t *testing.T) {
		nc, br := wsUpgrade(t, r.ln.Addr().String())
		if _, err := nc.Write(wsFrame(wsBinary, false, hello[:1])); err != nil {
			t.Fatal(err)
		}
		stop := make(chan struct{})
		done := make(chan struct{})
		go func() {
			defer close(done)
			empty := wsFrame(wsContinuation, false, nil)
			for {
				select {
				case <-stop:
					return
				case <-time.After(10 * time.Millisecond):
				}
				if _, err := nc.Write(empty); err != nil {
					return
				}
			}
		}()
		status, err := readCloseStatus(nc, br)
		close(stop)
		<-done
		if err != nil {
			t.Fatalf("no close frame: %v", err)
		}
		if want := 4000 + int(transport.CloseHandshakeTimeout); status != want {
			t.Fatalf("close status %d, want %d", status, want)
		}
	})
	t.Run("text HELLO", func(t *testing.T) {
		nc, br := wsUpgrade(t, r.ln.Addr().String())
		if _, err := nc.Write(wsFrame(wsText, true, hello)); err != nil {
			t.Fatal(err)
		}
		status, err := readCloseStatus(nc, br)
		if err != nil {
			t.Fatalf("no close frame: %v", err)
		}
		if want := 4000 + int(transport.CloseProtocolError); status != want {
			t.Fatalf("close status %d, want %d", status, want)
		}
	})
	t.Run("HELLO in one-byte fragments", func(t *testing.T) {
		nc, br := wsUpgrade(t, r.ln.Addr().String())
		var frames []byte
		for i := range hello {
			op := byte(wsContinuation)
			if i == 0 {
				op = wsBinary
			}
			frames = append(frames, wsFrame(op, i == len(hello)-1, hello[i:i+1])...)
		}
		if _, err := nc.Write(frames); err != nil {
			t.Fatal(err)
		}
		var h [4]byte // the WELCOME's frame header: FIN, binary, 16-bit length
		nc.SetReadDeadline(time.Now().Add(20 * time.Second))
		if _, err := io.ReadFull(br, h[:]); err != nil {
			t.Fatal(err)
		}
		if h[0] != 0x80|wsBinary {
			t.Fatalf("frame header % x, want a binary message", h)
		}
		p := make([]byte, 1)
		if _, err := io.ReadFull(br, p); err != nil || p[0] != byte(session.TypeWelcome) {
			t.Fatalf("message type % x (%v), want a WELCOME", p, err)
		}
	})
	settle(t, r, good)
}

// TestAttackWebSocketPings sends WebSocket pings, which the library
// answers with pongs below the session: they are no sign of life to the
// session. A client that sends a HELLO and then only pings (reading
// everything, answering no PING of the server) is closed with status 4005
// (idle timeout); one that floods pings before its HELLO and reads
// nothing, so that the pongs back up, has its socket closed within the
// handshake timeout and the library's bounded writes. The honest client is
// served meanwhile.
func TestAttackWebSocketPings(t *testing.T) {
	const idle = 3 * time.Second
	r, ev := wsLogRig(t, replica.Config{IdleTimeout: idle, HandshakeTimeout: 2 * time.Second}, wstransport.Config{})
	good := r.dial("good")
	r.tickUntilJoined(1)
	// The server ticks, and the honest client applies its ticks (its
	// reader, which answers the server's PINGs, waits for it to), on this
	// goroutine until stop.
	ticking := func() (stop func()) {
		quit, done := make(chan struct{}), make(chan struct{})
		go func() {
			defer close(done)
			for {
				select {
				case <-quit:
					return
				case <-time.After(20 * time.Millisecond):
				}
				r.srv.Tick()
				if _, err := good.Poll(); err != nil {
					t.Errorf("the honest client: %v", err)
					return
				}
			}
		}()
		return func() { close(quit); <-done }
	}

	t.Run("pings only after HELLO", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		ws, _, err := websocket.Dial(ctx, r.ln.Addr().String(), nil)
		if err != nil {
			t.Fatal(err)
		}
		defer ws.CloseNow()
		ws.SetReadLimit(-1)
		if err := ws.Write(ctx, websocket.MessageBinary, handHello(session.ProtocolVersion, demo.Schema().AppendDescriptor(nil), []byte("pinger"))); err != nil {
			t.Fatal(err)
		}
		read := make(chan error, 1)
		go func() {
			for {
				if _, _, err := ws.Read(ctx); err != nil {
					read <- err
					return
				}
			}
		}()
		stop := ticking()
		start := time.Now()
		pings := 0
	loop:
		for {
			select {
			case err := <-read:
				if status := websocket.CloseStatus(err); status != 4000+websocket.StatusCode(transport.CloseIdleTimeout) {
					stop()
					t.Fatalf("closed with %v (status %d), want status %d", err, status, 4000+int(transport.CloseIdleTimeout))
				}
				break loop
			case <-time.After(100 * time.Millisecond):
			}
			pctx, pcancel := context.WithTimeout(ctx, 10*time.Second)
			if ws.Ping(pctx) == nil {
				pings++
			}
			pcancel()
		}
		stop()
		if d := time.Since(start); d < idle/2 {
			t.Fatalf("closed after %v, long before the idle timeout", d)
		}
		if pings < 5 {
			t.Fatalf("%d pings answered: the client did not keep pinging through the idle timeout", pings)
		}
		waitLeftWithin(t, r, ev, "pinger", transport.CloseIdleTimeout, time.Minute)
	})

	t.Run("ping flood without reading", func(t *testing.T) {
		nc, _ := wsUpgrade(t, r.ln.Addr().String())
		nc.SetReadDeadline(time.Time{})
		stop := ticking()
		defer stop()
		ping := wsFrame(wsPing, true, make([]byte, 125))
		var flood []byte
		for range 256 {
			flood = append(flood, ping...)
		}
		start := time.Now()
		sent := 0
		nc.SetWriteDeadline(start.Add(2 * time.Minute))
		var err error
		for {
			var n int
			if n, err = nc.Write(flood); err != nil {
				break
			}
			sent += n
		}
		if errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("the server still has the socket open after %v (%d KiB of pings sent)", time.Since(start), sent>>10)
		}
		t.Logf("socket closed by the server after %v, %d KiB of pings sent: %v", time.Since(start), sent>>10, err)
	})
	settle(t, r, good)
}
