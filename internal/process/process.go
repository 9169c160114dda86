// Package process starts the processes diskcanary runs: smartctl for the
// SMART collector, diskcanary-plot for check --plot. It is the only
// non-test code that may import os/exec (the lint configuration's depguard
// rule holds it to that). What it owns: the process group, the timeout and
// the kill, the wait that never hangs the caller on a process stuck in the
// kernel, and the caps on what is kept of the output. Its callers decide
// what to run and when.
package process

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// LookPath resolves a program as Run will start it.
func LookPath(file string) (string, error) { return exec.LookPath(file) }

// Result is what a run left: the output kept, the exit code (-1 when it
// did not exit by itself), whether the timeout killed it.
type Result struct {
	Stdout   []byte
	Stderr   string
	Code     int
	TimedOut bool
	Err      error
	// Reaped is non-nil when the process survived SIGKILL past the grace
	// period; it is closed once the process is finally reaped.
	Reaped <-chan struct{}
}

// Options bound a run: how long it may take, and what is kept of its
// output; Stdin is handed to it whole. Name is the program in messages.
type Options struct {
	Name                 string
	Timeout              time.Duration
	MaxStdout, MaxStderr int
	Stdin                []byte
}

// killGrace is how long a killed process gets to be reaped before the run
// gives up its concurrency slot.
const killGrace = 2 * time.Second

// Run runs the binary at path for at most o.Timeout. It runs in its own
// process group, and that whole group is killed after every run, not only
// at the timeout: anything it (or a wrapper script standing in for it)
// left behind would otherwise pile up, one orphan per run.
func Run(ctx context.Context, path string, o Options, args ...string) Result {
	cmd := exec.Command(path, args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	stdout := &cappedOutput{limit: o.MaxStdout}
	stderr := &cappedOutput{limit: o.MaxStderr}
	cmd.Stdout, cmd.Stderr = stdout, stderr
	if o.Stdin != nil {
		cmd.Stdin = bytes.NewReader(o.Stdin)
	}
	// Wait returns this long after the process exits even if something it
	// started escaped the group and still holds the output pipes.
	cmd.WaitDelay = time.Second
	if err := cmd.Start(); err != nil {
		return Result{Code: -1, Err: fmt.Errorf("start %s: %w", path, err)}
	}
	pid := cmd.Process.Pid
	exited := make(chan struct{})
	go func() {
		waitExited(pid)
		close(exited)
	}()
	timer := time.NewTimer(o.Timeout)
	defer timer.Stop()
	res := Result{Code: -1}
	select {
	case <-exited:
	case <-timer.C:
		res.TimedOut = true
	case <-ctx.Done():
		res.Err = ctx.Err()
	}
	// Negative pid: the whole process group the process leads. It is not
	// reaped yet (cmd.Wait comes next), so its pid, which is the group's
	// id, cannot have been reused by an unrelated process.
	_ = syscall.Kill(-pid, syscall.SIGKILL)
	done := make(chan struct{})
	var waitErr error
	go func() {
		waitErr = cmd.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(killGrace):
		// Only a killed process can be stuck here (uninterruptible sleep);
		// one that exited is a zombie that Wait reaps at once.
		res.Reaped = done
		return res
	}
	if res.TimedOut || res.Err != nil {
		return res
	}
	res.Stdout = stdout.Bytes()
	res.Stderr = strings.TrimSpace(string(stderr.Bytes()))
	var ee *exec.ExitError
	switch {
	case waitErr == nil:
		res.Code = 0
	case errors.As(waitErr, &ee) && ee.Exited():
		res.Code = ee.ExitCode()
	default:
		res.Err = fmt.Errorf("%s %s: %w", o.Name, strings.Join(args, " "), waitErr)
	}
	// Truncated output is never parsed: half a JSON document from a binary
	// that prints hundreds of megabytes is not the program's data.
	for _, c := range []struct {
		name string
		out  *cappedOutput
	}{{"stdout", stdout}, {"stderr", stderr}} {
		if c.out.truncated {
			res.Stdout, res.Stderr = nil, ""
			res.Err = fmt.Errorf("%s %s: printed more than %d bytes on %s (the rest was discarded): check that %s is %s", o.Name, strings.Join(args, " "), c.out.limit, c.name, path, o.Name)
			break
		}
	}
	return res
}

// waitExited blocks until process pid has exited, without reaping it
// (WNOWAIT): cmd.Wait still gets its status, and until then the pid stays
// taken, so killing its process group afterwards cannot hit a stranger.
func waitExited(pid int) {
	for {
		var info unix.Siginfo
		err := unix.Waitid(unix.P_PID, pid, &info, unix.WEXITED|unix.WNOWAIT, nil)
		if err != unix.EINTR {
			// ECHILD: cmd.Wait reaped it first (after a timeout kill).
			return
		}
	}
}

// cappedOutput keeps the first limit bytes written to it and drops the
// rest, noting that it did, so a runaway process cannot grow diskcanary's
// memory.
// It must not implement io.ReaderFrom: io.Copy (what os/exec uses to drain
// a pipe) would call that instead of Write, and bytes.Buffer's ReadFrom
// reads everything. Writes past the cap still succeed, so the child keeps
// draining and never blocks on a full pipe.
type cappedOutput struct {
	buf       []byte
	limit     int
	truncated bool
}

func (b *cappedOutput) Write(p []byte) (int, error) {
	n := len(p)
	if room := b.limit - len(b.buf); n > room {
		b.truncated = true
		p = p[:max(room, 0)]
	}
	b.buf = append(b.buf, p...)
	return n, nil
}

// Bytes returns what was kept.
func (b *cappedOutput) Bytes() []byte { return b.buf }
