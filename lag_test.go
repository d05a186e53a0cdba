package replica_test

import (
	"context"
	"log/slog"
	"testing"
	"testing/synctest"
	"time"

	"github.com/coder/websocket"

	"github.com/replicago/replica"
	"github.com/replicago/replica/client"
	"github.com/replicago/replica/internal/demo"
	"github.com/replicago/replica/session"
	"github.com/replicago/replica/transport"
)

// TestFallBehindAndResync has a client stop polling while the server keeps
// changing a large world: its backlog grows, the server pauses it instead
// of dropping it, and when the client polls again it is resynchronised to
// exactly the server's view, with every server RPC sent meanwhile
// delivered once, in order, after the state.
func TestFallBehindAndResync(t *testing.T) { synctest.Test(t, fallBehindAndResync) }

func fallBehindAndResync(t *testing.T) {
	nw := transport.NewMemNetwork()
	ln, err := nw.Listen("", transport.Config{})
	if err != nil {
		t.Fatal(err)
	}
	r := newRig(t, ln, nw.Dialer(transport.Config{}), replica.Config{LagMessages: 40, LagBytes: 1 << 30})
	for range 300 {
		b, _ := demo.SpawnBot(r.srv.Tracker())
		b.SetHp(1)
	}
	c, err := client.Dial(context.Background(), r.dialer, r.ln.Addr().String(), demo.Schema(), client.DialConfig{Buffer: 4})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	r.tickUntilJoined(1)
	var mine demo.Bot
	for _, b := range r.bots {
		mine = b
	}
	var hurts []uint32
	demo.OnBotHurt(c, func(_ demo.BotView, seq uint32, _ int16, _ replica.Ref) { hurts = append(hurts, seq) })

	// The client does not poll: its reader fills Buffer, then stops
	// reading, and the server's queue for it grows past LagMessages.
	var sent uint32
	for tick := 0; r.srv.Stats().Paused == 0; tick++ {
		if tick > 2000 {
			t.Fatal("the server never paused the client that stopped reading")
		}
		for _, e := range r.srv.Tracker().AppendEntities(nil) {
			if b, ok := demo.BotOf(e); ok {
				b.SetX(float32(tick % 1000))
			}
		}
		sent++
		if err := demo.SendBotHurt(r.srv, replica.ToOwner, mine, sent, 1, 0); err != nil {
			t.Fatal(err)
		}
		r.srv.Tick()
	}
	// Paused: more ticks and RPCs pile up on the server side only.
	for range 20 {
		mine.SetHp(mine.Hp() + 1)
		sent++
		demo.SendBotHurt(r.srv, replica.ToOwner, mine, sent, 1, 0)
		r.srv.Tick()
	}
	select {
	case <-c.Done():
		t.Fatal("the client was dropped instead of paused")
	default:
	}

	// The client polls again; the server resynchronises it.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for r.srv.Stats().Resyncs == 0 {
		if ctx.Err() != nil {
			t.Fatalf("no resync: stats %+v, client at tick %d of %d", r.srv.Stats(), c.LastTick(), r.srv.TickNumber())
		}
		c.Poll()
		r.srv.Tick()
		time.Sleep(time.Millisecond)
	}
	// Now it keeps up: one more tick, applied.
	r.srv.Tick()
	for c.LastTick() != r.srv.TickNumber() {
		if _, err := c.Wait(ctx); err != nil {
			t.Fatalf("client at tick %d of %d: %v", c.LastTick(), r.srv.TickNumber(), err)
		}
	}
	if err := check(r.srv, c, mine); err != nil {
		t.Fatalf("after the resync: %v", err)
	}
	if uint32(len(hurts)) != sent {
		t.Fatalf("%d RPCs sent, %d arrived", sent, len(hurts))
	}
	for i, seq := range hurts {
		if seq != uint32(i+1) {
			t.Fatalf("RPC %d arrived as number %d", i+1, seq)
		}
	}
}

// TestFallBehindForever has a client stop polling for good: the server
// pauses it, sees its backlog never shrink, and drops it as a slow consumer
// after LagTimeout, while it keeps serving the others.
//
// Both tests run in virtual time (testing/synctest): the good client's
// reader, or the resumed one's, always keeps up with the ticks, as it
// would not on a busy machine in wall time, where it too could fall
// LagMessages behind and stall for LagTimeout.
func TestFallBehindForever(t *testing.T) { synctest.Test(t, fallBehindForever) }

func fallBehindForever(t *testing.T) {
	nw := transport.NewMemNetwork()
	ln, err := nw.Listen("", transport.Config{})
	if err != nil {
		t.Fatal(err)
	}
	r := newRig(t, ln, nw.Dialer(transport.Config{}), replica.Config{LagMessages: 40, LagBytes: 1 << 30, LagTimeout: 200 * time.Millisecond})
	for range 300 {
		demo.SpawnBot(r.srv.Tracker())
	}
	stuck, err := client.Dial(context.Background(), r.dialer, r.ln.Addr().String(), demo.Schema(), client.DialConfig{Buffer: 4})
	if err != nil {
		t.Fatal(err)
	}
	defer stuck.Close()
	good := r.dial("good")
	r.tickUntilJoined(2)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for tick := 0; ; tick++ {
		for _, e := range r.srv.Tracker().AppendEntities(nil) {
			if b, ok := demo.BotOf(e); ok {
				b.SetX(float32(tick % 1000))
			}
		}
		r.srv.Tick()
		if _, err := good.Poll(); err != nil {
			t.Fatal(err)
		}
		select {
		case <-stuck.Done():
			if code, reason, _ := stuck.CloseInfo(); code != transport.CloseSlowConsumer {
				t.Fatalf("closed with %s (%s), want %s", code, reason, transport.CloseSlowConsumer)
			}
			if r.srv.Stats().Paused == 0 {
				t.Fatal("dropped without being paused first")
			}
			return
		case <-ctx.Done():
			t.Fatalf("a client that never reads again is still connected (stats %+v)", r.srv.Stats())
		default:
		}
		time.Sleep(time.Millisecond)
	}
}

// pingForever sends a PING (§10.2: type 5, a 64-bit nonce) on tc every
// period until tc closes, and reads nothing.
func pingForever(tc transport.Conn, period time.Duration) {
	go func() {
		for nonce := byte(1); ; nonce++ {
			select {
			case <-tc.Done():
				return
			case <-time.After(period):
			}
			tc.Send([]byte{5, nonce, 0, 0, 0, 0, 0, 0, 0})
		}
	}()
}

// TestLagPingingReaderDropped has a client that keeps sending PINGs (and
// so is never idle) but reads nothing after its WELCOME. In virtual time:
// the server pauses it, and drops it as a slow consumer once its backlog
// in bytes has not shrunk for LagTimeout, whatever it sends meanwhile.
func TestLagPingingReaderDropped(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const lagTimeout = 10 * time.Second
		srv, ln, nw := memServer(t, replica.Config{LagMessages: 16, LagTimeout: lagTimeout}, nil)
		tc, err := nw.Dialer(transport.Config{}).Dial(context.Background(), ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer tc.Close(transport.CloseNormal, "")
		tc.Send(handHello(session.ProtocolVersion, demo.Schema().AppendDescriptor(nil), []byte("sloth")))
		if msg, err := tc.Receive(context.Background()); err != nil || msg[0] != byte(session.TypeWelcome) {
			t.Fatalf("no WELCOME: %v", err)
		}
		pingForever(tc, time.Second)
		b, err := demo.SpawnBot(srv.Tracker())
		if err != nil {
			t.Fatal(err)
		}
		var paused time.Time
		for i := 0; ; i++ {
			b.SetHp(int16(i))
			srv.Tick()
			synctest.Wait()
			if paused.IsZero() && srv.Stats().Paused > 0 {
				paused = time.Now()
			}
			select {
			case <-tc.Done():
			default:
				if !paused.IsZero() && time.Since(paused) > lagTimeout+time.Second {
					t.Fatalf("still connected %v after the pause", time.Since(paused))
				}
				if i > 10000 {
					t.Fatal("never paused")
				}
				time.Sleep(50 * time.Millisecond)
				continue
			}
			break
		}
		if paused.IsZero() {
			t.Fatal("dropped without being paused first")
		}
		if d := time.Since(paused); d <= lagTimeout || d > lagTimeout+100*time.Millisecond {
			t.Fatalf("dropped %v after the pause, want just after LagTimeout (%v)", d, lagTimeout)
		}
		if code, reason, byPeer := tc.CloseInfo(); code != transport.CloseSlowConsumer || !byPeer {
			t.Fatalf("closed with %s %q (by peer %v), want %s by the server", code, reason, byPeer, transport.CloseSlowConsumer)
		}
		if st := srv.Stats(); st.Kicked != 1 {
			t.Fatalf("stats %+v, want one kick", st)
		}
	})
}

// TestLagKernelQueueWebSocket is the slow reader of
// TestLagPingingReaderDropped over a real WebSocket: a raw client that
// completes the handshake, keeps sending PINGs and reads nothing. The
// server sends it 2 MiB of ticks, which the kernel's socket buffers would
// hold without the server's queue growing (about 4 MB here). Counting the
// kernel's send queue in the backlog, the server pauses the client and
// drops it as a slow consumer after LagTimeout.
func TestLagKernelQueueWebSocket(t *testing.T) {
	ev := &events{}
	srv, url := wsServer(t, replica.Config{LagBytes: 256 << 10, LagTimeout: 500 * time.Millisecond, Logger: slog.New(ev)})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ws, _, err := websocket.Dial(ctx, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ws.CloseNow()
	if err := ws.Write(ctx, websocket.MessageBinary, handHello(session.ProtocolVersion, demo.Schema().AppendDescriptor(nil), []byte("sloth"))); err != nil {
		t.Fatal(err)
	}
	if _, msg, err := ws.Read(ctx); err != nil || msg[0] != byte(session.TypeWelcome) {
		t.Fatalf("no WELCOME: %v", err)
	}
	go func() { // PINGs, and nothing read
		for nonce := byte(1); ctx.Err() == nil; nonce++ {
			if ws.Write(ctx, websocket.MessageBinary, []byte{5, nonce, 0, 0, 0, 0, 0, 0, 0}) != nil {
				return
			}
			time.Sleep(50 * time.Millisecond)
		}
	}()
	b, err := demo.SpawnBot(srv.Tracker())
	if err != nil {
		t.Fatal(err)
	}
	const budget = 2 << 20
	name := make([]byte, 8<<10)
	for sent := 0; ; {
		if sent < budget {
			name[sent/len(name)%len(name)]++
			b.SetName(string(name))
			sent += len(name)
		}
		srv.Tick()
		if kicked := ev.find("replica: kicked"); len(kicked) > 0 {
			if kicked[0].user != "sloth" || kicked[0].code != transport.CloseSlowConsumer {
				t.Fatalf("kicked %+v, want sloth as a slow consumer", kicked[0])
			}
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("the client that reads nothing is still connected after %d KiB of ticks: stats %+v", sent>>10, srv.Stats())
		}
		time.Sleep(5 * time.Millisecond)
	}
	if st := srv.Stats(); st.Paused == 0 {
		t.Fatalf("dropped without a pause: stats %+v", st)
	}
}
