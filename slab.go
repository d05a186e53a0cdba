package replica

import (
	"math/bits"
	"unsafe"
)

// A slab recycles the backing arrays of the interest state's lists (an
// entity's observers, a client's pairs, a grid cell's entities and
// viewpoints), whose lengths go up and down tick after tick as things
// move. It hands out arrays of a power-of-two capacity, from slabMin up,
// and takes back those a list outgrows, or shrinks out of once it uses a
// quarter of one or less. Arrays of a capacity are made several at a time,
// a quarter more than made so far, so that once the slab holds as many as
// the lists use at their busiest, lists change size without allocating:
// a tick in steady state allocates nothing for them. The slab keeps what
// it made, in use or free: the memory is the state's high-water mark, as
// with lists that only ever grow. Arrays over slabMax elements are left to
// the garbage collector.
type slab[T any] struct {
	free [slabClasses][][]T // per class, arrays ready for use
	made [slabClasses]int   // per class, arrays made
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
	free := p.free[k]
	if len(free) == 0 {
		// Make a quarter more than made so far, at least slabRefill
		// bytes, in one allocation.
		var zero T
		size := max(int(unsafe.Sizeof(zero)), 1) * n
		m := max(p.made[k]/4, slabRefill/size, 1)
		block := make([]T, m*n)
		p.made[k] += m
		if cap(free) < p.made[k] {
			free = make([][]T, 0, 2*p.made[k]) // room for the next refills too
		}
		for i := range m {
			free = append(free, block[i*n:i*n:(i+1)*n])
		}
	}
	s := free[len(free)-1]
	free[len(free)-1] = nil
	p.free[k] = free[:len(free)-1]
	return s
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

// fit returns s in an array of capacity n or more, a power of two: s
// itself, or a copy, s's array going back to the slab.
func (p *slab[T]) fit(s []T, n int) []T {
	if cap(s) >= n {
		return s
	}
	t := p.get(max(slabMin, 1<<bits.Len(uint(n-1))))[:len(s)]
	copy(t, s)
	p.put(s)
	return t
}

// shrink returns s in an array of half the capacity if it uses a quarter
// of its own or less, s's going back to the slab; else s.
func (p *slab[T]) shrink(s []T) []T {
	if cap(s) <= slabMin || len(s) > cap(s)/4 || slabClass(cap(s)) < 0 {
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
