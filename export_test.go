package replica

// CallForTest runs one client RPC message as the tick would, for the
// dispatch benchmark.
func (s *Server) CallForTest(c *Conn, msg []byte) { s.call(c, msg) }

// FullEncodedForTest returns the number of entities the server has encoded
// into full states, shared or not.
func (s *Server) FullEncodedForTest() uint64 { return s.fullEncoded }

// JoiningForTest returns the number of handshaken connections waiting for
// a tick to admit them.
func (s *Server) JoiningForTest() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.joining)
}

// ArenaChunksForTest returns the number of chunks the server's arena for
// the clients' messages has made.
func (s *Server) ArenaChunksForTest() int { return s.arena.Chunks() }
