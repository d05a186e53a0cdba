package quicconn

// ring is a FIFO queue on a circular buffer that grows by doubling. The
// zero value is an empty queue.
type ring[T any] struct {
	buf  []T
	head int
	n    int
}

func (r *ring[T]) len() int { return r.n }

func (r *ring[T]) push(v T) {
	if r.n == len(r.buf) {
		nb := make([]T, max(8, 2*len(r.buf)))
		for i := range r.n {
			nb[i] = r.buf[(r.head+i)%len(r.buf)]
		}
		r.buf, r.head = nb, 0
	}
	r.buf[(r.head+r.n)%len(r.buf)] = v
	r.n++
}

// at returns the i-th element from the front.
func (r *ring[T]) at(i int) T { return r.buf[(r.head+i)%len(r.buf)] }

// pop removes and returns the front element; the queue must not be empty.
func (r *ring[T]) pop() T {
	var zero T
	v := r.buf[r.head]
	r.buf[r.head] = zero
	r.head = (r.head + 1) % len(r.buf)
	r.n--
	return v
}

// drop removes the first k elements.
func (r *ring[T]) drop(k int) {
	for range k {
		r.pop()
	}
	r.shrink()
}

// reset empties the queue and releases its memory.
func (r *ring[T]) reset() { *r = ring[T]{} }

// shrink releases a large buffer once the queue is empty, so that a burst
// does not pin memory on an idle connection.
func (r *ring[T]) shrink() {
	if r.n == 0 && len(r.buf) > 64 {
		r.reset()
	}
}
