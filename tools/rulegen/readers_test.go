package rulegen

import (
	"slices"
	"strings"
	"testing"
	"time"
)

// exportedRules are the recording rules no alert, panel or other rule
// reads, kept for the people and tools outside that do: each with why.
// Every other recorded series is a cost on every node with no reader.
var exportedRules = map[string]string{
	ruleWearForecast: "the days a drive has left, as DiskcanarySmartWearOutSoon's runbook (docs/runbooks.md) names it for on-call to query",
	// Who did the I/O, as docs/alerts.md gives them to on-call and the
	// etcd runbook: the panels read the 15-minute rates and shares.
	ruleWorkloadTop(latencyWindow):      "the three busiest workloads per disk over the latency alerts' window (docs/alerts.md)",
	ruleWorkloadSuspects(latencyWindow): "the busiest three on the disks under a slow probe target: who was on a disk while its p99 rose (docs/alerts.md)",
	ruleWorkloadTop(5 * time.Minute):    "the three busiest workloads per disk over the etcd verdict's window (docs/alerts.md)",
	ruleWorkloadOps(5 * time.Minute):    "each workload's operations a second over the etcd verdict's window (docs/alerts.md)",
}

// TestEveryRecordingRuleIsRead: each recording rule is read by an alert
// (its expression or a query in its text), a dashboard panel or variable,
// another recording rule, or is one of exportedRules.
func TestEveryRecordingRuleIsRead(t *testing.T) {
	used, _ := parseAll(t)
	var texts []string
	for _, g := range Rules(Defaults()).Groups {
		for _, r := range g.Rules {
			for _, a := range r.Annotations {
				texts = append(texts, a)
			}
		}
	}
	recorded := recordedNames()
	if len(recorded) < 30 {
		t.Fatalf("only %d recording rules", len(recorded))
	}
	for name := range recorded {
		readers := slices.DeleteFunc(slices.Clone(used[name]), func(w string) bool { return w == "rule "+name })
		for _, text := range texts {
			if strings.Contains(text, name+"{") {
				readers = append(readers, "an alert text")
			}
		}
		_, exported := exportedRules[name]
		switch {
		case len(readers) == 0 && !exported:
			t.Errorf("recording rule %s: no alert, panel or rule reads it; drop it, or list it in exportedRules with who reads it", name)
		case len(readers) > 0 && exported:
			t.Errorf("recording rule %s is read by %s: it need not be in exportedRules", name, readers[0])
		}
	}
	for name := range exportedRules {
		if !recorded[name] {
			t.Errorf("exportedRules lists %s, which no rule records", name)
		}
	}
}
