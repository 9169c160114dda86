package rulegen

import (
	"bytes"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the committed alerts/ and dashboards/ files")

// repoRoot is two levels up from this package.
func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	return root
}

// TestCommittedFilesAreGenerated: the files in alerts/ and dashboards/ are
// exactly what the generator writes with its default flags (run
// `go run ./tools/rulegen` or `go test ./internal/rulegen -update`).
func TestCommittedFilesAreGenerated(t *testing.T) {
	root := repoRoot(t)
	files, err := Files(Defaults())
	if err != nil {
		t.Fatal(err)
	}
	if *update {
		if _, err := Write(root, Defaults()); err != nil {
			t.Fatal(err)
		}
	}
	for name, want := range files {
		got, err := os.ReadFile(filepath.Join(root, name))
		if err != nil {
			t.Errorf("%s: %v (run: go run ./tools/rulegen)", name, err)
			continue
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s differs from the generator's output (run: go run ./tools/rulegen)", name)
		}
	}
	// No stale generated file left behind.
	for _, dir := range []string{"dashboards", "alerts/tests"} {
		entries, _ := os.ReadDir(filepath.Join(root, dir))
		for _, e := range entries {
			if e.IsDir() {
				continue
			}
			if _, ok := files[filepath.Join(dir, e.Name())]; !ok && (strings.HasSuffix(e.Name(), ".json") || strings.HasSuffix(e.Name(), ".yml")) {
				t.Errorf("%s/%s is not generated: delete it or add it to the generator", dir, e.Name())
			}
		}
	}
}

// TestFlagsChangeThresholds: a flag reaches the rule file.
func TestFlagsChangeThresholds(t *testing.T) {
	p := Defaults()
	fs := flag.NewFlagSet("rulegen", flag.ContinueOnError)
	p.RegisterFlags(fs)
	if err := fs.Parse([]string{"-fdatasync.slow", "25ms", "-drift.factor", "4", "-drift.for", "45s", "-target-labels", "job,instance,probe,path,device,node"}); err != nil {
		t.Fatal(err)
	}
	files, err := Files(p)
	if err != nil {
		t.Fatal(err)
	}
	rules := string(files[RulesPath])
	for _, want := range []string{"> 0.025\n", "4 * cohort:diskcanary_fdatasync_duration_seconds:p99_15m_median", "for: 45s", "sum by (job, instance, probe, path, device, node, le)"} {
		if !strings.Contains(rules, want) {
			t.Errorf("rules generated with flags lack %q", want)
		}
	}
}

// TestEveryAlertHasFiringAndSilentCases and a runbook section.
func TestEveryAlertHasFiringAndSilentCases(t *testing.T) {
	cov := AlertsCovered(Defaults())
	runbook, err := os.ReadFile(filepath.Join(repoRoot(t), "docs", "runbooks.md"))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, g := range Rules(Defaults()).Groups {
		for _, r := range g.Rules {
			if r.Alert == "" {
				continue
			}
			names = append(names, r.Alert)
			c := cov[r.Alert]
			if c[0] == 0 || c[1] == 0 {
				t.Errorf("%s: %d firing and %d silent promtool cases; want at least one of each", r.Alert, c[0], c[1])
			}
			for _, a := range []string{"summary", "description", "runbook_url"} {
				if r.Annotations[a] == "" {
					t.Errorf("%s: no %s", r.Alert, a)
				}
			}
			if s := r.Labels["severity"]; s != "critical" && s != "warning" && s != "info" {
				t.Errorf("%s: severity %q", r.Alert, s)
			}
			if !bytes.Contains(runbook, []byte("\n## "+r.Alert+"\n")) {
				t.Errorf("docs/runbooks.md has no section \"## %s\" (runbook_url points there)", r.Alert)
			}
		}
	}
	sort.Strings(names)
	t.Logf("%d alerts: %s", len(names), strings.Join(names, " "))
}

// TestPromtool runs `promtool check rules` and `promtool test rules` on the
// committed files.
func TestPromtool(t *testing.T) {
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		t.Skip("promtool not installed (Debian package prometheus; bash .ci/run installs it): skipping promtool check/test rules")
	}
	root := repoRoot(t)
	out, err := exec.Command(promtool, "check", "rules", filepath.Join(root, RulesPath)).CombinedOutput()
	t.Logf("promtool check rules:\n%s", out)
	if err != nil {
		t.Fatalf("promtool check rules: %v", err)
	}
	tests, _ := filepath.Glob(filepath.Join(root, "alerts", "tests", "*.yml"))
	if len(tests) == 0 {
		t.Fatal("no alerts/tests/*.yml")
	}
	cmd := exec.Command(promtool, append([]string{"test", "rules"}, tests...)...)
	cmd.Dir = filepath.Join(root, "alerts", "tests")
	out, err = cmd.CombinedOutput()
	t.Logf("promtool test rules:\n%s", out)
	if err != nil {
		t.Fatalf("promtool test rules: %v", err)
	}
}
