//go:build !race

package wstransport

const raceEnabled = false
