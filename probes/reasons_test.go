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
