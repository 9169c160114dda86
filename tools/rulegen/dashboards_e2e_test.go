package rulegen

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/diskcanary/diskcanary/internal/smart/smarttest"
	"github.com/diskcanary/diskcanary/internal/testkit"
)

// dataField is a row field a data link reads: ${__data.fields.NAME...}.
var dataField = regexp.MustCompile(`\$\{__data\.fields\.(\w+)`)

// checkDashboardsLive runs every query of every dashboard generated with p
// against prom, as Grafana would on load: the variables resolved by
// grafanaVars (picks[file] overrides a variable's default). Every query
// must return data unless mayBeEmpty[file] names its panel ("title", or
// "title/refId" for one query) with the reason it is empty here; the rows
// of a table with data links must carry every field the links read. It
// returns the variables' values and options per file.
func checkDashboardsLive(t *testing.T, prom *testkit.Prometheus, p Params, picks, mayBeEmpty map[string]map[string]string) (map[string]map[string]string, map[string]map[string][]string) {
	t.Helper()
	values, options := map[string]map[string]string{}, map[string]map[string][]string{}
	for file, d := range generatedDashboards(t, p) {
		vals, opts := grafanaVars(t, prom, d, picks[file])
		values[file], options[file] = vals, opts
		titles := map[string]bool{}
		withData, total := 0, 0
		var empty []string
		for _, panel := range d.Panels {
			titles[panel.Title] = true
			results := panelResults(t, prom, d, vals, panel)
			for _, tg := range panel.Targets {
				titles[panel.Title+"/"+tg.RefID] = true
				res := results[tg.RefID]
				total++
				if panel.Title == "Fleet-drift outliers" && (len(res) != 1 || res[0].Value[1] != "1") {
					t.Errorf("Fleet-drift outliers = %v, want 1 (the throttled instance)", res)
				}
				switch {
				case len(res) > 0:
					withData++
				case mayBeEmpty[file][panel.Title] == "" && mayBeEmpty[file][panel.Title+"/"+tg.RefID] == "":
					t.Errorf("%s panel %q query %s returns no data:\n%s", file, panel.Title, tg.RefID, interpolate(t, d, tg.Expr, vals))
				default:
					empty = append(empty, panel.Title+"/"+tg.RefID)
				}
			}
		}
		for k := range mayBeEmpty[file] {
			if !titles[k] {
				t.Errorf("%s: mayBeEmpty names %q, which is no panel or query", file, k)
			}
		}
		sort.Strings(empty)
		t.Logf("%s: variables %v; %d of %d queries return data; empty as expected here: %s", file, vals, withData, total, strings.Join(empty, "; "))
	}
	return values, options
}

// panelResults runs a panel's queries with the variables' values, keyed by
// refId, and checks that the rows of a query with data carry every field
// the panel's data links read.
func panelResults(t *testing.T, prom *testkit.Prometheus, d gDashboard, vals map[string]string, panel gPanel) map[string][]testkit.Sample {
	t.Helper()
	out := map[string][]testkit.Sample{}
	for _, tg := range panel.Targets {
		res := prom.Query(t, interpolate(t, d, tg.Expr, vals))
		out[tg.RefID] = res
		if len(res) == 0 {
			continue
		}
		for _, l := range panel.FieldConfig.Defaults.Links {
			for _, m := range dataField.FindAllStringSubmatch(l.URL, -1) {
				found := false
				for _, s := range res {
					found = found || s.Metric[m[1]] != ""
				}
				if !found {
					t.Errorf("%s panel %q: its data link reads field %q, which no row of %s has (first row: %v)", d.UID, panel.Title, m[1], tg.RefID, res[0].Metric)
				}
			}
		}
	}
	return out
}

// TestNodeDiskVariableOnLoopDevices: the on-call dashboard's disk variable,
// resolved by a real Prometheus scraping a real daemon, is the disk under
// the probe on a node that also has other loop devices, which sort first
// and which the variable listing every device used to default to. The same
// daemon reads SMART through the fake smartctl (a failing ATA disk and an
// NVMe disk with a critical warning, real smartctl --json output), so the
// SMART panels the fleet end to end leaves empty (loop devices) are
// checked here: every column of the on-call SMART table has data for one
// of the two disks, and the fleet's SMART tables have rows whose fields
// their drill-down links read.
func TestNodeDiskVariableOnLoopDevices(t *testing.T) {
	testkit.RequireRoot(t)
	testkit.PrometheusBin(t) // skip before building anything
	bin := testkit.Binary(t)
	// Two ext4 loop devices; the probe goes on the one that sorts last, so
	// every-device order puts another loop device first.
	mntA, devA := testkit.LoopFSIn(t, "/dev/shm", 64<<20, "ext4")
	mntB, devB := testkit.LoopFSIn(t, "/dev/shm", 64<<20, "ext4")
	mnt, dev, decoy := mntB, filepath.Base(devB), filepath.Base(devA)
	if dev < decoy {
		mnt, dev, decoy = mntA, decoy, dev
	}
	dir := filepath.Join(mnt, "canary")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	fake := smarttest.Install(t, smarttest.FakeConfig{
		Scan: []map[string]string{{"name": "/dev/sda", "type": "sat", "protocol": "ATA"}, {"name": "/dev/nvme0", "type": "nvme", "protocol": "NVMe"}},
		Devices: map[string]smarttest.FakeDevice{
			"/dev/sda":   {Fixture: smarttest.Fixture("ata-hdd-failing-reallocated-selftest-usbjmicron-rc216-scrutiny.json")},
			"/dev/nvme0": {Fixture: smarttest.Fixture("nvme-critical-warning-smart-failed-rc8-smartctl-exporter.json")},
		},
	})
	cfg := filepath.Join(t.TempDir(), "diskcanary.yml")
	writeFile(t, cfg, fmt.Sprintf(`probes:
  targets:
    - {name: wal, kind: wal, dir: %[1]s, interval: 1s, ops: 20, min_free: 1MiB}
    - {name: randread, kind: randread, dir: %[1]s, interval: 1s, ops: 20, working_set: 4MiB, min_free: 1MiB}
smart:
  smartctl: %[2]s
`, dir, fake))
	d := startServe(t, bin, "--config.file", cfg)
	prom := testkit.StartPrometheus(t, fmt.Sprintf(`global:
  scrape_interval: 1s
  scrape_timeout: 900ms
scrape_configs:
  - job_name: diskcanary
    static_configs:
      - targets: [%q]
`, d.addr), "--log.level=warn")
	prom.WaitQuery(t, `diskcanary_probe_target_info{probe="randread"}`, 60*time.Second, func(s []testkit.Sample) bool { return len(s) == 1 })

	node := generatedDashboards(t, Defaults())["diskcanary-node.json"]
	values, options := grafanaVars(t, prom, node, nil)
	if values["instance"] != d.addr || values["job"] != "diskcanary" {
		t.Fatalf("instance %q job %q, want %s and diskcanary", values["instance"], values["job"], d.addr)
	}
	if got := strings.Join(options["disk"], " "); got != dev {
		t.Errorf("disk variable options %q, want only the probes' disk %s", got, dev)
	}
	if values["disk"] != dev {
		t.Errorf("disk variable resolves to %q, want the probes' disk %s", values["disk"], dev)
	}
	// One probe chosen: still its disk.
	values, _ = grafanaVars(t, prom, node, map[string]string{"probe": "wal"})
	if values["disk"] != dev {
		t.Errorf("probe=wal: disk variable resolves to %q, want %s", values["disk"], dev)
	}
	// What the variable listed before: every device, loop devices first.
	var every []string
	for _, s := range prom.Query(t, fmt.Sprintf(`group by (device) (diskcanary_disk_reads_completed_total{instance=%q})`, d.addr)) {
		every = append(every, s.Metric["device"])
	}
	sort.Strings(every)
	if len(every) < 2 || every[0] == dev || !contains(every, decoy) {
		t.Errorf("every exported device %v: want the decoy %s among them and another device before %s (the old default)", every, decoy, dev)
	}
	t.Logf("probes on %s (%s); the node exports %d devices, first %s; the disk variable is %v", dev, mnt, len(every), every[0], options["disk"])

	// SMART: the on-call table's columns, over the ATA and the NVMe disk
	// (as a fleet SMART table's link sets var-disk).
	smartDisks := prom.WaitQuery(t, `group by (device, protocol) (diskcanary_smart_device_info)`, 60*time.Second, func(s []testkit.Sample) bool { return len(s) == 2 })
	prom.WaitQuery(t, `diskcanary_smart_healthy`, 30*time.Second, func(s []testkit.Sample) bool { return len(s) == 2 })
	columns := map[string][]string{} // refId → disks with data
	for _, sd := range smartDisks {
		disk := sd.Metric["device"]
		vals, _ := grafanaVars(t, prom, node, map[string]string{"disk": disk})
		for _, title := range []string{"SMART healthy", "Temperature", "SMART"} {
			for ref, res := range panelResults(t, prom, node, vals, panelByTitle(t, node, title)) {
				if title != "SMART" && len(res) == 0 {
					t.Errorf("on-call %q is empty for %s disk %s", title, sd.Metric["protocol"], disk)
				}
				if title == "SMART" && len(res) > 0 {
					columns[ref] = append(columns[ref], disk)
				}
			}
		}
	}
	smart := panelByTitle(t, node, "SMART")
	rename, _ := smart.organize()
	for _, tg := range smart.Targets {
		if len(columns[tg.RefID]) == 0 {
			t.Errorf("on-call SMART table: column %s (%q) has data for neither disk:\n%s", tg.RefID, rename["Value #"+tg.RefID], tg.Expr)
		}
	}
	t.Logf("SMART columns with data, by disk: %v", columns)
	fleet := generatedDashboards(t, Defaults())["diskcanary-fleet.json"]
	fvals, _ := grafanaVars(t, prom, fleet, nil)
	for title, refs := range map[string][]string{
		"SMART: healthy / failing disks": {"A", "B"},
		"Wear used (distribution)":       {"A"},
		"Most worn disks":                {"A"},
		// C (media errors growing over a day) stays empty: the fixtures
		// do not change.
		"Disks with SMART problems": {"A", "B"},
	} {
		res := panelResults(t, prom, fleet, fvals, panelByTitle(t, fleet, title))
		for _, ref := range refs {
			if len(res[ref]) == 0 {
				t.Errorf("fleet %q query %s returns no data", title, ref)
			}
		}
	}
	if res := prom.Query(t, `count(diskcanary_smart_healthy == 0)`); len(res) != 1 || res[0].Value[1] != "2" {
		t.Errorf("failing disks %v, want 2 (both fixtures fail)", res)
	}
}
