// Package lockbreak is a replicagen fixture whose specs break the schema
// recorded in its lock file.
package lockbreak

//replica:class id=2
type hero struct {
	health int16   `replica:"id=1"`
	shield int32   `replica:"id=3"`
	level  int32   // was int16
	pos    float32 `replica:"quant=0.5"` // was quant=0.25
	armor  int32   `replica:"id=9"`      // was id 4
	speed  float32
}

//replica:class id=1
type villain struct {
	hp int16
}

//replica:class id=5
type spirit struct {
	hp int16
}
