package replica

import (
	"errors"
	"fmt"
	"math"

	"github.com/replicago/replica/schema"
	"github.com/replicago/replica/session"
	"github.com/replicago/replica/state"
	"github.com/replicago/replica/transport"
)

type rpcKey struct {
	class *schema.Struct
	rpc   uint32
}

// DefaultMaxRPCBytes is Config.MaxRPCBytes's default.
const DefaultMaxRPCBytes = 16 << 10

// rpcWeight is what a call of an RPC message of n bytes takes of its
// client's rate (Config.RPCRate): one, and one per whole KiB.
func rpcWeight(n int) int { return 1 + n>>10 }

// rpcQueue bounds the RPCs a connection may have waiting for the tick: a
// full burst (Config.RPCBurst) plus one second of calls at Config.RPCRate,
// so that calls the rate limiter lets through are never refused by the
// queue while the tick runs at least once a second.
func (s *Server) rpcQueue() int {
	return s.cfg.RPCBurst + int(math.Ceil(s.cfg.RPCRate))
}

// RPCHandler handles a client→server RPC on the tick goroutine. e is the
// entity it was called on, which c owns; args holds the arguments and is
// valid only during the call. Returning an error refuses the call: it is
// counted in Stats.RPCsRejected and logged, and has no other effect.
type RPCHandler func(c *Conn, e *state.Entity, args *state.Record) error

// HandleRPC registers h for RPC rpc of class. Register handlers before
// serving.
func (s *Server) HandleRPC(class *schema.Struct, rpc uint32, h RPCHandler) {
	if s.handlers == nil {
		s.handlers = make(map[rpcKey]RPCHandler)
	}
	s.handlers[rpcKey{class, rpc}] = h
}

// dispatch runs the handlers of the RPCs that arrived since the last tick,
// connection by connection, each connection's in arrival order. A tick
// decodes at most Config.MaxRPCBytes of one connection's calls (and at
// least one call): the rest wait, in order, for the next ticks. The rate
// limit lets a client send a burst of large calls at once (a burst of
// 600 weighs 35 calls of 16 KiB), and a call of many tiny elements costs
// about a millisecond to decode: run all at one tick, they would stall it
// for everyone; spread over ticks, a client adds at most one such call's
// cost to each.
func (s *Server) dispatch() {
	for _, c := range s.conns {
		if !c.rpcWait.Load() {
			continue // nothing arrived: its lock and lists not read
		}
		if c.closed() {
			continue // gone: reap drops its pending calls
		}
		c.rpcMu.Lock()
		in := c.rpcIn
		c.rpcIn = c.rpcBuf[:0]
		c.rpcWait.Store(false)
		c.rpcMu.Unlock()
		n, spent := 0, 0
		for ; n < len(in); n++ {
			if n > 0 && c.closed() {
				// An earlier call closed the connection (the
				// client was kicked): the calls after it are not run.
				clear(in[n:])
				n = len(in)
				break
			}
			if n > 0 && spent+len(in[n]) > s.cfg.MaxRPCBytes {
				break // this tick's share of the connection's calls
			}
			spent += len(in[n])
			s.call(c, in[n])
			in[n] = nil
		}
		if n < len(in) {
			c.deferRPCs(in, n)
			continue
		}
		c.rpcBuf = in[:0]
	}
}

// deferRPCs puts back in[n:], the calls a tick left, ahead of those that
// arrived since, for the next tick; in's array becomes the queue.
func (c *Conn) deferRPCs(in [][]byte, n int) {
	left := copy(in, in[n:])
	clear(in[left:])
	c.rpcMu.Lock()
	newer := c.rpcIn
	c.rpcIn = append(in[:left], newer...)
	clear(newer)
	c.rpcBuf = newer[:0]
	c.rpcWait.Store(true)
	c.rpcMu.Unlock()
}

// call checks and runs one client RPC. A call the client could not have
// made in good faith closes its connection: a malformed message, an RPC
// the class does not have or that only the server may send, or an entity
// it does not own. A call on an entity that has since been destroyed, or
// that the client lost in the last lostGrace seconds, is dropped: the
// client could not have known.
func (s *Server) call(c *Conn, msg []byte) {
	m, err := session.ParseRPC(msg)
	if err != nil {
		c.kick(transport.CloseProtocolError, err.Error())
		return
	}
	e := s.tr.Entity(state.ID(m.Entity))
	if e == nil {
		s.stats.RPCsStale++
		return
	}
	rpc := e.Class().RPC(m.RPC)
	var remote *schema.RPC
	if rc := c.schema.Class(e.Class().ID); rc != nil {
		remote = rc.RPC(m.RPC)
	}
	switch {
	case rpc == nil || remote == nil || rpc.Dir != schema.ClientToServer:
		c.kick(transport.CloseProtocolError, fmt.Sprintf("no client RPC %d on %s", m.RPC, e.Class().Name))
		return
	case s.ownerOf(e) != c && c.lostRecently(e.ID(), s.tick, s.cfg.TickRate):
		// Sent before the client learnt it had lost the entity.
		s.stats.RPCsStale++
		return
	case s.ownerOf(e) != c:
		c.kick(transport.ClosePolicyViolation, fmt.Sprintf("RPC %s on an entity the client does not own", rpc.Name))
		return
	}
	args, err := c.dec.DecodeRecord(remote.Args, rpc.Args, m.Args)
	if err != nil {
		c.kick(transport.CloseProtocolError, "RPC arguments: "+err.Error())
		return
	}
	h := s.handlers[rpcKey{e.Class(), m.RPC}]
	if h == nil {
		s.stats.RPCsRejected++
		return
	}
	if err := h(c, e, args); err != nil {
		s.stats.RPCsRejected++
		s.cfg.Logger.Debug("replica: RPC refused", "user", c.userID, "rpc", rpc.Name, "err", err)
		return
	}
	s.stats.RPCs++
}

// RPCTarget says which clients a server RPC goes to.
type RPCTarget struct {
	kind uint8
	conn *Conn
}

// RPC targets.
var (
	ToOwner     = RPCTarget{kind: 1} // the entity's owner
	ToObservers = RPCTarget{kind: 2} // every client that sees the entity
)

// ToConn targets one connection.
func ToConn(c *Conn) RPCTarget { return RPCTarget{kind: 3, conn: c} }

// Errors of SendRPC.
var (
	ErrNoRPC    = errors.New("replica: no such server RPC")
	ErrNoTarget = errors.New("replica: RPC target has no connection")
)

// SendRPC sends server→client RPC rpc on e with the given arguments (a
// record of the RPC's argument struct) to the clients of to. Call it on
// the tick goroutine. The arguments are encoded once; every target
// receives the call after the state of the current tick, so an entity
// created in the same tick already exists on the client. ToObservers
// reaches the clients that see e with that state, and no other.
//
// Errors: ErrUnknownEntity for an entity that is not live in this
// server, ErrNoRPC for an RPC e's class does not send to clients or
// arguments of another struct, ErrNoTarget for an entity without an owner
// (ToOwner) or a connection that has left or is another server's (ToConn).
func (s *Server) SendRPC(to RPCTarget, e *state.Entity, rpc uint32, args *state.Record) error {
	if e == nil || s.tr.Entity(e.ID()) != e {
		return ErrUnknownEntity
	}
	r := e.Class().RPC(rpc)
	if r == nil || r.Dir != schema.ServerToClient || args == nil || args.Type() != r.Args {
		return fmt.Errorf("%w: %d on %s", ErrNoRPC, rpc, e.Class().Name)
	}
	msg := session.AppendRPC(nil, &session.RPC{Entity: uint32(e.ID()), RPC: rpc, Args: s.rpcEnc.AppendRecord(nil, args)})
	switch to.kind {
	case 1:
		c := s.ownerOf(e)
		if c == nil {
			return ErrNoTarget
		}
		c.rpcOut = append(c.rpcOut, outRPC{msg: msg})
		s.stats.RPCsSent++
	case 2:
		// Whether a client sees e is known once this tick's interest is
		// worked out: flushRPCs decides.
		for _, c := range s.conns {
			c.rpcOut = append(c.rpcOut, outRPC{msg: msg, seen: e})
		}
	case 3:
		c := to.conn
		if c == nil || c.srv != s || c.view.gone {
			return ErrNoTarget // a departed connection's queue would grow for ever
		}
		c.rpcOut = append(c.rpcOut, outRPC{msg: msg})
		s.stats.RPCsSent++
	default:
		return ErrNoTarget
	}
	return nil
}

// An outRPC is a server RPC queued for a client. One sent ToObservers
// names its entity in seen: the client gets it only if it sees the entity
// once the tick's state is sent.
type outRPC struct {
	msg  []byte
	seen *state.Entity
}

// flushRPCs sends the RPCs queued for c during this tick.
func (s *Server) flushRPCs(c *Conn) {
	for _, o := range c.rpcOut {
		if o.seen != nil {
			if !s.Sees(c, o.seen) {
				continue
			}
			s.stats.RPCsSent++
		}
		if c.tc.Send(o.msg) != nil {
			break
		}
	}
	clear(c.rpcOut)
	c.rpcOut = c.rpcOut[:0]
}

// lostGrace is how long, in seconds, a client's RPC on an entity it has
// lost counts as sent before it learnt of the loss, rather than as a call
// on an entity it never owned.
const lostGrace = 10

// noteLost records that c lost entity id at tick, forgetting losses older
// than lostGrace.
func (c *Conn) noteLost(id state.ID, tick uint64, rate int) {
	if c.lostAt == nil {
		c.lostAt = make(map[state.ID]uint64)
	}
	for old, t := range c.lostAt {
		if tick-t > uint64(lostGrace*rate) {
			delete(c.lostAt, old)
		}
	}
	c.lostAt[id] = tick
}

// lostRecently reports whether c lost entity id within lostGrace of tick.
func (c *Conn) lostRecently(id state.ID, tick uint64, rate int) bool {
	t, ok := c.lostAt[id]
	return ok && tick-t <= uint64(lostGrace*rate)
}

// dropRPCs drops the calls c's queue holds, and the queue's arrays.
func (c *Conn) dropRPCs() {
	c.rpcMu.Lock()
	c.rpcIn, c.rpcBuf = nil, nil
	c.rpcWait.Store(false)
	c.rpcMu.Unlock()
}
