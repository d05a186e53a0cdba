package replica

// Ref is a reference to another entity by its network ID. Declare a field of
// type Ref in an entity spec to replicate a reference; the zero Ref refers to
// nothing. Clients resolve references after a whole tick is applied, so a
// reference to an entity created in the same tick resolves.
type Ref uint32
