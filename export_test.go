package replica

// CallForTest runs one client RPC message as the tick would, for the
// dispatch benchmark.
func (s *Server) CallForTest(c *Conn, msg []byte) { s.call(c, msg) }
