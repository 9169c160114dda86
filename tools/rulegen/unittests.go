package rulegen

import (
	"fmt"
	"net/url"
	"path"
	"regexp"
	"strings"
)

// promtool's unit-test file format, the helpers the cases are written
// with, and the one list of test files.

// promtool unit-test file format.
type unitTestFile struct {
	RuleFiles          []string   `yaml:"rule_files"`
	EvaluationInterval string     `yaml:"evaluation_interval"`
	Tests              []unitTest `yaml:"tests"`
}

type unitTest struct {
	Name           string      `yaml:"name"`
	Interval       string      `yaml:"interval"`
	InputSeries    []series    `yaml:"input_series"`
	AlertRuleTests []alertTest `yaml:"alert_rule_test,omitempty"`
	ExprTests      []exprTest  `yaml:"promql_expr_test,omitempty"`
}

type series struct {
	Series string `yaml:"series"`
	Values string `yaml:"values"`
}

type alertTest struct {
	EvalTime  string     `yaml:"eval_time"`
	Alertname string     `yaml:"alertname"`
	ExpAlerts []expAlert `yaml:"exp_alerts"`
}

type expAlert struct {
	ExpLabels      map[string]string `yaml:"exp_labels"`
	ExpAnnotations map[string]string `yaml:"exp_annotations"`
}

type exprTest struct {
	Expr       string      `yaml:"expr"`
	EvalTime   string      `yaml:"eval_time"`
	ExpSamples []expSample `yaml:"exp_samples"`
}

type expSample struct {
	Labels string  `yaml:"labels"`
	Value  float64 `yaml:"value"`
}

// The cases, in the file of the rule group they test, are written by hand:
// inputs, evaluation times and the expected alerts (labels) or values. Only the boilerplate promtool insists
// on — severity and the rendered annotations of an expected alert — is
// filled in from the rule, so a threshold change regenerates the tests
// without hiding what they check.

// bucket is a cumulative bucket count added per input interval.
type bucket struct {
	le  string
	cum int
}

// hist is a classic histogram that grows by the same bucket counts every
// interval, for n intervals. The last bucket is also +Inf and _count.
func hist(metric, labels string, n int, bs ...bucket) []series {
	var out []series
	for _, b := range bs {
		out = append(out, series{fmt.Sprintf(`%s_bucket{%s, le="%s"}`, metric, labels, b.le), fmt.Sprintf("0+%dx%d", b.cum, n)})
	}
	total := bs[len(bs)-1].cum
	out = append(out,
		series{fmt.Sprintf(`%s_bucket{%s, le="+Inf"}`, metric, labels), fmt.Sprintf("0+%dx%d", total, n)},
		series{fmt.Sprintf(`%s_count{%s}`, metric, labels), fmt.Sprintf("0+%dx%d", total, n)})
	return out
}

func concat(ss ...[]series) []series {
	var out []series
	for _, s := range ss {
		out = append(out, s...)
	}
	return out
}

func s(name, values string) []series { return []series{{name, values}} }

// Label sets used throughout.
const (
	walLabels  = `job="diskcanary", instance="n1:9742", probe="wal", path="/var/lib/etcd-canary", device="sda1"`
	readLabels = `job="diskcanary", instance="n1:9742", probe="randread", path="/var/lib/etcd-canary", device="sda1"`
	fdsMetric  = "diskcanary_fdatasync_duration_seconds"
	readMetric = "diskcanary_read_duration_seconds"
)

func labelMap(s string) map[string]string {
	m := map[string]string{}
	for _, kv := range regexp.MustCompile(`(\w+)="([^"]*)"`).FindAllStringSubmatch(s, -1) {
		m[kv[1]] = kv[2]
	}
	return m
}

// alertCase: at evalTime, alert fires exactly for the label sets in fire.
type alertCase struct {
	name   string
	input  []series
	at     string
	alert  string
	fire   []string
	expr   []exprTest
	interv string
	// cause is the attribution verdict the alert's text names
	// ("device/blocklatency"), "" when the target has none.
	cause string
	// kernelErrors is what the latency alerts' errors sentence renders to
	// (p.errorsText), "" when no kernel error is on the device.
	kernelErrors string
	// description, when set, is the expected description verbatim (for
	// alerts whose text renders values and queries).
	description string
	// values are what the alert's value renders to in its text, one per
	// entry of fire ("12.5ms", "85%"), for alerts whose text shows it.
	values []string
	// silentAt are eval times, before at, at which the alert must not fire
	// for any series of the input.
	silentAt []string
}

var (
	labelRef = regexp.MustCompile(`\{\{ \$labels\.(\w+)( \| urlquery)? \}\}`)
	valueRef = regexp.MustCompile(`\{\{ \$value \| [^}]*\}\}`)
)

func (p Params) expand(c alertCase, rules map[string]Rule) (unitTest, error) {
	t := unitTest{Name: c.name, Interval: c.interv, InputSeries: c.input, ExprTests: c.expr}
	if t.Interval == "" {
		t.Interval = "1m"
	}
	if c.alert == "" {
		return t, nil
	}
	r, ok := rules[c.alert]
	if !ok {
		return t, fmt.Errorf("test %q: no alert %s", c.name, c.alert)
	}
	at := alertTest{EvalTime: c.at, Alertname: c.alert, ExpAlerts: []expAlert{}}
	for i, f := range c.fire {
		lbls := labelMap(f)
		for k, v := range r.Labels {
			lbls[k] = v
		}
		ann := map[string]string{}
		for k, v := range r.Annotations {
			v = strings.ReplaceAll(v, p.clusterQueries(attributionText), causeText(c.cause))
			v = strings.ReplaceAll(v, p.clusterQueries(p.errorsText()), c.kernelErrors)
			v = labelRef.ReplaceAllStringFunc(v, func(m string) string {
				g := labelRef.FindStringSubmatch(m)
				if g[2] != "" {
					return url.QueryEscape(lbls[g[1]])
				}
				return lbls[g[1]]
			})
			if valueRef.MatchString(v) && !(k == "description" && c.description != "") {
				if i >= len(c.values) {
					return t, fmt.Errorf("test %q: the text of %s shows its value: give the rendered value of each alert (values)", c.name, c.alert)
				}
				v = valueRef.ReplaceAllLiteralString(v, c.values[i])
			}
			ann[k] = v
		}
		if c.description != "" {
			ann["description"] = c.description
		}
		at.ExpAlerts = append(at.ExpAlerts, expAlert{ExpLabels: lbls, ExpAnnotations: ann})
	}
	for _, s := range c.silentAt {
		t.AlertRuleTests = append(t.AlertRuleTests, alertTest{EvalTime: s, Alertname: c.alert, ExpAlerts: []expAlert{}})
	}
	t.AlertRuleTests = append(t.AlertRuleTests, at)
	return t, nil
}

// near pins a recording rule to a hand-computed value within 1e-9: the
// quantile interpolation over rates is not exact in floating point.
func near(expr, at, labels string, want float64) exprTest {
	return exprTest{Expr: fmt.Sprintf("abs(%s - %s) < bool 1e-9", expr, num(want)), EvalTime: at,
		ExpSamples: []expSample{{"{" + labels + "}", 1}}}
}

// unitTestsDir holds the promtool test files; each names the rule file
// relative to itself.
var unitTestsDir = path.Join(path.Dir(RulesPath), "tests")

// promtoolFile is one promtool test file: its cases and the evaluation
// interval their inputs are written for.
type promtoolFile struct {
	name       string
	evaluation string
	cases      []alertCase
}

// promtoolFiles is every promtool test file the generator writes, the one
// list of cases: TestEveryAlertHasFiringAndSilentCases counts what it
// generates.
func promtoolFiles(p Params) []promtoolFile {
	return []promtoolFile{
		{"latency.yml", "1m", latencyCases()},
		{"probes.yml", "1m", probeCases()},
		{"recording.yml", "1m", recordingCases(p.IostatWindow)},
		{"attribution.yml", "1m", attributionCases()},
		{"contention.yml", "1m", contentionCases()},
		{"smart.yml", "1m", smartCases()},
		// The wear-out forecast needs a month of history: hourly inputs
		// and evaluations (the alert reads the raw series, aligned with
		// them).
		{"wear-forecast.yml", "1h", wearForecastCases()},
		{"errors.yml", "1m", errorsCases()},
		{"collection.yml", "1m", collectionCases()},
		{"fleet-drift.yml", "1m", driftCases()},
		// Self drift needs a week of history: 10-minute input steps and
		// 4-minute evaluations keep it quick. Evaluations stay under the
		// 5 m lookback because alerts read recording rules of another
		// group. A file per op, so TestPromtool runs them in parallel.
		{"self-drift-fdatasync.yml", "4m", selfDriftCases("fdatasync")},
		{"self-drift-read.yml", "4m", selfDriftCases("read")},
		{"etcd.yml", "1m", etcdCases()},
		// A week of daily figures: hourly inputs and evaluations.
		{"capacity.yml", "1h", capacityCases()},
	}
}

// unitTests renders the promtool test files, keyed by path relative to the
// repository root.
func unitTests(p Params) (map[string]unitTestFile, error) {
	rules := map[string]Rule{}
	for _, g := range Rules(p).Groups {
		for _, r := range g.Rules {
			if r.Alert != "" {
				rules[r.Alert] = r
			}
		}
	}
	out := map[string]unitTestFile{}
	for _, pf := range promtoolFiles(p) {
		f := unitTestFile{RuleFiles: []string{path.Join("..", path.Base(RulesPath))}, EvaluationInterval: pf.evaluation}
		for _, c := range pf.cases {
			t, err := p.expand(c, rules)
			if err != nil {
				return nil, err
			}
			f.Tests = append(f.Tests, t)
		}
		out[path.Join(unitTestsDir, pf.name)] = f
	}
	return out, nil
}
