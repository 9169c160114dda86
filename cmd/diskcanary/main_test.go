package main

import (
	"os"
	"os/exec"
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
