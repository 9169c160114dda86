package probes

// The failure taxonomy: every probe error maps to one bounded reason label.

import (
	"errors"
	"fmt"

	"golang.org/x/sys/unix"
)

// opError is a failed syscall with the stage it failed in; reason() gives a
// bounded label value for diskcanary_probe_failures_total.
type opError struct {
	stage string // open, fallocate, write, fdatasync, read, ...
	path  string
	err   error
}

func (e *opError) Error() string { return fmt.Sprintf("%s %s: %v", e.stage, e.path, e.err) }
func (e *opError) Unwrap() error { return e.err }

// Failure reasons: a small closed set, so the label stays bounded.
const (
	reasonMissing     = "missing"
	reasonPermission  = "permission"
	reasonReadOnly    = "read_only"
	reasonNoSpace     = "no_space"
	reasonLowSpace    = "low_space"
	reasonIOError     = "io_error"
	reasonNoODirect   = "odirect_unsupported"
	reasonBudget      = "budget_exhausted"
	reasonLocked      = "locked"
	reasonUnsafe      = "unsafe_path"
	reasonShortIO     = "short_io"
	reasonOther       = "other"
	reasonInterrupted = "interrupted"
)

// failureReasons is every reason reasonOf returns: the engine exports each
// at 0 for every probe from the start, so a dashboard shows 0 rather than
// "No data" before the first failure, and the metric's help lists them.
var failureReasons = []string{
	reasonMissing, reasonPermission, reasonReadOnly, reasonNoSpace, reasonLowSpace, reasonIOError,
	reasonNoODirect, reasonBudget, reasonLocked, reasonUnsafe, reasonShortIO, reasonInterrupted, reasonOther,
}

var (
	errLowSpace    = errors.New("free space would drop below the floor (min_free)")
	errBudget      = errors.New("daily write budget exhausted (daily_write_budget)")
	errShortIO     = errors.New("short read or write")
	errInterrupted = errors.New("interrupted by shutdown")
)

// reasonOf maps an error to its failure reason.
func reasonOf(err error) string {
	var errno unix.Errno
	switch {
	case errors.Is(err, errLowSpace):
		return reasonLowSpace
	case errors.Is(err, errBudget):
		return reasonBudget
	case errors.Is(err, errShortIO):
		return reasonShortIO
	case errors.Is(err, errInterrupted):
		return reasonInterrupted
	case errors.Is(err, errUnsafe):
		return reasonUnsafe
	case errors.Is(err, errLocked):
		return reasonLocked
	case errors.Is(err, errNoODirect):
		return reasonNoODirect
	case errors.As(err, &errno):
		switch errno {
		case unix.ENOENT, unix.ENOTDIR:
			return reasonMissing
		case unix.EACCES, unix.EPERM:
			return reasonPermission
		case unix.EROFS:
			return reasonReadOnly
		case unix.ENOSPC, unix.EDQUOT:
			return reasonNoSpace
		case unix.EIO:
			return reasonIOError
		}
	}
	return reasonOther
}
