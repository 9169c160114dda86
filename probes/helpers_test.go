package probes

import (
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/diskcanary/diskcanary/internal/testkit"
)

// benchDir lets bench scripts point benchmarks at a filesystem of their
// choice (tmpfs for per-op overhead).
func benchDir() string { return os.Getenv("DISKCANARY_BENCH_DIR") }

func TestMain(m *testing.M) { testkit.Main(m) }

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
