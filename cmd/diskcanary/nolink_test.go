package main

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// plotModules are the charting library and what only it pulls in: its
// code, fonts and tables would be resident file pages of the daemon.
var plotModules = []string{"gonum.org/", "codeberg.org/go-fonts/", "codeberg.org/go-latex/", "codeberg.org/go-pdf/",
	"git.sr.ht/~sbinet/gg", "github.com/ajstarks/svgo", "github.com/golang/freetype", "golang.org/x/image/"}

// The daemon binary does not link the charting library: diskcanary-plot
// draws the capacity curve. The plot command's own dependencies are listed
// too, so the test would notice that the list itself went stale.
func TestDaemonDoesNotLinkThePlotLibrary(t *testing.T) {
	deps := func(pkg string) []string {
		// go test puts its own go first on PATH.
		out, err := exec.Command("go", "list", "-deps", pkg).Output()
		require.NoError(t, err, "go list -deps %s", pkg)
		return strings.Fields(string(out))
	}
	plotting := func(deps []string) []string {
		var found []string
		for _, d := range deps {
			for _, m := range plotModules {
				if strings.HasPrefix(d, m) {
					found = append(found, d)
				}
			}
		}
		return found
	}
	require.Empty(t, plotting(deps(".")), "cmd/diskcanary links the charting library")
	plot := plotting(deps("../diskcanary-plot"))
	require.Contains(t, plot, "gonum.org/v1/plot")
	require.Contains(t, plot, "github.com/ajstarks/svgo")
}
