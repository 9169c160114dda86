package main

import (
	"fmt"
	"runtime/debug"

	"github.com/prometheus/common/version"
	"github.com/spf13/cobra"
)

func newVersionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version and build information",
		Args:  cobra.NoArgs,
		Run: func(cmd *cobra.Command, _ []string) {
			fmt.Fprintln(cmd.OutOrStdout(), version.Print("diskcanary"))
		},
	}
}

// Built without deploy/build.sh's ldflags (go run, go install), the version
// would print empty: use the module version go install records, else "devel".
func init() {
	if version.Version != "" {
		return
	}
	version.Version = "devel"
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		version.Version = bi.Main.Version
	}
}
