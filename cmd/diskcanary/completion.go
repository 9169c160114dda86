package main

import (
	"os"
	"slices"
	"strings"

	"github.com/prometheus/common/promslog"
	"github.com/spf13/cobra"

	"github.com/diskcanary/diskcanary/internal/blockdev"
	"github.com/diskcanary/diskcanary/internal/hostpath"
	"github.com/diskcanary/diskcanary/probes"
)

// registerCompletions adds value completion to the commands' flags and
// arguments, from the lists the commands themselves accept, so the shell
// offers exactly what would be taken. `diskcanary completion SHELL` (cobra's
// default command) prints the script that calls it.
func registerCompletions(root *cobra.Command) {
	fixed := func(values ...string) cobra.CompletionFunc {
		return cobra.FixedCompletions(values, cobra.ShellCompDirectiveNoFileComp)
	}
	for _, cmd := range root.Commands() {
		switch cmd.Name() {
		case "check":
			_ = cmd.RegisterFlagCompletionFunc("profile",
				fixed(probes.ProfileEtcd, probes.ProfileFioEtcd, probes.ProfileRandRead, "all", probes.ProfileCapacity))
			_ = cmd.RegisterFlagCompletionFunc("pattern", fixed(probes.CapacityPatterns...))
		case "serve":
			_ = cmd.RegisterFlagCompletionFunc("log.level", fixed(promslog.LevelFlagOptions...))
			_ = cmd.RegisterFlagCompletionFunc("log.format", fixed(promslog.FormatFlagOptions...))
		case "iostat", "smart", "top":
			cmd.ValidArgsFunction = completeDevices
		}
	}
}

// completeDevices offers the kernel's block devices (the names in
// <sysfs>/block, which iostat and smart both take) not already given.
// iostat's --path.sysfs, when set, is where they are read.
func completeDevices(cmd *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
	var paths hostpath.Paths
	if f := cmd.Flags().Lookup("path.sysfs"); f != nil {
		paths.SysFS = f.Value.String()
	}
	entries, err := os.ReadDir(paths.Sys("block"))
	if err != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	var names []cobra.Completion
	for _, e := range entries {
		name := blockdev.NameFromSysfs(e.Name())
		if strings.HasPrefix(name, toComplete) && !slices.Contains(args, name) {
			names = append(names, name)
		}
	}
	return names, cobra.ShellCompDirectiveNoFileComp
}
