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
