package replica_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/replicago/replica"
	"github.com/replicago/replica/auth"
	"github.com/replicago/replica/client"
	"github.com/replicago/replica/codec"
	"github.com/replicago/replica/internal/demo"
	"github.com/replicago/replica/schema"
	"github.com/replicago/replica/session"
	"github.com/replicago/replica/transport"
	"github.com/replicago/replica/wstransport"
)

type rig struct {
	t      testing.TB
	srv    *replica.Server
	ln     transport.Listener
	dialer transport.Dialer
	bots   map[*replica.Conn]demo.Bot
	cancel context.CancelFunc
}

// newRig starts a server whose OnJoin gives every client a bot it owns.
func newRig(t testing.TB, ln transport.Listener, d transport.Dialer, cfg replica.Config) *rig {
	t.Helper()
	r := &rig{t: t, ln: ln, dialer: d, bots: map[*replica.Conn]demo.Bot{}}
	cfg.Schema = demo.Schema()
	cfg.OnJoin = func(c *replica.Conn) {
		b, err := demo.SpawnBot(r.srv.Tracker())
		if err != nil {
			t.Error(err)
			return
		}
		b.SetName(c.UserID())
		b.SetHp(100)
		r.srv.SetOwner(b.Entity(), c)
		r.bots[c] = b
	}
	if cfg.Auth == nil {
		cfg.Auth = auth.Anonymous{}
	}
	srv, err := replica.NewServer(cfg)
	if err != nil {
		t.Fatal(err)
	}
	r.srv = srv
	ctx, cancel := context.WithCancel(context.Background())
	r.cancel = cancel
	go srv.Serve(ctx, ln)
	t.Cleanup(func() { cancel(); srv.Close() })
	return r
}

func (r *rig) dial(token string) *client.Conn {
	r.t.Helper()
	c, err := client.Dial(context.Background(), r.dialer, r.ln.Addr().String(), demo.Schema(), client.DialConfig{Token: []byte(token)})
	if err != nil {
		r.t.Fatal(err)
	}
	r.t.Cleanup(func() { c.Close() })
	return c
}

// join dials n clients, player0 to player(n−1), and ticks until they have
// joined.
func (r *rig) join(n int) []*client.Conn {
	r.t.Helper()
	var clients []*client.Conn
	for i := range n {
		clients = append(clients, r.dial(fmt.Sprint("player", i)))
	}
	r.tickUntilJoined(n)
	return clients
}

// tickUntilJoined ticks until the server has n connections.
func (r *rig) tickUntilJoined(n int) {
	r.t.Helper()
	tickUntilJoined(r.t, r.srv, n)
}

// tickUntilJoined ticks srv until it has n connections, for at most 10
// seconds.
func tickUntilJoined(t testing.TB, srv *replica.Server, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for len(srv.Conns()) < n {
		if time.Now().After(deadline) {
			t.Fatalf("only %d of %d clients joined", len(srv.Conns()), n)
		}
		srv.Tick()
		time.Sleep(time.Millisecond)
	}
}

// tickUntilUser ticks until a connection of user has joined (OnJoin ran
// for it).
func (r *rig) tickUntilUser(user string) {
	r.t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		for c := range r.bots {
			if c.UserID() == user {
				return
			}
		}
		if time.Now().After(deadline) {
			r.t.Fatalf("%s did not join", user)
		}
		r.srv.Tick()
		time.Sleep(time.Millisecond)
	}
}

// sync ticks the server and waits until c has applied the tick.
func (r *rig) sync(c *client.Conn) {
	r.t.Helper()
	r.srv.Tick()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for c.LastTick() != r.srv.TickNumber() {
		if _, err := c.Wait(ctx); err != nil {
			r.t.Fatal(err)
		}
	}
}

// ownBot returns the bot OnJoin gave c's user that a session still
// owns (the one of its latest session).
func (r *rig) ownBot(c *client.Conn) demo.Bot {
	for _, b := range r.bots {
		if b.Name() == c.UserID() && r.srv.Owner(b.Entity()) != nil {
			return b
		}
	}
	return demo.Bot{}
}

// leafNamed returns the leaf of the top-level field name of class c.
func leafNamed(c *schema.Struct, name string) *schema.LeafInfo {
	for i := range c.Leaves {
		if l := c.Leaf(i); len(l.Path) == 1 && l.Field.Name == name {
			return l
		}
	}
	panic("no field " + name)
}

// check verifies that client c, owning bot mine, sees every bot exactly as
// its view allows: owner fields of its own bot only, others fields of the
// others only, server fields never.
func check(srv *replica.Server, c *client.Conn, mine demo.Bot) error {
	r := c.Replica()
	ents := srv.Tracker().AppendEntities(nil)
	if r.Len() != len(ents) {
		return fmt.Errorf("client has %d entities, server %d", r.Len(), len(ents))
	}
	for _, e := range ents {
		want, _ := demo.BotOf(e)
		got, ok := demo.BotViewOf(r.Entity(e.ID()))
		if !ok {
			return fmt.Errorf("entity %#x missing", uint32(e.ID()))
		}
		own := e == mine.Entity()
		switch {
		case got.X() != want.X() || got.Hp() != want.Hp() || got.Name() != want.Name():
			return fmt.Errorf("bot %s: shared fields differ", want.Name())
		case !got.Entity().IsZero(leafNamed(e.Class(), "mode")): // BotView has no getter for it
			return fmt.Errorf("bot %s: server-only field leaked", want.Name())
		case own && (got.Score() != want.Score() || got.Bounty() != 0 || got.Inv().Len() != want.Inv().Len()):
			return fmt.Errorf("own bot: score %d/%d bounty %d inv %d/%d", got.Score(), want.Score(), got.Bounty(), got.Inv().Len(), want.Inv().Len())
		case !own && (got.Score() != 0 || got.Bounty() != want.Bounty() || got.Inv().Len() != 0):
			return fmt.Errorf("bot %s: owner fields leaked or others fields missing", want.Name())
		}
	}
	return nil
}

func runSession(t *testing.T, ln transport.Listener, d transport.Dialer) {
	r := newRig(t, ln, d, replica.Config{})
	clients := r.join(3)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for tick := 0; tick < 30; tick++ {
		i := 0
		for _, b := range r.bots {
			b.SetX(float32(tick*10 + i))
			b.SetScore(int32(tick * i))
			b.SetBounty(int16(tick + i))
			b.SetMode(uint8(tick))
			if tick%5 == i {
				it := demo.NewItem()
				it.SetCount(int16(tick))
				b.Inv().Add(uint32(tick), it)
			}
			i++
		}
		r.srv.Tick()
		// Every client gets every tick; wait until each has applied it.
		for _, c := range clients {
			for c.Replica().Len() < 3 {
				if _, err := c.Wait(ctx); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	// Drain to the last tick, then compare views.
	for i, c := range clients {
		for c.LastTick() < r.srv.TickNumber() {
			if _, err := c.Wait(ctx); err != nil {
				t.Fatalf("client %d at tick %d of %d: %v", i, c.LastTick(), r.srv.TickNumber(), err)
			}
		}
		var mine demo.Bot
		for _, b := range r.bots {
			if b.Name() == c.UserID() {
				mine = b
			}
		}
		if err := check(r.srv, c, mine); err != nil {
			t.Errorf("client %d (%s): %v", i, c.UserID(), err)
		}
	}
}

// TestSessionMem runs three clients against a server over the in-memory
// transport: each must see exactly its view of every bot.
func TestSessionMem(t *testing.T) {
	nw := transport.NewMemNetwork()
	ln, err := nw.Listen("", transport.Config{})
	if err != nil {
		t.Fatal(err)
	}
	runSession(t, ln, nw.Dialer(transport.Config{}))
}

// TestSessionWebSocket does the same over real WebSocket connections.
func TestSessionWebSocket(t *testing.T) {
	ln, err := wstransport.Listen("127.0.0.1:0", wstransport.Config{})
	if err != nil {
		t.Fatal(err)
	}
	runSession(t, ln, wstransport.NewDialer(transport.Config{}))
}

// rawConn dials without the client library, to misbehave.
func rawConn(t testing.TB, r *rig) transport.Conn {
	t.Helper()
	tc, err := r.dialer.Dial(context.Background(), r.ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	return tc
}

func waitClosed(t *testing.T, tc transport.Conn, want transport.CloseCode) {
	t.Helper()
	select {
	case <-tc.Done():
	case <-time.After(5 * time.Second):
		t.Fatalf("connection still open, want it closed with %s", want)
	}
	if code, reason, _ := tc.CloseInfo(); code != want {
		t.Fatalf("closed with %s (%q), want %s", code, reason, want)
	}
}

func memRig(t testing.TB, cfg replica.Config) *rig {
	nw := transport.NewMemNetwork()
	ln, err := nw.Listen("", transport.Config{})
	if err != nil {
		t.Fatal(err)
	}
	return newRig(t, ln, nw.Dialer(transport.Config{}), cfg)
}

func TestRefusals(t *testing.T) {
	t.Run("incompatible schema", func(t *testing.T) {
		r := memRig(t, replica.Config{})
		// A client whose bot class has hp as a string.
		bad := &schema.Struct{Name: "Bot", Class: true, ID: demo.Schema().Classes[0].ID, Fields: []*schema.Field{
			{ID: 4, Name: "hp", Type: schema.Type{Kind: schema.String}, Vis: schema.VisAll},
		}}
		s, err := schema.New(bad)
		if err != nil {
			t.Fatal(err)
		}
		_, err = client.Dial(context.Background(), r.dialer, r.ln.Addr().String(), s, client.DialConfig{})
		var refused *client.RefusedError
		if !errors.As(err, &refused) || refused.Code != transport.CloseIncompatible {
			t.Fatalf("err = %v, want a refusal with %s", err, transport.CloseIncompatible)
		}
		// Which side has which type, and what to do, whoever reads it.
		for _, want := range []string{"field hp (ID 4): type string in the client", "in the server", "build the client from the server's schema"} {
			if !strings.Contains(refused.Message, want) {
				t.Errorf("refusal %q does not say %q", refused.Message, want)
			}
		}
	})
	t.Run("protocol version", func(t *testing.T) {
		r := memRig(t, replica.Config{})
		tc := rawConn(t, r)
		tc.Send(session.AppendHello(nil, &session.Hello{Version: 99, Descriptor: demo.Schema().AppendDescriptor(nil)}))
		waitClosed(t, tc, transport.CloseIncompatible)
		if _, reason, _ := tc.CloseInfo(); reason != fmt.Sprintf("protocol version 99, server speaks %d", session.ProtocolVersion) {
			t.Fatalf("reason %q", reason)
		}
	})
	t.Run("client limits", func(t *testing.T) {
		// A client that would refuse nesting the server may send.
		r := memRig(t, replica.Config{ClientLimits: codec.Limits{MaxDepth: 12}})
		_, err := client.Dial(context.Background(), r.dialer, r.ln.Addr().String(), demo.Schema(),
			client.DialConfig{Limits: codec.Limits{MaxDepth: 8}})
		var refused *client.RefusedError
		if !errors.As(err, &refused) || refused.Code != transport.CloseIncompatible ||
			refused.Message != "client limits: MaxDepth is 8, below 12 (the server's Config.ClientLimits)" {
			t.Fatalf("err = %v, want a refusal naming MaxDepth", err)
		}
		// At or above the server's, and with the defaults elsewhere, it joins.
		c, err := client.Dial(context.Background(), r.dialer, r.ln.Addr().String(), demo.Schema(),
			client.DialConfig{Limits: codec.Limits{MaxDepth: 12}})
		if err != nil {
			t.Fatal(err)
		}
		c.Close()
	})
	t.Run("authentication", func(t *testing.T) {
		r := memRig(t, replica.Config{Auth: tokenAuth{"secret"}})
		_, err := client.Dial(context.Background(), r.dialer, r.ln.Addr().String(), demo.Schema(), client.DialConfig{Token: []byte("guess")})
		var refused *client.RefusedError
		if !errors.As(err, &refused) || refused.Code != transport.CloseAuthFailed {
			t.Fatalf("err = %v, want a refusal with %s", err, transport.CloseAuthFailed)
		}
		if !client.ErrRefused(err) || client.ErrRefused(transport.ErrClosed) {
			t.Fatalf("ErrRefused(%v) = %v, ErrRefused(ErrClosed) = %v", err, client.ErrRefused(err), client.ErrRefused(transport.ErrClosed))
		}
		if c := r.dial("secret"); c.UserID() != "user-secret" {
			t.Fatalf("user %q", c.UserID())
		}
	})
	t.Run("handshake timeout", func(t *testing.T) {
		r := memRig(t, replica.Config{HandshakeTimeout: 100 * time.Millisecond})
		waitClosed(t, rawConn(t, r), transport.CloseHandshakeTimeout)
	})
	t.Run("client sends state", func(t *testing.T) {
		r := memRig(t, replica.Config{})
		good := r.dial("a")
		tc := rawConn(t, r)
		tc.Send(session.AppendHello(nil, &session.Hello{Version: session.ProtocolVersion, Descriptor: demo.Schema().AppendDescriptor(nil)}))
		if _, err := tc.Receive(context.Background()); err != nil { // WELCOME
			t.Fatal(err)
		}
		r.tickUntilJoined(2)
		// A tick-like message from a client is refused: clients send no state.
		tc.Send(session.AppendTick(nil, &session.Tick{Tick: 1, Segments: 1}))
		waitClosed(t, tc, transport.CloseProtocolError)
		// The well-behaved client keeps receiving ticks.
		r.srv.Tick()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if _, err := good.Wait(ctx); err != nil {
			t.Fatalf("the other client stopped receiving: %v", err)
		}
	})
}

type tokenAuth struct{ secret string }

func (a tokenAuth) Authenticate(_ context.Context, token []byte) (auth.Identity, error) {
	if string(token) != a.secret {
		return auth.Identity{}, errors.New("bad token")
	}
	return auth.Identity{UserID: "user-" + string(token)}, nil
}

// firstTick joins as user over a raw connection and returns the first
// TICK the server sends it, whose segments are the full state.
func firstTick(t *testing.T, r *rig, user string) *session.Tick {
	t.Helper()
	tc := dialRaw(t, r)
	hello(t, tc, user)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for {
		r.srv.Tick()
		msg, err := tc.Receive(ctx)
		if err != nil {
			t.Fatalf("no TICK: %v", err)
		}
		if m, err := session.Parse(msg); err == nil {
			if tick, ok := m.(*session.Tick); ok {
				return tick
			}
		}
	}
}

// TestSplitSegments checks that a full state and a tick naming more
// entities than SegmentEntities arrive as several segments that clients
// apply together, and that a tick needing more segments than a TICK may
// carry closes the connection instead of being sent.
func TestSplitSegments(t *testing.T) {
	r := memRig(t, replica.Config{SegmentEntities: 3})
	var extra []demo.Bot
	for i := range 10 {
		b, err := demo.SpawnBot(r.srv.Tracker())
		if err != nil {
			t.Fatal(err)
		}
		b.SetName(fmt.Sprint("npc", i))
		b.SetBounty(int16(i))
		extra = append(extra, b)
	}
	clients := r.join(3)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for tick := 1; tick <= 5; tick++ {
		for _, b := range append(slices.Collect(maps.Values(r.bots)), extra...) {
			b.SetX(float32(tick))
			b.SetScore(int32(tick))
			b.SetBounty(int16(tick))
		}
		r.srv.Tick()
		for _, c := range clients {
			for c.Replica().Len() < 13 || c.LastTick() < r.srv.TickNumber() {
				if _, err := c.Wait(ctx); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	for _, c := range clients {
		var mine demo.Bot
		for conn, b := range r.bots {
			if conn.UserID() == c.UserID() {
				mine = b
			}
		}
		if err := check(r.srv, c, mine); err != nil {
			t.Errorf("%s: %v", c.UserID(), err)
		}
	}
	// 14 entities, 3 a segment: 5 PartAll segments, then PartOthers and
	// PartOwner ones.
	if tick := firstTick(t, r, "late"); tick.Segments < 6 {
		t.Errorf("full state of 14 entities in %d segments, want them split 3 a segment", tick.Segments)
	}

	// One entity a segment: the full state of 20 needs more segments than
	// a TICK carries.
	small := memRig(t, replica.Config{SegmentEntities: 1})
	for range 20 {
		if _, err := demo.SpawnBot(small.srv.Tracker()); err != nil {
			t.Fatal(err)
		}
	}
	tc := dialRaw(t, small)
	hello(t, tc, "crowded")
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		small.srv.Tick()
		select {
		case <-tc.Done():
			deadline = time.Time{}
		default:
		}
	}
	waitClosed(t, tc, transport.CloseInternalError)
}

// TestSplitSegmentBytes checks that a segment over the size limit is split
// in halves, down to one entity, whatever the entity count allows.
func TestSplitSegmentBytes(t *testing.T) {
	// Segments are halved while over a quarter of the clients' limit.
	r := memRig(t, replica.Config{ClientLimits: codec.Limits{MaxSegmentBytes: 1200}})
	for i := range 6 {
		b, err := demo.SpawnBot(r.srv.Tracker())
		if err != nil {
			t.Fatal(err)
		}
		b.SetName(strings.Repeat(fmt.Sprint(i), 200)) // one bot is a segment
	}
	tick := firstTick(t, r, "late")
	// Six big bots, split by halves down to one a segment; the joiner's
	// small one shares one of them.
	if tick.Segments < 6 {
		t.Errorf("full state of seven bots, six of 200 bytes, in %d segments of at most 300 bytes", tick.Segments)
	}
	c := r.dial("player")
	r.tickUntilJoined(2)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for c.Replica().Len() < 8 {
		if _, err := c.Wait(ctx); err != nil {
			t.Fatal(err)
		}
	}
	for conn, b := range r.bots {
		if conn.UserID() == "player" {
			if err := check(r.srv, c, b); err != nil {
				t.Error(err)
			}
		}
	}
}

// TestSplitSegmentValues checks that a segment holding more values than a
// quarter of the clients' MaxValues is split: a client whose MaxValues is
// below one tick's worth of owned inventories still receives every item.
func TestSplitSegmentValues(t *testing.T) {
	lim := codec.Limits{MaxValues: 80}
	r := memRig(t, replica.Config{ClientLimits: lim})
	c, err := client.Dial(context.Background(), r.dialer, r.ln.Addr().String(), demo.Schema(),
		client.DialConfig{Token: []byte("hoarder"), Limits: lim})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	r.tickUntilJoined(1)
	conn := r.srv.Conns()[0]
	// Six owned bots of eight items each: 16 values a bot (the bag's
	// count, then a record per item), 96 in all, over the client's 80.
	for range 6 {
		b, err := demo.SpawnBot(r.srv.Tracker())
		if err != nil {
			t.Fatal(err)
		}
		r.srv.SetOwner(b.Entity(), conn)
		for k := range 8 {
			it := demo.NewItem()
			it.SetCount(int16(k + 1))
			b.Inv().Add(uint32(k), it)
		}
	}
	r.srv.Tick()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for c.LastTick() < r.srv.TickNumber() {
		if _, err := c.Wait(ctx); err != nil {
			t.Fatalf("the client refused a tick: %v", err)
		}
	}
	items := 0
	for _, e := range c.Replica().Entities(nil) {
		if b, ok := demo.BotViewOf(e); ok {
			items += b.Inv().Len()
		}
	}
	if items != 48 {
		t.Fatalf("the client holds %d items, want 48", items)
	}
}
