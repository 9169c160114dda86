package main

import (
	"os"
	"os/exec"
	"syscall"
	"testing"

	"github.com/diskcanary/diskcanary/internal/testkit"
)

func TestMain(m *testing.M) { testkit.Main(m) }

// diskcanaryCmd returns a command that runs the diskcanary binary
// (testkit.Binary) with args; wrap, when given, builds the command around
// the binary (e.g. to put it in a cgroup first). A daemon started by a
// test dies with the test binary.
func diskcanaryCmd(t *testing.T, wrap func(name string, args ...string) *exec.Cmd, args ...string) *exec.Cmd {
	t.Helper()
	if wrap == nil {
		wrap = exec.Command
	}
	cmd := wrap(testkit.Binary(t), args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	return cmd
}

// nobody is the uid and gid of the tests that run diskcanary unprivileged.
const nobody = 65534

// nobodyCmd returns a command that runs diskcanary with args as nobody,
// from base, a 0755 directory it creates.
func nobodyCmd(t *testing.T, args ...string) (cmd *exec.Cmd, base string) {
	t.Helper()
	base, err := os.MkdirTemp("", "diskcanary-nobody-")
	if err == nil {
		err = os.Chmod(base, 0o755)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	cmd = diskcanaryCmd(t, nil, args...)
	cmd.Dir = base
	cmd.SysProcAttr.Credential = &syscall.Credential{Uid: nobody, Gid: nobody}
	return cmd, base
}
