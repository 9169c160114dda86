package rulegen

import (
	"bytes"
	"flag"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/prometheus/promql/parser"
	"go.yaml.in/yaml/v3"

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

// TestPromtool runs `promtool check rules` on the committed rule file and
// `promtool test rules` on each committed unit test file, each its own
// parallel subtest. Each test file runs against the committed rules cut to
// what it reads (onlyWhatItTests): promtool evaluates every rule at every
// step of every case, and the weeks of self-drift history spent minutes on
// rules no case of theirs reads.
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
	var rules RuleFile
	readYAML(t, filepath.Join(root, RulesPath), &rules)
	tests, _ := filepath.Glob(filepath.Join(root, unitTestsDir, "*.yml"))
	if len(tests) == 0 {
		t.Fatalf("no %s/*.yml", unitTestsDir)
	}
	for _, file := range tests {
		t.Run(filepath.Base(file), func(t *testing.T) {
			t.Parallel()
			var tf unitTestFile
			b := readYAML(t, file, &tf)
			if want := []string{path.Join("..", path.Base(RulesPath))}; !slices.Equal(tf.RuleFiles, want) {
				t.Fatalf("rule_files %q; want %q", tf.RuleFiles, want)
			}
			cut, err := onlyWhatItTests(rules, tf)
			if err != nil {
				t.Fatal(err)
			}
			// The committed test file as it is, beside the cut rules where
			// its rule_files points.
			dir := t.TempDir()
			cutRules, err := marshalYAML(cut)
			if err != nil {
				t.Fatal(err)
			}
			name := filepath.Join(dir, unitTestsDir, filepath.Base(file))
			if err := os.MkdirAll(filepath.Dir(name), 0o755); err != nil {
				t.Fatal(err)
			}
			writeFile(t, filepath.Join(dir, RulesPath), string(cutRules))
			writeFile(t, name, string(b))
			cmd := exec.Command(promtool, "test", "rules", filepath.Base(file))
			cmd.Dir = filepath.Dir(name)
			out, err := cmd.CombinedOutput()
			t.Logf("promtool test rules (%d of the rules):\n%s", countRules(cut), out)
			if err != nil {
				t.Fatalf("promtool test rules: %v", err)
			}
		})
	}
}

// onlyWhatItTests cuts rf to what the unit tests of f read: the alerts they
// test, the recording rules their expressions and those alerts read, and
// the recording rules those read in turn (in expressions, and by name in
// templates), each in its group and in its place. A rule's result depends
// only on the series it reads, all of which are kept, so the cut cannot
// change what a case sees.
func onlyWhatItTests(rf RuleFile, f unitTestFile) (RuleFile, error) {
	need := map[string]bool{}
	p := parser.NewParser(parser.Options{})
	read := func(expr string) error {
		e, err := p.ParseExpr(expr)
		if err != nil {
			return fmt.Errorf("%s: %w", expr, err)
		}
		for _, s := range selectors(e) {
			need[s.name] = true
		}
		return nil
	}
	for _, c := range f.Tests {
		for _, a := range c.AlertRuleTests {
			need[a.Alertname] = true
		}
		for _, x := range c.ExprTests {
			if err := read(x.Expr); err != nil {
				return RuleFile{}, err
			}
		}
	}
	var recorded []string
	for _, g := range rf.Groups {
		for _, r := range g.Rules {
			if r.Record != "" {
				recorded = append(recorded, r.Record)
			}
		}
	}
	// The closure: each pass adds what the rules needed so far read (a
	// name may be recorded by several rules: a verdict, one a cause).
	done := map[*Rule]bool{}
	for added := true; added; {
		added = false
		for gi := range rf.Groups {
			for ri := range rf.Groups[gi].Rules {
				r := &rf.Groups[gi].Rules[ri]
				if !need[r.Record+r.Alert] || done[r] {
					continue
				}
				done[r] = true
				if err := read(r.Expr); err != nil {
					return RuleFile{}, err
				}
				// Templates query recording rules too (the attribution
				// in a description): any recorded name they spell.
				for _, text := range slices.Concat(slices.Collect(maps.Values(r.Annotations)), slices.Collect(maps.Values(r.Labels))) {
					for _, name := range recorded {
						if strings.Contains(text, name) {
							need[name] = true
						}
					}
				}
				added = true
			}
		}
	}
	var out RuleFile
	for _, g := range rf.Groups {
		kept := Group{Name: g.Name, Interval: g.Interval}
		for _, r := range g.Rules {
			if need[r.Record+r.Alert] {
				kept.Rules = append(kept.Rules, r)
			}
		}
		if len(kept.Rules) > 0 {
			out.Groups = append(out.Groups, kept)
		}
	}
	return out, nil
}

// The cut keeps a tested alert, what its expression reads through every
// rule recording that name, and what its description queries; the rest
// goes, groups left empty too, and the order stays.
func TestOnlyWhatItTests(t *testing.T) {
	rf := RuleFile{Groups: []Group{
		{Name: "rec", Interval: "1m", Rules: []Rule{
			{Record: "a:x", Expr: "sum(rate(m_total[5m]))"},
			{Record: "a:unread", Expr: "sum(other)"},
			{Record: "a:x", Expr: "sum(a:base)"},
			{Record: "a:base", Expr: "max(n)"},
			{Record: "a:why", Expr: "max(why_info)"},
		}},
		{Name: "unrelated", Rules: []Rule{{Alert: "Other", Expr: "a:unread > 1"}}},
		{Name: "alerts", Rules: []Rule{
			{Alert: "Tested", Expr: "a:x > 1", Annotations: map[string]string{"description": `{{ with query "a:why" }}{{ . }}{{ end }}`}},
			{Alert: "Untested", Expr: "up == 0"},
		}},
	}}
	cut, err := onlyWhatItTests(rf, unitTestFile{Tests: []unitTest{{AlertRuleTests: []alertTest{{Alertname: "Tested"}}}}})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, g := range cut.Groups {
		for _, r := range g.Rules {
			got = append(got, g.Name+"/"+r.Record+r.Alert)
		}
	}
	if want := []string{"rec/a:x", "rec/a:x", "rec/a:base", "rec/a:why", "alerts/Tested"}; !slices.Equal(got, want) || cut.Groups[0].Interval != "1m" {
		t.Errorf("cut to %q (interval %q); want %q (1m)", got, cut.Groups[0].Interval, want)
	}

	cut, err = onlyWhatItTests(rf, unitTestFile{Tests: []unitTest{{ExprTests: []exprTest{{Expr: "a:unread"}}}}})
	if err != nil || countRules(cut) != 1 {
		t.Errorf("an expression test of a:unread: %d rules, %v; want 1", countRules(cut), err)
	}
	_, err = onlyWhatItTests(rf, unitTestFile{Tests: []unitTest{{ExprTests: []exprTest{{Expr: "sum("}}}}})
	if err == nil || !strings.HasPrefix(err.Error(), "sum(: ") {
		t.Errorf("an expression that does not parse: %v", err)
	}
}

func countRules(rf RuleFile) int {
	n := 0
	for _, g := range rf.Groups {
		n += len(g.Rules)
	}
	return n
}

// readYAML decodes the YAML file name into v and returns its bytes.
func readYAML(t *testing.T, name string, v any) []byte {
	t.Helper()
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(b, v); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return b
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
