// Package game declares the zone example's classes: heroes that players
// steer and monsters that wander a 2000 × 2000 field. replicagen turns
// the unexported specs into the exported types of game_replica.go.
package game

//go:generate go run github.com/replicago/replica/cmd/replicagen

// hero is a player's character. Its position is what interest
// management reads (pos=x, pos=y).
//
//replica:class
type hero struct {
	x     float32 `replica:"pos=x,quant=1/16,min=0,max=2000"`
	y     float32 `replica:"pos=y,quant=1/16,min=0,max=2000"`
	hp    int16
	name  string
	gold  int32 `replica:"vis=owner"` // its owner alone sees it
	emote uint8 `replica:"lod=40"`    // seen within 40 units, and by its owner
}

// monster wanders the field; a boss is seen from farther away.
//
//replica:class
type monster struct {
	x    float32 `replica:"pos=x,quant=1/16,min=0,max=2000"`
	y    float32 `replica:"pos=y,quant=1/16,min=0,max=2000"`
	hp   int16
	boss bool
}

// walk is called by a hero's client to move it to a point.
//
//replica:rpc hero client
type walk struct {
	x, y float32 `replica:"quant=1/16,min=0,max=2000"`
}
