//go:build race

package wstransport

const raceEnabled = true
