package rulegen

import (
	"bytes"
	"flag"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/diskcanary/diskcanary/internal/testkit"
)

// repoRoot is two levels up from this package.
func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	return root
}

// TestCommittedFilesAreGenerated: the files in alerts/ and dashboards/, and
// their copies in the Kubernetes manifests, the Helm chart and the jsonnet
// mixin, are exactly what the generator writes with its default flags.
func TestCommittedFilesAreGenerated(t *testing.T) {
	root := repoRoot(t)
	files, err := Files(Defaults())
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range files {
		got, err := os.ReadFile(filepath.Join(root, name))
		if err != nil {
			t.Errorf("%s: %v (run: %s)", name, err, Command)
			continue
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s differs from the generator's output (run: %s)", name, Command)
		}
	}
	// No stale generated file left behind.
	for _, dir := range []string{"dashboards", unitTestsDir, ChartFilesDir, ChartFilesDir + "/dashboards", MixinGeneratedDir, MixinGeneratedDir + "/dashboards"} {
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
	if err := fs.Parse([]string{"-fdatasync.slow", "25ms", "-drift.factor", "4", "-drift.for", "45s", "-target-labels", "job,instance,probe,path,device,rack", "-cluster-label", "region"}); err != nil {
		t.Fatal(err)
	}
	files, err := Files(p)
	if err != nil {
		t.Fatal(err)
	}
	rules := string(files[RulesPath])
	for _, want := range []string{"> 0.025\n", "4 * cohort:diskcanary_fdatasync_duration_seconds:p99_15m_median", "for: 45s", "sum by (region, job, instance, probe, path, device, rack, le)", "sum by (region, job, instance, device) (increase(diskcanary_disk_errors_total"} {
		if !strings.Contains(rules, want) {
			t.Errorf("rules generated with flags lack %q", want)
		}
	}
}

// TestEveryAlertHasFiringAndSilentCases and a runbook section: the
// promtool files as generated have, for every alert, a case that expects
// it and one that expects silence.
func TestEveryAlertHasFiringAndSilentCases(t *testing.T) {
	files, err := unitTests(Defaults())
	if err != nil {
		t.Fatal(err)
	}
	cov := map[string][2]int{} // alert name: firing, silent cases
	for _, f := range files {
		for _, c := range f.Tests {
			for _, at := range c.AlertRuleTests {
				v := cov[at.Alertname]
				if len(at.ExpAlerts) > 0 {
					v[0]++
				} else {
					v[1]++
				}
				cov[at.Alertname] = v
			}
		}
	}
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
// committed files. promtool tests one file after another on one core, and
// the weeks of self-drift history are the longest, so each file is its
// own parallel subtest: the package's wall time is then the slowest file,
// not the sum.
func TestPromtool(t *testing.T) {
	testkit.E2E(t) // minutes of promtool on 2 cores: the end-to-end set
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
	tests, _ := filepath.Glob(filepath.Join(root, unitTestsDir, "*.yml"))
	if len(tests) == 0 {
		t.Fatalf("no %s/*.yml", unitTestsDir)
	}
	for _, file := range tests {
		t.Run(filepath.Base(file), func(t *testing.T) {
			t.Parallel()
			cmd := exec.Command(promtool, "test", "rules", filepath.Base(file))
			cmd.Dir = filepath.Dir(file)
			out, err := cmd.CombinedOutput()
			t.Logf("promtool test rules:\n%s", out)
			if err != nil {
				t.Fatalf("promtool test rules: %v", err)
			}
		})
	}
}

// TestPromtoolCatchesWrongThresholds: the unit tests pin the thresholds.
// Rules generated with a wrong threshold (and tests regenerated with it, so
// only the hand-written inputs and expectations stay) must fail promtool,
// in the case that the threshold decides.
func TestPromtoolCatchesWrongThresholds(t *testing.T) {
	testkit.E2E(t) // a promtool run per wrong threshold: the end-to-end set
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		t.Skip("promtool not installed (Debian package prometheus): skipping")
	}
	for _, m := range []struct {
		name, file, failing string
		mutate              func(*Params)
	}{
		{"etcd bar at 25 ms", "latency.yml", "fdatasync p99 20 ms with 1,500 samples: warns", func(p *Params) { p.FdatasyncSlow = 25 * time.Millisecond }},
		{"sample floor 500", "latency.yml", "fdatasync p99 20 ms on 750 samples: too few, silent", func(p *Params) { p.MinSamples = 500 }},
		{"drift factor 11", "fleet-drift.yml", "fdatasync: one of 5 at 10× the cohort median (user cohort)", func(p *Params) { p.DriftFactor = 11 }},
		{"cohort of 4 enough", "fleet-drift.yml", "fdatasync: 10× but only 4 in the cohort: silent", func(p *Params) { p.DriftMinCohort = 4 }},
		{"drift floor 1 ms", "fleet-drift.yml", "fdatasync: 3.5× the median but under the 2 ms floor: silent", func(p *Params) { p.DriftFloor = time.Millisecond }},
		{"wear warning at 85 %", "smart.yml", "wear 85 %: warning", func(p *Params) { p.WearWarning = 0.85 }},
	} {
		t.Run(m.name, func(t *testing.T) {
			t.Parallel()
			p := Defaults()
			m.mutate(&p)
			dir := t.TempDir()
			if _, err := Write(dir, p); err != nil {
				t.Fatal(err)
			}
			// Only the case the threshold decides: promtool evaluates every
			// rule from zero for each case, and the others say nothing here.
			files, err := unitTests(p)
			if err != nil {
				t.Fatal(err)
			}
			f := files[path.Join(unitTestsDir, m.file)]
			var only []unitTest
			for _, c := range f.Tests {
				if c.Name == m.failing {
					only = append(only, c)
				}
			}
			if len(only) != 1 {
				t.Fatalf("%s holds %d cases named %q; want 1", m.file, len(only), m.failing)
			}
			f.Tests = only
			b, err := marshalYAML(f)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, unitTestsDir, m.file), b, 0o644); err != nil {
				t.Fatal(err)
			}
			cmd := exec.Command(promtool, "test", "rules", m.file)
			cmd.Dir = filepath.Join(dir, unitTestsDir)
			out, err := cmd.CombinedOutput()
			if err == nil {
				t.Fatalf("promtool test rules passed with %s; the unit tests do not pin it:\n%s", m.name, out)
			}
			if !strings.Contains(string(out), "name: "+m.failing+",") {
				t.Errorf("want the case %q to fail; promtool said:\n%s", m.failing, out)
			}
		})
	}
}
