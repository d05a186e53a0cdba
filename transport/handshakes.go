package transport

import "net"

// Default caps on the connections a server holds in its session
// handshake (replica.Config and replay.PlayerConfig's MaxHandshakes and
// MaxHandshakesPerAddr).
const (
	DefaultMaxHandshakes        = 512
	DefaultMaxHandshakesPerAddr = 32
)

// HandshakeCaps counts the connections in their session handshake, in
// all and by source address (SourceAddr), against a cap on each: a server
// refuses one over either at once. The zero value caps nothing; the
// caller serializes the calls.
type HandshakeCaps struct {
	Max, MaxPerAddr int // ≤ 0: no cap
	n               int
	from            map[string]int
}

// Admit counts in a connection from addr, and returns its source, to give
// Done, and "" or, if a cap is reached, why it is refused, in which case
// nothing is counted.
func (h *HandshakeCaps) Admit(addr net.Addr) (from, busy string) {
	from = SourceAddr(addr)
	switch {
	case h.Max > 0 && h.n >= h.Max:
		return from, "too many handshakes in progress"
	case h.MaxPerAddr > 0 && h.from[from] >= h.MaxPerAddr:
		return from, "too many handshakes in progress from this address"
	}
	if h.from == nil {
		h.from = make(map[string]int)
	}
	h.n++
	h.from[from]++
	return from, ""
}

// Done counts out a handshake Admit let in from the source from.
func (h *HandshakeCaps) Done(from string) {
	h.n--
	if h.from[from]--; h.from[from] <= 0 {
		delete(h.from, from)
	}
}
