package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// The report keeps what lies outside its markers: the runs recorded by
// hand.
func TestWriteGeneratedKeepsTheRest(t *testing.T) {
	f := filepath.Join(t.TempDir(), "benchmarks.md")
	require.NoError(t, os.WriteFile(f, []byte("# head\n"+beginMark+"old table\n"+endMark+"## by hand\n"), 0o644))
	require.NoError(t, writeGenerated(f, []byte("new table\n")))
	b, err := os.ReadFile(f)
	require.NoError(t, err)
	require.Equal(t, "# head\n"+beginMark+"new table\n"+endMark+"## by hand\n", string(b))

	require.NoError(t, os.WriteFile(f, []byte("# no markers\n"), 0o644))
	require.ErrorContains(t, writeGenerated(f, nil), "no \"<!-- go run ./bench -report: generated from here -->\"")
}

// Flags given on the command line win over a scenario's own settings;
// the others stay the scenario's.
func TestOverride(t *testing.T) {
	scenario := defaults
	scenario.Rounds, scenario.Samples = 15, 1000
	flags := defaults
	flags.Rounds, flags.Samples = 1, 300
	got := override(scenario, flags, map[string]bool{"rounds": true})
	require.Equal(t, 1, got.Rounds)
	require.Equal(t, 1000, got.Samples)
}
