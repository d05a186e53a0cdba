package main

// Attacks on replica replay by raw WebSocket clients: the messages are
// built by hand from docs/protocol.md §10.2 (type bytes, §1 bit streams),
// not with the session package or the client SDK, which never send them.

import (
	"bytes"
	"context"
	"errors"
	"io"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/replicago/replica/client"
	"github.com/replicago/replica/internal/demo"
	"github.com/replicago/replica/session"
	"github.com/replicago/replica/transport"
	"github.com/replicago/replica/wstransport"
)

// rawBits writes a §1.1 bit stream, least-significant bit first.
type rawBits struct {
	buf []byte
	n   int
}

func (w *rawBits) bits(v uint64, width int) {
	for i := range width {
		if w.n%8 == 0 {
			w.buf = append(w.buf, 0)
		}
		w.buf[w.n/8] |= byte(v>>i&1) << (w.n % 8)
		w.n++
	}
}

// u writes §1.2's U(k).
func (w *rawBits) u(n uint64, k int) {
	b := 0
	for v := n; v > 0; v >>= 1 {
		b++
	}
	if b <= k {
		w.bits(0, 1)
		w.bits(n, k)
		return
	}
	for range b - k {
		w.bits(1, 1)
	}
	w.bits(0, 1)
	w.bits(n&(1<<(b-1)-1), b-1)
}

func (w *rawBits) bytes(p []byte) {
	w.u(uint64(len(p)), 4)
	for _, c := range p {
		w.bits(uint64(c), 8)
	}
}

// rawHello builds a §10.2 HELLO with the clients' default limits.
func rawHello(version uint64, desc, token []byte) []byte {
	var w rawBits
	w.u(version, 0)
	w.bytes(desc)
	w.bytes(token)
	for _, lim := range []uint64{4 << 20, 64 << 10, 1 << 16, 16, 1 << 16, 1 << 20} {
		w.u(lim, 8)
	}
	w.u(0, 0) // no resume block: one 0 bit
	return append([]byte{1}, w.buf...)
}

// TestReplayRawHelloLayout checks the hand-built HELLO against the session
// package's, so that the attacks speak the real protocol.
func TestReplayRawHelloLayout(t *testing.T) {
	desc := demo.Schema().AppendDescriptor(nil)
	want := session.AppendHello(nil, &session.Hello{Version: session.ProtocolVersion, Descriptor: desc, Token: []byte("x")})
	if got := rawHello(session.ProtocolVersion, desc, []byte("x")); !bytes.Equal(got, want) {
		t.Fatalf("hand-built HELLO\n% x\nsession.AppendHello\n% x", got, want)
	}
}

// startReplay records a short demo run and serves it in a loop, returning
// the WebSocket address of replica replay.
func startReplay(t *testing.T) string {
	t.Helper()
	file := filepath.Join(t.TempDir(), "run.rpl")
	dcfg, err := parseDemoFlags([]string{"-entities", "30", "-clients", "1", "-duration", "1s", "-room", "-http", "", "-wt-addr", "", "-record", file}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := demo.Run(context.Background(), dcfg, io.Discard); err != nil {
		t.Fatal(err)
	}
	cfg, err := parseReplayFlags([]string{"-loop", "-http", "", file}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	addr := make(chan string, 1)
	cfg.listen = addr
	ctx, cancel := context.WithCancel(context.Background())
	in, cmds := io.Pipe()
	var out syncBuilder
	done := make(chan error, 1)
	go func() { done <- serveReplay(ctx, cfg, in, &out) }()
	t.Cleanup(func() {
		cancel()
		cmds.Close()
		if err := <-done; err != nil {
			t.Errorf("replay: %v\n%s", err, out.String())
		}
	})
	select {
	case url := <-addr:
		return url
	case err := <-done:
		t.Fatalf("replay: %v\n%s", err, out.String())
		return ""
	}
}

// rawRefused reads a REFUSE (§10.2: type 3, U(4) code, string) and the
// close after it, and returns the refusal's code.
func rawRefused(t *testing.T, ctx context.Context, ws *websocket.Conn) transport.CloseCode {
	t.Helper()
	_, msg, err := ws.Read(ctx)
	if err != nil {
		t.Fatalf("no REFUSE: %v", err)
	}
	if len(msg) < 2 || msg[0] != 3 {
		t.Fatalf("got % x, want a REFUSE", msg[:min(len(msg), 16)])
	}
	code := transport.CloseCode(0)
	if msg[1]&1 == 0 { // U(4): a 0 bit, then 4 bits
		code = transport.CloseCode(msg[1] >> 1 & 0xf)
	} else {
		t.Fatalf("REFUSE code over 15: % x", msg[:min(len(msg), 16)])
	}
	_, _, err = ws.Read(ctx)
	if got := websocket.CloseStatus(err); got != websocket.StatusCode(4000+int(code)) {
		t.Fatalf("close after REFUSE %d: %v, want status %d", code, err, 4000+int(code))
	}
	return code
}

// rawClosed reads until the connection closes and returns its status,
// failing on anything but PING, TICK, segment, WELCOME or RESYNC.
func rawClosed(t *testing.T, ctx context.Context, ws *websocket.Conn) websocket.StatusCode {
	t.Helper()
	for {
		_, _, err := ws.Read(ctx)
		if err != nil {
			if ctx.Err() != nil {
				t.Fatalf("not closed: %v", err)
			}
			return websocket.CloseStatus(err)
		}
	}
}

// TestReplayAttacks sends replica replay what the SDK never sends, from
// raw WebSocket clients, while a Go client watches: each attacker gets a
// typed refusal or close, the player does not panic, and the watcher keeps
// receiving ticks after every attack.
func TestReplayAttacks(t *testing.T) {
	url := startReplay(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	watcher, err := client.Dial(ctx, wstransport.NewDialer(transport.Config{}), url, demo.Schema(), client.DialConfig{})
	if err != nil {
		t.Fatal(err)
	}
	defer watcher.Close()
	// ticks waits until the watcher has applied n more ticks.
	ticks := func(what string, n int) {
		t.Helper()
		for range n {
			if _, err := watcher.Wait(ctx); err != nil {
				t.Fatalf("watcher after %s: %v", what, err)
			}
		}
	}
	ticks("joining", 3)

	dial := func() *websocket.Conn {
		t.Helper()
		ws, _, err := websocket.Dial(ctx, "ws://"+strings.TrimPrefix(url, "ws://"), nil)
		if err != nil {
			t.Fatal(err)
		}
		ws.SetReadLimit(4 << 20)
		t.Cleanup(func() { ws.CloseNow() })
		return ws
	}
	desc := demo.Schema().AppendDescriptor(nil)
	// join sends a valid HELLO and reads the WELCOME.
	join := func() *websocket.Conn {
		t.Helper()
		ws := dial()
		if err := ws.Write(ctx, websocket.MessageBinary, rawHello(session.ProtocolVersion, desc, []byte("anyone"))); err != nil {
			t.Fatal(err)
		}
		_, msg, err := ws.Read(ctx)
		if err != nil || len(msg) == 0 || msg[0] != 2 {
			t.Fatalf("no WELCOME: % x %v", msg[:min(len(msg), 16)], err)
		}
		return ws
	}

	before := []struct {
		name string
		msg  []byte
		want transport.CloseCode
	}{
		{"garbage HELLO", []byte{0xff, 0x01, 0x02}, transport.CloseProtocolError},
		{"empty message", []byte{}, transport.CloseProtocolError},
		{"PING for HELLO", []byte{5, 1, 2, 3, 4, 5, 6, 7, 8}, transport.CloseProtocolError},
		{"truncated HELLO", rawHello(session.ProtocolVersion, desc, nil)[:40], transport.CloseProtocolError},
		{"HELLO of version 99", rawHello(99, desc, nil), transport.CloseIncompatible},
		{"HELLO with a garbage descriptor", rawHello(session.ProtocolVersion, []byte("not a descriptor"), nil), transport.CloseIncompatible},
	}
	for _, a := range before {
		ws := dial()
		if err := ws.Write(ctx, websocket.MessageBinary, a.msg); err != nil {
			t.Fatal(err)
		}
		if got := rawRefused(t, ctx, ws); got != a.want {
			t.Errorf("%s: refused with code %d, want %d", a.name, got, a.want)
		}
		ticks(a.name, 1)
	}

	// A message over the handshake's read limit is cut off unread.
	ws := dial()
	go ws.Write(ctx, websocket.MessageBinary, rawHello(session.ProtocolVersion, make([]byte, 1500<<10), nil))
	if got := rawClosed(t, ctx, ws); got != 4000+websocket.StatusCode(transport.CloseMessageTooLarge) {
		t.Errorf("1.5 MB HELLO: status %d, want %d", got, 4000+int(transport.CloseMessageTooLarge))
	}
	ticks("a huge HELLO", 1)

	// After the handshake a spectator sends PING and PONG only: anything
	// else closes with a protocol error, anything over 64 bytes is cut
	// off unread.
	after := []struct {
		name string
		msg  []byte
		code transport.CloseCode
	}{
		{"RPC", []byte{7, 1, 0, 0, 0, 1}, transport.CloseProtocolError},
		{"RESYNC", []byte{8}, transport.CloseProtocolError},
		{"a second HELLO", rawHello(session.ProtocolVersion, desc, nil), transport.CloseMessageTooLarge},
		{"garbage", []byte{0xee, 0xdd}, transport.CloseProtocolError},
		{"a 900 KB message", bytes.Repeat([]byte{7}, 900<<10), transport.CloseMessageTooLarge},
	}
	for _, a := range after {
		ws := join()
		go ws.Write(ctx, websocket.MessageBinary, a.msg) // a message cut off may never be written whole
		if got := rawClosed(t, ctx, ws); got != 4000+websocket.StatusCode(a.code) {
			t.Errorf("%s after the handshake: status %d, want %d", a.name, got, 4000+int(a.code))
		}
		ticks(a.name, 1)
	}

	// Floods: RESYNC-like garbage and PINGs from clients that never read.
	var wg sync.WaitGroup
	for i := range 4 {
		ws := join()
		wg.Add(1)
		go func() {
			defer wg.Done()
			msg := []byte{5, 0, 0, 0, 0, 0, 0, 0, 0}
			if i%2 == 1 {
				msg = []byte{8}
			}
			for j := 0; j < 20000; j++ {
				msg[len(msg)-1] = byte(j)
				if ws.Write(ctx, websocket.MessageBinary, msg) != nil {
					return
				}
			}
		}()
	}
	ticks("floods", 20)
	cancelled := make(chan struct{})
	go func() { wg.Wait(); close(cancelled) }()
	select {
	case <-cancelled:
	case <-ctx.Done():
		t.Fatal("flooders never finished or were never closed")
	}
	if err := ctx.Err(); errors.Is(err, context.DeadlineExceeded) {
		t.Fatal(err)
	}
}
