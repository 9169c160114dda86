package testfs

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/diskcanary/diskcanary/internal/testkit"
)

// Mounted is a running test filesystem.
type Mounted struct {
	Dir     string // the mountpoint
	Backing string
	Control *Control
	cmd     *exec.Cmd
}

// Start mounts a test filesystem over backing (a fresh directory under
// /dev/shm when backing is "", with --fake-sync, so injected latency is
// the whole latency) in its own process, the diskcanary-testfs command
// (built by testkit.Build: the package's TestMain must be testkit.Main).
// It skips the test when not root or without /dev/fuse, and
// unmounts at cleanup.
func Start(tb testkit.TB, backing string, args ...string) *Mounted {
	tb.Helper()
	testkit.RequireRoot(tb) // mount
	if _, err := os.Stat("/dev/fuse"); err != nil {
		tb.Skip("skipping: no /dev/fuse on this machine")
	}
	server := testkit.Build(tb, "internal/testkit/testfs/cmd/diskcanary-testfs")
	if backing == "" {
		dir, err := os.MkdirTemp("/dev/shm", "dc-testfs-backing-")
		if err != nil {
			tb.Fatal(err)
		}
		tb.Cleanup(func() { os.RemoveAll(dir) })
		backing = dir
		args = append(args, "--fake-sync")
	}
	mnt, err := os.MkdirTemp("", "dc-testfs-mnt-")
	if err != nil {
		tb.Fatal(err)
	}
	sock := filepath.Join(os.TempDir(), filepath.Base(mnt)+".sock")
	cmd := exec.Command(server, append([]string{"--backing", backing, "--mountpoint", mnt, "--control", sock}, args...)...)
	cmd.Stderr = os.Stderr
	// If the test binary dies (a timeout panic skips cleanups), the server
	// releases held ops and unmounts instead of leaving a dead mount.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
	out, err := cmd.StdoutPipe()
	if err != nil {
		tb.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	m := &Mounted{Dir: mnt, Backing: backing, cmd: cmd}
	tb.Cleanup(func() { m.stop(tb); os.Remove(mnt); os.Remove(sock) })

	ready := make(chan string, 1)
	go func() {
		line, _ := bufio.NewReader(out).ReadString('\n')
		ready <- strings.TrimSpace(line)
	}()
	select {
	case line := <-ready:
		if line != "ready" {
			tb.Fatalf("test filesystem did not start (said %q)", line)
		}
	case <-time.After(20 * time.Second):
		tb.Fatal("test filesystem did not start within 20s")
	}
	if m.Control, err = Dial(sock); err != nil {
		tb.Fatal(err)
	}
	return m
}

// Pid is the test filesystem server's process ID.
func (m *Mounted) Pid() int { return m.cmd.Process.Pid }

// Do sends a control command and fails the test on error. A hang is
// released at cleanup before anything the test started after the mount is
// stopped: cleanups run last-registered first, so a test that fails while
// its daemon waits in the hung filesystem would otherwise wait for ever in
// the cleanup that stops the daemon, never reaching this mount's own.
func (m *Mounted) Do(tb testkit.TB, cmd string) {
	tb.Helper()
	if _, err := m.Control.Do(cmd); err != nil {
		tb.Fatalf("testfs %s: %v", cmd, err)
	}
	if strings.HasPrefix(cmd, "hang") {
		tb.Cleanup(func() { _, _ = m.Control.Do("release") })
	}
}

func (m *Mounted) stop(tb testkit.TB) {
	if m.Control != nil {
		_, _ = m.Control.Do("release")
		m.Control.Close()
	}
	_ = m.cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan error, 1)
	go func() { done <- m.cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		tb.Logf("test filesystem did not exit; killing it and detaching %s", m.Dir)
		_ = m.cmd.Process.Kill()
		<-done
	}
	// Never leave a dead FUSE mount behind on a test machine.
	_ = syscall.Unmount(m.Dir, syscall.MNT_DETACH)
}

// LoopDevice attaches a 64 MiB file on this filesystem to a loop device
// that reads it with O_DIRECT (so every read reaches the filesystem and its
// injected faults, no page cache answers) and turns a flush into an fsync of
// it: a disk whose own requests carry the faults. Detached at cleanup.
func (m *Mounted) LoopDevice(tb testkit.TB) string {
	tb.Helper()
	img := filepath.Join(m.Dir, "disk.img")
	if err := os.WriteFile(img, nil, 0o600); err != nil {
		tb.Fatal(err)
	}
	if err := os.Truncate(img, 64<<20); err != nil {
		tb.Fatal(err)
	}
	return testkit.LoopDevice(tb, img, "--direct-io=on")
}
