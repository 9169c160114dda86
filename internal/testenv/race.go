//go:build race

package testenv

// Race is true in a race-detector build (go test -race).
const Race = true
