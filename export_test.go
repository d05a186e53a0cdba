package replica

// CallForTest runs one client RPC message as the tick would, for the
// dispatch benchmark.
func (s *Server) CallForTest(c *Conn, msg []byte) { s.call(c, msg) }

// SetSegmentBytes sets the size past which segments are split, until the
// returned func restores it.
func SetSegmentBytes(n int) (restore func()) {
	old := segmentBytes
	segmentBytes = n
	return func() { segmentBytes = old }
}
