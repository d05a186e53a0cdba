package replica

import (
	"time"

	"github.com/replicago/replica/session"
	"github.com/replicago/replica/transport"
)

// maxHeldRPCs bounds the server RPCs held for a paused client.
const maxHeldRPCs = 4096

// behind reports whether c gets no regular tick now: it has fallen behind
// (its backlog passed LagMessages or LagBytes) and is paused, or it has
// just caught up and was sent RESYNC and the full state instead. The
// client keeps applying what is queued; its replica reaches the server's
// state at the resync. RPCs for it are held while it is paused and sent
// after the full state, so none overtakes the state it was sent against.
//
// A paused client makes progress when its backlog in bytes, which counts
// what the transport holds for it (its queue, the message being written,
// and, on WebSocket, the kernel's send queue), reaches a new low: only
// bytes the peer took shrink it. One with no progress for LagTimeout is
// dropped as a slow consumer, whatever else it sends: its PINGs, and the
// PONGs queued for them, are no progress.
func (s *Server) behind(c *Conn) bool {
	if c.backlog == nil {
		s.held = true
		return false
	}
	msgs, bytes := c.backlog.Backlog()
	s.noteHeld(c.releases, msgs)
	if !c.paused {
		if msgs <= s.cfg.LagMessages && bytes <= s.cfg.LagBytes {
			return false
		}
		c.paused, c.lagLow, c.progress = true, bytes, time.Now()
		s.stats.Paused++
		s.cfg.Logger.Info("replica: client fell behind; paused", "user", c.userID, "session", c.id, "messages", msgs, "bytes", bytes)
		return true
	}
	if msgs > s.cfg.LagMessages/8 || bytes > s.cfg.LagBytes/8 {
		if bytes < c.lagLow {
			c.lagLow, c.progress = bytes, time.Now()
		}
		if time.Since(c.progress) > s.cfg.LagTimeout || len(c.rpcOut) > maxHeldRPCs {
			c.kick(transport.CloseSlowConsumer, "fell behind and stopped catching up")
		}
		return true
	}
	c.paused = false
	s.stats.Resyncs++
	s.resync(c)
	return true
}

// resync has c start over: RESYNC, then the full state of what it sees
// (which clears any resync pending for c) and the RPCs held for it.
func (s *Server) resync(c *Conn) {
	if c.tc.Send(session.AppendResync(nil)) == nil {
		s.sendFull(c)
		s.flushRPCs(c)
	}
}

// The clients' TICK messages (their headers and pair segments) are carved
// from s.arena, whose chunks are reused once no transport refers to what
// was carved from them. Before anything is sent to a connection in a
// tick, its backlog says whether its transport still holds messages of
// earlier ticks (transport.Releaser: a transport that does not say counts
// as holding them); so do, at the tick's end, the transports of the
// connections that left in it or the one before. If none does, the arena
// reuses the chunks of the earlier ticks; else it forgets them, and the
// garbage collector takes each once the transports let go.

// noteHeld notes what a transport holds before this tick's sends, from
// whether it is a transport.Releaser and the messages its Backlog reports.
func (s *Server) noteHeld(releases bool, msgs int) {
	if !releases || msgs > 0 {
		s.held = true
	}
}

// checkHeld notes what tc holds, for a connection behind did not check.
func (s *Server) checkHeld(tc transport.Conn) {
	bl, ok := tc.(transport.Backlogger)
	if !ok {
		s.held = true
		return
	}
	msgs, _ := bl.Backlog()
	_, releases := tc.(transport.Releaser)
	s.noteHeld(releases, msgs)
}

// endSends ends the tick's generation of the arena, after its sends and
// reap. The connections that left in this tick are checked now (those
// reaped as it began, before a joiner was admitted, were not checked by
// its sends) and again in the next.
func (s *Server) endSends() {
	for _, tc := range s.draining {
		s.checkHeld(tc)
	}
	for _, tc := range s.gone {
		s.checkHeld(tc)
	}
	s.arena.EndGen(!s.held)
	s.held = false
	clear(s.draining)
	s.draining, s.gone = append(s.draining[:0], s.gone...), s.gone[:0]
	clear(s.gone[:cap(s.gone)])
}
