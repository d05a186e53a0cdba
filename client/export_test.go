package client

// LastEvents returns the number of events the last committed tick
// produced, watched leaves only (creations and destructions always count).
func LastEvents(r *Replica) int { return r.lastEvents }
