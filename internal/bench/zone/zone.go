// Package zone declares the entity classes of the W2 zone workload: NPCs,
// and players with owner-only gold and inventory and the gear and emote
// that W2 shows only near the player (distance level of detail).
package zone

//go:generate go run github.com/replicago/replica/cmd/replicagen

// npc is a non-player entity of the zone.
//
//replica:class id=1
type npc struct {
	x     float32 `replica:"pos=x"`
	y     float32 `replica:"pos=y"`
	angle float32
	hp    int16
	level uint8
	name  string
}

// player is a client's avatar: client c owns player c.
//
//replica:class id=2
type player struct {
	x     float32 `replica:"pos=x"`
	y     float32 `replica:"pos=y"`
	angle float32
	hp    int16
	level uint8
	name  string
	gold  int32 `replica:"vis=owner"`
	// inv is the inventory: W2's 40 items, keyed 1..40.
	inv map[uint8]item `replica:"bag,vis=owner"`
	// gear and emote are near-LOD fields: W2 shows them only within 50
	// units (and always to the owner).
	gear  gear  `replica:"lod=50"`
	emote uint8 `replica:"lod=50"`
}

// item is one inventory item.
type item struct {
	kind  uint16
	count int16
}

// gear is what a player wears.
type gear struct {
	helm, armor, weapon uint16
}
