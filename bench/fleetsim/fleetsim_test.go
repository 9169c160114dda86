package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// A cut of a real capture (the fleet-scale scenario's daemon.prom): the probe
// target, one of the capturing machine's loop devices beside the probe's
// disk, a probe histogram with the daemon's bucket edges, a diskstats
// counter, identity labels and the exporter's own runtime series.
const daemonTemplate = `# HELP diskcanary_probe_target_info What a probe measures.
# TYPE diskcanary_probe_target_info gauge
diskcanary_probe_target_info{device="vda",fstype="ext4",kind="wal",path="/tmp/x/probe",probe="wal"} 1
# HELP diskcanary_disk_info Identity of a block device.
# TYPE diskcanary_disk_info gauge
diskcanary_disk_info{device="loop0",model="",serial=""} 1
diskcanary_disk_info{device="vda",model="",serial="overlayblk"} 1
# HELP diskcanary_disk_reads_completed_total The total number of reads completed successfully.
# TYPE diskcanary_disk_reads_completed_total counter
diskcanary_disk_reads_completed_total{device="loop0"} 12
diskcanary_disk_reads_completed_total{device="vda"} 1.009891e+06
# HELP diskcanary_probe_runs_total Probe cycles run, failed or not.
# TYPE diskcanary_probe_runs_total counter
diskcanary_probe_runs_total{probe="wal"} 6
# HELP diskcanary_probe_last_run_timestamp_seconds When the probe last ran.
# TYPE diskcanary_probe_last_run_timestamp_seconds gauge
diskcanary_probe_last_run_timestamp_seconds{probe="wal"} 1.7955565967570074e+09
# HELP diskcanary_fdatasync_duration_seconds Latency of the fdatasync after each sequential WAL-pattern write.
# TYPE diskcanary_fdatasync_duration_seconds histogram
diskcanary_fdatasync_duration_seconds_bucket{device="vda",path="/tmp/x/probe",probe="wal",le="5e-05"} 0
diskcanary_fdatasync_duration_seconds_bucket{device="vda",path="/tmp/x/probe",probe="wal",le="0.0001"} 3
diskcanary_fdatasync_duration_seconds_bucket{device="vda",path="/tmp/x/probe",probe="wal",le="0.00025"} 40
diskcanary_fdatasync_duration_seconds_bucket{device="vda",path="/tmp/x/probe",probe="wal",le="0.0005"} 100
diskcanary_fdatasync_duration_seconds_bucket{device="vda",path="/tmp/x/probe",probe="wal",le="0.001"} 110
diskcanary_fdatasync_duration_seconds_bucket{device="vda",path="/tmp/x/probe",probe="wal",le="0.01"} 114
diskcanary_fdatasync_duration_seconds_bucket{device="vda",path="/tmp/x/probe",probe="wal",le="+Inf"} 114
diskcanary_fdatasync_duration_seconds_sum{device="vda",path="/tmp/x/probe",probe="wal"} 0.063
diskcanary_fdatasync_duration_seconds_count{device="vda",path="/tmp/x/probe",probe="wal"} 114
# HELP go_gc_duration_seconds A summary of the wall-time pause (stop-the-world) duration in garbage collection cycles.
# TYPE go_gc_duration_seconds summary
go_gc_duration_seconds{quantile="0"} 2.3e-05
go_gc_duration_seconds{quantile="1"} 0.0004
go_gc_duration_seconds_sum 0.001
go_gc_duration_seconds_count 5
`

func parse(t *testing.T, b []byte) map[string]*dto.MetricFamily {
	t.Helper()
	p := expfmt.NewTextParser(model.UTF8Validation)
	mfs, err := p.TextToMetricFamilies(bytes.NewReader(b))
	if err != nil {
		t.Fatalf("rendered exposition does not parse: %v\n%s", err, b)
	}
	return mfs
}

func testTarget(t *testing.T, slow bool) (*target, float64) {
	t.Helper()
	tpl, err := parseTemplate(strings.NewReader(daemonTemplate), templateOptions{path: "/var/lib/diskcanary"})
	if err != nil {
		t.Fatal(err)
	}
	tpl.captured = 1.7955566e9
	nodes := newNodes(fleetOptions{nodes: 50, perCluster: 10, slowShare: 0.02, seed: 1, models: defaultModels})
	n := nodes[0]
	if slow {
		n = nodes[49] // the one slow node of 50 at 2 %
	}
	now := 1.8e9
	return newTarget(tpl, n, 1, now), now
}

func TestRenderKeepsTheTemplatesSeriesAndMovesThem(t *testing.T) {
	tg, now := testTarget(t, false)
	a := parse(t, tg.render(nil, now))
	b := parse(t, tg.render(nil, now+120))

	// The capturing machine's loop device is not a node's.
	if got := len(a["diskcanary_disk_info"].GetMetric()); got != 1 {
		t.Errorf("disk_info series: %d, want 1 (vda only)", got)
	}
	if got := len(a["diskcanary_disk_reads_completed_total"].GetMetric()); got != 1 {
		t.Errorf("reads_completed series: %d, want 1 (vda only)", got)
	}
	info := a["diskcanary_disk_info"].GetMetric()[0]
	if label(info, "model") != tg.node.model.name || label(info, "serial") != tg.node.serial {
		t.Errorf("disk_info carries model %q serial %q, want the node's %q %q", label(info, "model"), label(info, "serial"), tg.node.model.name, tg.node.serial)
	}

	h0, h1 := a["diskcanary_fdatasync_duration_seconds"].GetMetric()[0], b["diskcanary_fdatasync_duration_seconds"].GetMetric()[0]
	if p := label(h1, "path"); p != "/var/lib/diskcanary" {
		t.Errorf("path label %q, want /var/lib/diskcanary", p)
	}
	var edges []float64
	prev := uint64(0)
	for _, bk := range h1.GetHistogram().GetBucket() {
		edges = append(edges, bk.GetUpperBound())
		if bk.GetCumulativeCount() < prev {
			t.Errorf("bucket le=%g: %d below the one before (%d)", bk.GetUpperBound(), bk.GetCumulativeCount(), prev)
		}
		prev = bk.GetCumulativeCount()
	}
	want := []float64{5e-05, 0.0001, 0.00025, 0.0005, 0.001, 0.01, math.Inf(1)}
	if len(edges) != len(want) {
		t.Fatalf("bucket edges %v, want the template's %v", edges, want)
	}
	for i := range want {
		if edges[i] != want[i] {
			t.Fatalf("bucket edges %v, want the template's %v", edges, want)
		}
	}
	if prev != h1.GetHistogram().GetSampleCount() {
		t.Errorf("+Inf bucket %d != count %d", prev, h1.GetHistogram().GetSampleCount())
	}
	// 120 s holds two or three 44 s (±10 %) cycles of 50 fdatasyncs.
	d := h1.GetHistogram().GetSampleCount() - h0.GetHistogram().GetSampleCount()
	if d != 100 && d != 150 {
		t.Errorf("fdatasyncs in 120 s: %d, want 100 or 150", d)
	}
	runs := b["diskcanary_probe_runs_total"].GetMetric()[0].GetCounter().GetValue() - a["diskcanary_probe_runs_total"].GetMetric()[0].GetCounter().GetValue()
	if runs != float64(d/50) {
		t.Errorf("probe runs grew by %g, the histogram by %d cycles", runs, d/50)
	}
	last := b["diskcanary_probe_last_run_timestamp_seconds"].GetMetric()[0].GetGauge().GetValue()
	if last > now+120 || last < now+120-48.4 {
		t.Errorf("last run %g s before the scrape, want within one cycle", now+120-last)
	}
	r0 := a["diskcanary_disk_reads_completed_total"].GetMetric()[0].GetCounter().GetValue()
	r1 := b["diskcanary_disk_reads_completed_total"].GetMetric()[0].GetCounter().GetValue()
	if r1 <= r0 || r1 != math.Trunc(r1) {
		t.Errorf("reads_completed %g → %g: want an integer that grew", r0, r1)
	}
	if got := b["go_gc_duration_seconds"].GetMetric()[0].GetSummary().GetSampleCount(); got != 5 {
		t.Errorf("static summary count %d, want the template's 5", got)
	}
}

func TestSlowNodeIsSlower(t *testing.T) {
	p99 := func(slow bool) float64 {
		tg, _ := testTarget(t, slow)
		for _, s := range tg.tpl.byProbe["wal"] {
			if s.fam.name == "diskcanary_fdatasync_duration_seconds" {
				lat, _ := tg.node.latencyOf(s)
				return lat.median
			}
		}
		t.Fatal("no fdatasync histogram driven by the wal probe")
		return 0
	}
	if f, s := p99(false), p99(true); s < 4*f {
		t.Errorf("slow node median %g, fast %g: want well over the drift rules' 3x", s, f)
	}
}

func TestFamiliesReadBy(t *testing.T) {
	got := familiesReadBy([]byte(`expr: histogram_quantile(0.99, sum by (le) (rate(etcd_disk_wal_fsync_duration_seconds_bucket{job=~".*etcd.*"}[5m])))
expr: sum(rate(process_cpu_seconds_total{job=~".*etcd.*"}[5m]))`))
	for _, n := range []string{"etcd_disk_wal_fsync_duration_seconds", "process_cpu_seconds_total"} {
		if !got[n] {
			t.Errorf("%s not found", n)
		}
	}
	if got["etcd_server_has_leader"] {
		t.Error("etcd_server_has_leader is not in the rules")
	}
}

func TestFitAndCapacity(t *testing.T) {
	a, b := fit([]float64{100, 1000, 5000}, []float64{0.2, 1.1, 5.1})
	if math.Abs(a-0.1) > 1e-9 || math.Abs(b-0.001) > 1e-12 {
		t.Errorf("fit: %g + %g N, want 0.1 + 0.001 N", a, b)
	}
	rs := []result{
		{Nodes: 100, EvalInterval: 30, RSS: 200 << 20, Groups: []groupStat{{Name: "g", Max: 0.2}}},
		{Nodes: 1000, EvalInterval: 30, RSS: 2000 << 20, Groups: []groupStat{{Name: "g", Max: 1.1}}},
	}
	var w strings.Builder
	writeCapacity(&w, rs)
	for _, s := range []string{"≈ 100.0 ms + 1.0 ms × N", "RSS ≈ 0 MiB + 2.0 MiB × N", "within 25 % of it (7.50 s) up to N ≈ 7,400 nodes", "at N ≈ 29,900"} {
		if !strings.Contains(w.String(), s) {
			t.Errorf("capacity text lacks %q:\n%s", s, w.String())
		}
	}
}

// The slowest group is the one whose worst evaluation takes the largest
// share of its own interval: 10 s of 120 s is less than 5 s of the global 30 s.
func TestSlowestByShareOfInterval(t *testing.T) {
	r := result{EvalInterval: 30, Groups: []groupStat{
		{Name: "hour", Max: 10, Interval: 120},
		{Name: "fast", Max: 5},
		{Name: "minute", Max: 9, Interval: 60},
	}}
	if got := slowest(r).Name; got != "fast" {
		t.Errorf("slowest %s, want fast (5 s of 30 s)", got)
	}
	var w strings.Builder
	writeCapacity(&w, []result{{Nodes: 1000, EvalInterval: 30, RSS: 2000 << 20, Groups: r.Groups}})
	if !strings.Contains(w.String(), "≈ 0 µs + 5.0 ms × N") {
		t.Errorf("capacity text:\n%s", w.String())
	}
}

// A run passes the fleet target when its slowest group's worst evaluation
// is within a quarter of its interval and no iteration was missed.
func TestVerdicts(t *testing.T) {
	var w strings.Builder
	writeVerdicts(&w, []result{
		{Nodes: 1000, EvalInterval: 30, Groups: []groupStat{{Name: "fast", Max: 7.5}, {Name: "hour", Max: 20, Interval: 120}}},
		{Nodes: 5000, EvalInterval: 30, Groups: []groupStat{{Name: "fast", Max: 16.8}, {Name: "minute", Max: 9, Interval: 60, Missed: 2}}},
	})
	want := "ok: 1000 nodes: slowest group fast at most 7.50 s of its 30 s interval (25 %; ≤ 25 %)\n" +
		"ok: 1000 nodes: 0 missed iterations (0)\n" +
		"FAIL: 5000 nodes: slowest group fast at most 16.80 s of its 30 s interval (56 %; ≤ 25 %)\n" +
		"FAIL: 5000 nodes: 2 missed iterations (0)\n"
	if w.String() != want {
		t.Errorf("verdicts:\n%s\nwant:\n%s", w.String(), want)
	}
}

// A sharded run: a row per engine, the sum of the engines, the fleet's
// series and memory per node over all of them, each engine's groups side by
// side, and the verdicts per engine.
func TestShardedTable(t *testing.T) {
	shard := func(name string, up, series, rss, cpu, fast, missed float64) result {
		return result{Nodes: 200, Engine: "prometheus", Name: name, Prometheus: "2.42.0", ScrapeInterval: 30, EvalInterval: 30, Steady: 120,
			Targets: up, TargetsUp: up, HeadSeries: series, RuleSeries: 1000, RSS: rss, CPU: cpu,
			ScrapeP50: 0.002, ScrapeP99: 0.01, ScrapeMax: 0.02,
			Groups: []groupStat{{Name: "fast", Median: fast / 2, Max: fast, Missed: missed}, {Name: "slow", Median: 1, Max: 2, Interval: 60}}}
	}
	global := result{Nodes: 200, Engine: "vmalert", Name: "VictoriaMetrics + vmalert", Prometheus: "v1.151.0", ScrapeInterval: 30, EvalInterval: 30, Steady: 120,
		HeadSeries: 2000, RuleSeries: 1500, RSS: 100 << 20, CPU: 0.05,
		Groups: []groupStat{{Name: "cohort", Median: 0.01, Max: 0.02, Interval: 60}},
		Alerts: map[string]float64{"DiskcanaryFdatasyncFleetDrift pending": 4}}
	var w strings.Builder
	writeShardedTables(&w, []result{shard("shard 1/2", 100, 30000, 200<<20, 0.1, 3, 0), shard("shard 2/2", 100, 31000, 210<<20, 0.12, 9, 1), global})
	want := `200 nodes sharded by cluster: prometheus 2.42.0, vmalert v1.151.0; scrape interval 30 s (timeout 10 s), evaluation interval 30 s; medians and maxima over the last 2 min of the run.

| engine | targets up | head series | rule series | RSS | CPU | slowest group, median / max | all groups, sum of medians | missed iterations | scrape p50 / p99 / max |
|---|---:|---:|---:|---:|---:|---|---:|---:|---|
| shard 1/2 | 100/100 | 30,000 | 1,000 | 200 MiB | 0.10 cores | fast 1.50 s / 3.00 s | 2.50 s | 0 | 2.0 ms / 10.0 ms / 20.0 ms |
| shard 2/2 | 100/100 | 31,000 | 1,000 | 210 MiB | 0.12 cores | fast 4.50 s / 9.00 s | 5.50 s | 1 | 2.0 ms / 10.0 ms / 20.0 ms |
| VictoriaMetrics + vmalert |  | 2,000 | 1,500 | 100 MiB | 0.05 cores | cohort 10.0 ms / 20.0 ms | 10.0 ms | 0 |  |
| all engines | | 63,000 | | 510 MiB | 0.27 cores | | | 1 | |

Per node, all engines: 315 series, 2.5 MiB of RSS.

| rule group | interval | shard 1/2: median / max | shard 2/2: median / max | VictoriaMetrics + vmalert: median / max |
|---|---:|---|---|---|
| fast | 30 s | 1.50 s / 3.00 s | 4.50 s / 9.00 s |  |
| slow | 1 min | 1.00 s / 2.00 s | 1.00 s / 2.00 s |  |
| cohort | 1 min |  |  | 10.0 ms / 20.0 ms |

Alerts at the end, VictoriaMetrics + vmalert: DiskcanaryFdatasyncFleetDrift pending 4.

ok: 200 nodes, shard 1/2: slowest group fast at most 3.00 s of its 30 s interval (10 %; ≤ 25 %)
ok: 200 nodes, shard 1/2: 0 missed iterations (0)
FAIL: 200 nodes, shard 2/2: slowest group fast at most 9.00 s of its 30 s interval (30 %; ≤ 25 %)
FAIL: 200 nodes, shard 2/2: 1 missed iterations (0)
ok: 200 nodes, VictoriaMetrics + vmalert: slowest group cohort at most 20.0 ms of its 1 min interval (0 %; ≤ 25 %)
ok: 200 nodes, VictoriaMetrics + vmalert: 0 missed iterations (0)
`
	if w.String() != want {
		t.Errorf("sharded table:\n%s\nwant:\n%s", w.String(), want)
	}
}

// report -engine vmalert reads the global layer from VictoriaMetrics: the
// groups by vmalert's group label, the median from the iteration summary's
// quantile 0.5 and the maximum from its quantile 1 over the steady window,
// missed iterations, both processes' memory and CPU, and the rules (with
// each group's interval) from vmalert's API, not VictoriaMetrics'.
func TestReportVmalert(t *testing.T) {
	const g1, g2 = `"group":"diskcanary.cohort.recording"`, `"group":"diskcanary.drift.alerts"`
	vector := func(samples ...string) string {
		return `{"status":"success","data":{"resultType":"vector","result":[` + strings.Join(samples, ",") + `]}}`
	}
	instant := map[string]string{
		`vm_cache_entries{job="victoria-metrics", type="storage/hour_metric_ids"}`: vector(`{"metric":{},"value":[1000,"1688"]}`),
		`count({__name__=~".+:.+"})`:                                                  vector(`{"metric":{},"value":[1000,"466"]}`),
		`sum(process_resident_memory_bytes{job=~"victoria-metrics|vmalert"})`:         vector(`{"metric":{},"value":[1000,"104857600"]}`),
		`sum(rate(process_cpu_seconds_total{job=~"victoria-metrics|vmalert"}[120s]))`: vector(`{"metric":{},"value":[1000,"0.04"]}`),
		`vmalert_iteration_total`:                                                     vector(`{"metric":{`+g1+`},"value":[1000,"5"]}`, `{"metric":{`+g2+`},"value":[1000,"10"]}`),
		`vmalert_iteration_missed_total`:                                              vector(`{"metric":{`+g1+`},"value":[1000,"0"]}`, `{"metric":{`+g2+`},"value":[1000,"1"]}`),
		`count by (alertname, alertstate) (ALERTS)`:                                   vector(`{"metric":{"alertname":"DiskcanaryFdatasyncFleetDrift","alertstate":"pending"},"value":[1000,"2"]}`),
	}
	ranged := map[string]string{
		`vmalert_iteration_duration_seconds{quantile="0.5"}`: `{"status":"success","data":{"resultType":"matrix","result":[` +
			`{"metric":{` + g1 + `},"values":[[900,"0.010"],[915,"0.030"],[930,"0.020"]]},{"metric":{` + g2 + `},"values":[[900,"0.005"]]}]}}`,
		`vmalert_iteration_duration_seconds{quantile="1"}`: `{"status":"success","data":{"resultType":"matrix","result":[` +
			`{"metric":{` + g1 + `},"values":[[900,"0.040"],[915,"0.090"],[930,"0.050"]]},{"metric":{` + g2 + `},"values":[[900,"0.007"]]}]}}`,
	}
	vm := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = r.ParseForm()
		table := instant
		if strings.HasSuffix(r.URL.Path, "/query_range") {
			table = ranged
		}
		if body, ok := table[r.Form.Get("query")]; ok {
			fmt.Fprint(w, body)
			return
		}
		fmt.Fprint(w, vector()) // what a run without such series answers
	}))
	defer vm.Close()
	vmalert := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, `{"status":"success","data":{"groups":[`+
			`{"name":"diskcanary.cohort.recording","file":"g.yml","interval":60,"rules":[{"type":"recording","name":"cohort:x","query":"x","health":"ok","evaluationTime":0.02,"lastEvaluation":"2026-11-29T04:36:18Z"}]},`+
			`{"name":"diskcanary.drift.alerts","file":"g.yml","interval":30,"rules":[{"type":"alerting","name":"DiskcanaryFdatasyncFleetDrift","query":"y","duration":600,"health":"ok","state":"pending","evaluationTime":0.004,"lastEvaluation":"2026-11-29T04:36:18Z","alerts":[]}]}]}}`)
	}))
	defer vmalert.Close()
	out := filepath.Join(t.TempDir(), "result.json")
	if err := reportMain([]string{"-engine", "vmalert", "-prometheus", vm.URL, "-ruler", vmalert.URL, "-name", "VictoriaMetrics + vmalert",
		"-version", "v1.151.0", "-nodes", "200", "-start", "1", "-steady", "2m", "-out", out}); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	var r result
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatal(err)
	}
	want := []groupStat{
		{Name: "diskcanary.cohort.recording", Rules: 1, Interval: 60, Median: 0.02, Max: 0.09, Iterations: 5},
		{Name: "diskcanary.drift.alerts", Rules: 1, Interval: 30, Median: 0.005, Max: 0.007, Iterations: 10, Missed: 1},
	}
	if !reflect.DeepEqual(r.Groups, want) {
		t.Errorf("groups %+v, want %+v", r.Groups, want)
	}
	if r.Engine != "vmalert" || r.Name != "VictoriaMetrics + vmalert" || r.Prometheus != "v1.151.0" || r.HeadSeries != 1688 || r.RuleSeries != 466 ||
		r.RSS != 100<<20 || r.CPU != 0.04 || r.Alerts["DiskcanaryFdatasyncFleetDrift pending"] != 2 {
		t.Errorf("result %+v", r)
	}
	if len(r.Rules) != 2 || r.Rules[0].Name != "cohort:x" || r.Rules[0].Seconds != 0.02 {
		t.Errorf("rules %+v", r.Rules)
	}
}

// An etcd template is one member's view; each simulated member of a cluster
// gets its own server_id and its two peers' IDs as To, so a To names one
// member's etcd_server_id (the rules join on it).
func TestEtcdMembersHaveTheirOwnIDs(t *testing.T) {
	tpl, err := parseTemplate(strings.NewReader(`# TYPE etcd_server_id gauge
etcd_server_id{server_id="a48b05c7421d511b"} 1
# TYPE etcd_network_peer_sent_failures_total counter
etcd_network_peer_sent_failures_total{To="ac8832e2f137680f"} 0
etcd_network_peer_sent_failures_total{To="7ca25baa216d8b32"} 0
`), templateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	nodes := newNodes(fleetOptions{nodes: 12, perCluster: 6, seed: 1, models: defaultModels})
	ids := func(n *node) []string {
		var out []string
		for _, fam := range tpl.families {
			for _, s := range fam.series {
				for _, l := range s.labelsFor(n) {
					out = append(out, l.name+"="+l.value)
				}
			}
		}
		return out
	}
	// Nodes 6-8 are cluster 1's members 0-2; the template's peers in the
	// order of their IDs (7ca…, ac8…) are the member's next and the one
	// after. Families by name, series as captured (ac8… first).
	for i, want := range [][]string{
		{"To=0000000200000003", "To=0000000200000002", "server_id=0000000200000001"},
		{"To=0000000200000001", "To=0000000200000003", "server_id=0000000200000002"},
		{"To=0000000200000002", "To=0000000200000001", "server_id=0000000200000003"},
	} {
		if got := ids(nodes[6+i]); !slices.Equal(got, want) {
			t.Errorf("member %d: %v, want %v", i, got, want)
		}
	}
}
