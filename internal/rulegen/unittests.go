package rulegen

import (
	"fmt"
	"net/url"
	"regexp"
	"sort"
	"strings"
	"time"
)

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

// The cases below are written by hand: inputs, evaluation times and the
// expected alerts (labels) or values. Only the boilerplate promtool insists
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
}

// causeText is what attributionText renders for a verdict/source.
func causeText(cause string) string {
	verdict, source, _ := strings.Cut(cause, "/")
	switch verdict {
	case "":
		return ""
	case verdictDevice:
		return " Cause: the device (" + source + ": its own requests are slow too)."
	case verdictStack:
		return " Cause: the stack above the device (" + source + ": its requests are not slow; look at the filesystem, its journal, a cgroup I/O limit, the hypervisor)."
	}
	return " Cause: none over the last 15 minutes."
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
	t.AlertRuleTests = []alertTest{at}
	return t, nil
}

// UnitTests returns the promtool test files keyed by file name.
func UnitTests(p Params) (map[string]unitTestFile, error) {
	rules := map[string]Rule{}
	for _, g := range Rules(p).Groups {
		for _, r := range g.Rules {
			if r.Alert != "" {
				rules[r.Alert] = r
			}
		}
	}
	files := map[string][]alertCase{
		"latency.yml":     latencyCases(),
		"probes.yml":      probeCases(),
		"smart.yml":       smartCases(),
		"collection.yml":  collectionCases(),
		"fleet-drift.yml": driftCases(),
		"recording.yml":   recordingCases(p.IostatWindow),
		"attribution.yml": attributionCases(),
		"errors.yml":      errorsCases(),
		"etcd.yml":        etcdCases(),
	}
	out := map[string]unitTestFile{}
	for name, cases := range files {
		f := unitTestFile{RuleFiles: []string{"../diskcanary-rules.yml"}, EvaluationInterval: "1m"}
		for _, c := range cases {
			t, err := p.expand(c, rules)
			if err != nil {
				return nil, err
			}
			f.Tests = append(f.Tests, t)
		}
		out[name] = f
	}
	// Self drift needs a week of history: 10-minute input steps and
	// 4-minute evaluations keep it quick. Evaluations stay under the 5 m
	// lookback because alerts read recording rules of another group.
	f := unitTestFile{RuleFiles: []string{"../diskcanary-rules.yml"}, EvaluationInterval: "4m"}
	for _, c := range selfDriftCases() {
		t, err := p.expand(c, rules)
		if err != nil {
			return nil, err
		}
		f.Tests = append(f.Tests, t)
	}
	out["self-drift.yml"] = f
	// The wear-out forecast needs a month of history: hourly inputs and
	// evaluations (the alert reads the raw series, aligned with them).
	f = unitTestFile{RuleFiles: []string{"../diskcanary-rules.yml"}, EvaluationInterval: "1h"}
	for _, c := range wearForecastCases() {
		t, err := p.expand(c, rules)
		if err != nil {
			return nil, err
		}
		f.Tests = append(f.Tests, t)
	}
	out["wear-forecast.yml"] = f
	return out, nil
}

// AlertsCovered lists, per alert, how many firing and non-firing cases the
// unit tests have (the test requires at least one of each).
func AlertsCovered() map[string][2]int {
	cov := map[string][2]int{}
	all := [][]alertCase{latencyCases(), probeCases(), smartCases(), collectionCases(), driftCases(), selfDriftCases(), attributionCases(), errorsCases(), etcdCases(), wearForecastCases()}
	for _, cs := range all {
		for _, c := range cs {
			if c.alert == "" {
				continue
			}
			v := cov[c.alert]
			if len(c.fire) > 0 {
				v[0]++
			} else {
				v[1]++
			}
			cov[c.alert] = v
		}
	}
	return cov
}

func latencyCases() []alertCase {
	const n = 60
	// 100 samples a minute: 1.500 per 15 m. 3 % above 10 ms → p99 = 20 ms.
	slow := hist(fdsMetric, walLabels, n, bucket{"0.005", 95}, bucket{"0.01", 97}, bucket{"0.025", 100})
	// 200 a minute, 0.5 % above 10 ms: p99 = 9.44 ms, just under.
	edge := hist(fdsMetric, walLabels, n, bucket{"0.005", 190}, bucket{"0.01", 199}, bucket{"0.025", 200})
	// Same shape as slow, 50 a minute: 750 per 15 m, under the 900 floor.
	sparse := hist(fdsMetric, walLabels, n, bucket{"0.005", 47}, bucket{"0.01", 48}, bucket{"0.025", 50})
	// 10 a minute, half in (0.5 s, 1 s]: p99 = 0.99 s.
	incident := hist(fdsMetric, walLabels, n, bucket{"0.25", 0}, bucket{"0.5", 5}, bucket{"1", 10})
	// Half in (0.25 s, 0.5 s]: p99 = 0.495 s.
	underIncident := hist(fdsMetric, walLabels, n, bucket{"0.1", 0}, bucket{"0.25", 5}, bucket{"0.5", 10})
	// 2 a minute: 10 per 5 m, under the incident floor of 20.
	sparseIncident := hist(fdsMetric, walLabels, n, bucket{"0.25", 0}, bucket{"0.5", 1}, bucket{"1", 2})
	// Half in (1 s, 2.5 s]: p99 = 2.47 s.
	critical := hist(fdsMetric, walLabels, n, bucket{"0.5", 0}, bucket{"1", 5}, bucket{"2.5", 10})
	readSlow := hist(readMetric, readLabels, n, bucket{"0.01", 190}, bucket{"0.025", 196}, bucket{"0.05", 200})
	readEdge := hist(readMetric, readLabels, n, bucket{"0.01", 190}, bucket{"0.025", 199}, bucket{"0.05", 200})
	readSparse := hist(readMetric, readLabels, n, bucket{"0.01", 47}, bucket{"0.025", 48}, bucket{"0.05", 50})
	return []alertCase{
		{name: "fdatasync p99 20 ms with 1,500 samples: warns", input: slow, at: "40m", alert: "DiskcanaryFdatasyncSlow", fire: []string{walLabels},
			values: []string{"20ms"},
			expr: []exprTest{
				near(quantileRule("fdatasync", "p99", "15m"), "40m", walLabels, 0.02),
				near(quantileRule("fdatasync", "p50", "15m"), "40m", walLabels, 0.005*50/95),
				{Expr: samplesRule("fdatasync", "15m"), EvalTime: "40m", ExpSamples: []expSample{{samplesRule("fdatasync", "15m") + "{" + walLabels + "}", 1500}}},
			}},
		{name: "fdatasync p99 20 ms, not yet for 15 m: pending only", input: slow, at: "20m", alert: "DiskcanaryFdatasyncSlow"},
		{name: "fdatasync p99 9.44 ms, just under 10 ms: silent", input: edge, at: "40m", alert: "DiskcanaryFdatasyncSlow",
			expr: []exprTest{near(quantileRule("fdatasync", "p99", "15m"), "40m", walLabels, 0.005+0.005*8/9)}},
		{name: "fdatasync p99 20 ms on 750 samples: too few, silent", input: sparse, at: "40m", alert: "DiskcanaryFdatasyncSlow"},
		{name: "fdatasync p99 0.99 s: incident warning", input: incident, at: "30m", alert: "DiskcanaryFdatasyncVerySlow", fire: []string{walLabels}, values: []string{"990ms"}},
		{name: "fdatasync p99 0.495 s: no incident", input: underIncident, at: "30m", alert: "DiskcanaryFdatasyncVerySlow"},
		{name: "fdatasync p99 0.99 s on 10 samples per 5 m: silent", input: sparseIncident, at: "30m", alert: "DiskcanaryFdatasyncVerySlow"},
		{name: "fdatasync p99 2.47 s: critical", input: critical, at: "30m", alert: "DiskcanaryFdatasyncCritical", fire: []string{walLabels}, values: []string{"2.47s"}},
		{name: "fdatasync p99 0.99 s: not critical", input: incident, at: "30m", alert: "DiskcanaryFdatasyncCritical"},
		{name: "fdatasync p99 2.47 s on 10 samples per 5 m: not critical", input: hist(fdsMetric, walLabels, n, bucket{"0.5", 0}, bucket{"1", 1}, bucket{"2.5", 2}), at: "30m", alert: "DiskcanaryFdatasyncCritical"},
		{name: "read p99 37.5 ms: warns", input: readSlow, at: "40m", alert: "DiskcanaryReadSlow", fire: []string{readLabels}, values: []string{"37.5ms"}},
		{name: "read p99 23.3 ms, just under 25 ms: silent", input: readEdge, at: "40m", alert: "DiskcanaryReadSlow"},
		{name: "read p99 37.5 ms on 750 samples: silent", input: readSparse, at: "40m", alert: "DiskcanaryReadSlow"},
	}
}

func probeCases() []alertCase {
	const wal = `job="diskcanary", instance="n1:9742", probe="wal"`
	return []alertCase{
		{name: "stalled for minutes: page", input: s("diskcanary_probe_stalled{"+wal+"}", "0 0 1x10"), at: "8m", alert: "DiskcanaryProbeStalled", fire: []string{wal}},
		{name: "stalled for one scrape: silent", input: s("diskcanary_probe_stalled{"+wal+"}", "0 0 1 0x10"), at: "8m", alert: "DiskcanaryProbeStalled"},
		{name: "probe failing 20 m: warns", input: s("diskcanary_probe_success{"+wal+"}", "1 0x30"), at: "25m", alert: "DiskcanaryProbeFailing", fire: []string{wal}},
		{name: "probe failing 8 m after a success: silent", input: s("diskcanary_probe_success{"+wal+"}", "0x10 1 0x10"), at: "20m", alert: "DiskcanaryProbeFailing"},
		{name: "no cycle since t=0: data missing", input: s("diskcanary_probe_last_run_timestamp_seconds{"+wal+"}", "0x30"), at: "20m", alert: "DiskcanaryProbeDataMissing", fire: []string{wal}, values: []string{"20m 0s"}},
		{name: "a cycle every minute: silent", input: s("diskcanary_probe_last_run_timestamp_seconds{"+wal+"}", "0+60x30"), at: "20m", alert: "DiskcanaryProbeDataMissing"},
		{name: "cycles stopped 9 m ago: not yet", input: s("diskcanary_probe_last_run_timestamp_seconds{"+wal+"}", "0+60x11 660x30"), at: "20m", alert: "DiskcanaryProbeDataMissing"},
		{name: "tmpfs target: flagged", input: s(`diskcanary_probe_target_warning{`+wal+`, warning="tmpfs"}`, "1x5"), at: "3m", alert: "DiskcanaryProbeTargetUntrusted", fire: []string{wal + `, warning="tmpfs"`}},
		{name: "warning cleared: silent", input: s(`diskcanary_probe_target_warning{`+wal+`, warning="tmpfs"}`, "0x5"), at: "3m", alert: "DiskcanaryProbeTargetUntrusted"},
	}
}

func smartCases() []alertCase {
	const sda = `job="diskcanary", instance="n1:9742", device="sda"`
	const nvme = `job="diskcanary", instance="n1:9742", device="nvme0n1"`
	return []alertCase{
		{name: "SMART failed", input: s("diskcanary_smart_healthy{"+sda+"}", "0x5"), at: "3m", alert: "DiskcanarySmartUnhealthy", fire: []string{sda}},
		{name: "SMART passed", input: s("diskcanary_smart_healthy{"+sda+"}", "1x5"), at: "3m", alert: "DiskcanarySmartUnhealthy"},
		{name: "one new media error", input: s("diskcanary_smart_media_errors_total{"+nvme+"}", "0x30 1x30"), at: "40m", alert: "DiskcanarySmartMediaErrors", fire: []string{nvme}, values: []string{"1"}},
		{name: "old media errors, none new", input: s("diskcanary_smart_media_errors_total{"+nvme+"}", "3x60"), at: "40m", alert: "DiskcanarySmartMediaErrors"},
		{name: "new media error over an hour ago", input: s("diskcanary_smart_media_errors_total{"+nvme+"}", "0x10 1x100"), at: "100m", alert: "DiskcanarySmartMediaErrors"},
		{name: "the newest self-test failed", input: concat(
			s(`diskcanary_smart_selftest_last_result{`+sda+`, type="Extended offline", result="failed"}`, "1x5"),
			s(`diskcanary_smart_selftest_last_result{`+sda+`, type="Extended offline", result="passed"}`, "0x5")),
			at: "3m", alert: "DiskcanarySmartSelfTestFailed", fire: []string{sda + `, type="Extended offline", result="failed"`}},
		{name: "the newest self-test passed after an older failure: silent", input: concat(
			s(`diskcanary_smart_selftest_last_result{`+sda+`, type="Short offline", result="failed"}`, "0x5"),
			s(`diskcanary_smart_selftest_last_result{`+sda+`, type="Short offline", result="passed"}`, "1x5"),
			s(`diskcanary_smart_selftest_failed_lba{`+sda+`}`, "104870168x5")),
			at: "3m", alert: "DiskcanarySmartSelfTestFailed"},
		{name: "reallocated 8 → 10", input: s("diskcanary_smart_reallocated_sectors{"+sda+"}", "8x30 10x30"), at: "40m", alert: "DiskcanarySmartReallocatedSectors", fire: []string{sda}, values: []string{"10"}},
		{name: "reallocated steady at 10", input: s("diskcanary_smart_reallocated_sectors{"+sda+"}", "10x60"), at: "40m", alert: "DiskcanarySmartReallocatedSectors"},
		{name: "pending 0 → 2", input: s("diskcanary_smart_pending_sectors{"+sda+"}", "0x30 2x30"), at: "40m", alert: "DiskcanarySmartPendingSectors", fire: []string{sda}, values: []string{"2"}},
		{name: "pending 5 → 3 (remapped): silent", input: s("diskcanary_smart_pending_sectors{"+sda+"}", "5x30 3x30"), at: "40m", alert: "DiskcanarySmartPendingSectors"},
		{name: "offline uncorrectable 0 → 3", input: s("diskcanary_smart_offline_uncorrectable_sectors{"+sda+"}", "0x30 3x30"), at: "40m", alert: "DiskcanarySmartOfflineUncorrectable", fire: []string{sda}, values: []string{"3"}},
		{name: "offline uncorrectable steady at 1: silent", input: s("diskcanary_smart_offline_uncorrectable_sectors{"+sda+"}", "1x60"), at: "40m", alert: "DiskcanarySmartOfflineUncorrectable"},
		{name: "two command timeouts in the hour", input: s("diskcanary_smart_command_timeouts_total{"+sda+"}", "4x30 6x30"), at: "40m", alert: "DiskcanarySmartCommandTimeouts", fire: []string{sda}, values: []string{"2"}},
		{name: "command timeouts from long ago: silent", input: s("diskcanary_smart_command_timeouts_total{"+sda+"}", "4x100"), at: "90m", alert: "DiskcanarySmartCommandTimeouts"},
		{name: "NVMe spare flag", input: concat(s(`diskcanary_smart_critical_warning{`+nvme+`, flag="available_spare"}`, "1x5"), s(`diskcanary_smart_critical_warning{`+nvme+`, flag="temperature"}`, "0x5")),
			at: "3m", alert: "DiskcanarySmartCriticalWarning", fire: []string{nvme + `, flag="available_spare"`}},
		{name: "no NVMe flag", input: s(`diskcanary_smart_critical_warning{`+nvme+`, flag="temperature"}`, "0x5"), at: "3m", alert: "DiskcanarySmartCriticalWarning"},
		{name: "spare 5 % < threshold 10 %", input: concat(s("diskcanary_smart_available_spare_ratio{"+nvme+"}", "0.05x5"), s("diskcanary_smart_available_spare_threshold_ratio{"+nvme+"}", "0.1x5")),
			at: "3m", alert: "DiskcanarySmartSpareLow", fire: []string{nvme},
			description: "The available spare of nvme0n1 on n1:9742 is 5%, below the threshold its vendor set (10%)."},
		{name: "spare at threshold: silent", input: concat(s("diskcanary_smart_available_spare_ratio{"+nvme+"}", "0.1x5"), s("diskcanary_smart_available_spare_threshold_ratio{"+nvme+"}", "0.1x5")),
			at: "3m", alert: "DiskcanarySmartSpareLow"},
		{name: "wear 85 %: warning", input: s("diskcanary_smart_wear_used_ratio{"+nvme+"}", "0.85x5"), at: "3m", alert: "DiskcanarySmartWearHigh", fire: []string{nvme}, values: []string{"85%"}},
		{name: "wear 80 %: silent", input: s("diskcanary_smart_wear_used_ratio{"+nvme+"}", "0.8x5"), at: "3m", alert: "DiskcanarySmartWearHigh"},
		{name: "wear 95 %: critical", input: s("diskcanary_smart_wear_used_ratio{"+nvme+"}", "0.95x5"), at: "3m", alert: "DiskcanarySmartWearCritical", fire: []string{nvme}, values: []string{"95%"}},
		{name: "wear 85 %: not critical", input: s("diskcanary_smart_wear_used_ratio{"+nvme+"}", "0.85x5"), at: "3m", alert: "DiskcanarySmartWearCritical"},
		{name: "70 °C for 20 m, no limit of its own", input: s("diskcanary_smart_temperature_celsius{"+sda+"}", "70x30"), at: "20m", alert: "DiskcanarySmartTemperatureHigh", fire: []string{sda},
			values:      []string{"70"},
			description: "sda on n1:9742 is at 70 °C and has been above 65 °C (it states no limit of its own) for 15m."},
		{name: "NVMe at 80 °C, its own limit 100 °C: silent", input: concat(s("diskcanary_smart_temperature_celsius{"+nvme+"}", "80x30"), s("diskcanary_smart_temperature_max_operating_celsius{"+nvme+"}", "100x30")),
			at: "20m", alert: "DiskcanarySmartTemperatureHigh"},
		{name: "SSD at 72 °C over its own limit of 70 °C", input: concat(s("diskcanary_smart_temperature_celsius{"+sda+"}", "72x30"), s("diskcanary_smart_temperature_max_operating_celsius{"+sda+"}", "70x30")),
			values: []string{"72"},
			at:     "20m", alert: "DiskcanarySmartTemperatureHigh", fire: []string{sda},
			description: "sda on n1:9742 is at 72 °C and has been above 70 °C, its own operating limit, for 15m."},
		{name: "65 °C: silent", input: s("diskcanary_smart_temperature_celsius{"+sda+"}", "65x30"), at: "20m", alert: "DiskcanarySmartTemperatureHigh"},
		{name: "70 °C with a dip 9 m ago: not yet", input: s("diskcanary_smart_temperature_celsius{"+sda+"}", "70x10 60 70x20"), at: "20m", alert: "DiskcanarySmartTemperatureHigh"},
	}
}

func collectionCases() []alertCase {
	const sda = `job="diskcanary", instance="n1:9742", device="sda"`
	const inst = `job="diskcanary", instance="n1:9742"`
	return []alertCase{
		{name: "SMART read failing 35 m", input: s("diskcanary_smart_collect_success{"+sda+"}", "0x40"), at: "35m", alert: "DiskcanarySmartCollectionFailing", fire: []string{sda}},
		{name: "SMART read failing 14 m", input: s("diskcanary_smart_collect_success{"+sda+"}", "0x20 1 0x20"), at: "35m", alert: "DiskcanarySmartCollectionFailing"},
		{name: "SMART last success at t=0, now 70 m", input: s("diskcanary_smart_last_success_timestamp_seconds{"+sda+"}", "0x100"), at: "70m", alert: "DiskcanarySmartStale", fire: []string{sda}, values: []string{"1h 10m 0s"}},
		{name: "SMART stale but the disk sleeps", input: concat(s("diskcanary_smart_last_success_timestamp_seconds{"+sda+"}", "0x100"), s("diskcanary_smart_standby{"+sda+"}", "1x100")), at: "70m", alert: "DiskcanarySmartStale"},
		{name: "SMART fresh", input: s("diskcanary_smart_last_success_timestamp_seconds{"+sda+"}", "0+60x100"), at: "70m", alert: "DiskcanarySmartStale"},
		{name: "a smartctl timeout", input: s("diskcanary_smartctl_timeouts_total{"+sda+"}", "0x30 1x30"), at: "40m", alert: "DiskcanarySmartctlTimeouts", fire: []string{sda}},
		{name: "old smartctl timeouts", input: s("diskcanary_smartctl_timeouts_total{"+sda+"}", "2x60"), at: "40m", alert: "DiskcanarySmartctlTimeouts"},
		{name: "quarantined", input: s("diskcanary_smart_quarantined{"+sda+"}", "1x5"), at: "3m", alert: "DiskcanarySmartQuarantined", fire: []string{sda}},
		{name: "not quarantined", input: s("diskcanary_smart_quarantined{"+sda+"}", "0x5"), at: "3m", alert: "DiskcanarySmartQuarantined"},
		{name: "smart collector failing 20 m", input: s(`diskcanary_collector_success{`+inst+`, collector="smart"}`, "0x20"), at: "20m", alert: "DiskcanaryCollectorFailing", fire: []string{inst + `, collector="smart"`}},
		{name: "collector fine", input: s(`diskcanary_collector_success{`+inst+`, collector="smart"}`, "1x20"), at: "20m", alert: "DiskcanaryCollectorFailing"},
		{name: "exporter down 8 m", input: s(`up{`+inst+`}`, "0x10"), at: "8m", alert: "DiskcanaryExporterDown", fire: []string{inst}},
		{name: "exporter up; another job down", input: concat(s(`up{`+inst+`}`, "1x10"), s(`up{job="node", instance="n1:9100"}`, "0x10")), at: "8m", alert: "DiskcanaryExporterDown"},
	}
}

// driftTarget is one member of a test cohort.
func driftTarget(op string, i int, extra string) string {
	probe := "wal"
	if op == "read" {
		probe = "randread"
	}
	return fmt.Sprintf(`job="diskcanary", instance="n%d:9742", probe="%s", path="/var/lib/etcd-canary", device="sda1"%s`, i, probe, extra)
}

func driftCases() []alertCase {
	var cases []alertCase
	for _, op := range []string{"fdatasync", "read"} {
		metric := "diskcanary_" + op + "_duration_seconds"
		alert := "Diskcanary" + strings.ToUpper(op[:1]) + op[1:] + "FleetDrift"
		// 200 samples a minute each. Fast: all in (0.5 ms, 1 ms] →
		// p99 0.995 ms. Slow: all in (5 ms, 10 ms] → p99 9.95 ms = 10× the
		// median. Under the floor: 4 in 200 above 1 ms → p99 1.75 ms.
		fast := []bucket{{"0.0005", 0}, {"0.001", 200}, {"0.0025", 200}, {"0.005", 200}, {"0.01", 200}}
		slow := []bucket{{"0.0005", 0}, {"0.001", 0}, {"0.0025", 0}, {"0.005", 0}, {"0.01", 200}}
		fastLow := []bucket{{"0.00025", 0}, {"0.0005", 200}, {"0.001", 200}, {"0.0025", 200}}
		lowSlow := []bucket{{"0.00025", 0}, {"0.0005", 0}, {"0.001", 196}, {"0.0025", 200}}
		sparseSlow := []bucket{{"0.0005", 0}, {"0.001", 0}, {"0.0025", 0}, {"0.005", 0}, {"0.01", 50}}
		info := func(i int, cohort string) []series {
			lbl := driftTarget(op, i, cohort)
			kind := "wal"
			if op == "read" {
				kind = "randread"
			}
			return s(fmt.Sprintf(`diskcanary_probe_target_info{%s, kind="%s", layout="append", fstype="ext4", mountpoint="/var/lib/etcd-canary"}`, lbl, kind), "1x80")
		}
		cohort := func(members int, slowShape, fastShape []bucket, label string) []series {
			var in []series
			for i := 1; i <= members; i++ {
				shape := fastShape
				if i == members {
					shape = slowShape
				}
				in = append(in, hist(metric, driftTarget(op, i, ""), 80, shape...)...)
				in = append(in, info(i, label)...)
			}
			return in
		}
		user := `, cohort="m6i.large-gp3"`
		slowUser := driftTarget(op, 5, "") + `, cohort="m6i.large-gp3"`
		// A model cohort: no user label; sda1 is a partition of sda.
		var model []series
		for i := 1; i <= 5; i++ {
			shape := fast
			if i == 5 {
				shape = slow
			}
			inst := fmt.Sprintf(`job="diskcanary", instance="n%d:9742"`, i)
			model = append(model, hist(metric, driftTarget(op, i, ""), 80, shape...)...)
			model = append(model, info(i, "")...)
			model = append(model, s(`diskcanary_disk_parent_info{`+inst+`, device="sda1", disk="sda"}`, "1x80")...)
			model = append(model, s(`diskcanary_disk_info{`+inst+`, device="sda", model="ACME SSD 960", serial="S`+fmt.Sprint(i)+`", wwn="", rotational="0"}`, "1x80")...)
		}
		slowModel := driftTarget(op, 5, "") + `, cohort="model:ACME SSD 960"`
		// Disk load: diskcanary_disk_io_time_seconds_total rising by
		// 60 × util per minute on each member's sda1.
		loaded := func(slowUtil, fastUtil float64) []series {
			in := cohort(5, slow, fast, user)
			for i := 1; i <= 5; i++ {
				u := fastUtil
				if i == 5 {
					u = slowUtil
				}
				in = append(in, s(fmt.Sprintf(`diskcanary_disk_io_time_seconds_total{job="diskcanary", instance="n%d:9742", device="sda1"}`, i), fmt.Sprintf("0+%gx80", 60*u))...)
			}
			return in
		}
		cases = append(cases,
			alertCase{name: op + ": 10× the median on a disk 80 % busy, its cohort 10 %: load, silent", input: loaded(0.8, 0.1), at: "60m", alert: alert,
				expr: []exprTest{
					near(ruleTargetBusy+`{instance="n5:9742"}`, "60m", driftTarget(op, 5, ""), 0.8),
					near(ruleCohortBusy, "60m", `cohort="m6i.large-gp3", probe="`+probeOf(op)+`"`, 0.1),
				}},
			alertCase{name: op + ": 10× the median on an idle disk (2 %, cohort 10 %)", input: loaded(0.02, 0.1), at: "60m", alert: alert, values: []string{"9.95ms"}, fire: []string{slowUser}},
			alertCase{name: op + ": 10× the median, 70 % busy in a cohort at 60 %: not busier than its peers", input: loaded(0.7, 0.6), at: "60m", alert: alert, values: []string{"9.95ms"}, fire: []string{slowUser}},
			alertCase{name: op + ": 10× the median, 40 % busy against 10 %: under the 50 % floor", input: loaded(0.4, 0.1), at: "60m", alert: alert, values: []string{"9.95ms"}, fire: []string{slowUser}},
			alertCase{name: op + ": one of 5 at 10× the cohort median (user cohort)", input: cohort(5, slow, fast, user), at: "60m", alert: alert, values: []string{"9.95ms"}, fire: []string{slowUser},
				expr: []exprTest{
					near(cohortMedianRule(op), "60m", `cohort="m6i.large-gp3", probe="`+probeOf(op)+`"`, 0.000995),
					{Expr: cohortMembersRule(op), EvalTime: "60m", ExpSamples: []expSample{{cohortMembersRule(op) + `{cohort="m6i.large-gp3", probe="` + probeOf(op) + `"}`, 5}}},
					{Expr: ruleCohortInfo + `{instance="n5:9742"}`, EvalTime: "60m", ExpSamples: []expSample{{ruleCohortInfo + "{" + slowUser + "}", 1}}},
				}},
			alertCase{name: op + ": one of 5 at 10× the cohort median (disk model cohort)", input: model, at: "60m", alert: alert, values: []string{"9.95ms"}, fire: []string{slowModel}},
			alertCase{name: op + ": 10× but only 4 in the cohort: silent", input: cohort(4, slow, fast, user), at: "60m", alert: alert},
			alertCase{name: op + ": 3.5× the median but under the 2 ms floor: silent", input: cohort(5, lowSlow, fastLow, user), at: "60m", alert: alert},
			alertCase{name: op + ": 10× on 750 samples per 15 m: silent", input: cohort(5, sparseSlow, fast, user), at: "60m", alert: alert},
			alertCase{name: op + ": 10× for 20 m only: pending", input: cohort(5, slow, fast, user), at: "25m", alert: alert},
		)
	}
	return cases
}

// wearForecastCases: wear in whole percent, hourly, over 31 days.
func wearForecastCases() []alertCase {
	const nvme = `job="diskcanary", instance="n1:9742", device="nvme0n1"`
	wear := func(values string) []series { return s("diskcanary_smart_wear_used_ratio{"+nvme+"}", values) }
	return []alertCase{
		// 80 % used a month ago, 90 % now: 10 points left at 10 a month.
		{name: "80 → 90 % in a month: worn out in 30 days", input: wear("0.8x360 0.9x400"), at: "744h", interv: "1h",
			alert: "DiskcanarySmartWearOutSoon", fire: []string{nvme},
			description: "At its wear rate of the last 30 days, nvme0n1 on n1:9742 reaches its rated endurance (100 % used) in 30 days: order the replacement.",
			expr:        []exprTest{near(ruleWearForecast, "744h", nvme, 30)}},
		// 50 → 51 %: 49 points left at 1 a month, about four years.
		{name: "50 → 51 % in a month: silent", input: wear("0.5x360 0.51x400"), at: "744h", interv: "1h",
			alert: "DiskcanarySmartWearOutSoon",
			expr:  []exprTest{near(ruleWearForecast, "744h", nvme, 1470)}},
		{name: "no wear in a month: no forecast", input: wear("0.95x760"), at: "744h", interv: "1h",
			alert: "DiskcanarySmartWearOutSoon",
			expr:  []exprTest{{Expr: ruleWearForecast, EvalTime: "744h"}}},
	}
}

func selfDriftCases() []alertCase {
	var cases []alertCase
	// 10-minute steps; a week is 1008 steps. Evaluate at 1w 2h50m.
	const week, after = 1008, 18
	for _, op := range []string{"fdatasync", "read"} {
		metric := "diskcanary_" + op + "_duration_seconds"
		alert := "Diskcanary" + strings.ToUpper(op[:1]) + op[1:] + "SelfDrift"
		lbl := driftTarget(op, 1, "")
		// Every le gets "per" samples per step for the week, then "perAfter".
		shape := func(before, after2 []bucket) []series {
			var out []series
			les := map[string][2]int{}
			var order []string
			for _, b := range before {
				les[b.le] = [2]int{b.cum, 0}
				order = append(order, b.le)
			}
			for _, b := range after2 {
				v := les[b.le]
				v[1] = b.cum
				les[b.le] = v
			}
			row := func(name string, v [2]int) series {
				return series{name, fmt.Sprintf("0+%dx%d %d+%dx%d", v[0], week, v[0]*week+v[1], v[1], after)}
			}
			for _, le := range order {
				out = append(out, row(fmt.Sprintf(`%s_bucket{%s, le="%s"}`, metric, lbl, le), les[le]))
			}
			last := les[order[len(order)-1]]
			out = append(out, row(fmt.Sprintf(`%s_bucket{%s, le="+Inf"}`, metric, lbl), last), row(fmt.Sprintf(`%s_count{%s}`, metric, lbl), last))
			return out
		}
		les := []string{"0.00025", "0.0005", "0.001", "0.0025", "0.005", "0.01"}
		b := func(counts ...int) []bucket {
			var out []bucket
			for i, c := range counts {
				out = append(out, bucket{les[i], c})
			}
			return out
		}
		// Last week p99 0.995 ms; now 9.95 ms.
		cases = append(cases,
			alertCase{name: op + ": 10× last week's p99", interv: "10m", at: "170h50m", alert: alert, values: []string{"9.95ms"}, fire: []string{lbl},
				input: shape(b(0, 0, 2000, 2000, 2000, 2000), b(0, 0, 0, 0, 0, 2000))},
			alertCase{name: op + ": 3.5× last week but under the 2 ms floor", interv: "10m", at: "170h50m", alert: alert,
				input: shape(b(0, 2000, 2000, 2000, 2000, 2000), b(0, 0, 1960, 2000, 2000, 2000))},
			alertCase{name: op + ": 10× but only 600 samples an hour last week", interv: "10m", at: "170h50m", alert: alert,
				input: shape(b(0, 0, 100, 100, 100, 100), b(0, 0, 0, 0, 0, 2000))},
		)
	}
	return cases
}

func recordingCases(window time.Duration) []alertCase {
	const sda = `job="diskcanary", instance="n1:9742", device="sda"`
	const sdb = `job="diskcanary", instance="n1:9742", device="sdb"`
	// Per minute on sda: 600 reads (10/s) taking 3 s in total (r_await
	// 5 ms) of 4096 B each; 1200 writes (20/s) taking 12 s (w_await 10 ms)
	// of 16 KiB; 60 / 120 merges; the disk busy 30 s (%util 50 %) with a
	// weighted time of 90 s (aqu-sz 1.5). sdb is idle: sysstat prints 0.
	in := concat(
		s("diskcanary_disk_reads_completed_total{"+sda+"}", "0+600x10"),
		s("diskcanary_disk_read_time_seconds_total{"+sda+"}", "0+3x10"),
		s("diskcanary_disk_read_bytes_total{"+sda+"}", "0+2457600x10"),
		s("diskcanary_disk_reads_merged_total{"+sda+"}", "0+60x10"),
		s("diskcanary_disk_writes_completed_total{"+sda+"}", "0+1200x10"),
		s("diskcanary_disk_write_time_seconds_total{"+sda+"}", "0+12x10"),
		s("diskcanary_disk_written_bytes_total{"+sda+"}", "0+19660800x10"),
		s("diskcanary_disk_writes_merged_total{"+sda+"}", "0+120x10"),
		s("diskcanary_disk_io_time_seconds_total{"+sda+"}", "0+30x10"),
		s("diskcanary_disk_io_time_weighted_seconds_total{"+sda+"}", "0+90x10"),
		s("diskcanary_disk_reads_completed_total{"+sdb+"}", "0x10"),
		s("diskcanary_disk_read_time_seconds_total{"+sdb+"}", "0x10"),
		s("diskcanary_disk_read_bytes_total{"+sdb+"}", "0x10"),
		s("diskcanary_disk_writes_completed_total{"+sdb+"}", "0x10"),
		s("diskcanary_disk_write_time_seconds_total{"+sdb+"}", "0x10"),
		s("diskcanary_disk_written_bytes_total{"+sdb+"}", "0x10"),
	)
	want := []struct {
		name     string
		sda, sdb float64
		idle     bool
	}{
		{"reads_completed:rate", 10, 0, true},
		{"writes_completed:rate", 20, 0, true},
		{"reads_merged:rate", 1, 0, false},
		{"writes_merged:rate", 2, 0, false},
		{"read_bytes:rate", 40960, 0, true},
		{"written_bytes:rate", 327680, 0, true},
		{"read_await_seconds:rate", 0.005, 0, true},
		{"write_await_seconds:rate", 0.01, 0, true},
		{"read_request_size_bytes:rate", 4096, 0, true},
		{"write_request_size_bytes:rate", 16384, 0, true},
		{"queue_size:rate", 1.5, 0, false},
		{"utilization:ratio_rate", 0.5, 0, false},
	}
	var ex []exprTest
	for _, w := range want {
		name := iostatRuleName(w.name, window)
		e := exprTest{Expr: name, EvalTime: "10m", ExpSamples: []expSample{{name + "{" + sda + "}", w.sda}}}
		if w.idle {
			e.ExpSamples = append(e.ExpSamples, expSample{name + "{" + sdb + "}", w.sdb})
		}
		sort.Slice(e.ExpSamples, func(i, j int) bool { return e.ExpSamples[i].Labels < e.ExpSamples[j].Labels })
		ex = append(ex, e)
	}
	return []alertCase{{name: "iostat -dx formulas on a steady load and an idle disk", input: in, expr: ex}}
}

// near pins a recording rule to a hand-computed value within 1e-9: the
// quantile interpolation over rates is not exact in floating point.
func near(expr, at, labels string, want float64) exprTest {
	return exprTest{Expr: fmt.Sprintf("abs(%s - %s) < bool 1e-9", expr, num(want)), EvalTime: at,
		ExpSamples: []expSample{{"{" + labels + "}", 1}}}
}

func probeOf(op string) string {
	if op == "read" {
		return "randread"
	}
	return "wal"
}

// attributionCases: a slow probe target beside its disk's own request
// latency (the blocklatency histogram of the disk under its partition or
// dm device), or diskstats' mean await without it, and the verdict the
// latency alerts name.
func attributionCases() []alertCase {
	const n = 60
	const host = `job="diskcanary", instance="n1:9742"`
	reqMetric := "diskcanary_disk_request_duration_seconds"
	req := func(device, op string, bs ...bucket) []series {
		return hist(reqMetric, host+`, device="`+device+`", op="`+op+`"`, n, bs...)
	}
	parent := func(device, disk string) []series {
		return s(`diskcanary_disk_parent_info{`+host+`, device="`+device+`", disk="`+disk+`"}`, fmt.Sprintf("1x%d", n))
	}
	// fdatasync p99 20 ms (latencyCases' slow), 9.44 ms (edge); read 37.5 ms.
	slow := hist(fdsMetric, walLabels, n, bucket{"0.005", 95}, bucket{"0.01", 97}, bucket{"0.025", 100})
	edge := hist(fdsMetric, walLabels, n, bucket{"0.005", 190}, bucket{"0.01", 199}, bucket{"0.025", 200})
	readSlow := hist(readMetric, readLabels, n, bucket{"0.01", 190}, bucket{"0.025", 196}, bucket{"0.05", 200})
	// Flush requests: p99 9 ms (4 of 5 in (5, 10] ms), or 248.5 µs.
	slowFlush := func(disk string) []series { return req(disk, "flush", bucket{"0.005", 95}, bucket{"0.01", 100}) }
	fastFlush := func(disk string) []series { return req(disk, "flush", bucket{"0.0001", 0}, bucket{"0.00025", 100}) }
	verdict := func(labels, op, source, v string) exprTest {
		return exprTest{Expr: ruleAttribution, EvalTime: "40m", ExpSamples: []expSample{{
			fmt.Sprintf(`%s{%s, op="%s", source="%s", verdict="%s"}`, ruleAttribution, labels, op, source, v), 1}}}
	}
	// one: the series of rule with exactly these labels is want.
	one := func(rule, labels string, want float64) exprTest {
		return near(rule+"{"+labels+"}", "40m", labels, want)
	}
	deviceLat := func(labels, op, source string, want float64) exprTest {
		return one(ruleTargetDeviceLat, fmt.Sprintf(`%s, op="%s", source="%s"`, labels, op, source), want)
	}
	return []alertCase{
		{name: "fdatasync p99 20 ms, its disk's flushes p99 9 ms: the device", alert: "DiskcanaryFdatasyncSlow", at: "40m",
			values: []string{"20ms"},
			input:  concat(slow, parent("sda1", "sda"), slowFlush("sda"), parent("dm-0", "sda"), parent("dm-0", "sdb"), fastFlush("sdb")),
			fire:   []string{walLabels}, cause: "device/blocklatency",
			expr: []exprTest{
				one(ruleDiskRequestP99, host+`, device="sda", op="flush"`, 0.009),
				one(ruleDeviceRequestP99, host+`, device="sda1", op="flush"`, 0.009),
				one(ruleDeviceRequestP99, host+`, device="sdb", op="flush"`, 0.0001+0.00015*0.99),
				// A dm device over two disks takes the slower one.
				one(ruleDeviceRequestP99, host+`, device="dm-0", op="flush"`, 0.009),
				deviceLat(walLabels, "fdatasync", "blocklatency", 0.009),
				verdict(walLabels, "fdatasync", "blocklatency", verdictDevice),
			}},
		{name: "fdatasync p99 20 ms, its disk's flushes p99 248.5 µs: the stack above the device", alert: "DiskcanaryFdatasyncSlow", at: "40m",
			values: []string{"20ms"},
			input:  concat(slow, parent("sda1", "sda"), fastFlush("sda")),
			fire:   []string{walLabels}, cause: "stack/blocklatency",
			expr: []exprTest{
				deviceLat(walLabels, "fdatasync", "blocklatency", 0.0001+0.00015*0.99),
				verdict(walLabels, "fdatasync", "blocklatency", verdictStack),
			}},
		{name: "fdatasync p99 9.44 ms: no verdict to give, silent", alert: "DiskcanaryFdatasyncSlow", at: "40m",
			input: concat(edge, parent("sda1", "sda"), fastFlush("sda")),
			expr:  []exprTest{verdict(walLabels, "fdatasync", "blocklatency", verdictNone)}},
		// Without the eBPF collector: diskstats' f_await 15 ms (1.5 s of
		// flushing per 100 flushes a minute), w_await 5 ms.
		{name: "fdatasync p99 20 ms, no blocklatency, f_await 15 ms: the device, by diskstats", alert: "DiskcanaryFdatasyncSlow", at: "40m",
			values: []string{"20ms"},
			input: concat(slow,
				s(`diskcanary_disk_flush_requests_total{`+host+`, device="sda1"}`, "0+100x60"),
				s(`diskcanary_disk_flush_requests_time_seconds_total{`+host+`, device="sda1"}`, "0+1.5x60"),
				s(`diskcanary_disk_writes_completed_total{`+host+`, device="sda1"}`, "0+100x60"),
				s(`diskcanary_disk_write_time_seconds_total{`+host+`, device="sda1"}`, "0+0.5x60")),
			fire: []string{walLabels}, cause: "device/diskstats",
			expr: []exprTest{
				deviceLat(walLabels, "fdatasync", "diskstats", 0.015),
				verdict(walLabels, "fdatasync", "diskstats", verdictDevice),
			}},
		{name: "read p99 37.5 ms, its disk's reads p99 37.5 ms: the device", alert: "DiskcanaryReadSlow", at: "40m",
			values: []string{"37.5ms"},
			input:  concat(readSlow, parent("sda1", "sda"), req("sda", "read", bucket{"0.01", 190}, bucket{"0.025", 196}, bucket{"0.05", 200})),
			fire:   []string{readLabels}, cause: "device/blocklatency",
			expr: []exprTest{verdict(readLabels, "read", "blocklatency", verdictDevice)}},
	}
}
