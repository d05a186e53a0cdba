// Package aoiarena declares the entity class of the W1 arena workload in
// AOI mode, run by a replica.Server with interest management: W1's
// lossless unit (plain float32 position and angle), whose x and y are its
// position.
package aoiarena

//go:generate go run github.com/replicago/replica/cmd/replicagen

// unit is an arena entity; interest management reads its position from x
// and y.
//
//replica:class id=1
type unit struct {
	x     float32 `replica:"pos=x"`
	y     float32 `replica:"pos=y"`
	angle float32
	hp    int16
	name  string
}
