// Package persistschema declares the player of the persistence benchmark
// (replica-store bench): W2's players, whose gold, level and
// 40-item inventory are saved to the database.
package persistschema

//go:generate go run github.com/replicago/replica/cmd/replicagen

// player is a client's avatar; its persist fields are its save.
//
//replica:class id=1
type player struct {
	x     float32 `replica:"pos=x"`
	y     float32 `replica:"pos=y"`
	hp    int16
	name  string
	gold  int32 `replica:"vis=owner,life=persist"`
	level uint8 `replica:"life=persist"`
	// inv is the inventory: W2's 40 items, keyed 1..40.
	inv map[uint8]item `replica:"bag,vis=owner,life=persist"`
}

// item is one inventory item.
type item struct {
	kind  uint16
	count int16
}
