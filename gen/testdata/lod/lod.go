// Package lod is a replicagen fixture whose class sends some fields only
// to clients near an entity.
package lod

//replica:class
type hero struct {
	x     float32 `replica:"pos=x"`
	y     float32 `replica:"pos=y"`
	hp    int16
	gear  gear   `replica:"lod=60"`
	emote string `replica:"lod=20"`
	title string `replica:"lod=60"`
}

type gear struct {
	helm  uint16
	boots uint16
}
