package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"time"

	"github.com/diskcanary/diskcanary/internal/testkit"
)

// run is one scenario's run. It implements testkit.TB, so the benches start
// daemons, etcd and the test filesystem through internal/testkit and
// internal/testkit/testfs the way the tests do, with the same cleanup.
type run struct {
	name     string
	out      bytes.Buffer // what the report shows
	mu       sync.Mutex   // cleanups: an interrupt runs them from another goroutine
	cleanups []func()
	failed   bool
	skipped  string
	// inconclusive: the scenario could not tell (its reference's noise
	// is wider than the effect it looks for); its verdict says so.
	inconclusive bool
}

var _ testkit.TB = (*run)(nil)

// abort unwinds a scenario on Fatal or Skip, as runtime.Goexit does a test.
type abort struct{}

func (r *run) Helper()          {}
func (r *run) Name() string     { return r.name }
func (r *run) Cleanup(f func()) { r.mu.Lock(); r.cleanups = append(r.cleanups, f); r.mu.Unlock() }
func (r *run) Failed() bool     { return r.failed }
func (r *run) Log(args ...any)  { r.Logf("%s", fmt.Sprint(args...)) }
func (r *run) Logf(f string, a ...any) {
	fmt.Fprintf(os.Stderr, "  %s: %s\n", r.name, fmt.Sprintf(f, a...))
}
func (r *run) Error(args ...any)         { r.failed = true; r.Log(args...) }
func (r *run) Errorf(f string, a ...any) { r.failed = true; r.Logf(f, a...) }
func (r *run) Fatal(args ...any)         { r.Error(args...); panic(abort{}) }
func (r *run) Fatalf(f string, a ...any) { r.Errorf(f, a...); panic(abort{}) }
func (r *run) FailNow()                  { r.failed = true; panic(abort{}) }
func (r *run) Skip(args ...any)          { r.skipped = fmt.Sprint(args...); panic(abort{}) }
func (r *run) Skipf(f string, a ...any)  { r.skipped = fmt.Sprintf(f, a...); panic(abort{}) }
func (r *run) TempDir() string {
	d, err := os.MkdirTemp("", "diskcanary-bench-")
	if err != nil {
		r.Fatal(err)
	}
	r.Cleanup(func() { os.RemoveAll(d) })
	return d
}

// do runs scenario f and then its cleanups, last first; it says "pass",
// "FAIL", "inconclusive" or "skip: why".
func (r *run) do(f func(r *run) bool) (verdict string) {
	defer func() {
		if e := recover(); e != nil {
			if _, ok := e.(abort); !ok {
				r.Errorf("panic: %v", e)
			}
		}
		r.cleanup()
		switch {
		case r.failed:
			verdict = "FAIL"
		case r.skipped != "":
			verdict = "skip: " + r.skipped
			r.printf("skipped: %s\n", r.skipped)
		case r.inconclusive:
			verdict = "inconclusive"
		}
	}()
	if !f(r) {
		r.failed = true
	}
	return "pass"
}

// cleanup runs the cleanups registered so far, last first, each once: at
// the scenario's end, or from the interrupt handler (main.go) while the
// scenario still runs.
func (r *run) cleanup() {
	r.mu.Lock()
	fs := r.cleanups
	r.cleanups = nil
	r.mu.Unlock()
	for i := len(fs) - 1; i >= 0; i-- {
		fs[i]()
	}
}

// printf writes to the terminal and to the report.
func (r *run) printf(format string, a ...any) {
	s := fmt.Sprintf(format, a...)
	os.Stdout.WriteString(s)
	r.out.WriteString(s)
}

// need skips the scenario when a tool is missing.
func (r *run) need(tools ...string) {
	for _, t := range tools {
		if _, err := exec.LookPath(t); err != nil {
			r.Skipf("%s is missing (apt-get install %s)", t, debianPackage[t])
		}
	}
}

var debianPackage = map[string]string{
	"fio": "fio", "hey": "hey", "etcd": "etcd-server", "bpftrace": "bpftrace", "iostat": "sysstat", "losetup": "util-linux",
	"chrt": "util-linux", "prometheus": "prometheus", "promtool": "prometheus",
}

func (r *run) needRoot(why string) {
	if os.Geteuid() != 0 {
		r.Skipf("needs root (%s)", why)
	}
}

// exec runs a tool to its end and returns its standard output; a failure
// fails the scenario with the tool's standard error.
func (r *run) exec(name string, args ...string) []byte {
	return r.output(exec.Command(name, args...))
}

// output is exec for a command set up by the caller (its environment).
func (r *run) output(cmd *exec.Cmd) []byte {
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		r.Fatalf("%s: %v\n%s", strings.Join(cmd.Args, " "), err, stderr.Bytes())
	}
	return out
}

// waitFor polls cond every step until it holds (true) or timeout passes.
func waitFor(timeout, step time.Duration, cond func() bool) bool {
	for end := time.Now().Add(timeout); ; time.Sleep(step) {
		if cond() {
			return true
		}
		if time.Now().After(end) {
			return false
		}
	}
}
