package main

import (
	"fmt"
	"os"

	"github.com/prometheus/common/version"
	"github.com/spf13/cobra"
	"github.com/spf13/cobra/doc"
)

// newManCmd writes the man pages, one per command, from the commands'
// own help: packagers run it at build time, so the pages never drift from
// --help. Hidden: it is a build step, not something an operator runs.
func newManCmd() *cobra.Command {
	return &cobra.Command{
		Use:    "man DIR",
		Short:  "Write the man pages (section 1) into DIR",
		Hidden: true,
		Args:   cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			dir := args[0]
			if err := os.MkdirAll(dir, 0o755); err != nil {
				return err
			}
			root := cmd.Root()
			// Hidden commands (this one, cobra's __complete) get no page.
			root.DisableAutoGenTag = true
			err := doc.GenManTree(root, &doc.GenManHeader{
				Title:   "DISKCANARY",
				Section: "1",
				Source:  "diskcanary " + version.Version,
				Manual:  "diskcanary manual",
			}, dir)
			if err != nil {
				return fmt.Errorf("man pages into %s: %w", dir, err)
			}
			return nil
		},
	}
}
