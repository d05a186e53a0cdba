package replica

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/replicago/replica/auth"
	"github.com/replicago/replica/codec"
	"github.com/replicago/replica/schema"
	"github.com/replicago/replica/session"
	"github.com/replicago/replica/state"
	"github.com/replicago/replica/store"
	"github.com/replicago/replica/transport"
)

// Config configures a Server. Schema is required; the zero value of every
// other field selects its default.
type Config struct {
	// Schema holds the replicated classes: the Schema() of a generated
	// package.
	Schema *schema.Schema
	// TickRate is the number of ticks per second Run drives, at most
	// MaxTickRate. The default is 20.
	TickRate int
	// Auth authenticates clients from the token of their HELLO. It is
	// required: set an auth.HMAC (signed, expiring tokens) in production,
	// or auth.Anonymous{} to accept every client in development. Serve
	// logs a warning when the server runs with auth.Anonymous on a
	// listener whose address is not loopback. A client refused by Auth is
	// told a generic reason; the authenticator's error is logged.
	Auth auth.Authenticator
	// HandshakeTimeout bounds the time from accepting a connection to
	// receiving its HELLO. The default is 5 seconds.
	HandshakeTimeout time.Duration
	// MaxHelloBytes bounds the first message a connection may send, its
	// HELLO, before it is authenticated: the transport reads no more of a
	// larger one and closes the connection with CloseMessageTooLarge
	// (through transport.ReadLimiter, which the transports of this module
	// implement). After the handshake the transport's MaxMessageSize
	// applies again. The default is MaxDescriptorBytes plus the largest
	// token (session.MaxToken, 4096 bytes) plus 1 KiB for the rest of the
	// HELLO.
	MaxHelloBytes int
	// MaxHandshakes bounds the connections in their handshake at once, and
	// MaxHandshakesPerAddr those from one source address (IP); a
	// connection over either is refused at once with CloseServerBusy. The
	// defaults are 512 and 32: handshakes take a round trip or two, so
	// only a flood of slow ones comes near. Behind a proxy that does not
	// pass the client's address on, every client has the proxy's: raise
	// MaxHandshakesPerAddr to MaxHandshakes there.
	MaxHandshakes        int
	MaxHandshakesPerAddr int
	// IdleTimeout closes a connection that sends nothing for this long.
	// The default is 15 seconds; the server pings every IdleTimeout/3.
	IdleTimeout time.Duration
	// Logger receives the server's events: errors (a write clients would
	// refuse, a tick not sent, persistence failing), warnings (a client
	// kicked, auth.Anonymous on a public address), connections joining,
	// leaving and refused at Info, rejected RPCs at Debug. Nil passes
	// warnings and errors to slog.Default and drops the rest; give
	// slog.New(slog.DiscardHandler) to drop everything.
	Logger *slog.Logger
	// OnJoin runs on the tick goroutine when a connection joins, before it
	// receives the full state: spawn its avatar and SetOwner here.
	OnJoin func(*Conn)
	// OnLeave runs on the tick goroutine after a connection closed; the
	// entities it owned are still there and no longer owned.
	OnLeave func(*Conn)
	// OnDuplicate decides what happens when a user connects while a
	// session of the same user ID is open (old is the most recent such
	// session, new the one connecting): see SessionPolicy. It runs on the
	// new session's handshake goroutine, before the session is welcomed,
	// one call at a time. If nil, the new session replaces the old
	// (ReplaceOld).
	OnDuplicate func(old, new *Conn) SessionPolicy
	// RPCRate and RPCBurst bound the RPCs one client may send: RPCRate per
	// second on average, RPCBurst at once, a call weighing one plus one
	// per whole KiB of its message (a 3,000-byte call counts as three),
	// so that what the tick goroutine decodes for a client is bounded in
	// bytes as well as in calls. Calls over the limit are
	// dropped (counted in Stats.RPCsDropped), and a client that keeps
	// flooding is closed with ClosePolicyViolation within about two
	// seconds. The defaults are 60 per second and a burst of ten seconds'
	// worth: calls made at an honest rate arrive bunched after a network
	// stall, and must not be dropped for it. RPCBurst calls arriving at
	// once, between two ticks, are all dispatched at the next tick as long
	// as they fit in MaxRPCBytes (see there); the call after them is
	// dropped, not a reason to close the connection.
	// Calls wait for the tick in a queue of RPCBurst plus one second's
	// RPCRate; a call that finds it full (the tick goroutine has not
	// dispatched for about a second) is dropped too.
	RPCRate  float64
	RPCBurst int
	// MaxRPCBytes is the largest message a client may send once it has
	// joined: an RPC, its header and arguments. A larger one closes the
	// connection with CloseMessageTooLarge, before it is buffered whole
	// where the transport allows (transport.ReadLimiter). The default is
	// 16 KiB, room for a chat line or a game's input many times over;
	// raise it for RPCs that carry more, up to the transport's
	// MaxMessageSize. It is also what one tick decodes of a client's
	// calls: calls beyond MaxRPCBytes in all (the first call always
	// runs) wait, in order, for the next ticks, so that a client sending
	// a burst of large calls adds at most one large call's decoding to
	// each tick.
	MaxRPCBytes int
	// MaxDescriptorBytes bounds the schema descriptor a client may send in
	// its HELLO; larger ones are refused before they are decoded. The
	// default is four times the server's own, and at least 64 KiB.
	MaxDescriptorBytes int
	// LagMessages and LagBytes are the backlog (what the connection has
	// queued and not yet written) past which a client counts as fallen
	// behind: the server stops sending it ticks, holds its RPCs, and once
	// the backlog has drained to an eighth sends RESYNC and the full
	// state. Keep them under the transport's SendQueueMessages and
	// SendQueueBytes, or the queue overflows first and the client is
	// dropped as a slow consumer. The defaults are 512 messages and 1 MiB,
	// half and a quarter of the transports' defaults.
	LagMessages int
	LagBytes    int
	// LagTimeout drops, as a slow consumer (CloseSlowConsumer), a paused
	// client whose backlog has not shrunk for this long: one that has
	// stopped reading, as opposed to one draining slowly over a poor
	// network. Progress is counted in bytes the peer actually took: the
	// backlog in bytes (transport.Backlogger, which counts the message
	// being written and, on WebSocket, what the kernel's send queue holds)
	// must reach a new low. A client that keeps sending PINGs or RPCs but
	// does not read is dropped all the same. The default is 30 seconds.
	LagTimeout time.Duration
	// LoginGrace is how long a user's login session outlives its
	// connection. A connection of the same user that takes an entity
	// (SetOwner) while the connection that owned it last is open, or
	// within LoginGrace after it closed, continues that login: a reconnect
	// or a second device. Later it is a new login, and the entity's
	// session fields (life=session, the default) reset. The default is 30
	// seconds; a negative value makes every new connection a new login.
	LoginGrace time.Duration
	// ResumeWindow is how long after a session ends its client may resume
	// it (docs/protocol.md §10.5): a client that reconnects within it
	// (client.Conn.Reconnect) gets one catch-up tick with what changed
	// while it was away instead of the full state, and continues its
	// login. The server keeps, per entity and leaf, the last tick that
	// changed it, and, per session that left within the window, a few
	// bytes. The default is 20 seconds; a negative value turns resuming
	// off.
	ResumeWindow time.Duration
	// ClientLimits are the decoder limits the server's clients apply;
	// zero fields select the clients' defaults (codec.Limits). A server
	// whose clients change theirs sets the same here: a client whose
	// limits, sent in its HELLO, are below these is refused at the
	// handshake. The server keeps what it sends within them:
	//   - NewServer fails if a field clients see is nested deeper than
	//     MaxDepth allows;
	//   - the tracker refuses writes to such fields that would store a
	//     string or a container over them, or nest deeper than MaxDepth
	//     (state.Limits): sent, such a value would make every client
	//     refuse its ticks. Refusals are logged at the tick and counted in
	//     Stats.Refused. Server-only fields are not limited;
	//   - a tick or full state is split into several segments, which the
	//     client applies together, each naming at most SegmentEntities
	//     entities and halved while over a quarter of MaxSegmentBytes or
	//     of MaxValues.
	ClientLimits codec.Limits
	// SegmentEntities bounds the entities one segment names. The default
	// is a quarter of ClientLimits.MaxEntities: 16,384. A TICK carries at
	// most session.MaxSegments segments.
	SegmentEntities int
	// Interest, if set, has the last word on whether client c sees entity
	// e by distance in an AOI space: it runs whenever the server
	// re-evaluates the pair (e or c's viewpoint moved, either changed
	// space, e's radius changed, Reconsider(e)) and e is within range;
	// false hides e. Ownership, groups and always-relevant entities do
	// not ask it. It runs on the tick goroutine.
	Interest func(c *Conn, e *state.Entity) bool
	// MaxJoinsPerTick bounds the handshaken connections one tick admits:
	// runs OnJoin for and sends the full state. The others wait, first
	// come first served, for the next ticks; they have their WELCOME and
	// simply receive their first TICK later. A tick encodes the full
	// state once for all its joiners, but each joiner still costs its own
	// sends, and the others-fields of the entities the other joiners of
	// its tick own: bounding them keeps a storm of joins from stalling
	// the tick of the clients already in. The default is 200 a second,
	// at most 10 a tick: 10 at 20 Hz, 3 at 60 Hz. It keeps a tick's work
	// well under the Go scheduler's 10 ms time slice: a tick goroutine
	// preempted in a storm waits behind every runnable goroutine (in the
	// join-storm benchmark, with 32 joins a tick, up to 2.6 s). Waiting
	// connections stay open however long the queue: the server answers
	// their pings.
	MaxJoinsPerTick int
	// Budget bounds, in bytes per second, what each connection is sent of
	// the entities it sees beyond its room (in an AOI space, through
	// groups, always relevant): when a tick's changes and entering
	// entities would take a client over, the entities of lowest priority
	// wait for later ticks (see Server.SetPriority), and are then sent
	// whole, with their latest values. A client may save up two ticks'
	// worth. The entities it owns, its room's changes and full states
	// (on join or resync) are never held back, but count against it. The
	// default is 64 KiB/s; negative means no budget. Server.SetBudget sets
	// one connection's.
	Budget int
	// Store, if set, saves the persist fields (life=persist) of the
	// entities bound to a key (Server.Bind, Server.Load) behind the tick;
	// StoreWriter configures the write-behind (its Store and Codec are the
	// server's; the flush interval defaults to 1 second). Close writes
	// everything and does not close the Store. See docs/persistence.md.
	Store       store.Store
	StoreWriter store.WriterConfig
}

// DefaultBudget is Config.Budget's default, in bytes per second.
const DefaultBudget = 64 << 10

// MaxTickRate is the highest Config.TickRate.
const MaxTickRate = 1000

func (c Config) withDefaults() Config {
	if c.Budget == 0 {
		c.Budget = DefaultBudget
	}
	if c.TickRate <= 0 {
		c.TickRate = 20
	}
	if c.HandshakeTimeout <= 0 {
		c.HandshakeTimeout = 5 * time.Second
	}
	if c.IdleTimeout <= 0 {
		c.IdleTimeout = 15 * time.Second
	}
	if c.MaxHandshakes <= 0 {
		c.MaxHandshakes = transport.DefaultMaxHandshakes
	}
	if c.MaxHandshakesPerAddr <= 0 {
		c.MaxHandshakesPerAddr = transport.DefaultMaxHandshakesPerAddr
	}
	if c.Logger == nil {
		c.Logger = DefaultLogger()
	}
	if c.MaxRPCBytes <= 0 {
		c.MaxRPCBytes = DefaultMaxRPCBytes
	}
	if c.RPCRate <= 0 {
		c.RPCRate = 60
	}
	if c.LagMessages <= 0 {
		c.LagMessages = 512
	}
	if c.LagBytes <= 0 {
		c.LagBytes = 1 << 20
	}
	if c.LagTimeout <= 0 {
		c.LagTimeout = 30 * time.Second
	}
	if c.LoginGrace == 0 {
		c.LoginGrace = 30 * time.Second
	}
	if c.ResumeWindow == 0 {
		c.ResumeWindow = 20 * time.Second
	}
	if c.RPCBurst < 2 {
		c.RPCBurst = int(10 * c.RPCRate)
	}
	c.ClientLimits = c.ClientLimits.WithDefaults()
	if c.SegmentEntities <= 0 {
		c.SegmentEntities = max(1, c.ClientLimits.MaxEntities/4)
	}
	if c.MaxJoinsPerTick <= 0 {
		c.MaxJoinsPerTick = max(1, min(10, 200/c.TickRate))
	}
	return c
}

// ErrServerClosed is returned by Serve after Close.
var ErrServerClosed = errors.New("replica: server closed")

// A Server owns the world of one space: its entities, the connections that
// watch them and the tick that sends every change. Game code mutates
// entities on the tick goroutine (in the function given to Run, or between
// calls to Tick); connections are accepted and served on goroutines of
// their own, and join or leave at the next tick.
type Server struct {
	cfg     Config
	tr      *state.Tracker
	enc     codec.Encoder
	desc    []byte // the schema descriptor sent to clients
	tick    uint64
	tickNow atomic.Uint64 // tick, for the handshakes
	session atomic.Uint64
	kicked  atomic.Uint64

	rpcsDropped atomic.Uint64

	mu          sync.Mutex
	claimMu     sync.Mutex                    // serialises claim
	users       map[string][]*Conn            // the sessions of each user, handshaken or joined, oldest first
	logouts     map[uint64]uint64             // connection ID → tick it left, within Config.LoginGrace
	logoutOrder []logout                      // the entries of logouts in the order they were made
	tickets     map[session.Ticket]*resumable // the sessions a client may resume (resume.go)
	joining     []*Conn
	handshaking map[transport.Conn]bool
	shakes      transport.HandshakeCaps // handshaking's count, in all and by source address
	closed      bool
	lns         []transport.Listener

	conns       []*Conn                 // joined; owned by the tick goroutine
	owners      []owner                 // by entity slot
	moves       map[*state.Entity]*Conn // entities whose owner changed this tick: their owner before
	seg         [][]byte                // one connection's segments of a tick
	scratch     []byte
	fullEncoded uint64   // entities encoded into full states, for the tests
	fullSeg     [][]byte // one connection's segments of the full state
	handlers    map[rpcKey]RPCHandler
	lastPing    time.Time
	persist     *persister // nil without Config.Store
	hist        history    // the last tick that changed each leaf, for resumes (resume.go)
	departures  []departure
	rpcEnc      codec.Encoder
	stats       Stats

	// Interest management (interest.go).
	defSpace    *Space
	ients       []ient // by entity slot
	pos         posTable
	dirtyEnts   []state.ID
	dirtyViews  []*Conn
	bandDists   []float64 // the distances of every class's level-of-detail bands, each once (evalMove)
	stamp       uint64
	always      []state.ID
	activeRooms []*Space
	dcs         state.Changeset // destructions, for destroys
	dch         []state.Change
	pairCS      state.Changeset             // this tick's changes of entities seen beyond rooms
	enterEnts   []*state.Entity             // this tick's entities entering some client's pairs
	enterNeed   []uint8                     // per enterEnts: needOwner, needOthers, who gets its full state
	enterOwn    []*state.Entity             // enterEnts, nil where its owner does not get it (batchPairs)
	enterOthers []*state.Entity             // enterEnts, nil where only its owner gets it
	pairDelta   [codec.NumParts]codec.Batch // pairCS, by partition (and band, see bands)
	pairFull    [codec.NumParts]codec.Batch // enterEnts, by partition (and band)
	setEnts     []*state.Entity             // this tick's entities some client's budget held back and may now get whole
	setAt       map[state.ID]int32          // each of setEnts' index there
	pairSet     [codec.NumParts]codec.Batch // setEnts, by partition (and band)
	cands       []candidate                 // budgetPairs' scratch
	keepU       []pairUpd
	boundTick   uint64 // the tick maxFull and maxDelta are of
	maxFull     int    // bits: the largest pieces of the pair full states, over the partitions, and 16
	maxDelta    int    // and of the pair changes
	keepR       []raise
	asm         codec.Assembler
	heldBuf     []uint32             // sendFull: the slots a client holds
	arena       codec.Arena          // this and later ticks' messages for the clients
	parts       [codec.NumParts]bool // whether some class has a field in each partition
	bands       int                  // the most level-of-detail bands of a class: pairs are encoded by band if > 0
	pairParts   []codec.Part         // the partitions pairs are encoded in: those some class has a field in, by band if bands > 0
	hdr         []byte               // a TICK header being built
	entBuf      []*state.Entity

	// The arrays of the pair lists (interest.go, slab.go): the entities'
	// observers, the clients' pairs, and their lists of a tick, which fit
	// the pairs.
	obsSlab  slab[obsRef]
	pairSlab slab[pairRef]
	updBuf   []pairUpd // the clients' view.upd of a tick, one run each
	entSlab  slab[*state.Entity]
	// The arrays of the lists of levels of detail and budgets a client
	// keeps, sized with its pairs (addPair).
	entStamp  uint64 // the stamp of this tick's entity evaluations (updateInterest)
	idSlab    slab[state.ID]
	raiseSlab slab[raise]
	lvlSlab   slab[uint8]
	levelSlab slab[session.Level]

	warmEnts []*cellEnt // warm's and settleCells' scratch
	crossing []state.ID // placed entities moved to another cell this tick (moveCell)
	warmSum  uintptr    // what warm read, kept so that the reads stay

	// The arena's reuse (lag.go).
	held     bool             // a transport holds messages of earlier ticks
	gone     []transport.Conn // of connections that left in this tick
	draining []transport.Conn // and in the previous one
}

// Stats counts what a server has done since it started. Read it on the
// tick goroutine.
type Stats struct {
	RPCs         uint64 // client RPCs handled
	RPCsRejected uint64 // refused by their handler or without one
	RPCsStale    uint64 // aimed at an entity that no longer exists
	RPCsSent     uint64 // server RPCs queued for clients
	RPCsDropped  uint64 // client RPCs dropped over the rate limit (Config.RPCRate) or a full queue
	Kicked       uint64 // connections closed for misbehaving
	Paused       uint64 // times a client fell behind and was paused
	Resyncs      uint64 // paused clients brought back with the full state
	Refused      uint64 // writes over ClientLimits the tracker refused (state.Limits)
	Deferred     uint64 // entity sends a connection's budget put off to a later tick (Config.Budget)
	// Resumes counts resumed sessions sent a catch-up tick
	// (Config.ResumeWindow); ResumeFallbacks those sent the full state
	// instead, because it was smaller.
	Resumes         uint64
	ResumeFallbacks uint64
	// ResumeBytes counts the bytes resumed sessions were sent for their
	// first tick (a TICK and its segments; a RESYNC before a full
	// state), ResumeFullBytes what the full state would have been:
	// what catching up saved.
	ResumeBytes     uint64
	ResumeFullBytes uint64

	// Persist counts the write-behind of Config.Store: entities pending,
	// failed flushes, the last error, ticks over the backlog bound.
	Persist store.WriterStats
}

// NewServer returns a server for cfg.Schema.
func NewServer(cfg Config) (*Server, error) {
	if cfg.Schema == nil {
		return nil, errors.New("replica: Config.Schema is required")
	}
	if cfg.TickRate > MaxTickRate {
		// Run's ticker needs a period of a nanosecond or more, and tick
		// counts of durations (LoginGrace, ResumeWindow) must not overflow.
		return nil, fmt.Errorf("replica: Config.TickRate %d is over %d ticks per second", cfg.TickRate, MaxTickRate)
	}
	if cfg.Auth == nil {
		return nil, errors.New("replica: Config.Auth is required: set an auth.HMAC in production, " +
			"or auth.Anonymous{} to accept every client in development")
	}
	if ch, ok := cfg.Auth.(auth.Checker); ok {
		if err := ch.Check(); err != nil {
			return nil, fmt.Errorf("replica: Config.Auth: %w", err)
		}
	}
	cfg = cfg.withDefaults()
	// Clients are told the schema without its server-only fields, whose
	// values never reach them: their names stay on the server too.
	view, err := cfg.Schema.ClientView()
	if err != nil {
		return nil, fmt.Errorf("replica: client view of the schema: %w", err)
	}
	desc := view.AppendDescriptor(nil)
	if cfg.MaxDescriptorBytes <= 0 {
		cfg.MaxDescriptorBytes = max(64<<10, 4*len(cfg.Schema.AppendDescriptor(nil)))
	}
	if cfg.MaxHelloBytes <= 0 {
		cfg.MaxHelloBytes = cfg.MaxDescriptorBytes + session.MaxToken + 1<<10 + session.MaxResumeBytes
	}
	lim := state.Limits{MaxString: cfg.ClientLimits.MaxStringBytes, MaxContainer: cfg.ClientLimits.MaxContainerLen,
		MaxDepth: cfg.ClientLimits.MaxDepth}
	if err := lim.CheckSchema(cfg.Schema); err != nil {
		return nil, fmt.Errorf("replica: Config.ClientLimits.MaxDepth: %w", err)
	}
	if err := checkPositions(cfg.Schema); err != nil {
		return nil, err
	}
	tr := state.NewTracker(cfg.Schema)
	tr.SetLimits(lim)
	s := &Server{cfg: cfg, tr: tr, desc: desc, handshaking: map[transport.Conn]bool{},
		shakes: transport.HandshakeCaps{Max: cfg.MaxHandshakes, MaxPerAddr: cfg.MaxHandshakesPerAddr},
		users:  map[string][]*Conn{}, pos: positions(cfg.Schema)}
	if s.persist, err = newPersister(&cfg); err != nil {
		return nil, err
	}
	s.defSpace, _ = s.NewSpace(SpaceConfig{Name: "default"})
	s.asm.Arena = &s.arena
	for _, c := range cfg.Schema.Classes {
		s.bands = max(s.bands, len(c.Bands()))
		for _, d := range c.Bands() {
			if !slices.Contains(s.bandDists, d) { // classes mostly share their bands
				s.bandDists = append(s.bandDists, d)
			}
		}
		for p := range s.parts {
			if codec.Part(p).Vis() > codec.PartOwner {
				continue // no partition: its fields would be PartAll's again
			}
			s.parts[p] = s.parts[p] || slices.ContainsFunc(codec.PartLeaves(c, codec.Part(p)), func(w uint64) bool { return w != 0 })
		}
	}
	for p := range s.parts {
		if _, banded := codec.Part(p).Banded(); s.parts[p] && banded == (s.bands > 0) {
			s.pairParts = append(s.pairParts, codec.Part(p))
		}
	}
	return s, nil
}

// Tracker returns the server's entity tracker: spawn, find and destroy
// entities through it, on the tick goroutine.
func (s *Server) Tracker() *state.Tracker { return s.tr }

// SetOwner makes c the owner of e (nil for none): c receives e's
// owner-only fields, the others do not, and c may call its RPCs. Call it
// on the tick goroutine; ownership ends when e is destroyed.
//
// A change takes effect with the next tick, whatever else changed in it:
// the new owner is sent e's owner-only fields whole and forgets its
// others-only ones, the previous owner the reverse, and each is told
// (state.Entity.Owned and client.Replica.OnOwnership on the client). Only
// the owner at the tick counts: giving e away and back within one tick
// sends nothing.
//
// Giving e to a new login of the user who owned it last (a connection of
// the same user ID, once the one that owned e has been gone for longer
// than Config.LoginGrace) resets e's fields of lifetime session
// (life=session, the default) to their zero values: they belonged to the
// previous login.
//
// SetOwner returns ErrUnknownEntity, and changes nothing, when e is not a
// live entity of this server (nil, destroyed, or another server's), and
// ErrConnGone when c has left (in OnLeave, say) or is another server's:
// such an owner would never be released, and an entity of another server
// would shadow the entity of this one in the same slot.
func (s *Server) SetOwner(e *state.Entity, c *Conn) error {
	if e == nil || s.tr.Entity(e.ID()) != e {
		return ErrUnknownEntity
	}
	if c != nil && (c.srv != s || c.view.gone) {
		return ErrConnGone
	}
	s.setOwner(e, c)
	return nil
}

func (s *Server) setOwner(e *state.Entity, c *Conn) {
	from := s.ownerOf(e)
	if _, ok := s.moves[e]; !ok && from != c {
		if s.moves == nil {
			s.moves = make(map[*state.Entity]*Conn)
		}
		s.moves[e] = from // the owner at the start of the tick
	}
	if from != nil && from != c {
		from.noteLost(e.ID(), s.tick, s.cfg.TickRate)
	}
	if c != nil {
		delete(c.lostAt, e.ID())
	}
	slot := int(e.ID().Slot())
	for len(s.owners) <= slot {
		s.owners = append(s.owners, owner{})
	}
	last := s.owners[slot]
	if c != nil && last.id == e.ID() && last.user == c.userID && last.login != c.login && !s.loginLives(last.user, last.login) {
		// A new login of the user who owned e last: what belonged to
		// the previous login session goes.
		e.ResetLife(schema.LifeSession)
	}
	if c == nil {
		s.owners[slot] = owner{id: e.ID(), user: last.user, login: last.login}
	} else {
		s.owners[slot] = owner{id: e.ID(), c: c, user: c.userID, login: c.login}
	}
	if from != c {
		s.ownerChanged(e, c)
	}
}

// loginLives reports whether the login session of user's connection
// login goes on: the connection is open, or closed within
// Config.LoginGrace.
func (s *Server) loginLives(user string, login uint64) bool {
	s.mu.Lock()
	open := slices.ContainsFunc(s.users[user], func(o *Conn) bool { return o.login == login })
	s.mu.Unlock()
	if open {
		return true
	}
	left, ok := s.logouts[login]
	return ok && s.tick-left <= s.graceTicks()
}

// graceTicks is Config.LoginGrace in ticks, rounded up; 0 with none.
func (s *Server) graceTicks() uint64 { return s.ticksOf(s.cfg.LoginGrace) }

// ticksOf returns d in ticks of Config.TickRate, rounded up; 0 if d ≤ 0.
func (s *Server) ticksOf(d time.Duration) uint64 {
	if d <= 0 {
		return 0
	}
	return uint64((d*time.Duration(s.cfg.TickRate) + time.Second - 1) / time.Second)
}

// noteLogout records the tick c left, for loginLives, and forgets logins
// that left longer ago than the grace: the oldest first, so that a mass
// disconnect costs each leave O(1), not a sweep of every login kept.
func (s *Server) noteLogout(c *Conn) {
	if s.cfg.LoginGrace < 0 {
		return
	}
	if s.logouts == nil {
		s.logouts = make(map[uint64]uint64)
	}
	grace, n := s.graceTicks(), 0
	for ; n < len(s.logoutOrder) && s.tick-s.logoutOrder[n].tick > grace; n++ {
		// A resumed login that left again has a later entry of its own.
		if l := s.logoutOrder[n]; s.logouts[l.login] == l.tick {
			delete(s.logouts, l.login)
		}
	}
	s.logoutOrder = append(s.logoutOrder[n:], logout{c.login, s.tick})
	s.logouts[c.login] = s.tick
}

// A logout is a login that left and the tick it left, in logoutOrder.
type logout struct{ login, tick uint64 }

// An owner is the connection that owns the entity of one slot. It names
// the entity by ID: an entity created and destroyed in one tick leaves no
// trace in the changeset, so a slot's entry may be an earlier entity's.
//
// user and login name the connection that owned the entity last, kept
// after it leaves or hands the entity on: a new login of the same user
// taking the entity back resets its session fields.
type owner struct {
	id    state.ID
	c     *Conn
	user  string
	login uint64
}

// Owner returns the connection that owns e, or nil. An entity that is not
// a live one of this server (nil, destroyed, or of another server) has
// none: the owners are kept by ID, which another server's entity may
// share with one of this server.
func (s *Server) Owner(e *state.Entity) *Conn {
	if e == nil || s.tr.Entity(e.ID()) != e {
		return nil
	}
	return s.ownerOf(e)
}

func (s *Server) ownerOf(e *state.Entity) *Conn { return s.ownerByID(e.ID()) }

// ownerByID is ownerOf for the entity with ID id: the interest code, which
// has the ID in the entity's interest record, so need not read the entity.
func (s *Server) ownerByID(id state.ID) *Conn {
	if slot := int(id.Slot()); slot < len(s.owners) && s.owners[slot].id == id {
		return s.owners[slot].c
	}
	return nil
}

// Serve accepts connections from ln until ctx is done or the server is
// closed. Each connection is handshaken on its own goroutine and joins at
// the next tick. Serve logs a warning if the server authenticates with
// auth.Anonymous and ln's address is not a loopback one.
func (s *Server) Serve(ctx context.Context, ln transport.Listener) error {
	if ln == nil {
		return errors.New("replica: Serve needs a listener (wstransport.Listen, say)")
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return ErrServerClosed
	}
	s.lns = append(s.lns, ln)
	s.mu.Unlock()
	if auth.IsAnonymous(s.cfg.Auth) && !transport.Loopback(ln.Addr()) {
		s.cfg.Logger.Warn("replica: serving with auth.Anonymous on a non-loopback address: any client is admitted; set Config.Auth to an auth.HMAC in production",
			"addr", ln.Addr().String())
	}
	for {
		tc, err := ln.Accept(ctx)
		if err != nil {
			s.mu.Lock()
			closed := s.closed
			s.mu.Unlock()
			if closed {
				return ErrServerClosed
			}
			return err
		}
		// Before anything is read: the HELLO is read under the limit.
		if rl, ok := tc.(transport.ReadLimiter); ok {
			rl.SetReadLimit(s.cfg.MaxHelloBytes)
		}
		go s.handshake(ctx, tc)
	}
}

// Tick ends the current tick: it commits the changeset, brings interest
// up to date (who sees what: see Space), encodes the changes and sends
// every connection its TICK with the segments it may see. Connections
// that joined since the last tick (at most MaxJoinsPerTick of them) get
// the full state of what they see instead. Each TICK lists the entities
// its client gained and lost since the last (SetOwner). Tick must be
// called from the goroutine that mutates entities.
//
// A room's changes are encoded once per partition and shared by its
// viewers: every viewer gets the same PartAll bytes, and the same
// PartOthers bytes unless one of its own entities changed a field of that
// partition, in which case it gets a copy without its own entities.
// PartOwner is encoded per owner, from the owner's changes only. What a
// client sees beyond its room (in an AOI space, through groups, owned or
// always relevant) is encoded from the changes of those entities only, so
// a tick costs O(changes seen + connections).
func (s *Server) Tick() {
	// Joiners first: what OnJoin spawns belongs to this tick, which the
	// joiners receive as their full state and everyone else as creates.
	s.admit()
	s.dispatch()
	cs := s.tr.Commit()
	s.tick++
	s.tickNow.Store(s.tick)
	s.persistTick(cs)
	s.warm(cs)
	if s.resumes() {
		s.recordHistory(cs)
		s.expireTickets()
	}
	if errs, n := s.tr.TakeRefusals(); n > 0 {
		s.stats.Refused += uint64(n)
		for _, err := range errs {
			msg := "replica: write refused: clients would refuse the value"
			if errors.Is(err, state.ErrNaN) {
				msg = "replica: write refused: NaN for a quantized float"
			}
			s.cfg.Logger.Error(msg, "tick", s.tick, "err", err)
		}
		if n > len(errs) {
			s.cfg.Logger.Error("replica: more writes refused", "tick", s.tick, "count", n-len(errs))
		}
	}
	s.updateInterest(cs)

	// Each active room's shared segments. Transports keep a reference to
	// what they send until it is written, so each tick's segments are
	// fresh slices.
	for _, sp := range s.activeRooms {
		sp.cs.Schema, sp.cs.Tick = cs.Schema, cs.Tick
		all := s.deltas(sp.segAll[:0], &sp.cs, codec.PartAll, nil)
		all = s.fulls(all, sp.movedIn, codec.PartAll)
		all = s.destroys(all, sp.movedOut)
		sp.segAll = all
		if s.parts[codec.PartOthers] {
			others := s.deltas(sp.segOthers[:0], &sp.cs, codec.PartOthers, nil)
			sp.segOthers = s.fulls(others, sp.movedIn, codec.PartOthers)
		}
	}

	// Bucket the room changes by owning connection.
	for _, c := range s.conns {
		c.changes.Changes = c.changes.Changes[:0]
		c.gained, c.lost, c.gainFull, c.loseFull = c.gained[:0], c.lost[:0], c.gainFull[:0], c.loseFull[:0]
		c.levels = c.levels[:0]
	}
	for _, sp := range s.activeRooms {
		for _, ch := range sp.cs.Changes {
			if o := s.ownerOf(ch.Entity); o != nil && o.joined && o.view.space == sp {
				o.changes.Changes = append(o.changes.Changes, ch)
			}
		}
	}
	s.moved(cs)
	s.batchPairs()
	// Ping every third of the idle timeout, by the clock: ticks may be
	// slow or manual.
	now := time.Now()
	ping := now.Sub(s.lastPing) >= s.cfg.IdleTimeout/3
	if ping {
		s.lastPing = now
	}
	for _, c := range s.conns {
		if !c.joined {
			s.checkHeld(c.tc)
			s.sendFull(c)
			s.flushRPCs(c)
			continue
		}
		if s.behind(c) {
			continue
		}
		if c.view.resync {
			s.resync(c)
			continue
		}
		s.send(c, s.tickSegments(c))
		s.flushRPCs(c)
		if ping {
			c.tc.Send(session.AppendPing(nil, &session.Ping{Nonce: s.tick}))
		}
	}
	// A destroyed entity's slot may be reused from the next tick on: it
	// belongs to nobody.
	for _, ch := range cs.Changes {
		if ch.Destroyed {
			if slot := int(ch.Entity.ID().Slot()); slot < len(s.owners) {
				s.owners[slot] = owner{}
			}
		}
	}
	for _, sp := range s.activeRooms {
		sp.cs.Changes = sp.cs.Changes[:0]
		sp.movedIn, sp.movedOut, sp.active = sp.movedIn[:0], sp.movedOut[:0], false
	}
	s.activeRooms = s.activeRooms[:0]
	s.reap()
	s.endSends()
}

// tickSegments returns the segments of c's TICK, partition by partition,
// all first: its room's changes, then those of the entities it sees
// beyond its room. (An entity that moves between the two in a tick
// resyncs c instead: see evalPair.)
func (s *Server) tickSegments(c *Conn) [][]byte {
	s.budgetPairs(c)
	v := &c.view
	segs := s.seg[:0]
	var room *Space
	if v.space != nil && v.space.room && v.space.active {
		room = v.space
	}
	if room != nil {
		segs = append(segs, room.segAll...)
	}
	// A client in a room gets creates and destroys in the room's shared
	// segments, which its Held does not see: no ranks for it.
	if v.space != nil && v.space.room {
		c.held.Invalidate()
	}
	if c.held.Valid() {
		s.asm.Held = &c.held
	}
	segs = s.pairSegments(segs, c, codec.PartAll, nil)

	// Others partition: c's room, minus what c owns and what it lost
	// (sent whole below); then its pairs likewise. A partition no class
	// has a field in is skipped.
	if s.parts[codec.PartOthers] {
		segs = s.othersSegments(segs, c, room)
	}
	// Owner partition: what c owns, its new entities whole.
	if s.parts[codec.PartOwner] {
		notNew := func(e *state.Entity) bool { return s.ownerOf(e) == c && !slices.Contains(c.gainFull, e) }
		if room != nil {
			segs = s.deltas(segs, &c.changes, codec.PartOwner, notNew)
			segs = s.fulls(segs, s.ownedBy(room.movedIn, c, true), codec.PartOwner)
		}
		segs = s.pairSegments(segs, c, codec.PartOwner, notNew)
		segs = s.leveledFulls(segs, c, c.gainFull, codec.PartOwner)
	}
	s.asm.Held = nil
	c.held.Commit()
	s.seg = segs
	return segs
}

// ownedBy returns, in a scratch slice, the entities of ents that c owns
// (owned true) or does not own (false).
func (s *Server) ownedBy(ents []*state.Entity, c *Conn, owned bool) []*state.Entity {
	s.entBuf = s.entBuf[:0]
	for _, e := range ents {
		if (s.ownerOf(e) == c) == owned {
			s.entBuf = append(s.entBuf, e)
		}
	}
	return s.entBuf
}

// othersSegments appends the others-partition segments of c's TICK.
func (s *Server) othersSegments(segs [][]byte, c *Conn, room *Space) [][]byte {
	mine := func(e *state.Entity) bool { return s.ownerOf(e) == c }
	notMine := func(e *state.Entity) bool { return !mine(e) && !slices.Contains(c.loseFull, e) }
	if room != nil {
		transfer := len(c.gainFull)+len(c.loseFull) > 0
		if len(c.changes.Changes) > 0 || transfer || slices.ContainsFunc(room.movedIn, mine) {
			c.changes.Schema, c.changes.Tick = s.tr.Schema(), s.tick
			if s.scratch = s.enc.Delta(s.scratch[:0], &c.changes, codec.PartOthers, nil); transfer || !empty(s.scratch) {
				segs = s.deltas(segs, &room.cs, codec.PartOthers, notMine)
			} else {
				segs = s.deltas(segs, &room.cs, codec.PartOthers, nil)
			}
			segs = s.fulls(segs, s.ownedBy(room.movedIn, c, false), codec.PartOthers)
		} else {
			segs = append(segs, room.segOthers...)
		}
	}
	segs = s.pairSegments(segs, c, codec.PartOthers, notMine)
	return s.leveledFulls(segs, c, c.loseFull, codec.PartOthers)
}

// destroys appends to segs a segment destroying ents on a client, if
// any: entities that left its view, or were destroyed.
func (s *Server) destroys(segs [][]byte, ents []*state.Entity) [][]byte {
	if len(ents) == 0 {
		return segs
	}
	s.dcs.Changes = s.dcs.Changes[:0]
	for len(s.dch) < len(ents) {
		s.dch = append(s.dch, state.Change{Destroyed: true})
	}
	for i, e := range ents {
		s.dch[i].Entity = e
		s.dcs.Changes = append(s.dcs.Changes, &s.dch[i])
	}
	return s.deltas(segs, &s.dcs, codec.PartAll, nil)
}

// moved works out, for this tick's ownership changes, what each joined
// connection is told: the IDs it gained and lost, and the entities whose
// fields of the partition it now sees it must get whole (an entity
// created in this tick gets them with its creation). A change undone
// within the tick, or of an entity destroyed in it, is no change.
func (s *Server) moved(cs *state.Changeset) {
	if len(s.moves) == 0 {
		return
	}
	for e, from := range s.moves {
		to := s.ownerOf(e)
		if to == from || s.tr.Entity(e.ID()) != e {
			continue
		}
		if from != nil && from.joined {
			from.lost = append(from.lost, uint32(e.ID()))
			if s.keptSeeing(from, e) {
				from.loseFull = append(from.loseFull, e)
			}
		}
		if to != nil && to.joined {
			to.gained = append(to.gained, uint32(e.ID()))
			if s.keptSeeing(to, e) {
				to.gainFull = append(to.gainFull, e)
			}
		}
	}
	clear(s.moves)
}

// keptSeeing reports whether c saw e at the start of the tick and still
// does: its replica holds e, which an ownership change resets and fills.
// An entity created for c in this tick needs no reset: its creation and
// fills carry its values.
func (s *Server) keptSeeing(c *Conn, e *state.Entity) bool {
	ie := s.ientIf(e)
	if ie == nil || c.view.resync {
		return false
	}
	if sp := ie.space; sp != nil && sp.room && sp == c.view.space {
		return ie.arrived != s.tick && ie.born != s.tick
	}
	oi := s.pairOf(c, ie)
	return oi >= 0 && ie.obs[oi].entered != s.tick
}

// admit moves handshaken connections into the tick, at most
// MaxJoinsPerTick of them, the longest waiting first.
func (s *Server) admit() {
	s.mu.Lock()
	joining := s.joining
	if len(joining) > s.cfg.MaxJoinsPerTick {
		// A fresh slice for those left: handshakes append to it.
		s.joining = slices.Clone(joining[s.cfg.MaxJoinsPerTick:])
		joining = joining[:s.cfg.MaxJoinsPerTick]
	} else {
		s.joining = nil
	}
	s.mu.Unlock()
	if len(joining) > 0 {
		// A session a joiner replaced leaves first, so that OnJoin finds
		// the user's entities unowned; one replaced before it joined
		// never joins.
		s.reap()
		joining = slices.DeleteFunc(joining, func(c *Conn) bool {
			if c.replaced.Load() {
				s.release(c)
				s.dropTicket(c)
				return true
			}
			return false
		})
	}
	s.conns = append(s.conns, joining...)
	for _, c := range joining {
		c.admitted = true
		s.View(c, s.defSpace)
	}
	if s.cfg.OnJoin != nil {
		for _, c := range joining {
			s.cfg.OnJoin(c)
		}
	}
}

// A fullState is the full state of one room in one tick, encoded once
// for every connection of the room sent the full state in that tick: its
// joiners, and paused clients resynced. PartAll is the same for all of
// them. PartOthers differs only in the entities each one owns, which it
// must not see through others-fields: the shared PartOthers leaves out
// the entities the tick's joiners own, and each recipient gets those it
// does not own besides (a few: a joiner's avatar, say). The entities of
// connections that joined earlier are in the shared part, which suits
// every joiner.
type fullState struct {
	tick   uint64          // the tick encoded; 0 for none
	ents   []*state.Entity // every entity of the room
	owned  []*state.Entity // those the tick's joiners own
	shared []*state.Entity // the others
	all    [][]byte        // PartAll segments of ents
	others [][]byte        // PartOthers segments of shared
}

// fullState returns this tick's full state of room sp, encoding it at the
// first call of the tick. The state and its owners do not change until
// the tick's sends are done. The segments are fresh slices every tick:
// transports keep a reference to what they send until it is written.
func (s *Server) fullState(sp *Space) *fullState {
	f := &sp.full
	if f.tick == s.tick {
		return f
	}
	f.tick = s.tick
	for _, c := range sp.viewers {
		if !c.joined {
			c.fullTick = s.tick
		}
	}
	f.ents = f.ents[:0]
	for _, id := range sp.members {
		f.ents = append(f.ents, s.ients[id.Slot()].e)
	}
	f.owned, f.shared = f.owned[:0], f.shared[:0]
	for _, e := range f.ents {
		if o := s.ownerOf(e); o != nil && o.fullTick == s.tick && o.view.space == sp {
			f.owned = append(f.owned, e)
		} else {
			f.shared = append(f.shared, e)
		}
	}
	f.all = s.fulls(f.all[:0], f.ents, codec.PartAll)
	f.others = s.fulls(f.others[:0], f.shared, codec.PartOthers)
	return f
}

// sendFull sends c the full state of what it sees: the shared segments of
// its room's, what c sees of its own entities and those of the room's
// other joiners, and the entities it sees beyond its room.
func (s *Server) sendFull(c *Conn) {
	var mine, others, pairs []*state.Entity
	for _, p := range c.view.pairs {
		e := s.ients[p.id.Slot()].e
		pairs = append(pairs, e)
		if s.ownerOf(e) == c {
			mine = append(mine, e)
		} else {
			others = append(others, e)
		}
	}
	segs := s.fullSeg[:0]
	var shared [][]byte
	c.held.Invalidate()
	if sp := c.view.space; sp != nil && sp.room {
		f := s.fullState(sp)
		segs = append(segs, f.all...)
		room := f.owned // the entities of the room not in the shared others
		if c.fullTick != s.tick && s.ownsIn(c, sp) {
			// A resynced owner: its entities are in the shared
			// PartOthers, which it must not receive.
			room = f.ents
		} else {
			shared = f.others
		}
		for _, e := range room {
			if s.ownerOf(e) == c {
				mine = append(mine, e)
			} else {
				others = append(others, e)
			}
		}
	} else {
		// It holds its pairs from now on: the full state creates them.
		s.heldBuf = s.heldBuf[:0]
		for _, p := range c.view.pairs {
			s.heldBuf = append(s.heldBuf, p.id.Slot())
		}
		c.held.Reset(s.heldBuf, len(s.ients))
	}
	c.levels = c.levels[:0]
	for _, id := range c.view.held {
		if ie := &s.ients[id.Slot()]; ie.id == id {
			if oi := s.pairOf(c, ie); oi >= 0 {
				if ie.obs[oi].held&stale != 0 {
					s.noteSet(c, id) // before the full state, its copy was out of date
				}
				ie.obs[oi].held = 0 // the full state has it whole
			}
		}
	}
	c.view.held = c.view.held[:0]
	segs = s.leveledFulls(segs, c, pairs, codec.PartAll)
	segs = append(segs, shared...)
	segs = s.leveledFulls(segs, c, others, codec.PartOthers)
	segs = s.leveledFulls(segs, c, mine, codec.PartOwner)
	if s.bands > 0 {
		for _, e := range pairs {
			ie := &s.ients[e.ID().Slot()]
			o := &ie.obs[s.pairOf(c, ie)]
			o.sent = o.level
			if int(o.level) < len(e.Class().Bands()) {
				c.levels = append(c.levels, session.Level{ID: uint32(e.ID()), Level: o.level})
			}
		}
	}
	s.fullSeg = segs
	c.gained, c.lost = c.gained[:0], c.lost[:0]
	for _, e := range mine {
		c.gained = append(c.gained, uint32(e.ID()))
	}
	c.joined = true
	c.view.resync = false // this is the full state a resync asks for
	if r := c.resume; r != nil {
		c.resume = nil
		if s.catchUp(c, r, segs) {
			return
		}
		// The client kept its replica for a catch-up: it discards it.
		s.stats.ResumeFallbacks++
		c.tc.Send(session.AppendResync(nil))
	}
	s.send(c, segs)
}

// leveledFulls appends to segs the full segments of partition part (a
// whole one) for ents, as c sees them: with level-of-detail bands, each
// entity's bands up to the level of its pair with c (every band for an
// entity of c's room).
func (s *Server) leveledFulls(segs [][]byte, c *Conn, ents []*state.Entity, part codec.Part) [][]byte {
	if s.bands == 0 || len(ents) == 0 {
		return s.fulls(segs, ents, part)
	}
	for b := range s.bands + 1 {
		p := part.Band(b)
		if !s.parts[p] {
			continue
		}
		sub := s.entBuf[:0]
		for _, e := range ents {
			ie := &s.ients[e.ID().Slot()]
			if oi := s.pairOf(c, ie); oi < 0 || int(ie.obs[oi].level) >= b {
				sub = append(sub, e)
			}
		}
		s.entBuf = sub
		segs = s.fulls(segs, sub, p)
	}
	return segs
}

// ownsIn reports whether c owns an entity of room sp.
func (s *Server) ownsIn(c *Conn, sp *Space) bool {
	for _, id := range sp.members {
		if s.ownerOf(s.ients[id.Slot()].e) == c {
			return true
		}
	}
	return false
}

// fulls appends to segs the full segments of partition part for ents.
func (s *Server) fulls(segs [][]byte, ents []*state.Entity, part codec.Part) [][]byte {
	if len(ents) == 0 {
		return segs
	}
	s.fullEncoded += uint64(len(ents))
	return s.split(segs, len(ents), func(lo, hi int) []byte { return s.enc.Full(nil, ents[lo:hi], part) })
}

// deltas appends to segs the segments of partition part for the changes
// of cs that include accepts (all if nil).
func (s *Server) deltas(segs [][]byte, cs *state.Changeset, part codec.Part, include func(*state.Entity) bool) [][]byte {
	return s.split(segs, len(cs.Changes), func(lo, hi int) []byte {
		sub := *cs
		sub.Changes = cs.Changes[lo:hi]
		return s.enc.Delta(nil, &sub, part, include)
	})
}

// split appends to segs the segments encode makes of n entities (or
// changes), at most SegmentEntities of them each, halving any segment over
// a quarter of ClientLimits.MaxSegmentBytes or MaxValues: every segment
// stays within what the clients accept. encode(lo, hi) encodes entities lo
// to hi−1 into a fresh slice with s.enc.
func (s *Server) split(segs [][]byte, n int, encode func(lo, hi int) []byte) [][]byte {
	maxBytes, maxValues := s.segLimits()
	var add func(lo, hi int)
	add = func(lo, hi int) {
		seg := encode(lo, hi)
		if (len(seg) > maxBytes || s.enc.Values() > maxValues) && hi-lo > 1 {
			mid := lo + (hi-lo)/2
			add(lo, mid)
			add(mid, hi)
			return
		}
		segs = append(segs, seg)
	}
	for lo := 0; lo < n; lo += s.cfg.SegmentEntities {
		add(lo, min(lo+s.cfg.SegmentEntities, n))
	}
	return segs
}

// segLimits returns the bytes and values a segment may hold: a quarter of
// what the clients accept, so that whatever the encoding's estimate, no
// segment reaches the clients' limits.
func (s *Server) segLimits() (maxBytes, maxValues int) {
	return s.cfg.ClientLimits.MaxSegmentBytes / 4, s.cfg.ClientLimits.MaxValues / 4
}

// send writes a TICK and its segments, leaving out empty ones. A failed
// send has already closed the connection; reap removes it.
func (s *Server) send(c *Conn, segs [][]byte) {
	n := 0
	for _, seg := range segs {
		if !empty(seg) {
			segs[n] = seg
			n++
		}
	}
	if n > session.MaxSegments {
		s.cfg.Logger.Error("replica: tick too large for the protocol", "user", c.userID, "session", c.id,
			"segments", n, "max", session.MaxSegments, "segment_entities", s.cfg.SegmentEntities)
		c.tc.Close(transport.CloseInternalError, fmt.Sprintf("tick of %d segments, over the protocol's %d", n, session.MaxSegments))
		return
	}
	// A send fails when the connection has closed, or for a message over
	// the transport's MaxMessageSize (a ClientLimits.MaxSegmentBytes
	// above it): the client would then take the next message for the
	// missing segment, so the connection must end either way.
	fail := func(err error) {
		if !errors.Is(err, transport.ErrClosed) {
			s.cfg.Logger.Error("replica: tick not sent", "user", c.userID, "session", c.id, "err", err)
		}
		c.tc.Close(transport.CloseInternalError, "tick not sent")
	}
	s.hdr = session.AppendTick(s.hdr[:0], &session.Tick{Tick: s.tick, Segments: n, Gained: c.gained, Lost: c.lost, Levels: c.levels})
	sent := len(s.hdr)
	for _, seg := range segs[:n] {
		sent += len(seg)
	}
	c.tokens -= float64(sent) // the budget counts everything (Config.Budget)
	if err := c.tc.Send(s.arena.Copy(s.hdr)); err != nil {
		fail(err)
		return
	}
	for _, seg := range segs[:n] {
		if err := c.tc.Send(seg); err != nil {
			fail(err)
			return
		}
	}
}

func empty(seg []byte) bool { return len(seg) == 1 && seg[0] == 0 }

// reap drops closed connections and their ownerships.
func (s *Server) reap() {
	left := false
	for _, c := range s.conns {
		if c.closed() {
			c.left, left = true, true
		}
	}
	if left {
		s.dropLeft()
	}
}

// dropLeft drops the connections marked left, and their ownerships, and
// runs OnLeave for each.
func (s *Server) dropLeft() {
	// Their ownerships in one pass over the owners for all of them: a
	// pass for each would make a mass disconnect cost leavers × slots.
	for i, o := range s.owners {
		if o.c != nil && o.c.left {
			s.owners[i].c = nil
		}
	}
	live := s.conns[:0]
	for _, c := range s.conns {
		switch {
		case c.left:
			s.noteLogout(c)
			s.release(c)
			s.departed(c)
			s.gone = append(s.gone, c.tc)
			code, reason, byPeer := c.tc.CloseInfo()
			s.forget(c)
			c.dropRPCs() // its message buffers are not kept with it
			s.cfg.Logger.Info("replica: left", "user", c.userID, "session", c.id, "code", code, "reason", reason, "by_peer", byPeer)
			if s.cfg.OnLeave != nil {
				s.cfg.OnLeave(c)
			}
		default:
			live = append(live, c)
		}
	}
	clear(s.conns[len(live):])
	s.conns = live
}

// TickRate returns the ticks per second Run drives (Config.TickRate).
func (s *Server) TickRate() int { return s.cfg.TickRate }

// TickNumber returns the number of the last tick sent.
func (s *Server) TickNumber() uint64 { return s.tick }

// Conns returns the connections that have joined, for the tick goroutine.
func (s *Server) Conns() []*Conn { return s.conns }

// Run drives the tick loop at the configured rate until ctx is done:
// update runs game logic for the tick, then the tick is sent. It returns
// ctx's error, or ErrServerClosed when the server is closed, before Run or
// by update. Call Shutdown (or Close) then: it tells the clients, and, with
// Config.Store, writes every change. (Run does not write them itself: with
// the database down, the clients would wait the write's timeout for their
// goodbye.)
func (s *Server) Run(ctx context.Context, update func(tick uint64)) error {
	if s.isClosed() {
		return ErrServerClosed // else it would tick, for ever, a world nobody can join
	}
	t := time.NewTicker(time.Second / time.Duration(s.cfg.TickRate))
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
			if update != nil {
				update(s.tick + 1)
			}
			if s.isClosed() {
				return ErrServerClosed // Close has written everything
			}
			s.Tick()
		}
	}
}

func (s *Server) isClosed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closed
}

// Close stops the listeners and disconnects every client with
// CloseGoingAway, including those still in their handshake; OnLeave runs
// for every joined one. With Config.Store it then writes every change,
// those made since the last tick included (in OnLeave, say),
// (waiting for the database at most StoreWriter.WriteTimeout, 30 seconds
// by default) and stops the write-behind. Call it from the tick goroutine
// (or after Run returns). Close does not wait for the clients to be told:
// the transports send the close on goroutines of their own, which a
// program that exits right after cuts short; Shutdown waits for them.
func (s *Server) Close() error {
	_, err := s.close(context.Background())
	return err
}

// Shutdown is Close, then waits until every connection it closed has told
// its client (transport.Finisher: the messages queued before the close
// written and the close sent, each transport bounding how long it tries)
// or ctx ends, when it returns ctx's error. A program that exits after
// closing the server calls Shutdown, with a timeout of a few seconds, so
// that its clients read "server shutting down" rather than a lost
// connection. With Config.Store, the last writes wait for the database
// no longer than ctx allows either (the clients are told before them).
func (s *Server) Shutdown(ctx context.Context) error {
	closed, err := s.close(ctx)
	for _, tc := range closed {
		if werr := transport.AwaitFinished(ctx, tc); werr != nil {
			return errors.Join(err, werr)
		}
	}
	return err
}

// close is Close, the database waited for no longer than ctx allows; it
// returns the connections it closed.
func (s *Server) close(ctx context.Context) ([]transport.Conn, error) {
	s.mu.Lock()
	s.closed = true
	lns := s.lns
	joining := s.joining
	s.joining = nil
	var closed []transport.Conn
	for tc := range s.handshaking {
		closed = append(closed, tc)
	}
	s.mu.Unlock()
	for _, ln := range lns {
		ln.Close()
	}
	for _, tc := range closed {
		tc.Close(transport.CloseGoingAway, "server shutting down")
	}
	for _, c := range joining {
		c.tc.Close(transport.CloseGoingAway, "server shutting down")
		closed = append(closed, c.tc)
	}
	// The joined ones leave as they would in a tick (reap): OnLeave
	// finds what they owned unowned, and a connection it is given
	// refused (ErrConnGone) as an owner or a viewer, which would
	// otherwise be one for ever.
	for _, c := range s.conns {
		c.tc.Close(transport.CloseGoingAway, "server shutting down")
		closed = append(closed, c.tc)
		c.left = true
	}
	s.dropLeft()
	return closed, s.closePersist(ctx)
}

// Stats returns the server's counters.
func (s *Server) Stats() Stats {
	st := s.stats
	st.Kicked = s.kicked.Load()
	st.RPCsDropped = s.rpcsDropped.Load()
	st.Persist = s.persistStats()
	return st
}
