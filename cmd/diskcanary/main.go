// Command diskcanary is the storage-health daemon (serve) and its CLI
// (check, iostat, top, smart, version). main only wires; the work lives in
// probes/, collector/ and internal/.
package main

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"strings"

	"github.com/prometheus/common/version"
	"github.com/spf13/cobra"
)

// init wires the main goroutine to the main thread, which keeps every
// other goroutine, and so every disk op, off it. The kernel hands SIGTERM
// and SIGINT to the main thread whenever that thread can take them, and a
// thread waiting in a hung FUSE or NFS request cannot: the signal stays
// pending until the request returns, so a daemon whose probe happened to
// run there ignored its stop for as long as the disk hung. Main only waits
// for a signal or an exit; it does no I/O on a probed path.
func init() { runtime.LockOSThread() }

// exitUsage is every command's exit status for a usage error (unknown flag,
// bad value, wrong arguments): sysexits.h's EX_USAGE, apart from every
// verdict and from cobra's default 1, which for check and smart would read
// as "the disk is bad".
const exitUsage = 64

// usageErrors makes cmd's flag and argument errors exit with exitUsage;
// usageErrorsEverywhere applies it to every command.
func usageErrors(cmd *cobra.Command) {
	cmd.SetFlagErrorFunc(func(_ *cobra.Command, err error) error {
		return &exitError{exitUsage, err}
	})
	if args := cmd.Args; args != nil {
		cmd.Args = func(c *cobra.Command, a []string) error {
			if err := args(c, a); err != nil {
				return &exitError{exitUsage, err}
			}
			return nil
		}
	}
}

// exitError carries a process exit code out of a command (check: 1 =
// threshold exceeded, 2 = could not measure, exitUsage).
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }

func newRootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:   "diskcanary",
		Short: "Storage-health canary: probe latency, iostat-grade diskstats and SMART, for Prometheus",
		Long: `diskcanary tells the truth about storage: it runs small fio-style canary probes
(the etcd WAL pattern: sequential 2300-byte writes + fdatasync; 4 KiB O_DIRECT random
reads), reads /proc/diskstats the way iostat does and SMART through smartctl --json,
and exports it all to Prometheus on :9742.

Every command exits 64 (sysexits' EX_USAGE) on a usage error: an unknown
command or flag, a bad value, a wrong number of arguments.`,
		SilenceUsage:  true,
		SilenceErrors: true,
		// --version prints what `diskcanary version` prints.
		Version: version.Print("diskcanary"),
	}
	root.SetVersionTemplate("{{.Version}}\n")
	root.AddCommand(newServeCmd(), newCheckCmd(), newIostatCmd(), newTopCmd(), newSmartCmd(), newVersionCmd(), newManCmd())
	registerCompletions(root)
	usageErrorsEverywhere(root)
	return root
}

// usageErrorsEverywhere makes every command's usage errors exit with
// exitUsage, cobra's own commands (help, completion) and the root's unknown
// command included: cobra returns 1 for these, which for check and smart
// reads as a failing disk, so a typo in a CI gate would page someone.
func usageErrorsEverywhere(root *cobra.Command) {
	root.SuggestionsMinimumDistance = 2 // cobra's own default
	root.InitDefaultHelpCmd()
	root.InitDefaultCompletionCmd()
	// cobra answers an unknown word after a command that only groups others
	// with that command's help and exit 0; a Run makes it check the args.
	root.Args = func(c *cobra.Command, args []string) error {
		if len(args) == 0 {
			return nil
		}
		err := fmt.Sprintf("unknown command %q for %q", args[0], c.CommandPath())
		if s := c.SuggestionsFor(args[0]); len(s) > 0 {
			err += "; did you mean " + strings.Join(s, " or ") + "?"
		}
		return errors.New(err)
	}
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		if c.HasSubCommands() && !c.Runnable() {
			if c.Args == nil {
				c.Args = cobra.NoArgs
			}
			c.RunE = func(c *cobra.Command, _ []string) error { return c.Help() }
		}
		if c.Name() == "help" {
			c.Args = func(c *cobra.Command, args []string) error {
				if cmd, rest, err := c.Root().Find(args); err != nil || cmd == nil || len(rest) > 0 {
					return fmt.Errorf("unknown help topic %q", strings.Join(args, " "))
				}
				return nil
			}
		}
		usageErrors(c)
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
}

func main() {
	err := newRootCmd().Execute()
	if err == nil {
		return
	}
	code := 1
	var ee *exitError
	if errors.As(err, &ee) {
		code = ee.code
	}
	if msg := err.Error(); msg != "" {
		fmt.Fprintln(os.Stderr, "diskcanary:", msg)
	}
	os.Exit(code)
}
