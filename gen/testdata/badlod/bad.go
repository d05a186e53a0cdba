// Package bad is a replicagen fixture with level-of-detail tags the
// server cannot use.
package bad

//replica:class
type hero struct {
	hp     int16
	secret int32 `replica:"vis=server,lod=10"`
	inner  gear
	a      uint8 `replica:"lod=50"`
	b      uint8 `replica:"lod=40"`
	c      uint8 `replica:"lod=30"`
	d      uint8 `replica:"lod=20"`
	e      uint8 `replica:"lod=10"`
}

type gear struct {
	helm uint16 `replica:"lod=5"`
}
