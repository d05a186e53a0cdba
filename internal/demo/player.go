package demo

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/replicago/replica"
	"github.com/replicago/replica/client"
	"github.com/replicago/replica/transport"
)

// network is the transport a bot client connects over.
type network uint8

const (
	overWebSocket network = iota
	overQUIC
)

func (n network) String() string {
	if n == overQUIC {
		return "QUIC"
	}
	return "WebSocket"
}

// Callbacks counts the callbacks clients ran, summed over clients.
type Callbacks struct {
	Creates, Destroys   int64 // OnBotCreate, OnBotDestroy
	HP, Targets, Scores int64 // OnBotHpChange, OnBotTargetChange, OnBotScoreChange

	// OnBotInvChange, by kind: ItemsChanged counts item field changes.
	ItemsAdded, ItemsChanged, ItemsRemoved int64
}

// Total returns the number of callbacks.
func (c Callbacks) Total() int64 {
	return c.Creates + c.Destroys + c.HP + c.Targets + c.Scores + c.ItemsAdded + c.ItemsRemoved + c.ItemsChanged
}

func (c *Callbacks) add(o Callbacks) {
	c.Creates += o.Creates
	c.Destroys += o.Destroys
	c.HP += o.HP
	c.Targets += o.Targets
	c.Scores += o.Scores
	c.ItemsAdded += o.ItemsAdded
	c.ItemsRemoved += o.ItemsRemoved
	c.ItemsChanged += o.ItemsChanged
}

// counters are one client's Callbacks, counted by its goroutine and read
// by the tick goroutine for the status line.
type counters struct {
	creates, destroys, hp, targets, scores atomic.Int64
	itemsAdded, itemsChanged, itemsRemoved atomic.Int64
}

func (c *counters) load() Callbacks {
	return Callbacks{
		Creates: c.creates.Load(), Destroys: c.destroys.Load(),
		HP: c.hp.Load(), Targets: c.targets.Load(), Scores: c.scores.Load(),
		ItemsAdded: c.itemsAdded.Load(), ItemsChanged: c.itemsChanged.Load(), ItemsRemoved: c.itemsRemoved.Load(),
	}
}

// A player is one bot client: a client.Conn over a real socket, served by
// a goroutine of its own that waits for ticks, applies them and counts the
// callbacks they fire. The server gives it a bot when it joins; once a
// second the client calls the bot's emote RPC.
type player struct {
	name string // its connect token, which the demo's authenticator takes as the user ID
	net  network
	// partial: the client sees part of the arena (AOI), so a bot it sees
	// may chase one it does not, whose reference does not resolve.
	partial bool

	recv      atomic.Int64  // message bytes received, counted by transport.CountReceived
	joinBytes atomic.Int64  // bytes received until the first tick was applied
	tick      atomic.Uint64 // the last tick applied
	exited    atomic.Bool   // its goroutine has returned
	ev        counters

	// Owned by the player's goroutine. The tick goroutine reads them
	// while the player waits at a verification round, or once the
	// goroutine has returned: both are happens-before edges.
	conn      *client.Conn
	mine      BotView // its own bot, once the replica has it
	emotes    uint32  // emote calls made
	badRef    string  // the first target change that did not resolve
	lastRound *round
	err       error // why the goroutine returned
	closed    closeInfo

	// Owned by the tick goroutine.
	srv      *replica.Conn // its session on the server, from OnJoin
	joinedAt uint64        // the tick it joined in (its full state)
	left     bool          // the server saw it leave
}

// closeInfo is how a connection ended, as its client saw it.
type closeInfo struct {
	code   transport.CloseCode
	reason string
	byPeer bool
}

// A round is one verification: every client that joined at or before
// tick waits at it, once it has applied tick, until it is released.
type round struct {
	tick    uint64
	arrived chan *player // buffered: one send per player
	release chan struct{}
}

// hub coordinates the tick goroutine with the players' goroutines.
type hub struct {
	mu         sync.Mutex
	round      *round
	wake       context.Context // canceled when a round is announced
	cancelWake context.CancelFunc

	base  context.Context // canceled to abandon the players
	exits chan struct{}   // a player's goroutine returned; capacity 1
}

func newHub(base context.Context) *hub {
	h := &hub{base: base, exits: make(chan struct{}, 1)}
	h.wake, h.cancelWake = context.WithCancel(base)
	return h
}

// current returns the round to wait at, if any, and the context to wait
// for ticks with: it is canceled when a newer round is announced.
func (h *hub) current() (*round, context.Context) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.round, h.wake
}

// announce makes r the current round and wakes the players that wait for
// ticks, so that those already at r.tick stop there.
func (h *hub) announce(r *round) {
	h.mu.Lock()
	h.round = r
	cancel := h.cancelWake
	h.wake, h.cancelWake = context.WithCancel(h.base)
	h.mu.Unlock()
	cancel()
}

// run connects the player and applies ticks until the connection ends.
// Whenever the player has applied the tick of the current round, it waits
// there until the round is released: it neither applies ticks nor touches
// its replica while the tick goroutine compares it with the server.
func (p *player) run(h *hub, dial func(p *player) (*client.Conn, error)) {
	defer func() {
		p.exited.Store(true)
		select {
		case h.exits <- struct{}{}:
		default:
		}
	}()
	c, err := dial(p)
	if err != nil {
		p.err = err
		return
	}
	p.conn = c
	p.watch(c.Replica())
	for {
		r, wake := h.current()
		if r != nil && r != p.lastRound && c.LastTick() >= r.tick {
			p.lastRound = r
			r.arrived <- p
			<-r.release
			continue
		}
		_, err := c.Wait(wake)
		if t := c.LastTick(); t != 0 && p.tick.Swap(t) == 0 {
			p.joinBytes.Store(p.recv.Load())
		}
		// Once a second (every 20th tick at the default rate), emote.
		if t := c.LastTick(); err == nil && p.mine.Valid() && t/20 > uint64(p.emotes) {
			if p.mine.Emote(c, p.emotes+1, uint8(t%4)) == nil {
				p.emotes++
			}
		}
		if err != nil {
			if errors.Is(err, context.Canceled) && h.base.Err() == nil {
				continue // a round was announced
			}
			p.err = err
			p.closed.code, p.closed.reason, p.closed.byPeer = c.CloseInfo()
			return
		}
	}
}

// watch registers the callbacks that count what the client sees, some
// typed callbacks of the generated package among them.
func (p *player) watch(r *client.Replica) {
	ev := &p.ev
	OnBotCreate(r, func(BotView) { ev.creates.Add(1) })
	OnBotDestroy(r, func(b BotView) {
		ev.destroys.Add(1)
		if b.Entity() == p.mine.Entity() {
			p.mine = BotView{}
		}
	})
	// The server tells each client which bot it owns: its own, which
	// respawns as a new entity after each death.
	OnBotOwnership(r, func(b BotView, owned bool) {
		switch {
		case owned:
			p.mine = b
		case b.Entity() == p.mine.Entity():
			p.mine = BotView{}
		}
	})
	OnBotHpChange(r, func(BotView, int16, int16) { ev.hp.Add(1) })
	OnBotScoreChange(r, func(BotView, int32, int32) { ev.scores.Add(1) })
	OnBotTargetChange(r, func(b BotView, _, ref replica.Ref) {
		ev.targets.Add(1)
		// The client package promises that references resolve once a tick
		// is applied, which is when callbacks run, if the client has the
		// entity: in a room it has every bot. (In AOI mode, verification
		// checks references against what the server says it sees.)
		if ref != 0 && !p.partial && r.Resolve(ref) == nil && p.badRef == "" {
			p.badRef = fmt.Sprintf("bot %d (%q) changed target to entity %d, which did not resolve", b.ID(), b.Name(), ref)
		}
	})
	OnBotInvChange(r, func(_ BotView, c client.BagChange[uint32, ItemView]) {
		switch c.Kind {
		case client.Added:
			ev.itemsAdded.Add(1)
		case client.Removed:
			ev.itemsRemoved.Add(1)
		default:
			ev.itemsChanged.Add(1)
		}
	})
}
