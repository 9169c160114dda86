package testenv

import (
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// FreeAddr is a 127.0.0.1:port address the kernel just reported free.
func FreeAddr(tb testing.TB) string {
	tb.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// Process is a long-running command started by a test.
type Process struct {
	Cmd *exec.Cmd
	// Log is the file that takes the process's stdout and stderr.
	Log string
}

// StartProcess starts bin with args, its output going to a log file whose
// tail is printed if the test fails, and stops it at cleanup: SIGTERM,
// then SIGKILL after 10 s. It signals its own process only.
func StartProcess(tb testing.TB, bin string, args ...string) *Process {
	tb.Helper()
	name := filepath.Base(bin)
	p := &Process{Log: filepath.Join(tb.TempDir(), name+".log")}
	logf, err := os.Create(p.Log)
	if err != nil {
		tb.Fatal(err)
	}
	p.Cmd = exec.Command(bin, args...)
	p.Cmd.Stdout, p.Cmd.Stderr = logf, logf
	// It dies with the test binary, even when a timeout panic skips cleanups.
	p.Cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := p.Cmd.Start(); err != nil {
		_ = logf.Close()
		tb.Fatalf("start %s: %v", bin, err)
	}
	done := make(chan struct{})
	go func() { _ = p.Cmd.Wait(); close(done) }()
	tb.Cleanup(func() {
		_ = p.Cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = p.Cmd.Process.Kill()
			<-done
		}
		_ = logf.Close()
		if tb.Failed() {
			b, _ := os.ReadFile(p.Log)
			const max = 16 << 10
			if len(b) > max {
				b = append([]byte("..."), b[len(b)-max:]...)
			}
			tb.Logf("%s output:\n%s", name, b)
		}
	})
	return p
}
