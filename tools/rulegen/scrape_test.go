package rulegen

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestScrapeDropsAreUnread: no series an alert, rule, panel or variable
// selects is dropped at the scrape, and the drops take what they name.
func TestScrapeDropsAreUnread(t *testing.T) {
	used, _ := parseAll(t)
	recorded := recordedNames()
	for name, where := range used {
		if recorded[name] || notDiskcanary[name] != "" {
			continue // the drops are the diskcanary job's
		}
		if dropped(name, nil) {
			t.Errorf("%s is read by %s but dropped at the scrape", name, where[0])
		}
	}
	// The block-request histogram by op: attribution reads these.
	for _, op := range requestOps {
		if dropped("diskcanary_disk_request_duration_seconds_bucket", map[string]string{"op": op}) {
			t.Errorf("the %s requests' buckets are dropped, and attribution reads them", op)
		}
	}
	for _, c := range []struct {
		name, op string
		want     bool
	}{
		{"go_goroutines", "", true},
		{"process_cpu_seconds_total", "", true},
		{"diskcanary_disk_request_duration_seconds_bucket", "discard", true},
		{"diskcanary_disk_request_duration_seconds_bucket", "flush", false},
		{"diskcanary_disk_request_duration_seconds_count", "flush", true},
		{"diskcanary_fdatasync_duration_seconds_count", "", false},
		{"diskcanary_fdatasync_duration_seconds_sum", "", true},
		{"diskcanary_disk_reads_merged_total", "", true},
		{"diskcanary_disk_reads_completed_total", "", false},
		{"diskcanary_smart_healthy", "", false},
		// Anchored: a prefix of a dropped name is not dropped.
		{"diskcanary_disk_io_now_total", "", false},
	} {
		if got := dropped(c.name, map[string]string{"op": c.op}); got != c.want {
			t.Errorf("dropped(%s, op=%q) = %v, want %v", c.name, c.op, got, c.want)
		}
	}
}

// TestShippedScrapeConfigsDrop: the Operator manifests of deploy/kubernetes
// carry the generated drops as they are.
func TestShippedScrapeConfigsDrop(t *testing.T) {
	want := MetricRelabelings(8)
	for _, f := range []string{"deploy/kubernetes/base/podmonitor.yaml", "deploy/kubernetes/base/servicemonitor.yaml"} {
		b, err := os.ReadFile(filepath.Join(repoRoot(t), f))
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(b), "      metricRelabelings:\n"+want) {
			t.Errorf("%s: its metricRelabelings are not ScrapeDrops as generated; paste:\n      metricRelabelings:\n%s", f, want)
		}
	}
}
