package codec

// An Arena hands out byte slices carved from large chunks, so that the
// many small messages of a tick (every client's segments) cost an
// allocation per chunk rather than one each. A chunk is never reused: a
// slice handed out stays valid for as long as anything refers to it (a
// transport's send queue, say), and the chunk is garbage once nothing
// does. The zero Arena is ready to use; it is not safe for concurrent use.
type Arena struct {
	buf []byte
	// Chunk is the size of the chunks; the default is 64 KiB. A request
	// over a quarter of it gets a slice of its own.
	Chunk int
}

// Alloc returns a slice of length n, with capacity n, whose bytes are
// zero.
func (a *Arena) Alloc(n int) []byte {
	chunk := a.Chunk
	if chunk <= 0 {
		chunk = 64 << 10
	}
	if n > chunk/4 {
		return make([]byte, n)
	}
	if len(a.buf)+n > cap(a.buf) {
		a.buf = make([]byte, 0, chunk)
	}
	s := a.buf[len(a.buf) : len(a.buf)+n : len(a.buf)+n]
	a.buf = a.buf[:len(a.buf)+n]
	return s
}

// Copy returns a copy of p carved from the arena.
func (a *Arena) Copy(p []byte) []byte {
	s := a.Alloc(len(p))
	copy(s, p)
	return s
}
