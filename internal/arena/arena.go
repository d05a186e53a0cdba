// Package arena declares the entity classes of the W1 arena workload: one
// lossless class and one quantized class (positions at 1/64 unit, angle in
// 12 bits).
package arena

//go:generate go run github.com/replicago/replica/cmd/replicagen -ts

// unit is an arena entity with full-precision floats.
//
//replica:class id=1
type unit struct {
	x, y  float32
	angle float32
	hp    int16
	name  string
}

// qunit is an arena entity with quantized position and angle.
//
//replica:class id=2
type qunit struct {
	x, y  float32 `replica:"quant=1/64,min=0,max=1000"`
	angle float32 `replica:"bits=12,min=0,max=6.2816513263917"`
	hp    int16
	name  string
}
