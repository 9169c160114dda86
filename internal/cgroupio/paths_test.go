package cgroupio

import "github.com/diskcanary/diskcanary/internal/hostpath"

// pathsNone is a host without /proc or /sys: tests name every root.
var pathsNone = hostpath.Paths{ProcFS: "/nonexistent", SysFS: "/nonexistent"}
