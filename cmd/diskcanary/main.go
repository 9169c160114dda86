// Command diskcanary is the storage-health daemon (serve) and its CLI
// (check, iostat, smart, version). main only wires; the work lives in
// probes/, collector/ and internal/.
package main

import (
	"errors"
	"fmt"
	"os"

	"github.com/spf13/cobra"
)

// exitError carries a process exit code out of a command (check: 1 = over
// threshold, 2 = could not measure).
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
and exports it all to Prometheus on :9742.`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.AddCommand(newServeCmd(), newCheckCmd(), newIostatCmd(), newSmartCmd(), newVersionCmd())
	return root
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
