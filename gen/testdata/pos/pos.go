// Package pos is a replicagen fixture whose class keeps its position in a
// nested struct.
package pos

//replica:class
type walker struct {
	at   spot
	name string
}

type spot struct {
	x float32 `replica:"pos=x,quant=1/64"`
	y float32 `replica:"pos=y,quant=1/64"`
}
