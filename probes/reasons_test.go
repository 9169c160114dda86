package probes

import (
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// Every reason reasonOf gives is one the engine exports at 0 from the
// start, and every exported reason can happen.
func TestEveryFailureReasonIsInitialised(t *testing.T) {
	errs := []error{errLowSpace, errBudget, errShortIO, errInterrupted, errUnsafe, errLocked, errNoODirect,
		unix.ENOENT, unix.ENOTDIR, unix.EACCES, unix.EPERM, unix.EROFS, unix.ENOSPC, unix.EDQUOT, unix.EIO,
		errFSGone, errors.New("anything else")}
	seen := map[string]bool{}
	for _, err := range errs {
		r := reasonOf(fmt.Errorf("probe x: %w", &opError{"write", "/x", err}))
		require.Contains(t, failureReasons, r, "%v", err)
		seen[r] = true
	}
	require.Len(t, seen, len(failureReasons))
}

// The flush check reads field 16 of the device's sysfs stat line: real
// lines from a loop device and a virtio disk on kernel 6.18, and the
// shorter lines of kernels that count no flushes (before 5.5: 15 fields;
// before 4.18: 11).
func TestFlushesCompletedFromSysfsStat(t *testing.T) {
	for _, c := range []struct {
		line    string
		flushes uint64
		ok      bool
	}{
		{"  317686       14  2563672    19831  2947133  1297856 43220636   374323        0   159572   432775        2        0     4096        0  1772992    38620\n", 1772992, true},
		{" 1580531   143100 49234394  7513044  2394387   646861 69882768   706605        0   818644  8312891   383463       59 6034550656    43520   741840    49721\n", 741840, true},
		{"  317686       14  2563672    19831  2947133  1297856 43220636   374323        0   159572   432775        2        0     4096        0\n", 0, false},
		{"  317686       14  2563672    19831  2947133  1297856 43220636   374323        0   159572   432775\n", 0, false},
		{"", 0, false},
	} {
		flushes, ok := flushesCompleted([]byte(c.line))
		require.Equal(t, c.ok, ok, c.line)
		if ok {
			require.Equal(t, c.flushes, flushes, c.line)
		}
	}
}
