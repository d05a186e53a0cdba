// Package badpos is a replicagen fixture with position tags the server
// could not use.
package badpos

//replica:class
type sign struct {
	x    float32 `replica:"pos=x"`
	y    float32 `replica:"pos=y"`
	text string  `replica:"pos=y"`
}

//replica:class
type post struct {
	x float32 `replica:"pos=x"`
}

//replica:class
type pair struct {
	a, b float64 `replica:"pos=x"`
	c    int32   `replica:"pos=y"`
}

//replica:class
type caravan struct {
	carts []crate
}

type crate struct {
	x int32 `replica:"pos=x"`
	y int32 `replica:"pos=y"`
}
