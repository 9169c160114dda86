package rulegen

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/diskcanary/diskcanary/internal/buckets"
)

// comparison is a PromQL comparison against a number literal: the text left
// of the operator is read back to its operand.
var comparison = regexp.MustCompile(`(?:==|!=|>=|<=|>|<)\s*(?:bool\s+)?([0-9][0-9.eE+-]*)\b`)

// quantileThresholds returns, for each rule of the generated rule file, the
// numbers a quantile of a diskcanary histogram is compared with. A quantile
// is histogram_quantile over a diskcanary_*_bucket series or a recording
// rule made from one (etcd's histograms have etcd's buckets).
func quantileThresholds(t *testing.T, p Params) map[string][]float64 {
	t.Helper()
	files, err := Files(p)
	if err != nil {
		t.Fatal(err)
	}
	var rf RuleFile
	if err := yaml.Unmarshal(files["alerts/diskcanary-rules.yml"], &rf); err != nil {
		t.Fatal(err)
	}
	var rules []Rule
	for _, g := range rf.Groups {
		rules = append(rules, g.Rules...)
	}
	quantile := map[string]bool{}
	isQuantile := func(operand string) bool {
		if strings.Contains(operand, "histogram_quantile(") && strings.Contains(operand, "diskcanary_") && strings.Contains(operand, "_bucket") {
			return true
		}
		return quantile[strings.TrimSpace(operand)]
	}
	for changed := true; changed; {
		changed = false
		for _, r := range rules {
			// A count of quantiles (a cohort's members) is not a latency.
			if r.Record == "" || quantile[r.Record] || strings.HasPrefix(r.Expr, "count") {
				continue
			}
			if strings.Contains(r.Expr, "histogram_quantile(") && strings.Contains(r.Expr, "diskcanary_") && strings.Contains(r.Expr, "_bucket") ||
				slices.ContainsFunc(identifiers(r.Expr), func(id string) bool { return quantile[id] }) {
				quantile[r.Record], changed = true, true
			}
		}
	}
	out := map[string][]float64{}
	for _, r := range rules {
		name := r.Alert + r.Record
		for _, m := range comparison.FindAllStringSubmatchIndex(r.Expr, -1) {
			// A factor ("> 2 * median") is not a threshold.
			rest := strings.TrimLeft(r.Expr[m[1]:], " ")
			if rest != "" && strings.ContainsRune("*/+-^", rune(rest[0])) || !isQuantile(leftOperand(r.Expr[:m[0]])) {
				continue
			}
			v, err := strconv.ParseFloat(r.Expr[m[2]:m[3]], 64)
			if err != nil {
				t.Fatalf("%s: %q: %v", name, r.Expr[m[0]:m[1]], err)
			}
			out[name] = append(out[name], v)
		}
	}
	return out
}

var identifier = regexp.MustCompile(`[a-zA-Z_:][a-zA-Z0-9_:]*`)

func identifiers(expr string) []string { return identifier.FindAllString(expr, -1) }

// leftOperand is the operand that ends text: a series name (with its label
// selector) or a parenthesised expression with the function name before it.
func leftOperand(text string) string {
	text = strings.TrimRight(text, " \t\n")
	if strings.HasSuffix(text, "}") {
		text = text[:strings.LastIndexByte(text, '{')]
	}
	if !strings.HasSuffix(text, ")") {
		ids := identifier.FindAllStringIndex(text, -1)
		if len(ids) == 0 || ids[len(ids)-1][1] != len(text) {
			return ""
		}
		return text[ids[len(ids)-1][0]:]
	}
	depth := 0
	for i := len(text) - 1; i >= 0; i-- {
		switch text[i] {
		case ')':
			depth++
		case '(':
			depth--
			if depth == 0 {
				fn := identifier.FindAllStringIndex(text[:i], -1)
				if len(fn) > 0 && fn[len(fn)-1][1] == len(strings.TrimRight(text[:i], " ")) {
					return text[fn[len(fn)-1][0]:]
				}
				return text[i:]
			}
		}
	}
	return ""
}

// Every threshold a diskcanary latency quantile is compared with is an edge
// of buckets.Latency: histogram_quantile interpolates inside a bucket,
// so a threshold on an edge reads "more than 1 % of samples above it", never
// an interpolation artefact. Two comparisons are not thresholds: ">= 0"
// keeps a series that exists (drops NaN), and the drift floors (2 ms) only
// keep microsecond-scale p99s from paging on a ratio; they are listed.
func TestQuantileThresholdsAreBucketEdges(t *testing.T) {
	p := Defaults()
	floors := map[string]float64{
		"DiskcanaryFdatasyncFleetDrift": p.DriftFloor.Seconds(), "DiskcanaryReadFleetDrift": p.DriftFloor.Seconds(),
		"DiskcanaryFdatasyncSelfDrift": p.SelfDriftFloor.Seconds(), "DiskcanaryReadSelfDrift": p.SelfDriftFloor.Seconds(),
	}
	got := map[string][]float64{}
	for name, vs := range quantileThresholds(t, p) {
		for _, v := range vs {
			if v == 0 || v == floors[name] {
				continue
			}
			if !slices.Contains(buckets.Latency, v) {
				t.Errorf("%s compares a latency quantile with %g s, which is not an edge of buckets.Latency %v", name, v, buckets.Latency)
			}
			got[name] = append(got[name], v)
		}
	}
	// The thresholds found, so a parser that finds none cannot pass.
	want := map[string][]float64{
		"DiskcanaryFdatasyncSlow":     {0.01},
		"DiskcanaryFdatasyncVerySlow": {0.5},
		"DiskcanaryFdatasyncCritical": {1},
		"DiskcanaryReadSlow":          {0.025},
		"device_workload:diskcanary_cgroup_io_bytes:suspects_top3_rate15m": {0.01, 0.025},
		"node:diskcanary_etcd_verdict:info":                                {0.01, 0.01, 0.01, 0.01, 0.01, 0.01, 0.01},
		// The canary's sample gate reads slow on fewer samples.
		"node:diskcanary_fdatasync_duration_seconds:p99_max": {0.01},
		"target:diskcanary_probe_attribution:info":           {0.01, 0.01, 0.01, 0.01, 0.01, 0.025, 0.025, 0.025, 0.025, 0.025},
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("thresholds found:\n%v\nwant\n%v", got, want)
	}
}
