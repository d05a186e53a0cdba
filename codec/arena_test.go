package codec

import "testing"

func TestArena(t *testing.T) {
	var a Arena
	a.Chunk = 64
	x := a.Copy([]byte("abc"))
	y := a.Alloc(5)
	if string(x) != "abc" || len(y) != 5 || cap(x) != 3 || cap(y) != 5 {
		t.Fatalf("x %q cap %d, y len %d cap %d", x, cap(x), len(y), cap(y))
	}
	y = append(y, 'z') // must not write over another slice
	if string(x) != "abc" {
		t.Fatalf("x became %q", x)
	}
	big := a.Alloc(100) // over a quarter: a slice of its own
	if len(big) != 100 {
		t.Fatal(len(big))
	}
	n := testing.AllocsPerRun(100, func() { a.Alloc(8) })
	if n > 8.0/64*2 {
		t.Fatalf("%v allocations per 8-byte slice from 64-byte chunks", n)
	}
}

// TestArenaGenerations checks that chunks are carved again only once the
// generations they served are declared free, zeroed, and that without
// free they are never written over.
func TestArenaGenerations(t *testing.T) {
	var a Arena
	a.Chunk = 64
	gen := func(tag byte) [][]byte {
		var out [][]byte
		for range 20 { // 160 bytes: three chunks
			s := a.Alloc(8)
			for i, b := range s {
				if b != 0 {
					t.Fatalf("Alloc returned byte %d = %d", i, b)
				}
				s[i] = tag
			}
			out = append(out, s)
		}
		return out
	}
	intact := func(slices [][]byte, tag byte) {
		t.Helper()
		for _, s := range slices {
			for _, b := range s {
				if b != tag {
					t.Fatalf("a slice of generation %d was written over (%d)", tag, b)
				}
			}
		}
	}
	// Held: nothing is reused, every generation stays intact.
	var kept [][][]byte
	for g := range 5 {
		kept = append(kept, gen(byte(g+1)))
		a.EndGen(false)
	}
	for g, s := range kept {
		intact(s, byte(g+1))
	}
	made := a.Chunks()
	// Free from now on: a generation's slices stay intact until the end
	// of the next, and the chunks are reused.
	var prev [][]byte
	for g := range 50 {
		cur := gen(byte(100 + g%100))
		if prev != nil {
			intact(prev, byte(100+(g-1)%100))
		}
		a.EndGen(true)
		prev = cur
	}
	if grown := a.Chunks() - made; grown > 8 {
		t.Fatalf("%d chunks made over 50 freed generations of 3 chunks", grown)
	}
}
