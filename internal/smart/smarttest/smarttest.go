// Package smarttest builds and configures the fake smartctl
// (internal/smart/testdata/fakesmartctl) for the tests of internal/smart,
// collector and cmd/diskcanary. It is test support only: its os/exec use
// (running `go build` on the fake) never reaches the diskcanary binary.
package smarttest

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
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

// Build compiles the fake smartctl once per test process and returns its path.
func Build(t testing.TB) string {
	t.Helper()
	buildOnce.Do(func() {
		_, file, _, _ := runtime.Caller(0)
		src := filepath.Join(filepath.Dir(file), "..", "testdata", "fakesmartctl")
		dir, err := os.MkdirTemp("", "fakesmartctl")
		if err != nil {
			buildErr = err
			return
		}
		binPath = filepath.Join(dir, "smartctl")
		cmd := exec.Command("go", "build", "-o", binPath, ".")
		cmd.Dir = src
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = &buildError{out: string(out), err: err}
		}
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
