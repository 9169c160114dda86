package rulegen

import (
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/prometheus/promql/parser"
)

// TestLayersSplitTheRules: the per-cluster and global rule files are the
// rule file's groups, each once, in its order; the global layer reads only
// series the per-cluster layer records (the remote write sends those
// alone), and the per-cluster layer reads nothing the global one records.
func TestLayersSplitTheRules(t *testing.T) {
	p := Defaults()
	cluster, global := Layers(p)
	var names []string
	for _, g := range global.Groups {
		names = append(names, g.Name)
	}
	if want := []string{"diskcanary.cohort.recording", "diskcanary.drift.alerts"}; !reflect.DeepEqual(names, want) {
		t.Errorf("global layer groups %v, want %v", names, want)
	}
	all := Rules(p).Groups
	if len(cluster.Groups)+len(global.Groups) != len(all) {
		t.Fatalf("%d + %d groups in the layers, %d in the rule file", len(cluster.Groups), len(global.Groups), len(all))
	}
	ci, gi := 0, 0
	for _, g := range all {
		switch {
		case gi < len(global.Groups) && reflect.DeepEqual(g, global.Groups[gi]):
			gi++
		case ci < len(cluster.Groups) && reflect.DeepEqual(g, cluster.Groups[ci]):
			ci++
		default:
			t.Fatalf("group %s is in neither layer, or out of order", g.Name)
		}
	}

	records := func(rf RuleFile) map[string]bool {
		out := map[string]bool{}
		for _, g := range rf.Groups {
			for _, r := range g.Rules {
				if r.Record != "" {
					out[r.Record] = true
				}
			}
		}
		return out
	}
	reads := func(rf RuleFile) map[string]string {
		out := map[string]string{}
		pp := parser.NewParser(parser.Options{})
		for _, g := range rf.Groups {
			for _, r := range g.Rules {
				e, err := pp.ParseExpr(r.Expr)
				if err != nil {
					t.Fatalf("%s%s: %v", r.Record, r.Alert, err)
				}
				for _, s := range selectors(e) {
					out[s.name] = r.Record + r.Alert
				}
			}
		}
		return out
	}
	fromCluster, fromGlobal := records(cluster), records(global)
	var inputs []string
	for name, by := range reads(global) {
		switch {
		case fromCluster[name]:
			inputs = append(inputs, name)
		case !fromGlobal[name]:
			t.Errorf("global layer: %s reads %s, which the per-cluster layer does not record", by, name)
		}
	}
	slices.Sort(inputs)
	if want := slices.Sorted(slices.Values(GlobalInputs())); !reflect.DeepEqual(inputs, want) {
		t.Errorf("the global layer reads %v of the per-cluster layer; GlobalInputs (the remote write) says %v", inputs, want)
	}
	for name, by := range reads(cluster) {
		if fromGlobal[name] {
			t.Errorf("per-cluster layer: %s reads %s, which only the global layer records", by, name)
		}
	}
	for _, g := range global.Groups {
		for _, r := range g.Rules {
			for k, v := range r.Annotations {
				if strings.Contains(v, "| query") {
					t.Errorf("global layer: %s's %s queries when it renders; the global engine may lack what it reads", r.Alert, k)
				}
			}
		}
	}
}
