package smart

// The process runner: the only code in diskcanary that starts a process
// (smartctl), and so the only non-test file that may import os/exec (the
// lint configuration's depguard rule holds it to that). What it owns: the
// process group, the timeout and the kill, the wait that never hangs the
// caller on a process stuck in the kernel, and the caps on what is kept of
// the output. The runner (runner.go) decides what to run and when.

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/diskcanary/diskcanary/internal/regfile"
)

// lookPath resolves the smartctl binary as the process runner will start it.
func lookPath(file string) (string, error) { return exec.LookPath(file) }

// maxOutput bounds what is kept of smartctl's stdout: the largest real
// --xall output is ~200 KB, and a misbehaving binary must not eat memory.
// A saved output (ReadSaved) is held to the same bound.
const maxOutput = 4 << 20

// ReadSaved reads a saved `smartctl --json` output (`diskcanary smart
// --from-json`): a regular file of at most maxOutput bytes, what a live
// run's stdout may be. A FIFO would block the read for ever and /dev/zero
// fill memory; both are refused before a byte is read.
func ReadSaved(path string) ([]byte, error) { return regfile.Read(path, maxOutput) }

type execResult struct {
	stdout   []byte
	stderr   string
	code     int
	timedOut bool
	err      error
	// reaped is non-nil when the process survived SIGKILL past the grace
	// period; it is closed once the process is finally reaped.
	reaped <-chan struct{}
}

// killGrace is how long a killed process gets to be reaped before the run
// gives up its concurrency slot.
const killGrace = 2 * time.Second

// runSmartctl runs the smartctl binary at path for at most timeout.
// smartctl runs in its own process group, and that whole group is killed
// after every run, not only at the timeout: anything smartctl (or a
// wrapper script standing in for it) left behind would otherwise pile up,
// one orphan per run.
func runSmartctl(ctx context.Context, path string, timeout time.Duration, args ...string) execResult {
	cmd := exec.Command(path, args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	stdout := &cappedOutput{limit: maxOutput}
	stderr := &cappedOutput{limit: maxStderr}
	cmd.Stdout, cmd.Stderr = stdout, stderr
	// Wait returns this long after the process exits even if something it
	// started escaped the group and still holds the output pipes.
	cmd.WaitDelay = time.Second
	if err := cmd.Start(); err != nil {
		return execResult{code: -1, err: fmt.Errorf("start %s: %w", path, err)}
	}
	pid := cmd.Process.Pid
	exited := make(chan struct{})
	go func() {
		waitExited(pid)
		close(exited)
	}()
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	res := execResult{code: -1}
	select {
	case <-exited:
	case <-timer.C:
		res.timedOut = true
	case <-ctx.Done():
		res.err = ctx.Err()
	}
	// Negative pid: the whole process group smartctl leads. smartctl is not
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
		res.reaped = done
		return res
	}
	if res.timedOut || res.err != nil {
		return res
	}
	res.stdout = stdout.Bytes()
	res.stderr = strings.TrimSpace(string(stderr.Bytes()))
	var ee *exec.ExitError
	switch {
	case waitErr == nil:
		res.code = 0
	case errors.As(waitErr, &ee) && ee.Exited():
		res.code = ee.ExitCode()
	default:
		res.err = fmt.Errorf("smartctl %s: %w", strings.Join(args, " "), waitErr)
	}
	// Truncated output is never parsed: half a JSON document from a binary
	// that prints hundreds of megabytes is not SMART data.
	for _, o := range []struct {
		name string
		out  *cappedOutput
	}{{"stdout", stdout}, {"stderr", stderr}} {
		if o.out.truncated {
			res.stdout, res.stderr = nil, ""
			res.err = fmt.Errorf("smartctl %s: printed more than %d bytes on %s (the rest was discarded); the largest real output is ~200 KB: check that %s is smartctl", strings.Join(args, " "), o.out.limit, o.name, path)
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

// maxStderr bounds what is kept of smartctl's stderr, which only ever
// holds a line or two for the error message.
const maxStderr = 64 << 10

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
