// Package smarttest builds and configures the fake smartctl
// (internal/smart/testdata/fakesmartctl) for the tests of internal/smart,
// collector and cmd/diskcanary. It is test support only: its os/exec use
// (running `go build` on the fake) never reaches the diskcanary binary.
package smarttest

import (
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
	"testing"

	"github.com/diskcanary/diskcanary/internal/testkit"
)

// FakeDevice is how the fake smartctl answers for one device name.
type FakeDevice struct {
	Fixture string `json:"fixture,omitempty"` // smartctl --json file to print (its exit_status is the exit code)
	Sleep   string `json:"sleep,omitempty"`   // a Go duration to sleep first
	Hang    bool   `json:"hang,omitempty"`    // never answer; start a grandchild that never exits either
	Escape  bool   `json:"escape,omitempty"`  // with Hang: the grandchild leaves the process group (setsid)
	Exit    *int   `json:"exit,omitempty"`    // exit code override
	Garbage bool   `json:"garbage,omitempty"` // print text that is not JSON
	Stderr  string `json:"stderr,omitempty"`  // a line for stderr
	// A self-test start (--test=KIND) prints SelfTest (default: a bare
	// successful answer), and the next TestingReads reads print Testing.
	SelfTest     string `json:"selftest,omitempty"`
	Testing      string `json:"testing,omitempty"`
	TestingReads int    `json:"testing_reads,omitempty"`
}

// FakeConfig is the whole fake: what --scan-open lists and how each device answers.
type FakeConfig struct {
	Scan []map[string]string `json:"scan"`
	// ScanFixture, when set, is a saved `smartctl --scan` file printed instead of Scan.
	ScanFixture string                `json:"scan_fixture,omitempty"`
	Devices     map[string]FakeDevice `json:"devices"`
	// Log receives "start NAME UNIXNANO ARGS" / "end NAME UNIXNANO" lines.
	Log string `json:"log,omitempty"`
	// PIDFile receives "PID CHILDPID" of every hanging run.
	PIDFile string `json:"pidfile,omitempty"`
}

var (
	buildOnce sync.Once
	binPath   string
	buildErr  error
)

// Build compiles the fake smartctl once per test process and returns its
// path. The binary is kept in the user's cache directory (where Go keeps
// its build cache; not /tmp, where another user could plant one) under a
// name made from its source and the Go version, so that every test
// process (each package's) shares one build and none leaves a temporary
// directory behind.
func Build(t testkit.TB) string {
	t.Helper()
	buildOnce.Do(func() {
		_, file, _, _ := runtime.Caller(0)
		src := filepath.Join(filepath.Dir(file), "..", "testdata", "fakesmartctl")
		code, err := os.ReadFile(filepath.Join(src, "main.go"))
		if err != nil {
			buildErr = err
			return
		}
		cache, err := os.UserCacheDir()
		if err != nil {
			buildErr = fmt.Errorf("no cache directory for the fake's build: %w", err)
			return
		}
		sum := sha256.Sum256(append(code, runtime.Version()...))
		binPath = filepath.Join(cache, "diskcanary-test", fmt.Sprintf("fakesmartctl-%x", sum[:6]), "smartctl")
		if _, err := os.Stat(binPath); err == nil {
			return
		}
		if err := os.MkdirAll(filepath.Dir(binPath), 0o700); err != nil {
			buildErr = err
			return
		}
		// Built beside and renamed into place: test processes run in
		// parallel, and none may run a half-written binary.
		tmp := fmt.Sprintf("%s.%d", binPath, os.Getpid())
		cmd := exec.Command("go", "build", "-o", tmp, ".")
		cmd.Dir = src
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = &buildError{out: string(out), err: err}
			return
		}
		buildErr = os.Rename(tmp, binPath)
	})
	if buildErr != nil {
		t.Fatalf("building fake smartctl: %v", buildErr)
	}
	return binPath
}

type buildError struct {
	out string
	err error
}

func (e *buildError) Error() string { return e.err.Error() + ": " + e.out }

// Install writes cfg where the fake reads it (via $FAKESMARTCTL_CONFIG, which
// the runner's children inherit) and returns the fake's path.
func Install(t testing.TB, cfg FakeConfig) string {
	t.Helper()
	bin := Build(t)
	data, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "fake.json")
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("FAKESMARTCTL_CONFIG", p)
	return bin
}

// Fixture returns the path of a project-owned fixture in internal/smart/testdata.
func Fixture(name string) string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "testdata", name)
}

// Int returns a pointer, for FakeDevice.Exit.
func Int(v int) *int { return &v }
