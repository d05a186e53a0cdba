// Package badspec is a replicagen fixture with mistakes in spec types.
package badspec

// Enemy is exported, but spec types must be unexported.
//
//replica:class
type Enemy struct {
	hp int16
}

//replica:class
type door struct {
	open bool
}

//replica:class
type tree struct {
	root node
}

type node struct {
	value int32
	next  node
}

//replica:entity
type lamp struct {
	on bool
}

// replica:class
type wall struct {
	hp int16
}

//replica:class
type level int32

//replica:class id=3
type chest struct {
	gold int32
}

//replica:class id=3
type barrel struct {
	wine int32
}

//replica:class id=x
type crate struct {
	nails int32
}
