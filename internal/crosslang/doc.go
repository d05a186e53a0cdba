// Package crosslang holds the cross-language property test: a Go server
// drives random histories to a Go client and to the TypeScript client
// runtime running in Node (internal/tsnode), fed the same bytes, and both
// replicas must hold the same state, by their canonical dumps, after every
// tick. It has no code besides its tests.
package crosslang
