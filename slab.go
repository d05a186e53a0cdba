package replica

import (
	"math/bits"
	"slices"
	"unsafe"
)

// A slab recycles the backing arrays of the interest state's lists (an
// entity's observers, a client's pairs and its lists of a tick, a grid
// cell's entities and viewpoints), whose lengths go up and down tick after
// tick as things move. It hands out arrays of a power-of-two capacity,
// from slabMin up, and takes back those a list outgrows, or shrinks out
// of once it uses three eighths of one or less (an empty list holds
// none): the arrays of a capacity in use follow how many lists need that
// capacity now. Arrays of a capacity are made many at a time: as many
// again as made so far, and at least a quarter of what the slab made of
// every capacity; the first of a capacity come with a few of the next.
// Once the slab holds as many as the lists use at their busiest, with
// that margin, lists change size without allocating: a tick in steady
// state allocates nothing for them. The slab keeps what it made, in use
// or free: the memory is the state's high-water mark and its margin.
// Arrays over slabMax elements are left to the garbage collector.
type slab[T any] struct {
	free [slabClasses][][]T // per class, arrays ready for use
	made [slabClasses]int   // per class, arrays made
	size int                // bytes made, over every class
}

const (
	slabMinLog  = 2 // the smallest capacity, 4
	slabMin     = 1 << slabMinLog
	slabClasses = 9 // capacities 4 to 1,024
	slabMax     = slabMin << (slabClasses - 1)
	slabRefill  = 16 << 10 // bytes made at once, at least, unless that is one array
)

// slabClass returns the class of capacity n, a power of two from slabMin to
// slabMax, or -1.
func slabClass(n int) int {
	if n < slabMin || n > slabMax || n&(n-1) != 0 {
		return -1
	}
	return bits.TrailingZeros(uint(n)) - slabMinLog
}

// get returns an empty slice of capacity n, a power of two of at least
// slabMin.
func (p *slab[T]) get(n int) []T {
	k := slabClass(n)
	if k < 0 {
		return make([]T, 0, n)
	}
	if len(p.free[k]) == 0 {
		// Make as many as made so far, and at least a quarter of
		// what the slab made of every capacity, slabRefill bytes and
		// 8 arrays: the margin that keeps a steady state from
		// allocating when a few more lists than ever need this
		// capacity.
		var zero T
		size := max(int(unsafe.Sizeof(zero)), 1) * n
		m := max(p.made[k], p.size/4/size, slabRefill/size, 8)
		p.refill(k, m)
		if k+1 < slabClasses && p.made[k+1] == 0 {
			// A list that outgrows every list so far then finds an
			// array of the next capacity ready.
			p.refill(k+1, max(m/4, 8))
		}
	}
	free := p.free[k]
	s := free[len(free)-1]
	free[len(free)-1] = nil
	p.free[k] = free[:len(free)-1]
	return s
}

// refill makes m arrays of class k, in one allocation.
func (p *slab[T]) refill(k, m int) {
	n := slabMin << k
	var zero T
	block := make([]T, m*n)
	p.made[k] += m
	p.size += m * n * max(int(unsafe.Sizeof(zero)), 1)
	free := p.free[k]
	if cap(free) < p.made[k] {
		free = slices.Grow(free, 2*p.made[k]-len(free)) // room for the next refills too
	}
	for i := range m {
		free = append(free, block[i*n:i*n:(i+1)*n])
	}
	p.free[k] = free
}

// put takes back s's array, cleared, if it is of one of the slab's
// capacities. The free list has room for every array the slab made; an
// array it did not make may find none, and is then left to the garbage
// collector.
func (p *slab[T]) put(s []T) {
	if k := slabClass(cap(s)); k >= 0 && len(p.free[k]) < cap(p.free[k]) {
		s = s[:cap(s)]
		clear(s)
		p.free[k] = append(p.free[k], s[:0])
	}
}

// grow returns s with room for one more element: s itself, or a copy in
// an array of twice the capacity, s's going back to the slab.
func (p *slab[T]) grow(s []T) []T {
	if len(s) < cap(s) {
		return s
	}
	n := slabMin
	if cap(s) >= slabMin {
		n = 1 << bits.Len(uint(cap(s)))
	}
	t := p.get(n)[:len(s)]
	copy(t, s)
	p.put(s)
	return t
}

// push appends x to s, moving s to an array of twice the capacity, from
// the slab, when s is full.
func (p *slab[T]) push(s []T, x T) []T {
	if len(s) == cap(s) {
		s = p.grow(s)
	}
	return append(s, x)
}

// empty returns s emptied, for a list refilled tick after tick: without
// an array if its last use (len(s)) put nothing in it, in one of half the
// capacity if it filled three eighths of it or less (see shrink), so that
// a list's array follows what a tick puts in it, not the most it ever
// held.
func (p *slab[T]) empty(s []T) []T { return p.shrink(s)[:0] }

// shrink returns s in an array of half the capacity if it uses three
// eighths of its own or less, s's going back to the slab, or without an
// array if it is empty; else s. The new
// array is then at most three quarters full: a list must grow by a third
// before it moves up again, and a list that took a larger array for a
// while gives it back soon after, so that the arrays of a capacity in use
// follow how many lists need it now, not how many ever did.
func (p *slab[T]) shrink(s []T) []T {
	if len(s) == 0 && cap(s) > 0 {
		p.put(s) // an empty list holds no array
		return nil
	}
	if cap(s) <= slabMin || len(s) > cap(s)/8*3 || slabClass(cap(s)) < 0 {
		return s
	}
	t := p.get(cap(s) / 2)[:len(s)]
	copy(t, s)
	p.put(s)
	return t
}

// bytes returns the memory of the slab's free arrays.
func (p *slab[T]) bytes() int {
	var zero T
	n := 0
	for k, free := range p.free {
		n += len(free) * (slabMin << k)
	}
	return n * int(unsafe.Sizeof(zero))
}
