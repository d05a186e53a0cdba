package replay_test

import (
	"bytes"
	"context"
	"net"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/replicago/replica/auth"
	"github.com/replicago/replica/replay"
	"github.com/replicago/replica/session"
	"github.com/replicago/replica/transport"
	"github.com/replicago/replica/transport/transporttest"
)

// playerRig is a Player of a short W1 recording serving an in-memory
// network, in a synctest bubble.
type playerRig struct {
	p   *replay.Player
	nw  *transport.MemNetwork
	d   transport.Dialer
	ctx context.Context
}

// newPlayerRig starts a player with cfg on a listener of a fresh network,
// wrapped by wrap if it is not nil. Call it inside a synctest bubble.
func newPlayerRig(t *testing.T, file []byte, cfg replay.PlayerConfig, wrap func(transport.Listener) transport.Listener) (*playerRig, transport.Listener) {
	t.Helper()
	rd, err := replay.Open(bytes.NewReader(file), int64(len(file)))
	if err != nil {
		t.Fatal(err)
	}
	p, err := replay.NewPlayer(rd, cfg)
	if err != nil {
		t.Fatal(err)
	}
	r := &playerRig{p: p, nw: transport.NewMemNetwork()}
	r.d = r.nw.Dialer(transport.Config{})
	ctx, cancel := context.WithCancel(context.Background())
	r.ctx = ctx
	t.Cleanup(func() { cancel(); p.Close() })
	return r, r.listen(t, wrap)
}

// listen serves the player on one more listener of the rig's network.
func (r *playerRig) listen(t *testing.T, wrap func(transport.Listener) transport.Listener) transport.Listener {
	t.Helper()
	ln, err := r.nw.Listen("", transport.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	served := ln
	if wrap != nil {
		served = wrap(ln)
	}
	go r.p.Serve(r.ctx, served)
	return ln
}

// dial opens a raw connection to ln.
func (r *playerRig) dial(t *testing.T, ln transport.Listener) transport.Conn {
	t.Helper()
	tc, err := r.d.Dial(r.ctx, ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tc.Close(transport.CloseNormal, "") })
	return tc
}

// hello sends a HELLO of the recording's schema with token.
func (r *playerRig) hello(tc transport.Conn, token []byte) {
	tc.Send(session.AppendHello(nil, &session.Hello{Version: session.ProtocolVersion,
		Descriptor: r.p.Schema().AppendDescriptor(nil), Token: token}))
}

// first returns the first message tc receives, parsed.
func first(t *testing.T, tc transport.Conn) any {
	t.Helper()
	msg, err := tc.Receive(context.Background())
	if err != nil {
		t.Fatalf("nothing received: %v", err)
	}
	m, err := session.Parse(msg)
	if err != nil {
		t.Fatalf("unparsable message: %v", err)
	}
	return m
}

func isWelcome(m any) bool {
	_, ok := m.(*session.Welcome)
	return ok
}

// wantRefusal checks that m is a REFUSE with code and text.
func wantRefusal(t *testing.T, m any, code transport.CloseCode, text string) {
	t.Helper()
	r, ok := m.(*session.Refuse)
	if !ok || r.Code != uint16(code) || r.Message != text {
		t.Fatalf("got %T %+v, want a REFUSE %v %q", m, m, code, text)
	}
}

// TestPlayerAuth: with PlayerConfig.Auth, a client is admitted with a
// valid token, as the identity's user, and refused with CloseAuthFailed
// and a generic reason without one, with a tampered one and with an
// expired one.
func TestPlayerAuth(t *testing.T) {
	l := recordW1(t, 20, 5, 10)
	synctest.Test(t, func(t *testing.T) {
		h := &auth.HMAC{Keys: [][]byte{[]byte("a replay secret of 32 bytes, ok!")}}
		r, ln := newPlayerRig(t, l.file, replay.PlayerConfig{Auth: h}, nil)
		issue := func(user string, ttl time.Duration) []byte {
			tok, err := h.Issue(auth.Identity{UserID: user, Expires: time.Now().Add(ttl)})
			if err != nil {
				t.Fatal(err)
			}
			return tok
		}
		good := issue("alice", time.Hour)
		tc := r.dial(t, ln)
		r.hello(tc, good)
		if w, ok := first(t, tc).(*session.Welcome); !ok || w.UserID != "alice" {
			t.Fatalf("with a valid token: got %+v, want a WELCOME for alice", w)
		}
		tampered := bytes.Clone(good)
		tampered[len(tampered)-1] ^= 1
		soon := issue("bob", time.Minute)
		time.Sleep(2 * time.Minute)
		for _, c := range []struct {
			name  string
			token []byte
			text  string
		}{{"none", nil, "invalid token"}, {"tampered", tampered, "invalid token"}, {"expired", soon, "token expired"}} {
			tc := r.dial(t, ln)
			r.hello(tc, c.token)
			r, ok := first(t, tc).(*session.Refuse)
			if !ok || r.Code != uint16(transport.CloseAuthFailed) || r.Message != c.text {
				t.Errorf("token %s: got %+v, want a REFUSE %v %q", c.name, r, transport.CloseAuthFailed, c.text)
			}
		}
	})
}

// TestPlayerIdle: a spectator that sends nothing, not even the answers to
// the player's PINGs, is closed with CloseIdleTimeout after
// PlayerConfig.IdleTimeout; one that answers every PING stays.
func TestPlayerIdle(t *testing.T) {
	l := recordW1(t, 20, 5, 10)
	synctest.Test(t, func(t *testing.T) {
		const idle = 3 * time.Second
		r, ln := newPlayerRig(t, l.file, replay.PlayerConfig{Ping: time.Second, IdleTimeout: idle}, nil)
		silent, live := r.dial(t, ln), r.dial(t, ln)
		r.hello(silent, nil)
		r.hello(live, nil)
		if !isWelcome(first(t, silent)) {
			t.Fatal("the silent client got no WELCOME")
		}
		go func() { // answers every PING
			for {
				msg, err := live.Receive(context.Background())
				if err != nil {
					return
				}
				if m, err := session.Parse(msg); err == nil {
					if p, ok := m.(*session.Ping); ok {
						live.Send(session.AppendPong(nil, &session.Pong{Nonce: p.Nonce}))
					}
				}
			}
		}()
		start := time.Now()
		<-silent.Done()
		if d := time.Since(start); d < idle || d > idle+time.Second {
			t.Errorf("the silent client closed after %v, want about %v", d, idle)
		}
		if code, reason, byPeer := silent.CloseInfo(); code != transport.CloseIdleTimeout || !byPeer {
			t.Errorf("the silent client closed with %v %q (by the player: %v), want %v by the player", code, reason, byPeer, transport.CloseIdleTimeout)
		}
		time.Sleep(5 * idle)
		select {
		case <-live.Done():
			code, reason, _ := live.CloseInfo()
			t.Fatalf("a client answering the PINGs was closed: %v %q", code, reason)
		default:
		}
	})
}

// TestPlayerHandshakesPerAddr: past PlayerConfig.MaxHandshakesPerAddr
// handshakes in progress from one address, another from it is refused at
// once with CloseServerBusy, and one from another address is not.
func TestPlayerHandshakesPerAddr(t *testing.T) {
	l := recordW1(t, 20, 5, 10)
	synctest.Test(t, func(t *testing.T) {
		a := &net.TCPAddr{IP: net.IPv4(198, 51, 100, 7), Port: 40000}
		b := &net.TCPAddr{IP: net.IPv4(198, 51, 100, 8), Port: 40001}
		r, lnA := newPlayerRig(t, l.file, replay.PlayerConfig{MaxHandshakesPerAddr: 2, HandshakeTimeout: time.Minute},
			func(ln transport.Listener) transport.Listener { return transporttest.FixedAddr(ln, a) })
		lnB := r.listen(t, func(ln transport.Listener) transport.Listener { return transporttest.FixedAddr(ln, b) })
		r.dial(t, lnA)
		r.dial(t, lnA)
		synctest.Wait()
		wantRefusal(t, first(t, r.dial(t, lnA)), transport.CloseServerBusy, "too many handshakes in progress from this address")
		other := r.dial(t, lnB)
		r.hello(other, nil)
		if !isWelcome(first(t, other)) {
			t.Fatal("a client from another address got no WELCOME")
		}
	})
}

// TestPlayerConfigIdle: an IdleTimeout no longer than Ping, which would
// close clients that answer every PING, is refused.
func TestPlayerConfigIdle(t *testing.T) {
	l := recordW1(t, 20, 5, 10)
	rd, err := replay.Open(bytes.NewReader(l.file), int64(len(l.file)))
	if err != nil {
		t.Fatal(err)
	}
	_, err = replay.NewPlayer(rd, replay.PlayerConfig{Ping: 10 * time.Second, IdleTimeout: 10 * time.Second})
	if err == nil || !strings.Contains(err.Error(), "IdleTimeout") {
		t.Fatalf("NewPlayer with IdleTimeout = Ping: %v, want an error naming IdleTimeout", err)
	}
	if _, err := replay.NewPlayer(rd, replay.PlayerConfig{Ping: 10 * time.Second}); err != nil {
		t.Fatalf("NewPlayer with the default IdleTimeout and a 10 s Ping: %v", err)
	}
}

// TestPlayerSpectatorInput: a spectator may send PINGs, answered with
// the same nonce, and PONGs; anything else closes it with a protocol
// error, and a message over 64 bytes, more than a PING or PONG needs,
// with CloseMessageTooLarge.
func TestPlayerSpectatorInput(t *testing.T) {
	l := recordW1(t, 20, 5, 10)
	synctest.Test(t, func(t *testing.T) {
		r, ln := newPlayerRig(t, l.file, replay.PlayerConfig{Ping: time.Hour, IdleTimeout: 2 * time.Hour}, nil)
		join := func() transport.Conn {
			tc := r.dial(t, ln)
			r.hello(tc, nil)
			if !isWelcome(first(t, tc)) {
				t.Fatal("no WELCOME")
			}
			return tc
		}
		// nextPong skips the full state's messages to the first PONG.
		nextPong := func(tc transport.Conn) *session.Pong {
			for {
				msg, err := tc.Receive(context.Background())
				if err != nil {
					t.Fatalf("no PONG: %v", err)
				}
				if m, err := session.Parse(msg); err == nil {
					if p, ok := m.(*session.Pong); ok {
						return p
					}
				}
			}
		}
		tc := join()
		tc.Send(session.AppendPing(nil, &session.Ping{Nonce: 77}))
		if p := nextPong(tc); p.Nonce != 77 {
			t.Fatalf("PONG nonce %d, want 77", p.Nonce)
		}
		tc.Send(session.AppendPong(nil, &session.Pong{Nonce: 1}))
		synctest.Wait()
		select {
		case <-tc.Done():
			t.Fatal("a PONG closed the session")
		default:
		}
		for _, c := range []struct {
			name string
			msg  []byte
			code transport.CloseCode
		}{
			{"HELLO again", session.AppendHello(nil, &session.Hello{Version: session.ProtocolVersion}), transport.CloseProtocolError},
			{"garbage", []byte{0xFF, 0x01, 0x02}, transport.CloseProtocolError},
			{"65 bytes", make([]byte, 65), transport.CloseMessageTooLarge},
		} {
			tc := join()
			tc.Send(c.msg)
			<-tc.Done()
			if code, reason, _ := tc.CloseInfo(); code != c.code {
				t.Errorf("%s: closed with %v %q, want %v", c.name, code, reason, c.code)
			}
		}
	})
}
