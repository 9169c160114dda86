package smart

// smartctl is started by the process package (its process group, timeout,
// kill and output caps); what smart keeps here is smartctl's bounds.

import (
	"context"
	"time"

	"github.com/diskcanary/diskcanary/internal/process"
	"github.com/diskcanary/diskcanary/internal/regfile"
)

// maxOutput bounds what is kept of smartctl's stdout: the largest real
// --xall output is ~200 KB, and a misbehaving binary must not eat memory.
// A saved output (ReadSaved) is held to the same bound.
const maxOutput = 4 << 20

// maxStderr bounds what is kept of smartctl's stderr, which only ever
// holds a line or two for the error message.
const maxStderr = 64 << 10

// ReadSaved reads a saved `smartctl --json` output (`diskcanary smart
// --from-json`): a regular file of at most maxOutput bytes, what a live
// run's stdout may be. A FIFO would block the read for ever and /dev/zero
// fill memory; both are refused before a byte is read.
func ReadSaved(path string) ([]byte, error) { return regfile.Read(path, maxOutput) }

// runSmartctl runs the smartctl binary at path for at most timeout.
func runSmartctl(ctx context.Context, path string, timeout time.Duration, args ...string) process.Result {
	return process.Run(ctx, path, process.Options{Name: "smartctl", Timeout: timeout, MaxStdout: maxOutput, MaxStderr: maxStderr}, args...)
}
