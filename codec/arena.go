package codec

// An Arena hands out byte slices carved from large chunks, so that the
// many small messages of a tick (every client's segments) cost an
// allocation per chunk rather than one each. The zero Arena is ready to
// use; it is not safe for concurrent use.
//
// A chunk is reused only when its owner says that nothing refers to what
// was carved from it any more. The slices are handed out in generations (a
// server's tick), which [Arena.EndGen] ends: with free set, the caller
// declares that no slice of an earlier generation is referenced any more
// (the transports it sent them on have written them out), and their
// chunks are carved again. Without, and by default, those chunks are left
// to the garbage collector, which takes each once nothing refers to it.
type Arena struct {
	buf []byte // the current chunk, carved up to len(buf)
	// Chunk is the size of the chunks; the default is 64 KiB. A request
	// over a quarter of it gets a slice of its own.
	Chunk int

	old   [][]byte // chunks of past generations, not yet known free
	cur   [][]byte // chunks retired in the current generation
	spare [][]byte // chunks free to carve, emptied
	used  int      // chunks taken in the current generation
	peak  int      // decaying high-water mark of used, bounding spare
	made  int
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
		a.next(chunk)
	}
	s := a.buf[len(a.buf) : len(a.buf)+n : len(a.buf)+n]
	a.buf = a.buf[:len(a.buf)+n]
	clear(s) // a reused chunk holds old bytes
	return s
}

// next retires the current chunk and starts a spare or a new one.
func (a *Arena) next(chunk int) {
	if cap(a.buf) > 0 {
		a.cur = append(a.cur, a.buf[:0])
	}
	a.used++
	if n := len(a.spare); n > 0 && cap(a.spare[n-1]) == chunk {
		a.buf = a.spare[n-1]
		a.spare[n-1] = nil
		a.spare = a.spare[:n-1]
		return
	}
	a.buf = make([]byte, 0, chunk)
	a.made++
}

// Chunks returns the number of chunks the arena has made.
func (a *Arena) Chunks() int { return a.made }

// Copy returns a copy of p carved from the arena.
func (a *Arena) Copy(p []byte) []byte {
	chunk := a.Chunk
	if chunk <= 0 {
		chunk = 64 << 10
	}
	if len(p) > chunk/4 {
		s := make([]byte, len(p))
		copy(s, p)
		return s
	}
	// As Alloc, without clearing what the copy overwrites.
	if len(a.buf)+len(p) > cap(a.buf) {
		a.next(chunk)
	}
	n := len(a.buf)
	a.buf = append(a.buf, p...)
	return a.buf[n:len(a.buf):len(a.buf)]
}

// EndGen ends the current generation of slices. free declares that no
// slice of the generations before it is referenced any more: their chunks
// become spare, and the current chunk is retired so that it too is reused
// once its slices are free. Without free, the chunks of the generations
// before are forgotten, left to the garbage collector, and the current
// chunk keeps being carved. The current generation's chunks are kept for
// the next call.
func (a *Arena) EndGen(free bool) {
	if free {
		for _, c := range a.old {
			a.spare = append(a.spare, c)
		}
		if cap(a.buf) > 0 && len(a.buf) > 0 {
			a.cur = append(a.cur, a.buf[:0])
			a.buf = nil
		}
	}
	clear(a.old)
	a.old, a.cur = append(a.old[:0], a.cur...), a.cur[:0]
	clear(a.cur[:cap(a.cur)])
	// Spare chunks beyond what a generation has taken lately go.
	a.peak = max(a.used, a.peak-a.peak/8)
	a.used = 0
	if keep := a.peak + 1; len(a.spare) > keep {
		clear(a.spare[keep:])
		a.spare = a.spare[:keep]
	}
}
