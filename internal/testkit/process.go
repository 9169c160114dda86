package testkit

import (
	"bytes"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// FreeAddr is a 127.0.0.1:port address nothing listens on, for a process
// the test is about to start. The port is drawn from below the kernel's
// ephemeral range (net.ipv4.ip_local_port_range): a port that :0 hands out
// comes from that range, and any outgoing connection can take it before the
// process binds it. Seen: etcd beside an etcd loaded by hey failed with
// "bind: address already in use" on such a port.
func FreeAddr(tb TB) string {
	tb.Helper()
	const lowest = 10000 // above the well-known and most registered ports
	ephemeral := 32768   // the kernel's default start, if the sysctl is unreadable
	if b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
		if f := strings.Fields(string(b)); len(f) == 2 {
			if n, err := strconv.Atoi(f[0]); err == nil {
				ephemeral = n
			}
		}
	}
	if ephemeral-lowest < 1000 {
		tb.Fatalf("FreeAddr: the ephemeral port range starts at %d, leaving no ports below it above %d", ephemeral, lowest)
	}
	for range 200 {
		addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(lowest+rand.IntN(ephemeral-lowest)))
		l, err := net.Listen("tcp", addr)
		if err != nil {
			continue // taken: draw another
		}
		l.Close()
		return addr
	}
	tb.Fatalf("FreeAddr: no free port in 200 draws from %d-%d", lowest, ephemeral-1)
	return ""
}

// Process is a long-running command started by a test.
type Process struct {
	Cmd *exec.Cmd
	// Log is the file that takes the process's stdout and stderr.
	Log string
	// Done is closed when the process has exited.
	Done <-chan struct{}
}

// StartProcess starts bin with args; see StartCmd.
func StartProcess(tb TB, bin string, args ...string) *Process {
	tb.Helper()
	return StartCmd(tb, exec.Command(bin, args...))
}

// StartCmd starts cmd, its output going to a log file whose tail is printed
// if the test fails, and stops it at cleanup: SIGTERM, then SIGKILL after
// 10 s. It signals its own process only.
func StartCmd(tb TB, cmd *exec.Cmd) *Process {
	tb.Helper()
	name := filepath.Base(cmd.Path)
	p := &Process{Cmd: cmd, Log: filepath.Join(tb.TempDir(), name+".log")}
	logf, err := os.Create(p.Log)
	if err != nil {
		tb.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	// It dies with the test binary, even when a timeout panic skips cleanups.
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
	if err := cmd.Start(); err != nil {
		_ = logf.Close()
		tb.Fatalf("start %s: %v", name, err)
	}
	done := make(chan struct{})
	p.Done = done
	go func() { _ = cmd.Wait(); close(done) }()
	tb.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
		_ = logf.Close()
		if !tb.Failed() {
			return
		}
		if tail := p.logTail(); len(bytes.TrimSpace(tail)) > 0 {
			tb.Logf("%s output:\n%s", name, tail)
		}
	})
	return p
}

func (p *Process) logTail() []byte {
	b, _ := os.ReadFile(p.Log)
	const max = 16 << 10
	if len(b) > max {
		b = append([]byte("..."), b[len(b)-max:]...)
	}
	return b
}

// WaitListening waits until addr accepts TCP connections, failing the test
// at once if the process exits first.
func (p *Process) WaitListening(tb TB, addr string, timeout time.Duration) {
	tb.Helper()
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		select {
		case <-p.Done:
			tb.Fatalf("%s exited before listening on %s:\n%s", filepath.Base(p.Cmd.Path), addr, p.logTail())
		default:
		}
		if c, err := net.DialTimeout("tcp", addr, 100*time.Millisecond); err == nil {
			c.Close()
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	tb.Fatalf("%s not listening on %s after %v:\n%s", filepath.Base(p.Cmd.Path), addr, timeout, p.logTail())
}
