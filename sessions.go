package replica

import (
	"slices"

	"github.com/replicago/replica/transport"
)

// A SessionPolicy says what happens when a user connects while a session
// of the same user ID is open: a reconnect before the server noticed the
// old connection was gone, a second device, or a stolen token.
type SessionPolicy uint8

// Session policies.
const (
	// ReplaceOld, the default, closes the old session with
	// transport.CloseReplaced and admits the new one. The old session
	// leaves (OnLeave) before the new one joins (OnJoin), in the same
	// tick, so a game that hands the user's avatar to the new session in
	// OnJoin finds it unowned.
	ReplaceOld SessionPolicy = iota
	// RefuseNew refuses the new session with transport.CloseDuplicate;
	// the old one stays.
	RefuseNew
	// AllowBoth admits the new session beside the old one.
	AllowBoth
)

// claim applies the session policy to c, a session that passed every
// check of the handshake, and records it as one of its user's sessions.
// It returns false if c is refused. Called on c's handshake goroutine;
// claims are serialised, so two sessions of one user connecting at once
// are decided one after the other.
func (s *Server) claim(c *Conn) bool {
	s.claimMu.Lock()
	defer s.claimMu.Unlock()
	s.mu.Lock()
	olds := s.users[c.userID]
	s.mu.Unlock()
	policy := ReplaceOld
	if len(olds) > 0 && s.cfg.OnDuplicate != nil {
		policy = s.cfg.OnDuplicate(olds[len(olds)-1], c)
	}
	switch {
	case len(olds) == 0 || policy == AllowBoth:
	case policy == RefuseNew:
		s.cfg.Logger.Info("replica: duplicate session refused", "user", c.userID, "open", olds[len(olds)-1].id)
		return false
	default:
		for _, old := range olds {
			s.cfg.Logger.Info("replica: session replaced", "user", c.userID, "old", old.id, "new", c.id)
			old.replaced.Store(true)
			old.tc.Close(transport.CloseReplaced, "another session of this user connected")
		}
		olds = nil
	}
	s.mu.Lock()
	s.users[c.userID] = append(olds, c)
	s.mu.Unlock()
	return true
}

// release forgets c as one of its user's sessions.
func (s *Server) release(c *Conn) {
	s.mu.Lock()
	defer s.mu.Unlock()
	olds := slices.DeleteFunc(s.users[c.userID], func(o *Conn) bool { return o == c })
	if len(olds) == 0 {
		delete(s.users, c.userID)
	} else {
		s.users[c.userID] = olds
	}
}
