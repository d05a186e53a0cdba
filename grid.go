package replica

import (
	"slices"
	"unsafe"

	"github.com/replicago/replica/state"
)

// A grid holds the cells of an AOI space by cell coordinates: a dense
// array of the cells themselves over the bounding box of the cells used
// so far, which grows to take in new ones up to maxDense cells; cells
// beyond go to a map. A zone of bounded size, the usual case, so costs an
// index per lookup, and a world without bounds still works. The cells of
// a row are side by side in memory: a query reads a row's cells from a
// few adjacent cache lines, fetched together, where cells of their own
// each took a line found through a pointer. A dense cell is in use while
// it holds something, and the cells' lists take their arrays from the
// grid's slabs: entities and viewpoints moving between cells allocate
// nothing. A *cell it returns is valid until the next call that places
// something (at, addEnt, addView): growing moves the dense cells.
type grid struct {
	x0, y0 int32 // the cell coordinates of dense[0]
	w, h   int32
	dense  []cell
	nviews []int32 // per dense cell, its viewpoints: view queries skip the cells without
	sparse map[cellKey]*cell
	n      int // cells in use, dense and sparse
	ents   slab[cellEnt]
	views  slab[cellView]

	// The viewpoints of the dense cells again, in one array in cell
	// order, rebuilt when they changed since (indexViews): a query reads
	// one run of it per row of cells, where walking the cells reads
	// each cell and its list apart, scattered over the heap.
	vflat  []cellView
	voff   []int32 // per dense cell, its first viewpoint in vflat; and the end
	vstale bool
	runs   [][]cellView // viewRuns' result
}

// maxDense bounds the dense array: 64 Ki cells, 3 MiB.
const maxDense = 1 << 16

type cellKey struct{ x, y int32 }

// A cell holds the entities placed in it and the viewpoints in it, each
// with its position (and an entity with its visibility radius), so that a
// query can pass over those out of reach without reading their records.
type cell struct {
	ents  []cellEnt
	views []cellView
}

// A cellEnt is an entity of a cell, or of an AOI space's wide list.
type cellEnt struct {
	id   state.ID
	x, y float64
	r    float64 // its visibility radius
}

// A cellView is a viewpoint of a cell.
type cellView struct {
	c    *Conn
	x, y float64
}

func (ce *cell) empty() bool { return len(ce.ents) == 0 && len(ce.views) == 0 }

func (g *grid) index(k cellKey) (int, bool) {
	dx, dy := int64(k.x)-int64(g.x0), int64(k.y)-int64(g.y0)
	if dx < 0 || dy < 0 || dx >= int64(g.w) || dy >= int64(g.h) {
		return 0, false
	}
	return int(dy*int64(g.w) + dx), true
}

// get returns the cell in use at k, or nil.
func (g *grid) get(k cellKey) *cell {
	if i, ok := g.index(k); ok {
		if ce := &g.dense[i]; !ce.empty() {
			return ce
		}
		return nil
	}
	return g.sparse[k]
}

// at returns the cell at k, making it if need be, and counts it in use:
// the caller puts something in it.
func (g *grid) at(k cellKey) *cell {
	i, ok := g.index(k)
	if !ok {
		if ce := g.sparse[k]; ce != nil {
			return ce
		}
		if ok = g.grow(k); ok {
			i, _ = g.index(k)
		}
	}
	if ok {
		ce := &g.dense[i]
		if ce.empty() {
			g.n++
		}
		return ce
	}
	ce := &cell{}
	g.n++
	if g.sparse == nil {
		g.sparse = make(map[cellKey]*cell)
	}
	g.sparse[k] = ce
	return ce
}

// grow widens the dense box to take in k, with a margin, unless that
// would pass maxDense cells.
func (g *grid) grow(k cellKey) bool {
	x0, y0, x1, y1 := int64(k.x), int64(k.y), int64(k.x)+1, int64(k.y)+1
	if g.w > 0 {
		x0, y0 = min(x0, int64(g.x0)), min(y0, int64(g.y0))
		x1, y1 = max(x1, int64(g.x0)+int64(g.w)), max(y1, int64(g.y0)+int64(g.h))
	}
	// A margin of a quarter on each growing side, so that a world
	// filling out cell by cell grows in few steps.
	mw, mh := (x1-x0)/4+1, (y1-y0)/4+1
	if k.x < g.x0 || g.w == 0 {
		x0 -= mw
	}
	if int64(k.x) >= int64(g.x0)+int64(g.w) || g.w == 0 {
		x1 += mw
	}
	if k.y < g.y0 || g.h == 0 {
		y0 -= mh
	}
	if int64(k.y) >= int64(g.y0)+int64(g.h) || g.h == 0 {
		y1 += mh
	}
	x0, y0 = max(x0, -1<<31), max(y0, -1<<31)
	x1, y1 = min(x1, 1<<31-1), min(y1, 1<<31-1)
	if (x1-x0)*(y1-y0) > maxDense {
		return false
	}
	dense := make([]cell, (x1-x0)*(y1-y0))
	w := int32(x1 - x0)
	for i := range g.dense {
		cx, cy := int64(g.x0)+int64(i%int(g.w)), int64(g.y0)+int64(i/int(g.w))
		dense[(cy-y0)*int64(w)+(cx-x0)] = g.dense[i]
	}
	g.x0, g.y0, g.w, g.h, g.dense = int32(x0), int32(y0), w, int32(y1-y0), dense
	for k, ce := range g.sparse { // now inside the box: dense from here on
		if i, ok := g.index(k); ok {
			g.dense[i] = *ce
			delete(g.sparse, k)
		}
	}
	g.nviews = make([]int32, len(dense))
	for i := range dense {
		g.nviews[i] = int32(len(dense[i].views))
	}
	g.vstale = true
	return true
}

// drop takes the cell at k out of use if it holds nothing: a dense one
// stays in place, empty, a sparse one goes.
func (g *grid) drop(k cellKey, ce *cell) {
	if !ce.empty() {
		return
	}
	if i, ok := g.index(k); ok {
		if &g.dense[i] == ce {
			g.n--
		}
		return
	}
	if g.sparse[k] == ce {
		delete(g.sparse, k)
		g.n--
	}
}

// addEnt puts entity e in the cell at k and returns its index there.
func (g *grid) addEnt(k cellKey, e cellEnt) int32 {
	ce := g.at(k)
	ce.ents = append(g.ents.grow(ce.ents), e)
	return int32(len(ce.ents) - 1)
}

// removeEnt takes the entity at index i out of the cell at k. The cell's
// last entity takes its place: removeEnt returns its ID, and false if it
// was the one removed.
func (g *grid) removeEnt(k cellKey, i int32) (moved state.ID, ok bool) {
	ce := g.get(k)
	if ce == nil {
		return 0, false
	}
	ce.ents, moved, ok = removeEnt(&g.ents, ce.ents, i)
	g.drop(k, ce)
	return moved, ok
}

// removeEnt removes ents[i] from ents, whose arrays come from sl, the last
// entity taking its place: it returns the list, and the ID of that entity,
// and false if it was the one removed.
func removeEnt(sl *slab[cellEnt], ents []cellEnt, i int32) ([]cellEnt, state.ID, bool) {
	last := int32(len(ents) - 1)
	ents[i] = ents[last]
	moved := ents[i].id
	return sl.shrink(ents[:last]), moved, i != last
}

// forgetView drops c, which no longer views the grid's space, from the
// flat copy of the viewpoints, where it would stay until the next query
// rebuilt it: a connection that left must not be kept.
func (g *grid) forgetView(c *Conn) {
	for i := range g.vflat {
		if g.vflat[i].c == c {
			g.vflat[i] = cellView{}
			g.vstale = true
		}
	}
}

// addView puts c's viewpoint, at (x, y), in the cell at k.
func (g *grid) addView(k cellKey, c *Conn, x, y float64) {
	ce := g.at(k)
	ce.views = append(g.views.grow(ce.views), cellView{c, x, y})
	if i, ok := g.index(k); ok {
		g.nviews[i]++
		g.vstale = true
	}
}

// removeView takes c's viewpoint out of the cell at k.
func (g *grid) removeView(k cellKey, c *Conn) {
	if ce := g.get(k); ce != nil {
		n := len(ce.views)
		ce.views = g.views.shrink(slices.DeleteFunc(ce.views, func(v cellView) bool { return v.c == c }))
		if i, ok := g.index(k); ok {
			g.nviews[i] -= int32(n - len(ce.views))
			g.vstale = true
		}
		g.drop(k, ce)
	}
}

// moveView moves c's viewpoint, in the cell at k, to (x, y) in the same
// cell. It reports false if the cell does not hold c's viewpoint.
func (g *grid) moveView(k cellKey, c *Conn, x, y float64) bool {
	if ce := g.get(k); ce != nil {
		for i := range ce.views {
			if ce.views[i].c == c {
				ce.views[i].x, ce.views[i].y = x, y
				g.vstale = true
				return true
			}
		}
	}
	return false
}

// near calls fn for the cells from lo to hi, corners included.
func (g *grid) near(lo, hi cellKey, fn func(*cell)) {
	// The dense part: the range clipped to the box.
	x0, y0 := max(int64(lo.x), int64(g.x0)), max(int64(lo.y), int64(g.y0))
	x1, y1 := min(int64(hi.x), int64(g.x0)+int64(g.w)-1), min(int64(hi.y), int64(g.y0)+int64(g.h)-1)
	for y := y0; y <= y1; y++ {
		row := g.dense[(y-int64(g.y0))*int64(g.w):]
		for x := x0 - int64(g.x0); x <= x1-int64(g.x0); x++ {
			if ce := &row[x]; !ce.empty() {
				fn(ce)
			}
		}
	}
	g.nearSparse(lo, hi, fn)
}

// viewRuns returns the viewpoints of the cells from lo to hi, corners
// included, as runs of the grid's arrays: one per row of the dense part
// that has some, one per sparse cell. The result is valid until the next
// call.
func (g *grid) viewRuns(lo, hi cellKey) [][]cellView {
	g.indexViews()
	runs := g.runs[:0]
	x0, y0 := max(int64(lo.x), int64(g.x0)), max(int64(lo.y), int64(g.y0))
	x1, y1 := min(int64(hi.x), int64(g.x0)+int64(g.w)-1), min(int64(hi.y), int64(g.y0)+int64(g.h)-1)
	if x0 <= x1 {
		for y := y0; y <= y1; y++ {
			at := (y-int64(g.y0))*int64(g.w) - int64(g.x0)
			if a, b := g.voff[at+x0], g.voff[at+x1+1]; a < b {
				runs = append(runs, g.vflat[a:b])
			}
		}
	}
	if len(g.sparse) > 0 { // without making the closure, in a bounded world
		g.nearSparse(lo, hi, func(ce *cell) {
			if len(ce.views) > 0 {
				runs = append(runs, ce.views)
			}
		})
	}
	g.runs = runs
	return runs
}

// indexViews brings vflat and voff up to date with the dense cells'
// viewpoints.
func (g *grid) indexViews() {
	if !g.vstale {
		return
	}
	g.vstale = false
	if n := len(g.dense) + 1; cap(g.voff) < n {
		g.voff = make([]int32, n)
	}
	g.voff = g.voff[:len(g.dense)+1]
	clear(g.vflat) // no departed connection kept past its cell
	g.vflat = g.vflat[:0]
	for i, n := range g.nviews {
		g.voff[i] = int32(len(g.vflat))
		if n > 0 {
			g.vflat = append(g.vflat, g.dense[i].views...)
		}
	}
	g.voff[len(g.dense)] = int32(len(g.vflat))
}

// nearSparse calls fn for the sparse cells from lo to hi, by key or by
// scan, whichever is fewer.
func (g *grid) nearSparse(lo, hi cellKey, fn func(*cell)) {
	if len(g.sparse) == 0 {
		return
	}
	if span := (int64(hi.x) - int64(lo.x) + 1) * (int64(hi.y) - int64(lo.y) + 1); span > int64(len(g.sparse)) {
		for k, ce := range g.sparse {
			if k.x >= lo.x && k.x <= hi.x && k.y >= lo.y && k.y <= hi.y {
				fn(ce)
			}
		}
		return
	}
	for cy := lo.y; ; cy++ {
		for cx := lo.x; ; cx++ {
			if ce := g.sparse[cellKey{cx, cy}]; ce != nil {
				fn(ce)
			}
			if cx == hi.x {
				break
			}
		}
		if cy == hi.y {
			break
		}
	}
}

// each calls fn for every cell in use.
func (g *grid) each(fn func(cellKey, *cell)) {
	for i := range g.dense {
		if ce := &g.dense[i]; !ce.empty() {
			fn(cellKey{g.x0 + int32(i%int(g.w)), g.y0 + int32(i/int(g.w))}, ce)
		}
	}
	for k, ce := range g.sparse {
		fn(k, ce)
	}
}

// bytes estimates the grid's memory: its dense array of cells, its sparse
// cells as map entries and cells of their own, the cells' lists (of the
// empty dense cells too), and the slabs' free arrays.
func (g *grid) bytes() int {
	const mapEntry = 48 // key, value, tophash and load-factor slack of a Go map entry
	n := int(unsafe.Sizeof(cell{}))*len(g.dense) + (mapEntry+int(unsafe.Sizeof(cell{})))*len(g.sparse) + g.ents.bytes() + g.views.bytes()
	lists := func(ce *cell) int {
		return int(unsafe.Sizeof(cellEnt{}))*cap(ce.ents) + int(unsafe.Sizeof(cellView{}))*cap(ce.views)
	}
	for i := range g.dense {
		n += lists(&g.dense[i])
	}
	for _, ce := range g.sparse {
		n += lists(ce)
	}
	return n
}
