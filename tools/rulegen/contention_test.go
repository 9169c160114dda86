package rulegen

import "testing"

// "Who was doing I/O on this disk" sits beside the probe latency of the
// same disk, over the same window, and its ranking table below.
func TestContentionPanelBesideTheLatency(t *testing.T) {
	node := generatedDashboards(t, Defaults())["diskcanary-node.json"]
	lat := panelByTitle(t, node, "Probe targets on this disk: fdatasync p99 (15m)")
	who := panelByTitle(t, node, "Who was doing I/O on this disk (bytes/s by workload, 15m)")
	if who.GridPos.Y != lat.GridPos.Y || who.GridPos.X != lat.GridPos.X+lat.GridPos.W {
		t.Errorf("who-did-I/O panel at %+v, the latency panel at %+v: want it on the same line, right of it", who.GridPos, lat.GridPos)
	}
	want := `sort_desc(device_workload:diskcanary_cgroup_io_bytes:rate15m{cluster=~"$cluster", job="$job", instance="$instance", device="$disk"})`
	if len(who.Targets) != 1 || who.Targets[0].Expr != want || who.Targets[0].LegendFormat != "{{workload}}" {
		t.Errorf("who-did-I/O query %+v, want %s by {{workload}}", who.Targets, want)
	}
	table := panelByTitle(t, node, "Who was doing I/O on this disk: the ranking (15m)")
	if len(table.Targets) != 3 || table.Targets[2].Expr != `device_workload:diskcanary_cgroup_io_bytes:share_rate15m{cluster=~"$cluster", job="$job", instance="$instance", device="$disk"}` {
		t.Errorf("ranking table queries %+v", table.Targets)
	}
}
