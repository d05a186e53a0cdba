package badspec

// Door is declared by the user, so replicagen cannot generate it.
type Door struct{}
