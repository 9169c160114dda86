package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/diskcanary/diskcanary/internal/testfs"
)

// asMainEnv makes this test binary behave as the diskcanary binary (for
// tests that need a separate process: cgroups, signals, FUSE clients).
const asMainEnv = "DISKCANARY_TEST_AS_MAIN"

func TestMain(m *testing.M) {
	testfs.ServeIfChild()
	if args, ok := os.LookupEnv(asMainEnv); ok {
		os.Args = append([]string{"diskcanary"}, strings.Split(args, "\x1f")...)
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// diskcanaryCmd returns a command that runs diskcanary with args in a new
// process; wrap, when given, builds the command around the binary (e.g. to
// put it in a cgroup first).
func diskcanaryCmd(t *testing.T, wrap func(name string, args ...string) *exec.Cmd, args ...string) *exec.Cmd {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	if wrap == nil {
		wrap = exec.Command
	}
	cmd := wrap(self)
	cmd.Env = append(os.Environ(), asMainEnv+"="+strings.Join(args, "\x1f"))
	// A daemon started by a test dies with the test binary.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	return cmd
}

// nobody is the uid and gid of the tests that run diskcanary unprivileged.
const nobody = 65534

// nobodyCmd returns a command that runs diskcanary with args as nobody,
// from base, a 0755 directory it creates: the test binary lives in a 0700
// build directory, so it runs a copy there.
func nobodyCmd(t *testing.T, args ...string) (cmd *exec.Cmd, base string) {
	t.Helper()
	base, err := os.MkdirTemp("", "diskcanary-nobody-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	self, err := os.ReadFile(os.Args[0])
	if err == nil {
		err = os.Chmod(base, 0o755)
	}
	bin := filepath.Join(base, "diskcanary.test")
	if err == nil {
		err = os.WriteFile(bin, self, 0o755)
	}
	if err != nil {
		t.Fatal(err)
	}
	cmd = exec.Command(bin)
	cmd.Dir = base
	cmd.Env = append(os.Environ(), asMainEnv+"="+strings.Join(args, "\x1f"))
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Credential: &syscall.Credential{Uid: nobody, Gid: nobody}}
	return cmd, base
}
