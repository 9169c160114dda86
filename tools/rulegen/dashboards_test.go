package rulegen

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/grafana/grafana-foundation-sdk/go/cog"
	"github.com/grafana/grafana-foundation-sdk/go/cog/plugins"
	"github.com/grafana/grafana-foundation-sdk/go/dashboard"
)

// The tests read the dashboards as Grafana does: the JSON the generator
// writes, decoded into the few fields they look at.

type gDashboard struct {
	UID        string  `json:"uid"`
	Title      string  `json:"title"`
	Links      []gLink `json:"links"`
	Templating struct {
		List []gVar `json:"list"`
	} `json:"templating"`
	Panels []gPanel `json:"panels"`
}

type gLink struct {
	Title       string `json:"title"`
	Type        string `json:"type"`
	URL         string `json:"url"`
	KeepTime    bool   `json:"keepTime"`
	IncludeVars bool   `json:"includeVars"`
}

type gVar struct {
	Name             string `json:"name"`
	Type             string `json:"type"`
	Query            any    `json:"query"`
	Definition       string `json:"definition"`
	Regex            string `json:"regex"`
	Multi            bool   `json:"multi"`
	IncludeAll       bool   `json:"includeAll"`
	AllValue         string `json:"allValue"`
	Sort             int    `json:"sort"`
	AllowCustomValue bool   `json:"allowCustomValue"`
}

type gDS struct {
	Type string `json:"type"`
	UID  string `json:"uid"`
}

type gPanel struct {
	ID          int    `json:"id"`
	Type        string `json:"type"`
	Title       string `json:"title"`
	Description string `json:"description"`
	GridPos     struct {
		H, W, X, Y int
	} `json:"gridPos"`
	Datasource      *gDS         `json:"datasource"`
	Targets         []gTarget    `json:"targets"`
	FieldConfig     gFieldConfig `json:"fieldConfig"`
	Transformations []struct {
		ID      string          `json:"id"`
		Options json.RawMessage `json:"options"`
	} `json:"transformations"`
}

type gTarget struct {
	RefID        string `json:"refId"`
	Datasource   *gDS   `json:"datasource"`
	Expr         string `json:"expr"`
	LegendFormat string `json:"legendFormat"`
	Format       string `json:"format"`
	Instant      bool   `json:"instant"`
}

type gThresholds struct {
	Mode  string `json:"mode"`
	Steps []struct {
		Value *float64 `json:"value"`
		Color string   `json:"color"`
	} `json:"steps"`
}

// steps renders thresholds as "base, VALUE color, ..." for literal comparison.
func (t *gThresholds) String() string {
	if t == nil {
		return "<none>"
	}
	var out []string
	for _, s := range t.Steps {
		if s.Value == nil {
			out = append(out, s.Color)
		} else {
			out = append(out, fmt.Sprintf("%g %s", *s.Value, s.Color))
		}
	}
	return strings.Join(out, ", ")
}

type gFieldConfig struct {
	Defaults struct {
		Unit       string            `json:"unit"`
		Thresholds *gThresholds      `json:"thresholds"`
		Mappings   []json.RawMessage `json:"mappings"`
		Links      []gLink           `json:"links"`
		NoValue    string            `json:"noValue"`
		Custom     struct {
			ThresholdsStyle struct {
				Mode string `json:"mode"`
			} `json:"thresholdsStyle"`
		} `json:"custom"`
	} `json:"defaults"`
	Overrides []struct {
		Matcher struct {
			ID      string `json:"id"`
			Options string `json:"options"`
		} `json:"matcher"`
		Properties []struct {
			ID    string          `json:"id"`
			Value json.RawMessage `json:"value"`
		} `json:"properties"`
	} `json:"overrides"`
}

// override returns the value of property id in the override matching
// (matcher, name), or nil.
func (p gPanel) override(matcher, name, id string) json.RawMessage {
	for _, o := range p.FieldConfig.Overrides {
		if o.Matcher.ID != matcher || o.Matcher.Options != name {
			continue
		}
		for _, prop := range o.Properties {
			if prop.ID == id {
				return prop.Value
			}
		}
	}
	return nil
}

// organize returns the table's organize transformation's options.
func (p gPanel) organize() (rename map[string]string, exclude map[string]bool) {
	for _, tr := range p.Transformations {
		if tr.ID != "organize" {
			continue
		}
		var o struct {
			RenameByName  map[string]string `json:"renameByName"`
			ExcludeByName map[string]bool   `json:"excludeByName"`
		}
		_ = json.Unmarshal(tr.Options, &o)
		return o.RenameByName, o.ExcludeByName
	}
	return nil, nil
}

// valueTexts reads the value → text mappings of raw mappings.
func valueTexts(raw []json.RawMessage) map[string]string {
	out := map[string]string{}
	for _, m := range raw {
		var vm struct {
			Type    string `json:"type"`
			Options map[string]struct {
				Text  string `json:"text"`
				Color string `json:"color"`
			} `json:"options"`
		}
		if json.Unmarshal(m, &vm) != nil || vm.Type != "value" {
			continue
		}
		for v, r := range vm.Options {
			out[v] = r.Text + " " + r.Color
		}
	}
	return out
}

func (v gVar) query() string {
	if s, ok := v.Query.(string); ok {
		return s
	}
	return ""
}

// generatedDashboards renders the dashboards with p and decodes their JSON.
func generatedDashboards(t testing.TB, p Params) map[string]gDashboard {
	t.Helper()
	ds, err := Dashboards(p)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]gDashboard{}
	for name, d := range ds {
		b, err := marshalDashboard(d)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		var g gDashboard
		if err := json.Unmarshal(b, &g); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		out[name] = g
	}
	return out
}

func panelByTitle(t *testing.T, d gDashboard, title string) gPanel {
	t.Helper()
	for _, p := range d.Panels {
		if p.Title == title {
			return p
		}
	}
	t.Fatalf("%s has no panel %q", d.UID, title)
	return gPanel{}
}

// TestDashboardsAreWellFormed checks what Grafana would only show at import
// or on screen: unique stable UIDs and panel IDs, panels inside the 24-column
// grid without overlaps, every query on the templated data source, and every
// $variable a query uses defined in the dashboard.
func TestDashboardsAreWellFormed(t *testing.T) {
	uids := map[string]string{}
	wantUIDs := map[string]string{"diskcanary-fleet.json": "diskcanary-fleet", "diskcanary-node.json": "diskcanary-node", "diskcanary-etcd.json": "diskcanary-etcd"}
	dashboards := generatedDashboards(t, Defaults())
	if len(dashboards) != len(wantUIDs) {
		t.Errorf("%d dashboards, want %d", len(dashboards), len(wantUIDs))
	}
	for file, d := range dashboards {
		if d.UID != wantUIDs[file] {
			t.Errorf("%s: uid %q, want %q (UIDs are stable: links, alerts' dashboard_url and provisioning depend on them)", file, d.UID, wantUIDs[file])
		}
		if other, dup := uids[d.UID]; dup {
			t.Errorf("%s and %s share uid %s", file, other, d.UID)
		}
		uids[d.UID] = file
		vars := map[string]bool{}
		for _, v := range d.Templating.List {
			vars[v.Name] = true
		}
		if !vars["datasource"] {
			t.Errorf("%s: no datasource variable", file)
		}
		ids := map[int]bool{}
		type cell struct{ x, y int }
		used := map[cell]string{}
		for _, p := range d.Panels {
			if p.ID == 0 || ids[p.ID] {
				t.Errorf("%s: panel %q: id %d missing or duplicate", file, p.Title, p.ID)
			}
			ids[p.ID] = true
			g := p.GridPos
			if g.X < 0 || g.W <= 0 || g.X+g.W > 24 || g.H <= 0 {
				t.Errorf("%s: panel %q outside the grid: %+v", file, p.Title, g)
			}
			for x := g.X; x < g.X+g.W; x++ {
				for y := g.Y; y < g.Y+g.H; y++ {
					if other, ok := used[cell{x, y}]; ok {
						t.Errorf("%s: panels %q and %q overlap at %d,%d", file, other, p.Title, x, y)
					}
					used[cell{x, y}] = p.Title
				}
			}
			if p.Type == "row" {
				continue
			}
			if p.Datasource == nil || p.Datasource.UID != "${datasource}" || len(p.Targets) == 0 {
				t.Errorf("%s: panel %q: no query on ${datasource}", file, p.Title)
			}
			for _, tg := range p.Targets {
				if tg.Datasource == nil || tg.Datasource.UID != "${datasource}" {
					t.Errorf("%s: panel %q %s not on ${datasource}", file, p.Title, tg.RefID)
				}
				for _, m := range grafanaVar.FindAllStringSubmatch(tg.Expr, -1) {
					if !strings.HasPrefix(m[1], "__") && !vars[m[1]] {
						t.Errorf("%s: panel %q uses undefined variable $%s", file, p.Title, m[1])
					}
				}
			}
			for _, l := range p.FieldConfig.Defaults.Links {
				for _, m := range grafanaVar.FindAllStringSubmatch(l.URL, -1) {
					if !strings.HasPrefix(m[1], "__") && !vars[m[1]] {
						t.Errorf("%s: panel %q: data link uses undefined variable $%s", file, p.Title, m[1])
					}
				}
			}
		}
		for i, v := range d.Templating.List {
			if v.Type == "query" && v.query() != v.Definition {
				t.Errorf("%s: variable %s: query %q differs from its definition %q", file, v.Name, v.query(), v.Definition)
			}
			// A variable may only use those before it: Grafana resolves
			// them in order.
			before := map[string]bool{}
			for _, w := range d.Templating.List[:i] {
				before[w.Name] = true
			}
			for _, m := range grafanaVar.FindAllStringSubmatch(v.Definition, -1) {
				if !before[m[1]] {
					t.Errorf("%s: variable %s uses $%s, which is not defined before it", file, v.Name, m[1])
				}
			}
		}
		// The committed JSON is valid and has the top-level keys Grafana's
		// importer needs.
		data, err := os.ReadFile(filepath.Join(repoRoot(t), "dashboards", file))
		if err != nil {
			t.Fatal(err)
		}
		var raw map[string]any
		if err := json.Unmarshal(data, &raw); err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		for _, k := range []string{"uid", "title", "panels", "templating", "schemaVersion", "time"} {
			if _, ok := raw[k]; !ok {
				t.Errorf("%s: no %q", file, k)
			}
		}
	}
}

// TestDashboardPanelsSayWhatTheyMean: what on-call reads off a panel is
// spelled out in the JSON. Every panel has a description; every stat panel
// has its own thresholds (not Grafana's default, red at 80); every table
// value column has a name and a unit; the dashboards link to each other
// keeping the time range; the fleet tables drill down to the on-call view.
func TestDashboardPanelsSayWhatTheyMean(t *testing.T) {
	dashboards := generatedDashboards(t, Defaults())
	var stats, tables, columns int
	for file, d := range dashboards {
		for _, p := range d.Panels {
			if p.Type == "row" {
				continue
			}
			if len(p.Description) < 40 {
				t.Errorf("%s: panel %q: description %q; say what it shows and why it may be empty", file, p.Title, p.Description)
			}
			switch p.Type {
			case "stat":
				stats++
				th := p.FieldConfig.Defaults.Thresholds
				if th == nil || len(th.Steps) < 2 {
					t.Errorf("%s: stat %q: thresholds %s; want a base and at least one step", file, p.Title, th)
				} else if th.String() == "green, 80 red" {
					t.Errorf("%s: stat %q has Grafana's default thresholds (red from 80)", file, p.Title)
				}
			case "table":
				tables++
				rename, exclude := p.organize()
				for _, tg := range p.Targets {
					if tg.Format != "table" || !tg.Instant {
						t.Errorf("%s: table %q %s: format %q instant %v; want an instant table query", file, p.Title, tg.RefID, tg.Format, tg.Instant)
					}
					field := "Value"
					if len(p.Targets) > 1 {
						field = "Value #" + tg.RefID
					}
					if exclude[field] || string(p.override("byName", field, "custom.hidden")) == "true" {
						continue
					}
					columns++
					name := rename[field]
					if name == "" || strings.HasPrefix(name, "Value") {
						t.Errorf("%s: table %q: column %q is not named (organize renameByName)", file, p.Title, field)
						continue
					}
					if unit := p.override("byName", name, "unit"); len(unit) == 0 {
						t.Errorf("%s: table %q: column %q (%s) has no unit", file, p.Title, name, field)
					}
				}
				if !exclude["Time"] || !exclude["__name__"] {
					t.Errorf("%s: table %q shows Time or __name__", file, p.Title)
				}
				if d.UID == dashboardFleet {
					if len(p.FieldConfig.Defaults.Links) != 1 {
						t.Errorf("%s: table %q: %d data links, want one to the on-call view", file, p.Title, len(p.FieldConfig.Defaults.Links))
						continue
					}
					u := p.FieldConfig.Defaults.Links[0].URL
					for _, want := range []string{"/d/diskcanary-node?", "${cluster:queryparam}", "var-instance=${__data.fields.instance:percentencode}", "${datasource:queryparam}", "${__url_time_range}"} {
						if !strings.Contains(u, want) {
							t.Errorf("%s: table %q: data link %q lacks %q", file, p.Title, u, want)
						}
					}
					if !strings.Contains(u, "var-disk=") && !strings.Contains(u, "var-probe=") {
						t.Errorf("%s: table %q: data link %q sets neither the disk nor the probe", file, p.Title, u)
					}
				}
			}
		}
		// Links to the other two dashboards, keeping time and variables.
		linked := map[string]bool{}
		for _, l := range d.Links {
			if strings.HasPrefix(l.URL, "/d/") && l.KeepTime && l.IncludeVars {
				linked[strings.TrimPrefix(l.URL, "/d/")] = true
			}
		}
		for _, uid := range []string{dashboardFleet, dashboardNode, dashboardEtcd} {
			if uid != d.UID && !linked[uid] {
				t.Errorf("%s: no link to %s keeping time and variables (links: %+v)", file, uid, d.Links)
			}
		}
	}
	if stats != 14 || tables != 15 {
		t.Errorf("%d stat panels and %d tables; want 14 and 15 (update the test with the dashboards)", stats, tables)
	}
	t.Logf("%d stat panels with thresholds, %d tables with %d named value columns", stats, tables, columns)

	// Literal expectations for the panels on-call misread before.
	node, fleet := dashboards["diskcanary-node.json"], dashboards["diskcanary-fleet.json"]
	stalled := panelByTitle(t, node, "Stalled")
	if got := stalled.FieldConfig.Defaults.Thresholds.String(); got != "green, 1 red" {
		t.Errorf("node Stalled thresholds %q, want %q", got, "green, 1 red")
	}
	if got := valueTexts(stalled.FieldConfig.Defaults.Mappings); !reflect.DeepEqual(got, map[string]string{"0": "ok green", "1": "STALLED red"}) {
		t.Errorf("node Stalled mappings %v", got)
	}
	up := panelByTitle(t, fleet, "Exporters: up / down")
	if got := up.FieldConfig.Defaults.Thresholds.String(); got != "green, 1 red" {
		t.Errorf("Exporters: down thresholds %q, want %q", got, "green, 1 red")
	}
	var upTh gThresholds
	if err := json.Unmarshal(up.override("byFrameRefID", "A", "thresholds"), &upTh); err != nil || upTh.String() != "red, 1 green" {
		t.Errorf("Exporters: up thresholds %q (%v), want %q: red only when none is up, never past 80", upTh.String(), err, "red, 1 green")
	}
	smart := panelByTitle(t, node, "SMART")
	rename, _ := smart.organize()
	for field, want := range map[string]string{"Value #B": "Health", "Value #C": "Temperature", "Value #D": "Wear used", "Value #I": "SMART data age"} {
		if rename[field] != want {
			t.Errorf("SMART table: %s renamed %q, want %q", field, rename[field], want)
		}
	}
	for name, want := range map[string]string{"Temperature": `"celsius"`, "Wear used": `"percentunit"`, "SMART data age": `"s"`} {
		if got := string(smart.override("byName", name, "unit")); got != want {
			t.Errorf("SMART table: %s unit %s, want %s", name, got, want)
		}
	}
}

// lineAt returns a time series panel's dashed threshold lines.
func linesOf(t *testing.T, d gDashboard, title string) string {
	t.Helper()
	p := panelByTitle(t, d, title)
	if p.FieldConfig.Defaults.Custom.ThresholdsStyle.Mode != "dashed" {
		t.Errorf("%s: %q draws no threshold lines", d.UID, title)
	}
	return p.FieldConfig.Defaults.Thresholds.String()
}

// TestDashboardThresholdsAreTheAlerts: the lines and colours are the
// alerts' thresholds, from Params, so changing a threshold flag moves them.
func TestDashboardThresholdsAreTheAlerts(t *testing.T) {
	for _, c := range []struct {
		name                             string
		mutate                           func(*Params)
		fleetFsync, fleetRead, nodeRead  string
		etcdWorst, nodeStale, smartTempC string
	}{
		{"defaults", func(*Params) {}, "transparent, 0.01 red", "transparent, 0.025 red", "transparent, 0.025 red",
			"green, 0.01 orange, 0.5 red", "green, 600 red", "transparent, 65 red"},
		{"flags", func(p *Params) {
			p.FdatasyncSlow, p.ReadSlow, p.FdatasyncIncidentWarning = 20*time.Millisecond, 50*time.Millisecond, 250*time.Millisecond
			p.ProbeStaleAfter, p.SmartTemperatureCelsius = 5*time.Minute, 70
		}, "transparent, 0.02 red", "transparent, 0.05 red", "transparent, 0.05 red",
			"green, 0.02 orange, 0.25 red", "green, 300 red", "transparent, 70 red"},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := Defaults()
			c.mutate(&p)
			ds := generatedDashboards(t, p)
			fleet, node, etcd := ds["diskcanary-fleet.json"], ds["diskcanary-node.json"], ds["diskcanary-etcd.json"]
			for _, x := range []struct{ got, want, what string }{
				{linesOf(t, fleet, "fdatasync p99 against its cohort band (p10 / p50 / p90 of peers)"), c.fleetFsync, "fleet fdatasync band"},
				{linesOf(t, fleet, "read p99 against its cohort band (p10 / p50 / p90 of peers)"), c.fleetRead, "fleet read band (DiskcanaryReadSlow)"},
				{linesOf(t, node, "read p99 beside its device's read latency"), c.nodeRead, "node read attribution"},
				{panelByTitle(t, etcd, "Worst fdatasync p99 (15m)").FieldConfig.Defaults.Thresholds.String(), c.etcdWorst, "etcd worst p99 stat"},
				{panelByTitle(t, node, "Time since last cycle").FieldConfig.Defaults.Thresholds.String(), c.nodeStale, "node time since last cycle"},
				{linesOf(t, node, "Temperature"), c.smartTempC, "node temperature"},
			} {
				if x.got != x.want {
					t.Errorf("%s: thresholds %q, want %q", x.what, x.got, x.want)
				}
			}
			// The titles name the bars they draw.
			panelByTitle(t, node, fmt.Sprintf("fdatasync p50 / p99 (5m) with the etcd %s bar", human(p.FdatasyncSlow)))
		})
	}
}

// TestDashboardClusterVariable: with a cluster label every dashboard has a
// cluster variable and every query filters on it; with the label named
// otherwise the variable keeps its name and reads that label; with none
// (-cluster-label "") there is no cluster variable and nothing mentions it.
func TestDashboardClusterVariable(t *testing.T) {
	for _, c := range []struct{ label, matcher string }{{"cluster", `cluster=~"$cluster"`}, {"region", `region=~"$cluster"`}, {"", ""}} {
		t.Run("label="+c.label, func(t *testing.T) {
			p := Defaults()
			p.ClusterLabel = c.label
			for file, d := range generatedDashboards(t, p) {
				var cluster *gVar
				for i, v := range d.Templating.List {
					if v.Name == "cluster" {
						cluster = &d.Templating.List[i]
					}
					if v.Name == "job" && cluster == nil && c.label != "" {
						t.Errorf("%s: job variable before the cluster variable", file)
					}
				}
				if c.label == "" {
					if cluster != nil {
						t.Errorf("%s: a cluster variable without a cluster label", file)
					}
					b, _ := json.Marshal(d)
					if strings.Contains(string(b), "$cluster") || strings.Contains(string(b), "{cluster:") {
						t.Errorf("%s mentions $cluster without a cluster label", file)
					}
					continue
				}
				if cluster == nil {
					t.Fatalf("%s: no cluster variable", file)
				}
				if want := fmt.Sprintf("label_values(diskcanary_build_info, %s)", c.label); cluster.query() != want || !cluster.IncludeAll || cluster.AllValue != ".*" {
					t.Errorf("%s: cluster variable %q includeAll %v allValue %q; want %q, All = .*", file, cluster.query(), cluster.IncludeAll, cluster.AllValue, want)
				}
				for _, pn := range d.Panels {
					for _, tg := range pn.Targets {
						if !strings.Contains(tg.Expr, c.matcher) {
							t.Errorf("%s: panel %q %s does not filter on %s:\n%s", file, pn.Title, tg.RefID, c.matcher, tg.Expr)
						}
						// etcd's node-level series have no job: they filter on the node.
						if !strings.Contains(tg.Expr, `job="$job"`) && !strings.Contains(tg.Expr, `job=~"$job"`) && !strings.Contains(tg.Expr, `=~"$node"`) {
							t.Errorf("%s: panel %q %s filters on neither $job nor $node:\n%s", file, pn.Title, tg.RefID, tg.Expr)
						}
					}
				}
				for _, v := range d.Templating.List {
					if v.Type == "query" && v.Name != "cluster" && !strings.Contains(v.Definition, c.matcher) {
						t.Errorf("%s: variable %s does not filter on the cluster: %s", file, v.Name, v.Definition)
					}
				}
			}
		})
	}
}

// varMatcher finds label="$var", label=~"$var", label=~"${var}" etc.
var varMatcher = regexp.MustCompile(`\w+\s*(=~|!~|=|!=)\s*"\$\{?(\w+)`)

// TestDashboardVariableMatchers: Grafana regex-escapes the values of a
// variable that can hold several (multi or All) and leaves a single value
// alone, so the first may only be matched with =~ and the second with =.
// A dotted instance under =, or a cluster "All" (.*) under =, matches
// nothing.
func TestDashboardVariableMatchers(t *testing.T) {
	for file, d := range generatedDashboards(t, Defaults()) {
		multi := map[string]bool{}
		for _, v := range d.Templating.List {
			multi[v.Name] = v.Multi || v.IncludeAll
		}
		var exprs []string
		for _, v := range d.Templating.List {
			exprs = append(exprs, v.Definition)
		}
		for _, p := range d.Panels {
			for _, tg := range p.Targets {
				exprs = append(exprs, tg.Expr)
			}
		}
		n := 0
		for _, e := range exprs {
			for _, m := range varMatcher.FindAllStringSubmatch(e, -1) {
				n++
				op, name := m[1], m[2]
				if multi[name] && op != "=~" {
					t.Errorf("%s: $%s holds several values (multi or All) but is matched with %s: %s", file, name, op, m[0])
				}
				if !multi[name] && op != "=" {
					t.Errorf("%s: $%s holds one value but is matched with %s: %s", file, name, op, m[0])
				}
			}
		}
		if n == 0 {
			t.Errorf("%s: no variable matchers found", file)
		}
	}
}

// TestDiskVariableFollowsTheProbes: the on-call dashboard's disk variable
// is the physical disks under the chosen probe targets, not every device
// (which put loop0 first on a node with snaps).
func TestDiskVariableFollowsTheProbes(t *testing.T) {
	node := generatedDashboards(t, Defaults())["diskcanary-node.json"]
	var disk gVar
	for _, v := range node.Templating.List {
		if v.Name == "disk" {
			disk = v
		}
	}
	want := `query_result(max by (disk) (diskcanary_disk_parent_info{cluster=~"$cluster", job="$job", instance="$instance"} * on (cluster, job, instance, device) group_left () max by (cluster, job, instance, device) (diskcanary_probe_target_info{cluster=~"$cluster", job="$job", instance="$instance", probe=~"$probe"})))`
	if disk.query() != want {
		t.Errorf("disk variable query\n%s\nwant\n%s", disk.query(), want)
	}
	if disk.Regex != `/disk="([^"]+)"/` || disk.Multi || disk.IncludeAll || !disk.AllowCustomValue {
		t.Errorf("disk variable regex %q multi %v includeAll %v allowCustomValue %v", disk.Regex, disk.Multi, disk.IncludeAll, disk.AllowCustomValue)
	}
	// Grafana's query_result lines and the regex: the disk, once.
	re := regexp.MustCompile(strings.Trim(disk.Regex, "/"))
	var got []string
	for _, line := range []string{`{disk="sda"} 1 1732000000000`, `{disk="nvme0n1"} 1 1732000000000`} {
		got = append(got, re.FindStringSubmatch(line)[1])
	}
	sort.Strings(got)
	if strings.Join(got, " ") != "nvme0n1 sda" {
		t.Errorf("regex extracts %v", got)
	}
}

// strictDecode decodes a dashboard with the SDK's strict decoder: every
// field known to Grafana's schema for the dashboard, its variables and
// each panel type, with the right types. (It reports success as an empty
// error list.)
func strictDecode(b []byte) error {
	var d dashboard.Dashboard
	err := d.UnmarshalJSONStrict(b)
	var be cog.BuildErrors
	if errors.As(err, &be) && len(be) == 0 {
		return nil
	}
	return err
}

// TestDashboardsDecodeStrictly: the committed JSON is what Grafana's schema
// (as the foundation SDK has it) allows, so a hand edit or an unknown
// option shows here rather than at import.
func TestDashboardsDecodeStrictly(t *testing.T) {
	plugins.RegisterDefaultPlugins()
	for _, f := range []string{"diskcanary-fleet.json", "diskcanary-node.json", "diskcanary-etcd.json"} {
		b, err := os.ReadFile(filepath.Join(repoRoot(t), "dashboards", f))
		if err != nil {
			t.Fatal(err)
		}
		if err := strictDecode(b); err != nil {
			t.Errorf("%s: %v", f, err)
		}
	}
	// The check bites: the fleet dashboard with an option its stat panels
	// do not have.
	b, err := os.ReadFile(filepath.Join(repoRoot(t), "dashboards", "diskcanary-fleet.json"))
	if err != nil {
		t.Fatal(err)
	}
	bad := strings.Replace(string(b), `"colorMode": "value",`, `"colorMode": "value", "colourMode": "value",`, 1)
	if bad == string(b) || strictDecode([]byte(bad)) == nil {
		t.Error("a stat panel with an unknown option decodes strictly")
	}
}

func TestUnescapeHTML(t *testing.T) {
	for in, want := range map[string]string{
		`"a \u003e 1 \u0026 b \u003c 2"`: `"a > 1 & b < 2"`,
		`"\\u003e"`:                      `"\\u003e"`, // an escaped backslash, then text
		`"\u00e9\n\""`:                   `"\u00e9\n\""`,
	} {
		if got := string(unescapeHTML([]byte(in))); got != want {
			t.Errorf("unescapeHTML(%s) = %s, want %s", in, got, want)
		}
	}
}
