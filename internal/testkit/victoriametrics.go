package testkit

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
)

// VictoriaMetricsVersion is the release of VictoriaMetrics (the single
// node and vmalert) the sharded-fleet test runs as the global engine.
const VictoriaMetricsVersion = "v1.151.0"

// VictoriaMetricsEnv names the directory the two binaries are cached in
// (.ci/run sets it); by default /var/cache/diskcanary/victoriametrics-VERSION,
// or the user's cache directory where /var/cache is not writable.
const VictoriaMetricsEnv = "DISKCANARY_VICTORIAMETRICS"

var vmBuild struct {
	once sync.Once
	dir  string
	err  error
}

// VictoriaMetrics returns the paths of victoria-metrics and vmalert,
// building them the first time from the Go module proxy with
// `go install MODULE/app/NAME@VERSION`: a build outside every module of
// this repository, so none of VictoriaMetrics' dependencies enters a
// go.mod here. A failed build fails the test with go's output.
func VictoriaMetrics(tb TB) (single, vmalert string) {
	tb.Helper()
	E2E(tb)
	vmBuild.once.Do(func() { vmBuild.dir, vmBuild.err = buildVictoriaMetrics() })
	if vmBuild.err != nil {
		tb.Fatal(vmBuild.err)
	}
	return filepath.Join(vmBuild.dir, "victoria-metrics"), filepath.Join(vmBuild.dir, "vmalert")
}

func buildVictoriaMetrics() (string, error) {
	dir := os.Getenv(VictoriaMetricsEnv)
	if dir == "" {
		dir = "/var/cache/diskcanary/victoriametrics-" + VictoriaMetricsVersion
		if err := os.MkdirAll(dir, 0o755); err != nil {
			cache, cerr := os.UserCacheDir()
			if cerr != nil {
				return "", fmt.Errorf("no directory for the VictoriaMetrics binaries: %v; %v", err, cerr)
			}
			dir = filepath.Join(cache, "diskcanary", "victoriametrics-"+VictoriaMetricsVersion)
		}
	}
	names := []string{"victoria-metrics", "vmalert"}
	have := true
	for _, n := range names {
		if _, err := os.Stat(filepath.Join(dir, n)); err != nil {
			have = false
		}
	}
	if have {
		return dir, nil
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		return "", fmt.Errorf("no go command on PATH to build VictoriaMetrics %s: %w", VictoriaMetricsVersion, err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	// Into a fresh directory, then renamed: a build cut short leaves no
	// half-written binary for the next run to trust.
	tmp, err := os.MkdirTemp(dir, ".build-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(tmp)
	args := []string{"install"}
	for _, n := range names {
		args = append(args, "github.com/VictoriaMetrics/VictoriaMetrics/app/"+n+"@"+VictoriaMetricsVersion)
	}
	cmd := exec.Command(goBin, args...)
	cmd.Dir = tmp // outside every module of this repository
	cmd.Env = append(os.Environ(), "GOBIN="+tmp, "GOFLAGS=-buildvcs=false")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go %v: %v\n%s", args, err, out)
	}
	for _, n := range names {
		if err := os.Rename(filepath.Join(tmp, n), filepath.Join(dir, n)); err != nil {
			return "", err
		}
	}
	return dir, nil
}
