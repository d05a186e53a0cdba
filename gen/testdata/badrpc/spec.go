// Package badrpc is a replicagen fixture with mistakes in RPC declarations.
package badrpc

//replica:class
type player struct {
	hp   int16
	wrap shout
	list []shout
}

//replica:class id=2
type tower struct {
	hp int16
}

type stats struct {
	n int32
}

//replica:rpc ghost client
type haunt struct{}

//replica:rpc Player client
type wave struct{}

//replica:rpc stats client
type count struct{}

//replica:rpc player both
type jump struct{}

//replica:rpc player
type duck struct{}

//replica:rpc player client id=x
type roll struct{}

//replica:class
//replica:rpc player server
type dual struct{}

//replica:rpc player client
//replica:rpc tower client
type twice struct{}

//replica:rpc player server
type shout struct {
	loud  bool
	vol   int16   `replica:"vis=owner"`
	pitch float32 `replica:"life=scene,chan=unreliable"`
	n     int     // field rules apply
	q     float32 `replica:"quant=0.5"`
}

//replica:rpc tower client id=4
type build struct{}

//replica:rpc tower server id=4
type razed struct{}

// Sneak is exported.
//
//replica:rpc player client
type Sneak struct{}

//replica:rpc player client
type level int32

// replica:rpc player client
type spaced struct{}
