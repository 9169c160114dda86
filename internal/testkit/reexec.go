package testkit

import (
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"syscall"
	"testing"
)

// childEnv names, in a test binary Reexec started, the one test it runs
// as the child.
const childEnv = "DISKCANARY_TEST_CHILD"

// Main is the TestMain of every package that uses Build, Binary or
// Reexec: it runs the tests, then removes what those left behind.
func Main(m *testing.M) {
	binDir.Lock()
	binDir.main = true
	binDir.Unlock()
	code := m.Run()
	binDir.Lock()
	if binDir.path != "" {
		_ = os.RemoveAll(binDir.path)
	}
	binDir.Unlock()
	os.Exit(code)
}

// Reexec returns a command that runs this test binary again, in a process
// of its own, for the one test named test (usually the caller's own
// t.Name(): InChild tells it which side it is on), with env added to its
// environment. For what needs a second process: a lock another process
// holds, another user's credentials, a process no other test has left
// goroutines in. The binary runs from a copy in a 0755 directory, so the
// command may drop to an unprivileged user (SysProcAttr.Credential); the
// child dies with the test binary.
func Reexec(tb TB, test string, env ...string) *exec.Cmd {
	tb.Helper()
	self := selfCopy(tb)
	cmd := exec.Command(self, "-test.run=^"+regexp.QuoteMeta(test)+"$", "-test.v", "-test.count=1")
	cmd.Env = append(append(os.Environ(), childEnv+"="+test), env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	return cmd
}

// InChild reports whether tb's test is running as the child Reexec
// started for it.
func InChild(tb TB) bool { return os.Getenv(childEnv) == tb.Name() }

var self built

// selfCopy copies the test binary into binDir once: the build directory
// `go test` runs it from is 0700.
func selfCopy(tb TB) string {
	tb.Helper()
	self.once.Do(func() {
		dir, err := sharedDir()
		if err != nil {
			self.err = err
			return
		}
		exe, err := os.Executable()
		if err != nil {
			self.err = err
			return
		}
		self.path = filepath.Join(dir, filepath.Base(exe))
		self.err = copyExecutable(exe, self.path)
	})
	if self.err != nil {
		tb.Fatal(self.err)
	}
	return self.path
}

func copyExecutable(from, to string) error {
	src, err := os.Open(from)
	if err != nil {
		return err
	}
	defer src.Close()
	dst, err := os.OpenFile(to, os.O_CREATE|os.O_WRONLY|os.O_EXCL, 0o755)
	if err != nil {
		return err
	}
	_, err = io.Copy(dst, src)
	if cerr := dst.Close(); err == nil {
		err = cerr
	}
	return err
}
