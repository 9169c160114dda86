package probes

import (
	"os"
	"os/exec"
	"testing"
)

// runSelf re-runs this test binary for one test with extra environment, for
// behaviour that needs a second process (locks, credentials).
func runSelf(t *testing.T, test string, env ...string) (string, error) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^"+test+"$", "-test.v", "-test.count=1")
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// benchDir lets bench scripts point benchmarks at a filesystem of their
// choice (tmpfs for per-op overhead).
func benchDir() string { return os.Getenv("DISKCANARY_BENCH_DIR") }
