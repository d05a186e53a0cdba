package replica_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/replicago/replica"
	"github.com/replicago/replica/auth"
	"github.com/replicago/replica/client"
	"github.com/replicago/replica/codec"
	"github.com/replicago/replica/schema"
	"github.com/replicago/replica/session"
	"github.com/replicago/replica/state"
	"github.com/replicago/replica/transport"
	"github.com/replicago/replica/wstransport"
)

// shipSchema is a class with a client→server RPC (fire) and a
// server→client RPC (hit).
func shipSchema(t testing.TB) (*schema.Schema, *schema.Struct) {
	fire := &schema.Struct{Name: "Fire", Fields: []*schema.Field{
		{ID: 1, Name: "seq", Type: schema.Type{Kind: schema.Uint32}, Vis: schema.VisAll},
		{ID: 2, Name: "x", Type: schema.Type{Kind: schema.Float32, Quant: schema.Quant{Step: 1.0 / 64}}, Vis: schema.VisAll},
	}}
	hit := &schema.Struct{Name: "Hit", Fields: []*schema.Field{
		{ID: 1, Name: "damage", Type: schema.Type{Kind: schema.Int16}, Vis: schema.VisAll},
		{ID: 2, Name: "by", Type: schema.Type{Kind: schema.Ref}, Vis: schema.VisAll},
	}}
	ship := &schema.Struct{Name: "Ship", Class: true, ID: 1,
		Fields: []*schema.Field{
			{ID: 1, Name: "last", Type: schema.Type{Kind: schema.Uint32}, Vis: schema.VisAll},
			{ID: 2, Name: "x", Type: schema.Type{Kind: schema.Float32, Quant: schema.Quant{Step: 1.0 / 64}}, Vis: schema.VisAll},
		},
		RPCs: []*schema.RPC{
			{ID: 1, Name: "fire", Dir: schema.ClientToServer, Args: fire},
			{ID: 2, Name: "hit", Dir: schema.ServerToClient, Args: hit},
		}}
	s, err := schema.New(ship)
	if err != nil {
		t.Fatal(err)
	}
	return s, ship
}

type rpcRig struct {
	t      testing.TB
	srv    *replica.Server
	ln     transport.Listener
	nw     *transport.MemNetwork
	d      transport.Dialer
	ship   *schema.Struct
	sch    *schema.Schema
	owned  map[*replica.Conn]*state.Entity
	fired  []uint32 // seq of every fire handled, in order
	joined []*replica.Conn
}

func newRPCRig(t testing.TB, cfg replica.Config) *rpcRig {
	nw := transport.NewMemNetwork()
	ln, err := nw.Listen("", transport.Config{})
	if err != nil {
		t.Fatal(err)
	}
	r := newRPCRigOn(t, cfg, ln, nw.Dialer(transport.Config{}))
	r.nw = nw
	return r
}

// newRPCRigOn is newRPCRig on another transport.
func newRPCRigOn(t testing.TB, cfg replica.Config, ln transport.Listener, d transport.Dialer) *rpcRig {
	sch, ship := shipSchema(t)
	var err error
	r := &rpcRig{t: t, ln: ln, d: d, ship: ship, sch: sch, owned: map[*replica.Conn]*state.Entity{}}
	cfg.Schema = sch
	cfg.OnJoin = func(c *replica.Conn) {
		e, _ := r.srv.Tracker().Spawn(ship)
		r.srv.SetOwner(e, c)
		r.owned[c] = e
		r.joined = append(r.joined, c)
	}
	if cfg.Auth == nil {
		cfg.Auth = auth.Anonymous{}
	}
	if r.srv, err = replica.NewServer(cfg); err != nil {
		t.Fatal(err)
	}
	r.srv.HandleRPC(ship, 1, func(c *replica.Conn, e *state.Entity, args *state.Record) error {
		seq := uint32(fieldNum(args, 1))
		if seq == 0 {
			return errors.New("seq 0 is invalid") // the validation hook refuses it
		}
		r.fired = append(r.fired, seq)
		e.SetNum(0, uint64(seq))
		e.SetNum(1, uint64(math.Float32bits(state.Float32(&ship.RPC(1).Args.Field(2).Type, fieldNum(args, 2)))))
		return nil
	})
	ctx, cancel := context.WithCancel(context.Background())
	go r.srv.Serve(ctx, ln)
	t.Cleanup(func() { cancel(); r.srv.Close() })
	return r
}

func (r *rpcRig) dial() *client.Conn {
	c, err := client.Dial(context.Background(), r.d, r.ln.Addr().String(), r.sch, client.DialConfig{})
	if err != nil {
		r.t.Fatal(err)
	}
	r.t.Cleanup(func() { c.Close() })
	n := len(r.joined) + 1
	for deadline := time.Now().Add(5 * time.Second); len(r.joined) < n; {
		if time.Now().After(deadline) {
			r.t.Fatal("client did not join")
		}
		r.srv.Tick()
		time.Sleep(time.Millisecond)
	}
	return c
}

// sync ticks and waits until c has applied the tick.
func (r *rpcRig) sync(c *client.Conn) {
	r.t.Helper()
	r.srv.Tick()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for c.LastTick() != r.srv.TickNumber() {
		if _, err := c.Wait(ctx); err != nil {
			r.t.Fatal(err)
		}
	}
}

func (r *rpcRig) mine(c *client.Conn) *state.Entity {
	for sc, e := range r.owned {
		if sc.UserID() == c.UserID() {
			return c.Replica().Entity(e.ID())
		}
	}
	r.t.Fatal("no entity for the client")
	return nil
}

// fieldNum returns the stored value of numeric field id of r.
func fieldNum(r *state.Record, id uint32) uint64 { return r.Num(r.Type().Field(id).Num) }

func fireArgs(ship *schema.Struct, seq uint32, x float32) *state.Record {
	h := state.NewValue(ship.RPC(1).Args)
	h.SetNum(0, uint64(seq))
	h.SetNum(1, uint64(math.Float32bits(x)))
	return h.Record()
}

// TestRPCRoundTrip calls fire from the owner, checks the handler ran once
// per call in order and its state change replicated, and has the server
// answer with hit, which the client receives after the tick's state.
func TestRPCRoundTrip(t *testing.T) {
	r := newRPCRig(t, replica.Config{RPCRate: 1000, RPCBurst: 1000})
	c := r.dial()
	r.sync(c)
	me := r.mine(c)
	var hits []int16
	var hitBy []*state.Entity
	c.HandleRPC(r.ship, 2, func(e *state.Entity, args *state.Record) {
		hits = append(hits, int16(fieldNum(args, 1)))
		hitBy = append(hitBy, c.Replica().Entity(state.ID(fieldNum(args, 2))))
	})
	for seq := uint32(1); seq <= 200; seq++ {
		if err := c.CallRPC(me, 1, fireArgs(r.ship, seq, 1.5)); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.CallRPC(me, 1, fireArgs(r.ship, 0, 0)); err != nil { // refused by the handler
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for (len(r.fired) < 200 || r.srv.Stats().RPCsRejected < 1) && time.Now().Before(deadline) {
		r.sync(c)
	}
	for i, seq := range r.fired {
		if seq != uint32(i+1) {
			t.Fatalf("call %d ran with seq %d: calls must run exactly once, in order", i, seq)
		}
	}
	if len(r.fired) != 200 || r.srv.Stats().RPCsRejected != 1 {
		t.Fatalf("%d calls ran, %d rejected", len(r.fired), r.srv.Stats().RPCsRejected)
	}
	r.sync(c)
	if got := fieldNum(&me.Record, 1); got != 200 {
		t.Fatalf("replicated last seq %d, want 200", got)
	}

	// The server spawns an attacker and sends hit in the same tick: the
	// client resolves the attacker when the RPC runs.
	attacker, _ := r.srv.Tracker().Spawn(r.ship)
	h := state.NewValue(r.ship.RPC(2).Args)
	damage := int64(-7)
	h.SetNum(0, uint64(damage))
	h.SetNum(1, uint64(attacker.ID()))
	var owner *replica.Conn
	for sc := range r.owned {
		owner = sc
	}
	if err := r.srv.SendRPC(replica.ToOwner, r.owned[owner], 2, h.Record()); err != nil {
		t.Fatal(err)
	}
	if err := r.srv.SendRPC(replica.ToOwner, r.owned[owner], 1, h.Record()); !errors.Is(err, replica.ErrNoRPC) {
		t.Fatalf("sending a client RPC: %v", err)
	}
	r.sync(c)
	// The RPC follows the tick's messages: it may arrive after them.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for len(hits) == 0 && ctx.Err() == nil {
		c.Wait(ctx)
	}
	if len(hits) != 1 || hits[0] != -7 || hitBy[0] == nil {
		t.Fatalf("hits %v, attacker resolved %v", hits, hitBy)
	}
}

func TestRPCAbuse(t *testing.T) {
	t.Run("entity not owned", func(t *testing.T) {
		r := newRPCRig(t, replica.Config{})
		a, b := r.dial(), r.dial()
		r.sync(a)
		r.sync(b)
		theirs := r.mine(b)
		theirsOnA := a.Replica().Entity(theirs.ID())
		// The client library refuses the call; a client that sends it
		// anyway is closed.
		if err := a.CallRPC(theirsOnA, 1, fireArgs(r.ship, 1, 0)); !errors.Is(err, client.ErrNotOwned) {
			t.Fatalf("CallRPC on another client's entity = %v, want ErrNotOwned", err)
		}
		var zero *state.Entity // a generated view's, before the client has its entity
		if err := a.CallRPC(zero, 1, fireArgs(r.ship, 1, 0)); !errors.Is(err, client.ErrNotOwned) {
			t.Fatalf("CallRPC on a nil entity = %v, want ErrNotOwned", err)
		}
		r.srv.CallForTest(r.connOf(a), rawFire(r, theirs, 1))
		waitKicked(t, r, a, transport.ClosePolicyViolation)
		r.sync(b) // the other client is unaffected
	})
	t.Run("flood", func(t *testing.T) {
		// In virtual time: the 2 s bound is the server's policy, not the
		// machine's speed.
		synctest.Test(t, func(t *testing.T) {
			r := newRPCRig(t, replica.Config{RPCRate: 20, RPCBurst: 20})
			// The flooding client's own queue must not overflow first: then it
			// would close itself as a slow consumer before the server kicks it.
			bystander := r.dial()
			r.d = r.nw.Dialer(transport.Config{SendQueueMessages: 1 << 16, SendQueueBytes: 64 << 20})
			c := r.dial()
			r.sync(c)
			me := r.mine(c)
			start := time.Now()
			for i := 0; i < 10000; i++ {
				if c.CallRPC(me, 1, fireArgs(r.ship, uint32(i+1), 0)) != nil {
					break
				}
			}
			waitKicked(t, r, c, transport.ClosePolicyViolation)
			if d := time.Since(start); d > 2*time.Second {
				t.Fatalf("flood kicked after %v, want within 2 s", d)
			}
			// The other client's ticks are unaffected: it is still connected
			// and keeps applying every tick.
			for range 5 {
				r.sync(bystander)
			}
			if bystander.Replica().Len() != len(r.srv.Tracker().AppendEntities(nil)) {
				t.Fatal("the bystander's replica diverged")
			}
		})
	})
	t.Run("stale entity", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			r := newRPCRig(t, replica.Config{})
			c := r.dial()
			r.sync(c)
			me := r.mine(c)
			for sc, e := range r.owned {
				if sc.UserID() == c.UserID() {
					r.srv.Tracker().Destroy(e)
				}
			}
			if err := c.CallRPC(me, 1, fireArgs(r.ship, 1, 0)); err != nil {
				t.Fatal(err)
			}
			r.sync(c)
			// In the bubble, Sleep returns once every goroutine is
			// blocked: the call has reached the server.
			time.Sleep(20 * time.Millisecond)
			r.srv.Tick()
			if st := r.srv.Stats(); st.RPCsStale != 1 || len(r.fired) != 0 {
				t.Fatalf("stats %+v, fired %v", st, r.fired)
			}
		})
	})
	t.Run("server RPC from a client", func(t *testing.T) {
		r := newRPCRig(t, replica.Config{})
		c := r.dial()
		r.sync(c)
		me := r.mine(c)
		hit := state.NewValue(r.ship.RPC(2).Args).Record()
		if err := c.CallRPC(me, 2, hit); !errors.Is(err, client.ErrNoRPC) {
			t.Fatalf("the client library sent a server RPC: %v", err)
		}
	})
}

// connOf returns the server's connection of c.
func (r *rpcRig) connOf(c *client.Conn) *replica.Conn {
	for _, sc := range r.joined {
		if sc.UserID() == c.UserID() {
			return sc
		}
	}
	r.t.Fatalf("no connection of %s", c.UserID())
	return nil
}

// rawFire is the RPC message of a fire call on e, as a client that does
// not use the client library may send it.
func rawFire(r *rpcRig, e *state.Entity, seq uint32) []byte {
	var enc codec.Encoder
	return session.AppendRPC(nil, &session.RPC{Entity: uint32(e.ID()), RPC: 1, Args: enc.AppendRecord(nil, fireArgs(r.ship, seq, 0))})
}

// waitKicked ticks until the server closed c's connection with code.
func waitKicked(t *testing.T, r *rpcRig, c *client.Conn, code transport.CloseCode) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); ; {
		r.srv.Tick()
		select {
		case <-c.Done():
			if got, reason, _ := c.CloseInfo(); got != code {
				t.Fatalf("closed with %s (%s), want %s", got, reason, code)
			}
			return
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("not kicked, want %s", code)
		}
		time.Sleep(time.Millisecond)
	}
}

// BenchmarkRPCDispatch measures checking, decoding and running one client
// RPC with scalar arguments on the server.
func BenchmarkRPCDispatch(b *testing.B) {
	r := newRPCRig(b, replica.Config{})
	var enc codec.Encoder
	c, err := client.Dial(context.Background(), r.d, r.ln.Addr().String(), r.sch, client.DialConfig{})
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	for len(r.joined) < 1 {
		r.srv.Tick()
		time.Sleep(time.Millisecond)
	}
	sc := r.joined[0]
	e := r.owned[sc]
	msg := session.AppendRPC(nil, &session.RPC{Entity: uint32(e.ID()), RPC: 1, Args: enc.AppendRecord(nil, fireArgs(r.ship, 7, 2.5))})
	b.ReportAllocs()
	for b.Loop() {
		r.srv.CallForTest(sc, msg)
	}
	if len(r.fired) == 0 {
		b.Fatal("the handler never ran")
	}
}

// TestRPCTargets sends server RPCs on one client's entity to its owner, to
// every observer and to one other connection: each reaches exactly the
// clients it names.
func TestRPCTargets(t *testing.T) {
	r := newRPCRig(t, replica.Config{TickRate: 30})
	a, b := r.dial(), r.dial()
	sa, sb := r.joined[0], r.joined[1]
	if a.TickRate() != 30 {
		t.Fatalf("client reports %d ticks per second, the server runs 30", a.TickRate())
	}
	got := map[*client.Conn][]int16{}
	for _, c := range []*client.Conn{a, b} {
		c.HandleRPC(r.ship, 2, func(e *state.Entity, args *state.Record) {
			if e.ID() != r.owned[sa].ID() {
				t.Errorf("hit on entity %v, sent on %v", e.ID(), r.owned[sa].ID())
			}
			got[c] = append(got[c], int16(fieldNum(args, 1)))
		})
	}
	hit := func(damage int64) *state.Record {
		h := state.NewValue(r.ship.RPC(2).Args)
		h.SetNum(0, uint64(damage))
		return h.Record()
	}
	both := func() {
		r.sync(a)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		for b.LastTick() != r.srv.TickNumber() {
			if _, err := b.Wait(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
	both()
	for _, s := range []struct {
		to     replica.RPCTarget
		damage int64
	}{{replica.ToConn(sb), -1}, {replica.ToOwner, -2}, {replica.ToObservers, -3}} {
		if err := r.srv.SendRPC(s.to, r.owned[sa], 2, hit(s.damage)); err != nil {
			t.Fatal(err)
		}
	}
	if err := r.srv.SendRPC(replica.ToConn(nil), r.owned[sa], 2, hit(-4)); !errors.Is(err, replica.ErrNoTarget) {
		t.Fatalf("ToConn(nil): %v, want ErrNoTarget", err)
	}
	unowned, _ := r.srv.Tracker().Spawn(r.ship)
	if err := r.srv.SendRPC(replica.ToOwner, unowned, 2, hit(-5)); !errors.Is(err, replica.ErrNoTarget) {
		t.Fatalf("ToOwner on an entity nobody owns: %v, want ErrNoTarget", err)
	}
	// The RPCs follow their tick on each ordered stream, so once the next
	// tick is applied they have all run.
	both()
	both()
	if !slices.Equal(got[a], []int16{-2, -3}) || !slices.Equal(got[b], []int16{-1, -3}) {
		t.Fatalf("owner received %v, want [-2 -3]; the other client %v, want [-1 -3]", got[a], got[b])
	}
}

// TestRPCAfterOwnershipLoss: a call on an entity the client has just lost
// (sent before it learnt of the loss) is dropped as stale, not a reason to
// close; long after the loss, such a call is the client's fault again. In
// a synctest bubble, so that a call has surely reached the server before
// the ticks that follow.
func TestRPCAfterOwnershipLoss(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRPCRig(t, replica.Config{})
		a := r.dial()
		b := r.dial()
		r.sync(a)
		shipA := r.mine(a)
		var connB *replica.Conn
		for sc := range r.owned {
			if sc.UserID() == b.UserID() {
				connB = sc
			}
		}
		if err := a.CallRPC(shipA, 1, fireArgs(r.ship, 1, 0)); err != nil {
			t.Fatal(err)
		}
		synctest.Wait() // the call waits at the server for the next tick
		r.srv.SetOwner(r.srv.Tracker().Entity(shipA.ID()), connB)
		r.sync(a)
		if st := r.srv.Stats(); st.RPCsStale != 1 || st.Kicked != 0 || len(r.fired) != 0 {
			t.Fatalf("%+v, fired %v: the late call must only be dropped", st, r.fired)
		}
		if shipA.Owned() {
			t.Fatal("client A still thinks it owns the ship")
		}
		// Long after the loss (10 s at 20 ticks a second), the same call
		// closes the connection. The client library no longer sends it.
		for range 10*20 + 1 {
			r.srv.Tick()
		}
		if err := a.CallRPC(shipA, 1, fireArgs(r.ship, 2, 0)); !errors.Is(err, client.ErrNotOwned) {
			t.Fatalf("CallRPC on a ship given away = %v, want ErrNotOwned", err)
		}
		r.srv.CallForTest(r.connOf(a), rawFire(r, shipA, 2))
		r.srv.Tick()
		<-a.Done()
		if code, _, _ := a.CloseInfo(); code != transport.ClosePolicyViolation {
			t.Fatalf("closed with %v, want %v", code, transport.ClosePolicyViolation)
		}
	})
}

// TestRPCBurstHonoured sends exactly Config.RPCBurst calls (the default,
// 600) between two ticks, in virtual time so that none of the limiter's
// tokens refills: every call is dispatched at the next tick, in order, and
// the client stays. One call more in the same instant is dropped by the
// limiter and counted, and the client still stays.
func TestRPCBurstHonoured(t *testing.T) {
	for _, extra := range []int{0, 1} {
		synctest.Test(t, func(t *testing.T) {
			r := newRPCRig(t, replica.Config{})
			// The client's own queue must hold the burst.
			r.d = r.nw.Dialer(transport.Config{SendQueueMessages: 1 << 12})
			c := r.dial()
			r.sync(c)
			me := r.mine(c)
			const burst = 600 // the documented default of Config.RPCBurst
			r.fired = nil
			for i := range burst + extra {
				if err := c.CallRPC(me, 1, fireArgs(r.ship, uint32(i+1), 0)); err != nil {
					t.Fatal(err)
				}
			}
			synctest.Wait() // every call has reached the server's reader
			r.srv.Tick()
			synctest.Wait()
			select {
			case <-c.Done():
				code, reason, _ := c.CloseInfo()
				t.Fatalf("burst of %d calls: client closed: %s %s", burst+extra, code, reason)
			default:
			}
			if len(r.fired) != burst || r.fired[0] != 1 || r.fired[burst-1] != burst {
				t.Fatalf("burst of %d calls: %d dispatched, want the first %d", burst+extra, len(r.fired), burst)
			}
			if st := r.srv.Stats(); st.RPCsDropped != uint64(extra) || st.Kicked != 0 {
				t.Fatalf("burst of %d calls: stats %+v, want %d dropped and none kicked", burst+extra, st, extra)
			}
			r.sync(c)
		})
	}
}

// TestAttackRPCRaw sends, on the wire, RPCs the client library never
// sends, to a server whose class declares a client RPC (fire: a uint32 and
// an unbounded quantized float) and a server RPC (hit), over the in-memory
// transport and WebSocket. Each malformed or forbidden call closes only
// its sender, with the code docs/protocol.md §10.4 gives, before any
// handler runs; a call the handler refuses is counted and the client
// stays; an honest client next to them keeps its session.
func TestAttackRPCRaw(t *testing.T) {
	for _, tr := range []string{"mem", "ws"} {
		t.Run(tr, func(t *testing.T) {
			var r *rpcRig
			if tr == "mem" {
				r = newRPCRig(t, replica.Config{})
			} else {
				ln, err := wstransport.Listen("127.0.0.1:0", wstransport.Config{})
				if err != nil {
					t.Fatal(err)
				}
				r = newRPCRigOn(t, replica.Config{}, ln, wstransport.NewDialer(transport.Config{}))
			}
			honest := r.dial()
			r.sync(honest)
			var enc codec.Encoder
			args := func(seq uint32) []byte { return enc.AppendRecord(nil, fireArgs(r.ship, seq, 1.5)) }
			rpc := func(e *state.Entity, id uint32, a []byte) []byte {
				return session.AppendRPC(nil, &session.RPC{Entity: uint32(e.ID()), RPC: id, Args: a})
			}
			theirs := r.owned[r.connOf(honest)]
			cases := []struct {
				name string
				msg  func(own *state.Entity) []byte
				want transport.CloseCode
			}{
				{"server RPC sent by a client", func(own *state.Entity) []byte {
					return rpc(own, 2, enc.AppendRecord(nil, state.NewValue(r.ship.RPC(2).Args).Record()))
				}, transport.CloseProtocolError},
				{"arguments missing", func(own *state.Entity) []byte { return rpc(own, 1, nil) }, transport.CloseProtocolError},
				{"arguments truncated", func(own *state.Entity) []byte { a := args(7); return rpc(own, 1, a[:len(a)-1]) }, transport.CloseProtocolError},
				{"trailing bytes after the arguments", func(own *state.Entity) []byte { return rpc(own, 1, append(args(7), 0, 0)) }, transport.CloseProtocolError},
				{"a padding bit set", func(own *state.Entity) []byte { a := args(7); a[len(a)-1] |= 0x80; return rpc(own, 1, a) }, transport.CloseProtocolError},
				{"a declared RPC on another client's entity", func(*state.Entity) []byte { return rpc(theirs, 1, args(7)) }, transport.ClosePolicyViolation},
			}
			for i, tc := range cases {
				t.Run(tc.name, func(t *testing.T) {
					c, own := rawRPCJoin(t, r, fmt.Sprint("raw", i))
					fired := len(r.fired)
					if err := c.Send(tc.msg(own)); err != nil {
						t.Fatal(err)
					}
					waitRawKicked(t, r, c, tc.want)
					if len(r.fired) != fired {
						t.Fatal("the handler ran")
					}
					r.sync(honest)
				})
			}
			t.Run("refused by the handler", func(t *testing.T) {
				c, own := rawRPCJoin(t, r, "refused")
				rejected := r.srv.Stats().RPCsRejected
				if err := c.Send(rpc(own, 1, args(0))); err != nil { // seq 0: the handler refuses it
					t.Fatal(err)
				}
				for deadline := time.Now().Add(5 * time.Second); r.srv.Stats().RPCsRejected == rejected; {
					if time.Now().After(deadline) {
						t.Fatal("the call was never refused")
					}
					r.sync(honest)
				}
				select {
				case <-c.Done():
					code, reason, _ := c.CloseInfo()
					t.Fatalf("closed with %s (%s) for a call its handler refused", code, reason)
				default:
				}
			})
			r.sync(honest)
			if got, want := honest.Replica().Len(), len(r.srv.Tracker().AppendEntities(nil)); got != want {
				t.Fatalf("the honest client holds %d entities, the server has %d", got, want)
			}
		})
	}
}

// rawRPCJoin completes a handshake as user without the client library,
// waits until the connection has joined, and returns it with the entity
// it owns. Everything the server sends it is read and dropped.
func rawRPCJoin(t *testing.T, r *rpcRig, user string) (transport.Conn, *state.Entity) {
	t.Helper()
	tc, err := r.d.Dial(context.Background(), r.ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tc.Close(transport.CloseNormal, "test over") })
	tc.Send(session.AppendHello(nil, &session.Hello{Version: session.ProtocolVersion, Descriptor: r.sch.AppendDescriptor(nil), Token: []byte(user)}))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	msg, err := tc.Receive(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if m, err := session.Parse(msg); err != nil {
		t.Fatal(err)
	} else if _, ok := m.(*session.Welcome); !ok {
		t.Fatalf("got %T, want WELCOME", m)
	}
	go func() {
		for {
			if _, err := tc.Receive(context.Background()); err != nil {
				return
			}
		}
	}()
	for deadline := time.Now().Add(5 * time.Second); ; {
		for sc, e := range r.owned {
			if sc.UserID() == user {
				return tc, e
			}
		}
		if time.Now().After(deadline) {
			t.Fatal("raw client did not join")
		}
		r.srv.Tick()
		time.Sleep(time.Millisecond)
	}
}

// waitRawKicked ticks until the server closed tc with code.
func waitRawKicked(t *testing.T, r *rpcRig, tc transport.Conn, code transport.CloseCode) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); ; {
		r.srv.Tick()
		select {
		case <-tc.Done():
			if got, reason, _ := tc.CloseInfo(); got != code {
				t.Fatalf("closed with %s (%s), want %s", got, reason, code)
			}
			return
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("not closed, want %s", code)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestRPCToObserversOnly: an RPC sent ToObservers reaches the clients that
// see the entity and no other (its arguments may say what those others
// must not know), and SendRPC refuses a nil entity and a connection that
// has left.
func TestRPCToObserversOnly(t *testing.T) {
	r := newRPCRig(t, replica.Config{})
	a := r.dial()
	r.sync(a)
	tc, theirs := rawRPCJoinCollect(t, r, "b")
	shipA := r.owned[r.connOf(a)]
	// Into no space: only its owner, a, sees it.
	if err := r.srv.SetSpace(shipA, nil); err != nil {
		t.Fatal(err)
	}
	r.sync(a)
	var hits []int16
	a.HandleRPC(r.ship, 2, func(e *state.Entity, args *state.Record) {
		if e.ID() == shipA.ID() {
			hits = append(hits, int16(fieldNum(args, 1)))
		}
	})
	hit := state.NewValue(r.ship.RPC(2).Args)
	hit.SetNum(0, 7)
	if err := r.srv.SendRPC(replica.ToObservers, shipA, 2, hit.Record()); err != nil {
		t.Fatal(err)
	}
	// And one on b's own ship, which both see, as a marker: once b has it,
	// anything sent before it has arrived.
	if err := r.srv.SendRPC(replica.ToObservers, theirs, 2, hit.Record()); err != nil {
		t.Fatal(err)
	}
	// The RPCs follow their tick on the ordered stream: once the next
	// tick is applied they have run.
	r.sync(a)
	r.sync(a)
	if len(hits) != 1 {
		t.Fatalf("the owner got %d hits on its ship, want 1", len(hits))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for {
		select {
		case m := <-tc:
			if m.Entity == uint32(shipA.ID()) {
				t.Fatal("a client that does not see the entity received its RPC")
			}
			if m.Entity == uint32(theirs.ID()) {
				goto sent
			}
		case <-ctx.Done():
			t.Fatal("the RPC on the entity b sees never arrived")
		}
	}
sent:
	if err := r.srv.SendRPC(replica.ToObservers, nil, 2, hit.Record()); !errors.Is(err, replica.ErrUnknownEntity) {
		t.Errorf("SendRPC on a nil entity = %v, want ErrUnknownEntity", err)
	}
	sa := r.connOf(a)
	a.Close()
	for len(r.srv.Conns()) > 1 {
		r.srv.Tick()
	}
	if err := r.srv.SendRPC(replica.ToConn(sa), theirs, 2, hit.Record()); !errors.Is(err, replica.ErrNoTarget) {
		t.Errorf("SendRPC to a connection that left = %v, want ErrNoTarget", err)
	}
}

// rawRPCJoinCollect is rawRPCJoin that passes on the server RPCs the
// connection receives.
func rawRPCJoinCollect(t *testing.T, r *rpcRig, user string) (<-chan *session.RPC, *state.Entity) {
	t.Helper()
	tc, err := r.d.Dial(context.Background(), r.ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tc.Close(transport.CloseNormal, "test over") })
	tc.Send(session.AppendHello(nil, &session.Hello{Version: session.ProtocolVersion, Descriptor: r.sch.AppendDescriptor(nil), Token: []byte(user)}))
	rpcs := make(chan *session.RPC, 64)
	go func() {
		for skip := 0; ; {
			msg, err := tc.Receive(context.Background())
			if err != nil {
				return
			}
			if skip > 0 { // a segment, which has no type byte
				skip--
				continue
			}
			switch m, _ := session.Parse(msg); m := m.(type) {
			case *session.Tick:
				skip = m.Segments
			case *session.RPC:
				rpcs <- m
			}
		}
	}()
	for deadline := time.Now().Add(5 * time.Second); ; {
		for sc, e := range r.owned {
			if sc.UserID() == user {
				return rpcs, e
			}
		}
		if time.Now().After(deadline) {
			t.Fatal("raw client did not join")
		}
		r.srv.Tick()
		time.Sleep(time.Millisecond)
	}
}

// TestRPCSize checks that the server bounds RPCs in bytes as well as in
// calls: a message over Config.MaxRPCBytes (16 KiB by default) closes its
// sender with CloseMessageTooLarge, over the in-memory transport and
// WebSocket (whose reader stops at the limit), and a large call weighs
// one plus one per whole KiB against Config.RPCRate, so that calls of
// 4 KiB, weighing 5, empty a burst of 10 at the third.
func TestRPCSize(t *testing.T) {
	for _, tr := range []string{"mem", "ws"} {
		t.Run(tr, func(t *testing.T) {
			cfg := replica.Config{RPCRate: 0.001, RPCBurst: 10}
			var r *rpcRig
			if tr == "mem" {
				r = newRPCRig(t, cfg)
			} else {
				ln, err := wstransport.Listen("127.0.0.1:0", wstransport.Config{})
				if err != nil {
					t.Fatal(err)
				}
				r = newRPCRigOn(t, cfg, ln, wstransport.NewDialer(transport.Config{}))
			}
			rpc := func(own *state.Entity, n int) []byte {
				msg := session.AppendRPC(nil, &session.RPC{Entity: uint32(own.ID()), RPC: 1})
				return append(msg, make([]byte, n-len(msg))...) // arguments of zeros: malformed
			}

			c, own := rawRPCJoin(t, r, "at-limit")
			if err := c.Send(rpc(own, replica.DefaultMaxRPCBytes)); err != nil {
				t.Fatal(err)
			}
			// Read, dispatched, and refused for its arguments: not for its
			// size.
			waitRawKicked(t, r, c, transport.CloseProtocolError)

			c, own = rawRPCJoin(t, r, "over")
			if err := c.Send(rpc(own, replica.DefaultMaxRPCBytes+1)); err != nil {
				t.Fatal(err)
			}
			waitRawKicked(t, r, c, transport.CloseMessageTooLarge)

			c, own = rawRPCJoin(t, r, "heavy")
			dropped := r.srv.Stats().RPCsDropped
			for range 3 {
				if err := c.Send(rpc(own, 4<<10)); err != nil {
					t.Fatal(err)
				}
			}
			for deadline := time.Now().Add(5 * time.Second); r.srv.Stats().RPCsDropped == dropped; {
				if time.Now().After(deadline) {
					t.Fatal("three calls of weight 5 against a burst of 10: none dropped")
				}
				time.Sleep(time.Millisecond)
			}
			if got := r.srv.Stats().RPCsDropped - dropped; got != 1 {
				t.Fatalf("%d calls dropped, want 1", got)
			}
			waitRawKicked(t, r, c, transport.CloseProtocolError) // the two let through, at the tick
		})
	}
}

// TestRPCTickShare checks that one tick decodes at most
// Config.MaxRPCBytes of a client's calls (and at least one): the rest run
// at the next ticks, in the order sent, after none of them is dropped,
// and calls sent in the meantime run after them. With a limit of 64 bytes
// and calls of a few bytes, each tick runs the same number of calls, more
// than one and fewer than all.
func TestRPCTickShare(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const limit, first, second = 64, 40, 10
		r := newRPCRig(t, replica.Config{MaxRPCBytes: limit})
		c := r.dial()
		r.sync(c)
		me := r.mine(c)
		r.fired = nil
		send := func(from, n int) {
			for i := range n {
				if err := c.CallRPC(me, 1, fireArgs(r.ship, uint32(from+i), 0)); err != nil {
					t.Fatal(err)
				}
			}
			synctest.Wait() // every call has reached the server's reader
		}
		send(1, first)
		r.srv.Tick()
		per := len(r.fired)
		if per < 2 || per >= first {
			t.Fatalf("the first tick ran %d of %d calls under a %d-byte share, want more than one and fewer than all", per, first, limit)
		}
		send(first+1, second) // queued behind the calls left
		for ticks := 1; len(r.fired) < first+second; ticks++ {
			if ticks > first+second {
				t.Fatalf("%d ticks ran %d of %d calls", ticks, len(r.fired), first+second)
			}
			before := len(r.fired)
			r.srv.Tick()
			if got := len(r.fired) - before; got != per && len(r.fired) < first+second {
				t.Fatalf("tick %d ran %d calls, the first %d", ticks+1, got, per)
			}
		}
		for i, seq := range r.fired {
			if seq != uint32(i+1) {
				t.Fatalf("calls ran in the order %v, want 1 to %d", r.fired, first+second)
			}
		}
		if st := r.srv.Stats(); st.RPCsDropped != 0 || st.Kicked != 0 {
			t.Fatalf("stats %+v: none dropped or kicked wanted", st)
		}
		r.sync(c)
	})
}

// TestRPCOverLimitRefusedByClient checks that the WELCOME states
// Config.MaxRPCBytes and that the Go client refuses a call over it with
// ErrRPCTooLarge, sending nothing (the server would close the connection
// for it), while a call within it runs and the session goes on.
func TestRPCOverLimitRefusedByClient(t *testing.T) {
	const limit = 256
	say := &schema.Struct{Name: "Say", Fields: []*schema.Field{
		{ID: 1, Name: "text", Type: schema.Type{Kind: schema.String}, Vis: schema.VisAll}}}
	talker := &schema.Struct{Name: "Talker", Class: true, ID: 1,
		Fields: []*schema.Field{{ID: 1, Name: "said", Type: schema.Type{Kind: schema.Uint32}, Vis: schema.VisAll}},
		RPCs:   []*schema.RPC{{ID: 1, Name: "say", Dir: schema.ClientToServer, Args: say}}}
	sc, err := schema.New(talker)
	if err != nil {
		t.Fatal(err)
	}
	w := newWorld(t, 1, replica.Config{Schema: sc, MaxRPCBytes: limit})
	defer w.close()
	var heard []int
	w.srv.HandleRPC(talker, 1, func(c *replica.Conn, e *state.Entity, args *state.Record) error {
		heard = append(heard, len(args.Str(0)))
		return nil
	})
	e, err := w.srv.Tracker().Spawn(talker)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.srv.SetOwner(e, w.conns[0]); err != nil {
		t.Fatal(err)
	}
	w.tick(t)
	c := w.clients[0]
	mine := c.Replica().Entity(e.ID())
	call := func(n int) error {
		args := state.NewValue(say)
		args.SetStr(0, strings.Repeat("a", n))
		return c.CallRPC(mine, 1, args.Record())
	}
	if err := call(limit); !errors.Is(err, client.ErrRPCTooLarge) || !strings.Contains(err.Error(), "the server takes 256") {
		t.Fatalf("a call of %d bytes of text under a %d-byte limit: %v, want ErrRPCTooLarge naming the limit", limit, limit, err)
	}
	if err := call(limit - 16); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(5 * time.Second); len(heard) == 0 && time.Now().Before(deadline); {
		w.tick(t)
		time.Sleep(time.Millisecond)
	}
	if len(heard) != 1 || heard[0] != limit-16 {
		t.Fatalf("the server heard calls of %v bytes of text, want the one within the limit", heard)
	}
	select {
	case <-c.Done():
		code, reason, _ := c.CloseInfo()
		t.Fatalf("the client's session ended: %s %s", code, reason)
	default:
	}
}
