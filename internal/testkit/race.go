//go:build race

package testkit

// Race is true in a race-detector build (go test -race).
const Race = true
