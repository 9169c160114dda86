package probes

import (
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/diskcanary/diskcanary/internal/testfs"
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

// TestMain lets this test binary double as the FUSE test filesystem's
// server process (testfs.Start re-executes it).
func TestMain(m *testing.M) {
	testfs.ServeIfChild()
	os.Exit(m.Run())
}

// threads is the process's OS thread count.
func threads(t *testing.T) int {
	t.Helper()
	b, err := os.ReadFile("/proc/self/status")
	require.NoError(t, err)
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "Threads:"); ok {
			n, err := strconv.Atoi(strings.TrimSpace(v))
			require.NoError(t, err)
			return n
		}
	}
	t.Fatal("no Threads: line in /proc/self/status")
	return 0
}
