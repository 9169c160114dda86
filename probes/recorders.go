package probes

// The recorders: where the op loops (ops.go) put each timed op.

import "time"

// walRecorder receives one WAL op's timings. Implementations must not allocate.
type walRecorder interface {
	recordWAL(write, fdatasync time.Duration)
}

// readRecorder receives one read's latency. Implementations must not allocate.
type readRecorder interface {
	recordRead(d time.Duration)
}

// recorder takes both kinds' ops: the daemon's histograms, check's samples.
type recorder interface {
	walRecorder
	readRecorder
}

// unrecorded takes ops that are run but not measured.
type unrecorded struct{}

func (unrecorded) recordWAL(_, _ time.Duration) {}
