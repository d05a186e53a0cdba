package replica_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/replicago/replica"
	"github.com/replicago/replica/codec"
	"github.com/replicago/replica/internal/demo"
	"github.com/replicago/replica/session"
	"github.com/replicago/replica/state"
	"github.com/replicago/replica/transport"
)

// FuzzInbound plays a client that, once joined, sends the server
// arbitrary messages: whatever the fuzzer makes of RPC calls (on its own
// entity, another client's, one that does not exist; arguments of any
// bytes), pings, pongs and messages a client never sends. Each input is a
// run of messages, each a length byte and that many bytes. The server
// must never panic; it either keeps the client, which then gets the next
// tick, or closes it with a code that blames the client (protocol error,
// policy violation, message too large); and an honest client beside it
// keeps being served. The fuzzer's session leaves after each input, its
// bot with it. A well-formed call on entity ID mine is made on the
// fuzzer's own bot, whose ID changes from session to session.
func FuzzInbound(f *testing.F) {
	const mine = 1<<32 - 1
	bot := demo.Schema().Classes[0]
	args := emoteArgs(7, 2)
	msg := func(b []byte) []byte { return append([]byte{byte(len(b))}, b...) }
	call := func(id, rpc uint32, args []byte) []byte {
		return msg(session.AppendRPC(nil, &session.RPC{Entity: id, RPC: rpc, Args: args}))
	}
	f.Add(call(mine, 1, args))
	f.Add(slices.Concat(call(mine, 1, args), call(mine, 1, args[:len(args)-1]), call(mine, 1, args)))
	f.Add(call(mine, 3, args))
	f.Add(call(mine, 2, args))
	f.Add(call(1, 1, args)) // a bot the fuzzer does not own
	f.Add(call(1<<24|1, 1, args))
	f.Add(slices.Concat(msg(session.AppendPing(nil, &session.Ping{Nonce: 3})), msg(session.AppendPong(nil, &session.Pong{Nonce: 3}))))
	f.Add(msg([]byte{byte(session.TypeTick), 1, 2, 3}))
	f.Add(msg([]byte{byte(session.TypeResync)}))
	f.Add([]byte{0})

	r := memRig(f, replica.Config{RPCRate: 1e6, RPCBurst: 1e6})
	handled := 0
	r.srv.HandleRPC(bot, 1, func(*replica.Conn, *state.Entity, *state.Record) error { handled++; return nil })
	for range 4 {
		demo.SpawnBot(r.srv.Tracker())
	}
	honest := r.dial("honest")
	r.tickUntilJoined(1)
	const nonce = 0x5eed
	f.Fuzz(func(t *testing.T, in []byte) {
		tc, _ := rawSession(t, r, "fuzz", nil)
		for len(r.srv.Conns()) < 2 {
			r.srv.Tick()
			time.Sleep(time.Millisecond)
		}
		var own uint32
		for c, b := range r.bots {
			if c.UserID() == "fuzz" && slices.Contains(r.srv.Conns(), c) {
				own = uint32(b.Entity().ID())
			}
		}
		for len(in) > 0 {
			n := min(int(in[0]), len(in)-1)
			m := in[1 : 1+n]
			if call, err := session.ParseRPC(m); err == nil && call.Entity == mine {
				call.Entity = own
				m = session.AppendRPC(nil, &call)
			}
			tc.Send(m)
			in = in[1+n:]
		}
		// The read loop handles a connection's messages in order: once
		// the ping is answered, the others were read, and the calls are
		// queued for the tick.
		tc.Send(session.AppendPing(nil, &session.Ping{Nonce: nonce}))
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		closed := !waitFor(t, ctx, tc, func(m any) bool {
			p, ok := m.(*session.Pong)
			return ok && p.Nonce == nonce
		})
		r.srv.Tick()
		tick := r.srv.TickNumber()
		if !closed {
			closed = !waitFor(t, ctx, tc, func(m any) bool {
				k, ok := m.(*session.Tick)
				return ok && k.Tick == tick
			})
		}
		if closed {
			code, reason, byPeer := tc.CloseInfo()
			if !byPeer || !slices.Contains([]transport.CloseCode{
				transport.CloseProtocolError, transport.ClosePolicyViolation, transport.CloseMessageTooLarge}, code) {
				t.Fatalf("the client's connection closed with %s (%q, by the server: %v)", code, reason, byPeer)
			}
		}
		for honest.LastTick() != tick {
			if _, err := honest.Wait(ctx); err != nil {
				t.Fatalf("the honest client: %v", err)
			}
		}
		tc.Close(transport.CloseGoingAway, "done")
		for len(r.srv.Conns()) > 1 {
			r.srv.Tick()
			time.Sleep(time.Millisecond)
		}
		for c, b := range r.bots {
			if !slices.Contains(r.srv.Conns(), c) {
				r.srv.Tracker().Destroy(b.Entity())
				delete(r.bots, c)
			}
		}
	})
}

// waitFor reads tc's session messages (passing over the segments that
// follow each TICK) until one satisfies ok, and reports whether it came;
// false if the connection closed first. A message that does not parse
// fails the test.
func waitFor(t *testing.T, ctx context.Context, tc transport.Conn, ok func(any) bool) bool {
	t.Helper()
	segments := 0
	for {
		b, err := tc.Receive(ctx)
		if err != nil {
			if ctx.Err() != nil {
				t.Fatal("no answer from the server")
			}
			return false
		}
		if segments > 0 {
			segments--
			continue
		}
		m, err := session.Parse(b)
		if err != nil {
			t.Fatalf("the server sent a malformed message: %v", err)
		}
		if k, isTick := m.(*session.Tick); isTick {
			segments = k.Segments
		}
		if ok(m) {
			return true
		}
	}
}

// TestCallsAfterKick: of one client's calls in a tick, those after a call
// that closes its connection (here, arguments cut short) are not run.
func TestCallsAfterKick(t *testing.T) {
	bot := demo.Schema().Classes[0]
	args := emoteArgs(7, 0)
	r := memRig(t, replica.Config{RPCRate: 1000, RPCBurst: 1000})
	handled := 0
	r.srv.HandleRPC(bot, 1, func(*replica.Conn, *state.Entity, *state.Record) error { handled++; return nil })
	tc, _ := rawSession(t, r, "ana", nil)
	r.tickUntilJoined(1)
	own := uint32(r.bots[r.srv.Conns()[0]].Entity().ID())
	for _, a := range [][]byte{args, args[:len(args)-1], args, args} {
		tc.Send(session.AppendRPC(nil, &session.RPC{Entity: own, RPC: 1, Args: a}))
	}
	tc.Send(session.AppendPing(nil, &session.Ping{Nonce: 1}))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if !waitFor(t, ctx, tc, func(m any) bool { _, ok := m.(*session.Pong); return ok }) {
		t.Fatal("closed before the tick")
	}
	r.srv.Tick()
	if waitFor(t, ctx, tc, func(any) bool { return false }) {
		t.Fatal("unreachable")
	}
	if code, _, _ := tc.CloseInfo(); code != transport.CloseProtocolError || handled != 1 {
		t.Fatalf("closed with %s, %d calls handled; want a protocol error after 1", code, handled)
	}
}

// emoteArgs returns the encoded arguments of the demo bot's emote RPC.
func emoteArgs(seq uint32, kind uint8) []byte {
	emote := state.NewValue(demo.Schema().Classes[0].RPC(1).Args)
	emote.SetNum(0, uint64(seq))
	emote.SetNum(1, uint64(kind))
	var enc codec.Encoder
	return enc.AppendRecord(nil, emote.Record())
}
