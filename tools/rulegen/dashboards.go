package rulegen

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/grafana/grafana-foundation-sdk/go/cog"
	"github.com/grafana/grafana-foundation-sdk/go/cog/variants"
	"github.com/grafana/grafana-foundation-sdk/go/common"
	"github.com/grafana/grafana-foundation-sdk/go/dashboard"
	"github.com/grafana/grafana-foundation-sdk/go/heatmap"
	"github.com/grafana/grafana-foundation-sdk/go/histogram"
	"github.com/grafana/grafana-foundation-sdk/go/prometheus"
	"github.com/grafana/grafana-foundation-sdk/go/stat"
	"github.com/grafana/grafana-foundation-sdk/go/table"
	"github.com/grafana/grafana-foundation-sdk/go/timeseries"

	"github.com/diskcanary/diskcanary/internal/config"
)

// The dashboards are built with Grafana's foundation SDK, in the classic
// dashboard JSON every Grafana imports and provisions from files (the SDK
// marks that builder deprecated in favour of dashboardv2, a schema older
// Grafanas and file provisioning do not read). Every
// threshold a panel colours or draws comes from Params, the same value the
// alert uses; every stat panel has explicit thresholds, every table names
// its columns, every panel says what it shows and why it may be empty.

// Dashboards returns the dashboards keyed by file name.
func Dashboards(p Params) (map[string]dashboard.Dashboard, error) {
	out := map[string]dashboard.Dashboard{}
	for name, build := range map[string]func(Params) *board{
		"diskcanary-fleet.json": fleetDashboard,
		"diskcanary-node.json":  nodeDashboard,
		"diskcanary-etcd.json":  etcdDashboard,
	} {
		d, err := build(p).build()
		if err != nil {
			return nil, fmt.Errorf("dashboard %s: %w", name, err)
		}
		out[name] = d
	}
	return out, nil
}

// marshalDashboard renders a dashboard as indented JSON. PromQL is full of
// < and >, and data links of &: the SDK's nested marshalers escape them for
// HTML (\u003e), which is valid JSON but unreadable in review, so they are
// turned back.
func marshalDashboard(d dashboard.Dashboard) ([]byte, error) {
	b, err := json.MarshalIndent(d, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(unescapeHTML(b), '\n'), nil
}

// unescapeHTML replaces the \u003c, \u003e and \u0026 escapes of encoding/json
// in a JSON document by the characters, leaving every other escape alone.
func unescapeHTML(b []byte) []byte {
	out := make([]byte, 0, len(b))
	for i := 0; i < len(b); i++ {
		if b[i] != '\\' || i+1 >= len(b) {
			out = append(out, b[i])
			continue
		}
		if b[i+1] == 'u' && i+6 <= len(b) {
			switch string(b[i+2 : i+6]) {
			case "003c":
				out, i = append(out, '<'), i+5
				continue
			case "003e":
				out, i = append(out, '>'), i+5
				continue
			case "0026":
				out, i = append(out, '&'), i+5
				continue
			}
		}
		// Any other escape is two characters or starts with them: copy
		// both, so an escaped backslash never starts a new escape.
		out, i = append(out, b[i], b[i+1]), i+1
	}
	return out
}

// built hands a value to an SDK method that takes a builder, for the few
// values whose builder sets a default the dashboards do not want.
type built[T any] struct{ v T }

func (b built[T]) Build() (T, error) { return b.v, nil }

var promDS = common.DataSourceRef{Type: cog.ToPtr("prometheus"), Uid: cog.ToPtr("${datasource}")}

// board is one dashboard under construction.
type board struct {
	p   Params
	uid string
	b   *dashboard.DashboardBuilder
}

// dashboardTitles are the dashboards' titles by UID, for the links between them.
var dashboardTitles = map[string]string{
	dashboardFleet: "diskcanary / Fleet",
	dashboardNode:  "diskcanary / Node and disk (on-call)",
	dashboardEtcd:  "diskcanary / etcd",
}

func newBoard(p Params, uid, description string) *board {
	d := &board{p: p, uid: uid}
	d.b = dashboard.NewDashboardBuilder(dashboardTitles[uid]).
		Uid(uid).
		Description(description).
		Tags([]string{"diskcanary"}).
		Editable().
		Tooltip(dashboard.DashboardCursorSyncCrosshair).
		Refresh("1m").
		Time("now-6h", "now").
		Timezone("browser").
		Version(1).
		WithVariable(dashboard.NewDatasourceVariableBuilder("datasource").
			Label("Data source").
			Description("The Prometheus (or Thanos, Mimir) that scrapes diskcanary and evaluates its rules (alerts/diskcanary-rules.yml): most panels read recording rules.").
			Type("prometheus"))
	// The other two dashboards, with the time range and the variables they
	// share (cluster, job, instance, probe), and the runbooks.
	for _, other := range []string{dashboardFleet, dashboardNode, dashboardEtcd} {
		if other == uid {
			continue
		}
		d.b.Link(built[dashboard.DashboardLink]{dashboard.DashboardLink{
			Title: dashboardTitles[other], Type: dashboard.DashboardLinkTypeLink, Icon: "dashboard",
			Tooltip: "Open " + dashboardTitles[other] + " for the same time range and variables",
			Url:     cog.ToPtr("/d/" + other), Tags: []string{}, KeepTime: true, IncludeVars: true,
		}})
	}
	d.b.Link(built[dashboard.DashboardLink]{dashboard.DashboardLink{
		Title: "Runbooks", Type: dashboard.DashboardLinkTypeLink, Icon: "doc",
		Tooltip: "What each diskcanary alert means, how to confirm it, what to do",
		Url:     cog.ToPtr(p.RunbookBase), Tags: []string{}, TargetBlank: true,
	}})
	return d
}

// build finishes the dashboard: panel IDs in order, top to bottom.
func (d *board) build() (dashboard.Dashboard, error) {
	out, err := d.b.Build()
	if err != nil {
		return out, err
	}
	for i := range out.Panels {
		id := uint32(i + 1)
		if out.Panels[i].RowPanel != nil {
			out.Panels[i].RowPanel.Id = id
		} else {
			out.Panels[i].Panel.Id = &id
		}
	}
	return out, nil
}

// Template variables. A variable that can hold several values (multi or
// All) is only ever matched with =~ (Grafana regex-escapes its values),
// one that holds a single value with = (see TestDashboardVariableMatchers).

type varOpts struct {
	multi, all bool
	regex      string
}

func (d *board) queryVar(name, label, description, query string, o varOpts) {
	v := dashboard.NewQueryVariableBuilder(name).
		Label(label).
		Description(description).
		Datasource(promDS).
		Query(dashboard.StringOrMap{String: cog.ToPtr(query)}).
		Definition(query).
		Refresh(dashboard.VariableRefreshOnTimeRangeChanged).
		Sort(dashboard.VariableSortAlphabeticalAsc).
		Multi(o.multi).
		IncludeAll(o.all)
	if o.all {
		// .* also matches series without the label (a single
		// Prometheus with no cluster label), and is the default.
		v.AllValue(".*").Current(dashboard.VariableOption{
			Text:  dashboard.StringOrArrayOfString{String: cog.ToPtr("All")},
			Value: dashboard.StringOrArrayOfString{String: cog.ToPtr("$__all")},
		})
	}
	if o.regex != "" {
		v.Regex(o.regex)
	}
	d.b.WithVariable(v)
}

// clusterVar adds the cluster variable, named "cluster" whatever the label
// (Params.ClusterLabel) is called. With no cluster label there is none, and
// no query mentions it.
func (d *board) clusterVar() {
	c := d.p.ClusterLabel
	if c == "" {
		return
	}
	d.queryVar("cluster", "Cluster", fmt.Sprintf("The %q label of diskcanary's series (the rules keep it through every aggregation). All also covers series without it: a single Prometheus that attaches no cluster label.", c),
		fmt.Sprintf("label_values(diskcanary_build_info, %s)", c), varOpts{all: true})
}

// sel is a series selector: the cluster matcher first (when there is a
// cluster label), then ms.
func (d *board) sel(ms ...string) string {
	if d.p.ClusterLabel != "" {
		ms = append([]string{fmt.Sprintf(`%s=~"$cluster"`, d.p.ClusterLabel)}, ms...)
	}
	return "{" + strings.Join(ms, ", ") + "}"
}

// legend prefixes a legend with the cluster, where there is one.
func (d *board) legend(s string) string {
	if d.p.ClusterLabel == "" {
		return s
	}
	return "{{" + d.p.ClusterLabel + "}} " + s
}

// Layout: the SDK places panels left to right and starts a new line when a
// line's widths reach 24; every line below adds up to 24.

func (d *board) row(title string) { d.b.WithRow(dashboard.NewRowBuilder(title)) }

func (d *board) add(p cog.Builder[dashboard.Panel]) { d.b.WithPanel(p) }

// query is one PromQL query of a panel.
type query struct{ expr, legend string }

func q(expr, legend string) query { return query{expr, legend} }

func targets(instant bool, format prometheus.PromQueryFormat, qs []query) []cog.Builder[variants.Dataquery] {
	var out []cog.Builder[variants.Dataquery]
	for i, x := range qs {
		t := prometheus.NewDataqueryBuilder().RefId(string(rune('A' + i))).Datasource(promDS).Expr(x.expr).Format(format)
		if x.legend != "" {
			t.LegendFormat(x.legend)
		}
		if instant {
			t.Instant()
		} else {
			t.Range()
		}
		out = append(out, t)
	}
	return out
}

// Thresholds and value mappings.

type step struct {
	at    float64
	color string
}

func at(v float64, color string) step { return step{v, color} }

// steps is a threshold scale: base below the first step.
func steps(base string, s ...step) *dashboard.ThresholdsConfigBuilder {
	out := []dashboard.Threshold{{Color: base}}
	for _, x := range s {
		out = append(out, dashboard.Threshold{Value: cog.ToPtr(x.at), Color: x.color})
	}
	return dashboard.NewThresholdsConfigBuilder().Mode(dashboard.ThresholdsModeAbsolute).Steps(out)
}

func thresholdsOf(b *dashboard.ThresholdsConfigBuilder) dashboard.ThresholdsConfig {
	t, err := b.Build()
	if err != nil {
		panic(err) // a fixed config: cannot fail
	}
	return t
}

// mapped is one value → text (and colour) of a value mapping.
type mapped struct{ value, text, color string }

func valueMap(ms ...mapped) dashboard.ValueMapping {
	opts := map[string]dashboard.ValueMappingResult{}
	for i, m := range ms {
		r := dashboard.ValueMappingResult{Text: cog.ToPtr(m.text), Index: cog.ToPtr(int32(i))}
		if m.color != "" {
			r.Color = cog.ToPtr(m.color)
		}
		opts[m.value] = r
	}
	return dashboard.ValueMapping{ValueMap: &dashboard.ValueMap{Type: dashboard.MappingTypeValueToText, Options: opts}}
}

func nullMap(text string) dashboard.ValueMapping {
	return dashboard.ValueMapping{SpecialValueMap: &dashboard.SpecialValueMap{Type: dashboard.MappingTypeSpecialValue,
		Options: dashboard.DashboardSpecialValueMapOptions{Match: dashboard.SpecialValueMatchNull,
			Result: dashboard.ValueMappingResult{Text: cog.ToPtr(text), Color: cog.ToPtr("text")}}}}
}

// Panels. Each constructor takes the description: no panel goes without.

func (d *board) timeseries(title, description, unit string, qs ...query) *timeseries.PanelBuilder {
	return timeseries.NewPanelBuilder().Title(title).Description(description).Unit(unit).
		Datasource(promDS).Targets(targets(false, prometheus.PromQueryFormatTimeSeries, qs)).
		Legend(common.NewVizLegendOptionsBuilder().ShowLegend(true).DisplayMode(common.LegendDisplayModeTable).
			Placement(common.LegendPlacementBottom).Calcs([]string{"lastNotNull", "max"})).
		Tooltip(common.NewVizTooltipOptionsBuilder().Mode(common.TooltipDisplayModeMulti).Sort(common.SortOrderDescending))
}

// withLines draws dashed threshold lines, each at an alert's threshold.
func withLines(p *timeseries.PanelBuilder, lines ...step) *timeseries.PanelBuilder {
	return p.Thresholds(steps("transparent", lines...)).
		ThresholdsStyle(common.NewGraphThresholdsStyleConfigBuilder().Mode(common.GraphThresholdsStyleModeDashed))
}

func (d *board) stat(title, description, unit string, th *dashboard.ThresholdsConfigBuilder, qs ...query) *stat.PanelBuilder {
	return stat.NewPanelBuilder().Title(title).Description(description).Unit(unit).Thresholds(th).
		Datasource(promDS).Targets(targets(true, prometheus.PromQueryFormatTimeSeries, qs)).
		ReduceOptions(common.NewReduceDataOptionsBuilder().Calcs([]string{"lastNotNull"})).
		ColorMode(common.BigValueColorModeValue).GraphMode(common.BigValueGraphModeNone).
		TextMode(common.BigValueTextModeAuto).Orientation(common.VizOrientationAuto)
}

func (d *board) heatmap(title, description, expr string) *heatmap.PanelBuilder {
	return heatmap.NewPanelBuilder().Title(title).Description(description).
		Datasource(promDS).Targets(targets(false, prometheus.PromQueryFormatHeatmap, []query{{expr, "{{le}}"}})).
		Calculate(false).
		YAxis(heatmap.NewYAxisConfigBuilder().Unit("s")).
		Color(heatmap.NewHeatmapColorOptionsBuilder().Mode(heatmap.HeatmapColorModeScheme).Scheme("Oranges").
			Scale(heatmap.HeatmapColorScaleExponential).Exponent(0.5).Steps(64)).
		CellGap(1)
}

// column is one column of a table: a label or a query's value ("Value"
// for a one-query table, "Value #A", "Value #B"... for several), shown
// under name (empty: the label's own name) with a unit, colours and value
// texts, or hidden.
type column struct {
	field, name, unit string
	th                *dashboard.ThresholdsConfigBuilder
	mappings          []dashboard.ValueMapping
	hidden            bool
}

// col is a visible column; hide a hidden one (kept for data links).
func col(field, name, unit string) column { return column{field: field, name: name, unit: unit} }
func hide(field string) column            { return column{field: field, hidden: true} }

func (c column) colored(th *dashboard.ThresholdsConfigBuilder) column { c.th = th; return c }
func (c column) mapped(m ...dashboard.ValueMapping) column {
	c.mappings = append(c.mappings, m...)
	return c
}

// table is an instant table: the queries merged into one row per label
// set, Time and __name__ dropped, the listed columns first, renamed and
// with their units, thresholds (colouring the cell's text) and value texts.
func (d *board) table(title, description string, cols []column, qs ...query) *table.PanelBuilder {
	rename, index := map[string]string{}, map[string]int{}
	for i, c := range cols {
		if c.field == "" {
			continue // hide(p.ClusterLabel) with no cluster label
		}
		if c.name != "" {
			rename[c.field] = c.name
		}
		index[c.field] = i
	}
	t := table.NewPanelBuilder().Title(title).Description(description).
		Datasource(promDS).Targets(targets(true, prometheus.PromQueryFormatTable, qs)).
		WithTransformation(dashboard.DataTransformerConfig{Id: "merge", Options: map[string]any{}}).
		WithTransformation(dashboard.DataTransformerConfig{Id: "organize", Options: map[string]any{
			"excludeByName": map[string]bool{"Time": true, "__name__": true},
			"renameByName":  rename,
			"indexByName":   index,
		}}).
		CellHeight(common.TableCellHeightSm).
		Footer(common.NewTableFooterOptionsBuilder().Show(false).Reducer([]string{"sum"}).CountRows(false))
	for _, c := range cols {
		if c.field == "" {
			continue
		}
		shown := c.field
		if c.name != "" {
			shown = c.name
		}
		var props []dashboard.DynamicConfigValue
		if c.hidden {
			props = append(props, dashboard.DynamicConfigValue{Id: "custom.hidden", Value: true})
		}
		if c.unit != "" {
			props = append(props, dashboard.DynamicConfigValue{Id: "unit", Value: c.unit})
		}
		if c.th != nil {
			props = append(props, dashboard.DynamicConfigValue{Id: "thresholds", Value: thresholdsOf(c.th)})
		}
		if len(c.mappings) > 0 {
			props = append(props, dashboard.DynamicConfigValue{Id: "mappings", Value: c.mappings})
		}
		if c.th != nil || len(c.mappings) > 0 {
			// Colour the text by the thresholds and the mappings' colours.
			props = append(props, dashboard.DynamicConfigValue{Id: "custom.cellOptions", Value: common.TableColorTextCellOptions{Type: common.TableCellDisplayModeColorText}})
		}
		if len(props) > 0 {
			t.OverrideByName(shown, props)
		}
	}
	return t
}

// nodeLink is a data link from a table row to the on-call dashboard, with
// the dashboard's cluster, data source and time range and vars taken from
// the row (var-NAME=${__data.fields.LABEL}).
func (d *board) nodeLink(title string, vars ...string) []cog.Builder[dashboard.DashboardLink] {
	var params []string
	if d.p.ClusterLabel != "" {
		params = append(params, "${cluster:queryparam}")
	}
	for _, v := range vars {
		name, label, ok := strings.Cut(v, "=")
		if !ok {
			label = name
		}
		params = append(params, fmt.Sprintf("var-%s=${__data.fields.%s:percentencode}", name, label))
	}
	params = append(params, "${datasource:queryparam}", "${__url_time_range}")
	return []cog.Builder[dashboard.DashboardLink]{built[dashboard.DashboardLink]{dashboard.DashboardLink{
		Title: title, Type: dashboard.DashboardLinkTypeLink, Tags: []string{},
		Url: cog.ToPtr("/d/" + dashboardNode + "?" + strings.Join(params, "&")),
	}}}
}

// slowFor is the alert threshold of a probe op's p99.
func slowFor(p Params, op string) float64 {
	for _, a := range attributedOps {
		if a.op == op {
			return a.slow(p).Seconds()
		}
	}
	panic("no threshold for op " + op)
}

// Colours of a healthy state and of its opposite.
var (
	okOrStalled = valueMap(mapped{"0", "ok", "green"}, mapped{"1", "STALLED", "red"})
	verdictText = valueMap(mapped{verdictDevice, "device: its own requests are slow", "red"},
		mapped{verdictStack, "stack: the device's requests are not slow, or no device", "orange"},
		mapped{verdictNone, "none: not slow", "green"})
)

func (d *board) smartHealthy() dashboard.ValueMapping {
	return valueMap(mapped{"1", "PASSED", "green"}, mapped{"0", "FAILED", "red"})
}

func fleetDashboard(p Params) *board {
	d := newBoard(p, dashboardFleet,
		"Which disks drifted from their cohort (same model or a user cohort label), fleet SMART health and wear, stalled targets. Click a row to open the on-call view of that instance and disk.")
	d.clusterVar()
	d.queryVar("job", "Job", "diskcanary's scrape jobs.", "label_values(diskcanary_build_info"+d.sel()+", job)", varOpts{multi: true, all: true})
	d.queryVar("cohort", "Cohort", "The cohort label the scrape config sets (instance or volume type), else model:<disk model>. Cohort series span clusters and jobs.",
		"label_values("+ruleCohortInfo+d.sel(`job=~"$job"`)+", cohort)", varOpts{multi: true, all: true})
	sel := d.sel(`job=~"$job"`)
	// Targets of the chosen cohorts, and the cohort-level series (which have
	// no cluster, job or instance: they aggregate across them).
	tsel := d.sel(`job=~"$job"`, `cohort=~"$cohort"`)
	csel := `{cohort=~"$cohort"}`
	cohortNeeds := fmt.Sprintf("A cohort counts once it has %d targets with %d samples each in 15 minutes (-drift.min-cohort, -min-samples): on a smaller fleet, or where each disk model is alone, this stays empty.", p.DriftMinCohort, p.MinSamples)
	targetLink := d.nodeLink("On-call view of ${__data.fields.instance}, disk ${__data.fields.disk}", "job", "instance", "probe", "disk")

	d.row("Now")
	d.add(d.stat("Stalled targets",
		fmt.Sprintf("Probe targets with an operation stuck past their stall threshold right now (diskcanary_probe_stalled = 1); DiskcanaryProbeStalled pages after %s. Anything but 0 is red.", promDuration(p.StallFor)),
		"none", steps("green", at(1, "red")),
		q(fmt.Sprintf(`count(diskcanary_probe_stalled%s == 1) or vector(0)`, sel), "")).Span(4).Height(4))
	d.add(d.stat(fmt.Sprintf("Targets over the %s etcd bar (fdatasync p99, 15m)", human(p.FdatasyncSlow)),
		fmt.Sprintf("WAL probe targets whose 15-minute fdatasync p99 is over %s, the etcd guidance and the threshold of DiskcanaryFdatasyncSlow (which also wants %d samples and %s).", human(p.FdatasyncSlow), p.MinSamples, promDuration(p.FdatasyncSlowFor)),
		"none", steps("green", at(1, "orange")),
		q(fmt.Sprintf(`count(%s%s > %s) or vector(0)`, quantileRule("fdatasync", "p99", "15m"), sel, seconds(p.FdatasyncSlow)), "")).Span(5).Height(4))
	d.add(d.stat("Fleet-drift outliers",
		fmt.Sprintf("fdatasync targets over %s × their cohort's median p99 and over %s, what DiskcanaryFdatasyncFleetDrift alerts on after %s. %s", num(p.DriftFactor), human(p.DriftFloor), promDuration(p.DriftFor), cohortNeeds),
		"none", steps("green", at(1, "orange")),
		q(fmt.Sprintf("count(\n  %s\n  and\n  %s%s > %s\n) or vector(0)", driftRatio(p, "fdatasync", tsel, csel, "> "+num(p.DriftFactor)), cohortTargetRule("fdatasync"), tsel, seconds(p.DriftFloor)), "")).Span(5).Height(4))
	d.add(d.stat("SMART: healthy / failing disks",
		"Disks whose drive says its overall health check passed, and those where it failed (diskcanary_smart_healthy). Empty where smartctl is absent or not permitted, and for loop, virtio and other devices without SMART.",
		"none", steps("green", at(1, "red")),
		q(fmt.Sprintf(`count(diskcanary_smart_healthy%s == 1) or vector(0)`, sel), "healthy"),
		q(fmt.Sprintf(`count(diskcanary_smart_healthy%s == 0) or vector(0)`, sel), "failing")).
		OverrideByQuery("A", []dashboard.DynamicConfigValue{{Id: "thresholds", Value: thresholdsOf(steps("green"))}}).
		Span(5).Height(4))
	d.add(d.stat("Exporters: up / down",
		fmt.Sprintf("diskcanary exporters answering (diskcanary_build_info) and diskcanary scrape targets that are down (up{%s} == 0, what DiskcanaryExporterDown alerts on after %s; -job-selector). Up is red only at 0; down is red from 1.", p.JobSelector, promDuration(p.ExporterDownFor)),
		"none", steps("green", at(1, "red")),
		q(fmt.Sprintf(`count(diskcanary_build_info%s) or vector(0)`, sel), "up"),
		// The alert's job selector too: with job at All (.*), up alone
		// would count every scrape job's down targets.
		q(fmt.Sprintf(`count(up%s == 0) or vector(0)`, d.sel(p.JobSelector, `job=~"$job"`)), "down")).
		OverrideByQuery("A", []dashboard.DynamicConfigValue{{Id: "thresholds", Value: thresholdsOf(steps("red", at(1, "green")))}}).
		Span(5).Height(4))

	targetCols := func(value, unit string, th *dashboard.ThresholdsConfigBuilder) []column {
		return []column{col("instance", "Instance", ""), col("probe", "Probe", ""), col("path", "Path", ""),
			col("device", "Device", ""), col("disk", "Disk", ""), col("Value", value, unit).colored(th)}
	}
	d.row("Latency and drift")
	for _, op := range []struct{ op, title string }{{"fdatasync", "fdatasync"}, {"read", "random-read"}} {
		slow := slowFor(p, op.op)
		d.add(d.table(fmt.Sprintf("Worst targets by %s p99 (15m)", op.title),
			fmt.Sprintf("The 15 probe targets with the highest %s p99 over 15 minutes, with the physical disk under each (diskcanary_disk_parent_info). Orange over %s, the alert threshold. Click a row for the on-call view.", op.title, human(durationOf(slow))),
			targetCols(op.title+" p99 (15m)", "s", steps("green", at(slow, "orange"))),
			q(fmt.Sprintf(`topk(15, %s)`, d.withDisk(quantileRule(op.op, "p99", "15m")+sel, sel)), "")).
			DataLinks(targetLink).Span(12).Height(9))
		d.add(d.table(fmt.Sprintf("Drift: p99 ÷ cohort median (%s, 15m)", op.op),
			fmt.Sprintf("Each target's %s p99 over its cohort's median p99, highest first; orange from %s×, the drift factor. %s", op.title, num(p.DriftFactor), cohortNeeds),
			append(targetCols("p99 ÷ cohort median", "suffix:×", steps("green", at(p.DriftFactor, "orange"))), col("cohort", "Cohort", "")),
			q(fmt.Sprintf(`topk(15, %s)`, d.withDisk(driftRatio(p, op.op, tsel, csel, ""), sel)), "")).
			DataLinks(targetLink).Span(12).Height(9))
	}
	for _, op := range []string{"fdatasync", "read"} {
		d.add(withLines(d.timeseries(fmt.Sprintf("%s p99 against its cohort band (p10 / p50 / p90 of peers)", op),
			fmt.Sprintf("The spread of the cohort's 15-minute p99s and the targets over %s× its median (the outliers). The dashed line is %s, the alert threshold for %s. %s", num(p.DriftFactor), human(durationOf(slowFor(p, op))), op, cohortNeeds), "s",
			q(fmt.Sprintf(`quantile by (cohort, probe) (0.1, %s%s)`, cohortTargetRule(op), tsel), "p10 {{cohort}} {{probe}}"),
			q(fmt.Sprintf(`quantile by (cohort, probe) (0.5, %s%s)`, cohortTargetRule(op), tsel), "p50 {{cohort}} {{probe}}"),
			q(fmt.Sprintf(`quantile by (cohort, probe) (0.9, %s%s)`, cohortTargetRule(op), tsel), "p90 {{cohort}} {{probe}}"),
			q(fmt.Sprintf("%s%s\n> on (cohort, probe) group_left ()\n(%s * %s%s)", cohortTargetRule(op), tsel, num(p.DriftFactor), cohortMedianRule(op), csel), "outlier {{instance}} {{path}}")),
			at(slowFor(p, op), "red")).Span(12).Height(9))
	}

	diskLink := d.nodeLink("On-call view of ${__data.fields.instance}, disk ${__data.fields.device}", "job", "instance", "disk=device")
	smartEmpty := " Empty where smartctl is absent or not permitted, and for devices without SMART (loop, virtio, most dm and cloud volumes)."
	d.row("SMART")
	d.add(histogram.NewPanelBuilder().Title("Wear used (distribution)").
		Description(fmt.Sprintf("How many disks have used how much of their rated endurance (NVMe percentage used, ATA wear attributes), in about 5 %% buckets; DiskcanaryWearHigh warns at %s, critical at %s.%s", pct(p.WearWarning), pct(p.WearCritical), smartEmpty)).
		Datasource(promDS).Targets(targets(true, prometheus.PromQueryFormatTimeSeries, []query{{fmt.Sprintf(`diskcanary_smart_wear_used_ratio%s`, sel), "{{instance}} {{device}}"}})).
		Unit("percentunit").Min(0).Max(1).BucketCount(20).
		Legend(common.NewVizLegendOptionsBuilder().ShowLegend(false).DisplayMode(common.LegendDisplayModeHidden).Placement(common.LegendPlacementBottom)).
		Span(8).Height(8))
	d.add(d.table("Most worn disks",
		fmt.Sprintf("The 15 disks with the most rated endurance used: orange from %s, red from %s (the wear alerts). Click a row for the on-call view of the disk.%s", pct(p.WearWarning), pct(p.WearCritical), smartEmpty),
		[]column{col("instance", "Instance", ""), col("device", "Disk", ""), col("Value", "Wear used", "percentunit").colored(steps("green", at(p.WearWarning, "orange"), at(p.WearCritical, "red")))},
		q(fmt.Sprintf(`topk(15, diskcanary_smart_wear_used_ratio%s)`, sel), "")).
		DataLinks(diskLink).Span(8).Height(8))
	d.add(d.table("Disks with SMART problems",
		"Disks whose drive reports failing health, an NVMe critical-warning flag, or media errors that grew over the last day. Empty is good."+smartEmpty,
		[]column{col("instance", "Instance", ""), col("device", "Disk", ""), col("flag", "Critical-warning flag", ""),
			col("Value #A", "Health", "none").mapped(d.smartHealthy()),
			col("Value #B", "Critical warning", "none").mapped(valueMap(mapped{"1", "set", "red"})),
			col("Value #C", "Media errors (1d)", "none").colored(steps("green", at(1, "red")))},
		q(fmt.Sprintf(`diskcanary_smart_healthy%s == 0`, sel), ""),
		q(fmt.Sprintf(`diskcanary_smart_critical_warning%s > 0`, sel), ""),
		q(fmt.Sprintf(`increase(diskcanary_smart_media_errors_total%s[1d]) > 0`, sel), "")).
		DataLinks(diskLink).Span(8).Height(8))

	d.capacityPanels(func(ms ...string) string { return d.sel(append([]string{`job=~"$job"`}, ms...)...) })

	d.row("Stalls")
	d.add(d.table("Stalled targets",
		"Probe targets with an operation stuck right now: the disk (or the filesystem, or the storage network) does not complete an I/O. Empty is good. Click a row for the on-call view; its disk variable resolves to the probe's disk.",
		[]column{col("instance", "Instance", ""), col("probe", "Probe", ""), col("Value", "State", "none").mapped(okOrStalled)},
		q(fmt.Sprintf(`diskcanary_probe_stalled%s == 1`, sel), "")).
		DataLinks(d.nodeLink("On-call view of ${__data.fields.instance}, probe ${__data.fields.probe}", "job", "instance", "probe")).Span(12).Height(6))
	d.add(d.timeseries("Stalled targets over time",
		"Stalled probe targets per job over the dashboard's range: a stall that came and went still shows here. Flat at 0 is good.", "none",
		q(fmt.Sprintf(`sum by (%s) (diskcanary_probe_stalled%s)`, p.withCluster("job"), sel), d.legend("{{job}}"))).Span(12).Height(6))
	return d
}

// contentionTimeseries is "who was doing I/O on this disk", beside the
// probe latency over the same window: each workload's bytes per second
// from the contention collector's per-cgroup counters.
func (d *board) contentionTimeseries(dd, noDisk string) *timeseries.PanelBuilder {
	w := latencyWindow
	return d.timeseries(fmt.Sprintf("Who was doing I/O on this disk (bytes/s by workload, %s)", promDuration(w)),
		fmt.Sprintf("Bytes per second each workload read, wrote and discarded on this disk over %s, the latency panels' window, from the kernel's cgroup I/O accounting: the top cgroups per disk by name (Kubernetes pod/container, systemd unit, or the cgroup path), diskcanary's own probes as diskcanary, the rest as other. A workload that rises with the p99 beside it is the first suspect.%s%s", promDuration(w), contentionEmpty, noDisk), "Bps",
		q(fmt.Sprintf("sort_desc(%s%s)", ruleWorkloadBytes(w), dd), "{{workload}}")).Span(12).Height(7)
}

// contentionTable ranks the workloads on the disk now.
func (d *board) contentionTable(dd, noDisk string) *table.PanelBuilder {
	w := latencyWindow
	return d.table(fmt.Sprintf("Who was doing I/O on this disk: the ranking (%s)", promDuration(w)),
		fmt.Sprintf("The workloads on this disk over the last %s, busiest first: bytes and operations per second and their share of the bytes every cgroup moved on it (diskcanary's own probes and other included in the share, left out of the %s ranking rule).%s%s", promDuration(w), ruleWorkloadTop(w), contentionEmpty, noDisk),
		[]column{col("workload", "Workload", ""), col("cgroup", "Cgroup", ""),
			col("Value #A", "Bytes/s", "Bps"), col("Value #B", "Operations/s", "iops"), col("Value #C", "Share of the disk", "percentunit"),
			hide("job"), hide("instance"), hide("device"), hide(d.p.ClusterLabel)},
		q(fmt.Sprintf("sort_desc(%s%s)", ruleWorkloadBytes(w), dd), ""),
		q(fmt.Sprintf("%s%s", ruleWorkloadOps(w), dd), ""),
		q(fmt.Sprintf("%s%s", ruleWorkloadShare(w), dd), "")).Span(12).Height(7)
}

// contentionEmpty says when the contention panels are empty.
const contentionEmpty = " Empty with the contention collector off, on a kernel without cgroup I/O accounting, and on cgroup v1 for a disk blk-throttle is not active on (docs/metrics.md)."

// withDisk joins the physical disk under each series' device (the first,
// when a dm or md device spans several; the device itself where
// diskcanary_disk_parent_info has none), so a row can say, and link to,
// the disk the on-call dashboard shows.
func (d *board) withDisk(expr, sel string) string {
	on := d.p.withCluster("job", "instance", "device")
	return fmt.Sprintf(`(
  %s
)
* on (%[2]s) group_left (disk)
topk by (%[2]s) (1,
  diskcanary_disk_parent_info%[3]s
  or on (%[2]s)
  label_replace(diskcanary_probe_target_info%[3]s, "disk", "$1", "device", "(.+)")
)`, strings.ReplaceAll(expr, "\n", "\n  "), on, sel)
}

// driftRatio is a target's p99 over its cohort median, for cohorts large
// enough to alert on; cmp optionally filters it.
func driftRatio(p Params, op, tsel, csel, cmp string) string {
	e := fmt.Sprintf("%s%s\n/ on (cohort, probe) group_left ()\n(%s%s and on (cohort, probe) %s >= %d)", cohortTargetRule(op), tsel, cohortMedianRule(op), csel, cohortMembersRule(op), p.DriftMinCohort)
	if cmp != "" {
		e = "(" + e + ") " + cmp
	}
	return e
}

// diskVarQuery is the on-call dashboard's disk variable: the physical disks
// under the chosen probe targets (the probe's device → diskcanary_disk_
// parent_info → disk), not every device the node has, so it defaults to
// the probe's disk on a node with loop devices (snaps) that sort first.
func (d *board) diskVarQuery() string {
	ii := d.sel(`job="$job"`, `instance="$instance"`)
	on := d.p.withCluster("job", "instance", "device")
	return fmt.Sprintf(`query_result(max by (disk) (diskcanary_disk_parent_info%s * on (%s) group_left () max by (%s) (diskcanary_probe_target_info%s)))`,
		ii, on, on, d.sel(`job="$job"`, `instance="$instance"`, `probe=~"$probe"`))
}

// diskVarRegex takes the disk from query_result's lines ({disk="sda"} 1 TS).
const diskVarRegex = `/disk="([^"]+)"/`

func nodeDashboard(p Params) *board {
	d := newBoard(p, dashboardNode,
		"One instance and one physical disk: probe latency, iostat and SMART side by side. Open it from a diskcanary alert or a fleet table row.")
	d.clusterVar()
	d.queryVar("job", "Job", "diskcanary's scrape job.", "label_values(diskcanary_build_info"+d.sel()+", job)", varOpts{})
	d.queryVar("instance", "Instance", "The diskcanary exporter (one per node).", "label_values(diskcanary_build_info"+d.sel(`job="$job"`)+", instance)", varOpts{})
	d.queryVar("probe", "Probe", "Probe targets of the instance; the disk variable follows them.",
		"label_values(diskcanary_probe_target_info"+d.sel(`job="$job"`, `instance="$instance"`)+", probe)", varOpts{multi: true, all: true})
	d.b.WithVariable(dashboard.NewQueryVariableBuilder("disk").
		Label("Physical disk").
		Description("The physical disks under the chosen probes' targets (partition → disk, dm/md → the disks below; diskcanary_disk_parent_info), first by name. Any other disk can be typed in or reached from the fleet dashboard's SMART tables.").
		Datasource(promDS).
		Query(dashboard.StringOrMap{String: cog.ToPtr(d.diskVarQuery())}).
		Definition(d.diskVarQuery()).
		Regex(diskVarRegex).
		Refresh(dashboard.VariableRefreshOnTimeRangeChanged).
		Sort(dashboard.VariableSortAlphabeticalAsc).
		AllowCustomValue(true))
	ti := d.sel(`job="$job"`, `instance="$instance"`, `probe=~"$probe"`)
	ii := d.sel(`job="$job"`, `instance="$instance"`)
	dd := d.sel(`job="$job"`, `instance="$instance"`, `device="$disk"`)
	on := d.p.withCluster("job", "instance", "device")
	// Probe targets on the chosen physical disk: the probe's device →
	// diskcanary_disk_parent_info → disk.
	onDisk := func(expr string) string {
		return fmt.Sprintf("%s\n* on (%s) group_left ()\nmax by (%s) (diskcanary_disk_parent_info%s or label_replace(diskcanary_disk_info%s, \"disk\", \"$1\", \"device\", \"(.+)\"))",
			expr, on, on, d.sel(`job="$job"`, `instance="$instance"`, `disk="$disk"`), dd)
	}
	noDisk := " Empty until the disk variable has a value: it lists the disks under the chosen probes."
	noSmart := " Empty where smartctl is absent or not permitted, and for devices without SMART (loop, virtio, most dm and cloud volumes)."

	d.row("State")
	d.add(d.stat("Stalled",
		fmt.Sprintf("Per probe: STALLED while an operation is stuck past its stall threshold (diskcanary_probe_stalled = 1); DiskcanaryProbeStalled pages after %s.", promDuration(p.StallFor)),
		"none", steps("green", at(1, "red")),
		q(fmt.Sprintf(`diskcanary_probe_stalled%s`, ti), "{{probe}}")).
		Mappings([]dashboard.ValueMapping{okOrStalled}).ColorMode(common.BigValueColorModeBackground).Span(6).Height(4))
	d.add(d.stat("Last cycle succeeded",
		fmt.Sprintf("Per probe: whether its last cycle completed (diskcanary_probe_success). DiskcanaryProbeFailing after %s of failures; the reason is under Probe failures by reason.", promDuration(p.ProbeFailingFor)),
		"none", steps("red", at(1, "green")),
		q(fmt.Sprintf(`diskcanary_probe_success%s`, ti), "{{probe}}")).
		Mappings([]dashboard.ValueMapping{valueMap(mapped{"1", "ok", "green"}, mapped{"0", "failed", "red"})}).ColorMode(common.BigValueColorModeBackground).Span(6).Height(4))
	d.add(d.stat("Time since last cycle",
		fmt.Sprintf("Per probe: since its last completed cycle; red from %s, when DiskcanaryProbeDataMissing starts counting.", promDuration(p.ProbeStaleAfter)),
		"s", steps("green", at(p.ProbeStaleAfter.Seconds(), "red")),
		q(fmt.Sprintf(`time() - diskcanary_probe_last_run_timestamp_seconds%s`, ti), "{{probe}}")).Span(6).Height(4))
	d.add(d.stat("SMART healthy",
		"The drive's own overall health verdict for this disk (diskcanary_smart_healthy)."+noSmart,
		"none", steps("red", at(1, "green")),
		q(fmt.Sprintf(`diskcanary_smart_healthy%s`, dd), "{{device}}")).
		Mappings([]dashboard.ValueMapping{d.smartHealthy(), nullMap("no SMART data")}).NoValue("no SMART data").
		ColorMode(common.BigValueColorModeBackground).Span(6).Height(4))

	// The 5-minute quantiles no alert reads, from the raw buckets of the
	// one node shown: recorded, every node would pay for them every
	// evaluation (probeRecording).
	nodeQuantile := func(q, metric string) string {
		return fmt.Sprintf("histogram_quantile(%s, sum by (probe, path, le) (rate(%s_bucket%s[5m])))", q, metric, ti)
	}
	d.row("Probe latency")
	d.add(d.heatmap("fdatasync latency (heatmap)",
		"Every fdatasync of the WAL probes, by latency bucket over time: a second band or a tail appears here before a p99 moves. Empty for probes without fdatasync (randread).",
		fmt.Sprintf(`sum by (le) (rate(diskcanary_fdatasync_duration_seconds_bucket%s[$__rate_interval]))`, ti)).Span(12).Height(8))
	d.add(withLines(d.timeseries(fmt.Sprintf("fdatasync p50 / p99 (5m) with the etcd %s bar", human(p.FdatasyncSlow)),
		fmt.Sprintf("The WAL probes' fdatasync p50 and p99 over 5 minutes. The dashed line is %s, etcd's guidance and DiskcanaryFdatasyncSlow's threshold (on the 15-minute p99); the incident alerts fire at %s and %s.", human(p.FdatasyncSlow), human(p.FdatasyncIncidentWarning), human(p.FdatasyncIncidentCritical)), "s",
		q(fmt.Sprintf(`%s%s`, quantileRule("fdatasync", "p99", "5m"), ti), "p99 {{probe}} {{path}}"),
		q(nodeQuantile("0.5", fdsMetric), "p50 {{probe}} {{path}}")), at(p.FdatasyncSlow.Seconds(), "red")).Span(12).Height(8))
	d.add(d.heatmap("random read latency (heatmap)",
		"Every 4 KiB O_DIRECT random read of the read probes, by latency bucket over time. Empty for probes that do not read (wal).",
		fmt.Sprintf(`sum by (le) (rate(diskcanary_read_duration_seconds_bucket%s[$__rate_interval]))`, ti)).Span(12).Height(8))
	d.add(withLines(d.timeseries(fmt.Sprintf("random read p50 / p99 and write() p99 (5m), with the %s read bar", human(p.ReadSlow)),
		fmt.Sprintf("The read probes' p50 and p99 and the WAL probes' write() p99 (the syscall before the fdatasync). The dashed line is %s, DiskcanaryReadSlow's threshold (on the 15-minute read p99).", human(p.ReadSlow)), "s",
		q(nodeQuantile("0.99", readMetric), "read p99 {{probe}}"),
		q(nodeQuantile("0.5", readMetric), "read p50 {{probe}}"),
		q(nodeQuantile("0.99", "diskcanary_write_duration_seconds"), "write() p99 {{probe}}")), at(p.ReadSlow.Seconds(), "red")).Span(12).Height(8))
	d.add(withLines(d.timeseries("Probe targets on this disk: fdatasync p99 (15m)",
		fmt.Sprintf("Every WAL probe target whose device sits on the chosen disk (a partition, or a dm/md device over it), whatever the probe variable says. The dashed line is %s.%s", human(p.FdatasyncSlow), noDisk), "s",
		q(onDisk(fmt.Sprintf(`%s%s`, quantileRule("fdatasync", "p99", "15m"), ii)), "{{probe}} {{path}} ({{device}})")), at(p.FdatasyncSlow.Seconds(), "red")).Span(12).Height(7))
	d.add(d.contentionTimeseries(dd, noDisk))
	d.add(d.timeseries("Probe failures by reason",
		"Failed probe cycles by reason (diskcanary_probe_failures_total): low_space, eio, timeout... Empty while every cycle succeeds.", "none",
		q(fmt.Sprintf(`sum by (probe, reason) (increase(diskcanary_probe_failures_total%s[$__rate_interval]))`, ti), "{{probe}} {{reason}}")).Span(12).Height(7))
	d.add(d.timeseries("Probe write cost (bytes per day, page-granular)",
		fmt.Sprintf("What the probes write to this disk, as bytes per day at the current rate (the default budget is %g GB a day per filesystem).", config.DefaultDailyWriteBudget/1e9), "bytes",
		q(fmt.Sprintf(`rate(diskcanary_probe_written_bytes_total%s[$__rate_interval]) * 86400`, ti), "{{probe}}")).Span(12).Height(7))
	d.add(d.timeseries("Probe cycles per minute (runs, failures)",
		"How often each probe completed a cycle, and failed one. A probe that stops running is a stall or a dead daemon.", "none",
		q(fmt.Sprintf(`rate(diskcanary_probe_runs_total%s[$__rate_interval]) * 60`, ti), "runs {{probe}}"),
		q(fmt.Sprintf(`sum by (probe) (rate(diskcanary_probe_failures_total%s[$__rate_interval])) * 60`, ti), "failures {{probe}}")).Span(12).Height(7))
	d.add(d.contentionTable(dd, noDisk))

	d.row("Whose fault: the probe beside its device (15m)")
	for _, a := range attributedOps {
		d.add(withLines(d.timeseries(fmt.Sprintf("%s p99 beside its device's %s latency", a.op, strings.ReplaceAll(a.requests, "|", "/")),
			fmt.Sprintf("The probe's %s p99 and its device's own latency for the same requests: the block layer's p99 (source blocklatency, eBPF) or diskstats' mean await (source diskstats). A slow probe over a fast device is the stack above it. The dashed line is %s, the alert threshold.", a.op, human(a.slow(p))), "s",
			q(fmt.Sprintf(`%s%s`, quantileRule(a.op, "p99", "15m"), ti), "probe p99 {{probe}} {{path}}"),
			q(fmt.Sprintf(`%s%s`, ruleTargetDeviceLat, d.sel(`job="$job"`, `instance="$instance"`, `probe=~"$probe"`, fmt.Sprintf(`op="%s"`, a.op))), "device {{device}} ({{source}})")), at(a.slow(p).Seconds(), "red")).Span(12).Height(7))
	}
	d.add(d.table("Verdict per probe target: device (its requests are slow), stack (they are not), none (not slow)",
		fmt.Sprintf("Whose fault a slow probe is over 15 minutes: the device when its own requests take at least %s of the probe's p99, else the stack above it (filesystem, journal, cgroup throttle, hypervisor); the stack too when no block device is under the probe (source %s: FUSE, tmpfs, overlay, a network filesystem); none when the probe is not slow.", pct(p.AttributionDeviceShare), sourceNoDevice),
		[]column{col("probe", "Probe", ""), col("path", "Path", ""), col("device", "Device", ""), col("op", "Op", ""),
			col("verdict", "Verdict", "").mapped(verdictText), col("source", "Device latency from", ""),
			hide("Value"), hide("job"), hide("instance"), hide(p.ClusterLabel)},
		q(fmt.Sprintf(`%s%s`, ruleAttribution, ti), "")).Span(24).Height(4))

	// Devices on the chosen disk: the disk itself, its partitions and the
	// dm/md devices over it (diskcanary_disk_parent_info maps a whole disk
	// to itself), so its filesystems' errors show beside its own.
	onDiskDevices := fmt.Sprintf(`on (%s) diskcanary_disk_parent_info%s`, on, d.sel(`job="$job"`, `instance="$instance"`, `disk="$disk"`))
	kernelLog := " Counted from the kernel log (needs CAP_SYSLOG); empty while the kernel logged none."
	d.row("Kernel errors on this disk and its filesystems")
	d.add(d.timeseries("Disk errors the kernel logged, by kind",
		fmt.Sprintf("I/O errors, timeouts, resets and link losses the kernel logged for this disk; %d or more timeouts, aborts, resets or link losses in %s page (DiskcanaryDiskErrorStorm).%s", p.ErrorStormCount, promDuration(p.ErrorStormWindow), kernelLog), "none",
		q(fmt.Sprintf(`sum by (kind) (increase(diskcanary_disk_errors_total%s[$__rate_interval]))`, dd), "{{kind}}")).Span(8).Height(7))
	d.add(d.timeseries("Filesystem errors the kernel logged, by device and kind",
		"Errors of the filesystems on this disk (its partitions and dm/md devices over it): ext4 and xfs corruption, journal aborts."+kernelLog, "none",
		q(fmt.Sprintf("sum by (device, fstype, kind) (increase(diskcanary_filesystem_errors_total%s[$__rate_interval]) and %s)", ii, onDiskDevices), "{{device}} {{fstype}} {{kind}}")).Span(8).Height(7))
	d.add(d.stat("Filesystems the kernel made read-only",
		"Filesystems on this disk the kernel remounted read-only after an error (diskcanary_filesystem_readonly). Anything but 0 is red: writes fail there.",
		"none", steps("green", at(1, "red")),
		q(fmt.Sprintf("sum(diskcanary_filesystem_readonly%s and %s) or vector(0)", ii, onDiskDevices), "")).
		Mappings([]dashboard.ValueMapping{valueMap(mapped{"0", "none", "green"})}).Span(8).Height(7))
	d.add(d.table("Exact counters: SCSI commands failed and timed out (SCSI/SATA disks), errors the filesystems recorded on disk",
		"The SCSI midlayer's counters (SCSI and SATA disks only: empty for NVMe, virtio and loop) and the error counts ext4 keeps in its superblock.",
		[]column{col("device", "Device", ""), col("fstype", "Filesystem", ""),
			col("Value #A", "SCSI commands failed", "none").colored(steps("green", at(1, "red"))),
			col("Value #B", "SCSI timeouts", "none").colored(steps("green", at(1, "red"))),
			col("Value #C", "Errors recorded by the filesystem", "none").colored(steps("green", at(1, "red"))),
			hide("job"), hide("instance"), hide(p.ClusterLabel)},
		q(fmt.Sprintf(`diskcanary_disk_scsi_io_errors_total%s`, dd), ""),
		q(fmt.Sprintf(`diskcanary_disk_scsi_io_timeouts_total%s`, dd), ""),
		q(fmt.Sprintf("diskcanary_filesystem_recorded_errors%s and %s", ii, onDiskDevices), "")).Span(24).Height(5))

	w := p.IostatWindow
	r := func(name string) string { return iostatRuleName(name, w) + dd }
	iostat := fmt.Sprintf(" iostat -dx's column over %s windows, from the recording rules.%s", promDuration(w), noDisk)
	d.row("iostat -dx (recording rules, " + promDuration(w) + " windows)")
	d.add(d.timeseries("r/s, w/s", "Reads and writes completed per second."+iostat, "iops", q(r("reads_completed:rate"), "r/s"), q(r("writes_completed:rate"), "w/s")).Span(8).Height(7))
	d.add(d.timeseries("r_await, w_await", "Mean time a read or write spent queued and in service (a mean: the probe heatmaps show the tail)."+iostat, "s", q(r("read_await_seconds:rate"), "r_await"), q(r("write_await_seconds:rate"), "w_await")).Span(8).Height(7))
	d.add(d.timeseries("%util", "Share of time the disk had I/O in flight; near 100 % a rotational disk is saturated, an SSD or NVMe may not be."+iostat, "percentunit", q(r("utilization:ratio_rate"), "%util")).Span(8).Height(7))
	d.add(d.timeseries("aqu-sz", "Mean number of requests queued or in service."+iostat, "short", q(r("queue_size:rate"), "aqu-sz")).Span(8).Height(7))
	d.add(d.timeseries("rareq-sz, wareq-sz", "Mean size of a read and of a write request."+iostat, "bytes", q(r("read_request_size_bytes:rate"), "rareq-sz"), q(r("write_request_size_bytes:rate"), "wareq-sz")).Span(8).Height(7))
	d.add(d.timeseries("rkB/s, wkB/s", "Bytes read and written per second."+iostat, "Bps", q(r("read_bytes:rate"), "read"), q(r("written_bytes:rate"), "written")).Span(8).Height(7))

	d.row("SMART of this disk")
	d.add(d.table("SMART",
		fmt.Sprintf("The drive's identity and health as of the last SMART read: red at a failed verdict, from %s °C, from %s wear used, over %s old.%s", num(p.SmartTemperatureCelsius), pct(p.WearCritical), promDuration(p.SmartStaleAfter), noSmart),
		[]column{col("device", "Disk", ""), col("protocol", "Protocol", ""), col("model", "Model", ""), col("serial", "Serial", ""), col("firmware", "Firmware", ""),
			hide("Value #A"),
			col("Value #B", "Health", "none").mapped(d.smartHealthy()),
			col("Value #C", "Temperature", "celsius").colored(steps("green", at(p.SmartTemperatureCelsius, "red"))),
			col("Value #D", "Wear used", "percentunit").colored(steps("green", at(p.WearWarning, "orange"), at(p.WearCritical, "red"))),
			col("Value #E", "Media errors", "none").colored(steps("green", at(1, "red"))),
			col("Value #F", "Reallocated sectors", "none").colored(steps("green", at(1, "orange"))),
			col("Value #G", "Pending sectors", "none").colored(steps("green", at(1, "orange"))),
			col("Value #H", "Available spare", "percentunit"),
			col("Value #I", "SMART data age", "s").colored(steps("green", at(p.SmartStaleAfter.Seconds(), "red"))),
			hide("job"), hide("instance"), hide(p.ClusterLabel)},
		q(fmt.Sprintf(`diskcanary_smart_device_info%s`, dd), ""),
		q(fmt.Sprintf(`diskcanary_smart_healthy%s`, dd), ""),
		q(fmt.Sprintf(`diskcanary_smart_temperature_celsius%s`, dd), ""),
		q(fmt.Sprintf(`diskcanary_smart_wear_used_ratio%s`, dd), ""),
		q(fmt.Sprintf(`diskcanary_smart_media_errors_total%s`, dd), ""),
		q(fmt.Sprintf(`diskcanary_smart_reallocated_sectors%s`, dd), ""),
		q(fmt.Sprintf(`diskcanary_smart_pending_sectors%s`, dd), ""),
		q(fmt.Sprintf(`diskcanary_smart_available_spare_ratio%s`, dd), ""),
		q(fmt.Sprintf(`time() - diskcanary_smart_last_success_timestamp_seconds%s`, dd), "")).Span(16).Height(6))
	d.add(withLines(d.timeseries("Temperature",
		fmt.Sprintf("The drive's temperature. The dashed line is %s °C, DiskcanarySmartTemperatureHigh's threshold.%s", num(p.SmartTemperatureCelsius), noSmart), "celsius",
		q(fmt.Sprintf(`diskcanary_smart_temperature_celsius%s`, dd), "{{device}}")), at(p.SmartTemperatureCelsius, "red")).Span(8).Height(6))
	d.add(d.table("Disk",
		"What sysfs says about the disk: model, serial, WWN, rotational, block sizes, dm name."+noDisk,
		[]column{col("device", "Disk", ""), col("model", "Model", ""), col("serial", "Serial", ""), col("wwn", "WWN", ""),
			col("rotational", "Rotational", ""), col("logical_block_size", "Logical block (bytes)", ""), col("physical_block_size", "Physical block (bytes)", ""),
			hide("Value"), hide("job"), hide("instance"), hide(p.ClusterLabel), hide("major"), hide("minor")},
		q(fmt.Sprintf(`diskcanary_disk_info%s`, dd), "")).Span(24).Height(4))
	return d
}

func etcdDashboard(p Params) *board {
	d := newBoard(p, dashboardEtcd,
		"Is it the disk? One verdict per etcd member (disk, contention, noisy neighbour, network, cpu, etcd, healthy) from etcd's own metrics and the diskcanary canary on the same node, the evidence under it, and whether the disk meets etcd's bar.")
	d.clusterVar()
	d.queryVar("job", "diskcanary job", "diskcanary's scrape job.", "label_values(diskcanary_build_info"+d.sel()+", job)", varOpts{})
	d.queryVar("instance", "Instance", "diskcanary exporters with a WAL probe target.", "label_values(diskcanary_probe_target_info"+d.sel(`job="$job"`, `kind="wal"`)+", instance)", varOpts{multi: true, all: true})
	node := p.EtcdJoinLabels[len(p.EtcdJoinLabels)-1]
	d.queryVar("node", "etcd member's node", fmt.Sprintf("The %q label etcd's and diskcanary's series share (-etcd.join-labels).", node),
		fmt.Sprintf("label_values(%s%s, %s)", ruleEtcdVerdict, d.sel(), node), varOpts{multi: true, all: true})
	ti := d.sel(`job="$job"`, `instance=~"$instance"`)
	ni := d.sel(fmt.Sprintf(`%s=~"$node"`, node))
	leg := "{{" + node + "}}"
	noEtcd := fmt.Sprintf(" Empty unless the same Prometheus scrapes etcd (%s) with the %q label on both etcd's and diskcanary's series.", p.EtcdSelector, node)
	window := promDuration(p.EtcdWindow)
	d.row("Verdict: is it the disk?")
	d.add(d.table("Verdict per etcd member (DiskcanaryEtcdDegraded after "+promDuration(p.EtcdDegradedFor)+")",
		fmt.Sprintf("Per etcd member, a row for each cause that holds: disk (the canary on etcd's disk slow or stalled, the disk not busy), contention (the same, the disk busy), noisy neighbour (the same, one workload, not etcd, moving over %s of the disk's bytes: the Workload column names it), network, cpu, etcd (etcd slow on its own); or healthy. No row: not enough samples to say (a hung disk before its canary stalls).", pct(p.EtcdNeighbourShare))+noEtcd,
		[]column{col(node, "Node", ""), col("cause", "Verdict", "").mapped(valueMap(
			mapped{causeHealthy, "healthy", "green"}, mapped{causeDisk, "disk", "red"}, mapped{causeContention, "contention on the disk", "orange"},
			mapped{causeNeighbour, "noisy neighbour", "orange"},
			mapped{causeNetwork, "network", "orange"}, mapped{causeCPU, "cpu", "orange"}, mapped{causeEtcd, "etcd itself", "orange"})),
			col("workload", "Workload", ""),
			hide("Value"), hide(p.ClusterLabel)},
		q(fmt.Sprintf("%s%s", ruleEtcdVerdict, ni), "")).Span(8).Height(8))
	d.add(d.table("Evidence per member ("+window+")",
		"The figures behind the verdict, coloured at the verdict's own thresholds; a p99 is blank where too few samples stand behind it (a hung disk: see the canary's I/O)."+noEtcd,
		[]column{col(node, "Node", ""),
			col("Value #A", "etcd WAL fsync p99", "s").colored(steps("green", at(p.FdatasyncSlow.Seconds(), "red"))),
			col("Value #B", "canary fdatasync p99", "s").colored(steps("green", at(p.FdatasyncSlow.Seconds(), "red"))),
			col("Value #I", "canary I/O", "none").mapped(okOrStalled),
			col("Value #C", "etcd backend commit p99", "s").colored(steps("green", at(p.EtcdCommitSlow.Seconds(), "red"))),
			col("Value #D", "worst peer round trip p99", "s").colored(steps("green", at(p.EtcdPeerRTTSlow.Seconds(), "red"))),
			col("Value #E", "slow applies a second", "none").colored(steps("green", at(p.EtcdSlowApplyRate, "orange"))),
			col("Value #H", "leader changes ("+promDuration(p.EtcdLeaderChangesWindow)+")", "none").colored(steps("green", at(float64(p.EtcdLeaderChanges), "orange"))),
			col("Value #F", "canary disk busy", "percentunit").colored(steps("green", at(p.EtcdBusyUtilization, "orange"))),
			col("Value #G", "CPU pressure", "percentunit").colored(steps("green", at(p.EtcdCPUPressure, "orange"))),
			hide(p.ClusterLabel)},
		q(fmt.Sprintf("%s%s", ruleEtcdWALFsyncP99, ni), ""),
		q(fmt.Sprintf("%s%s", ruleEtcdCanaryP99, ni), ""),
		q(fmt.Sprintf("%s%s", ruleEtcdCommitP99, ni), ""),
		q(fmt.Sprintf("%s%s", ruleEtcdPeerRTTP99, ni), ""),
		q(fmt.Sprintf("%s%s", ruleEtcdSlowApplies, ni), ""),
		q(fmt.Sprintf("%s%s", ruleEtcdCanaryBusy, ni), ""),
		q(fmt.Sprintf("%s%s", ruleEtcdCPUPressure, ni), ""),
		q(fmt.Sprintf("%s%s", ruleEtcdLeaderChanges, ni), ""),
		q(fmt.Sprintf("%s%s", ruleEtcdCanaryStalled, ni), "")).Span(16).Height(8))

	d.row("The evidence")
	d.add(withLines(d.timeseries("etcd WAL fsync p99 and the canary's fdatasync p99 ("+window+")",
		fmt.Sprintf("etcd's own WAL fsync p99 beside the canary's on etcd's disk: the canary over the dashed %s line is the disk; only etcd's is etcd itself. A line breaks where too few samples stand behind it (%d to read slow, %d to read fine).%s", human(p.FdatasyncSlow), p.EtcdSlowSamples, p.MinIncidentSamples, noEtcd), "s",
		q(fmt.Sprintf("%s%s", ruleEtcdWALFsyncP99, ni), "etcd "+leg),
		q(fmt.Sprintf("%s%s", ruleEtcdCanaryP99, ni), "canary "+leg)), at(p.FdatasyncSlow.Seconds(), "red")).Span(12).Height(8))
	d.add(withLines(d.timeseries("etcd backend commit p99",
		fmt.Sprintf("etcd's bbolt commit p99; the dashed line is %s, where the verdict calls etcd's disk slow.%s", human(p.EtcdCommitSlow), noEtcd), "s",
		q(fmt.Sprintf("%s%s", ruleEtcdCommitP99, ni), leg)), at(p.EtcdCommitSlow.Seconds(), "red")).Span(12).Height(8))
	d.add(withLines(d.timeseries("Worst peer round-trip p99",
		fmt.Sprintf("The slowest round trip between the member and a peer (its own and its peers' to it), and its median over %s; over the dashed %s line the verdict blames the network when the round trip is over %s× its median or peer messages fail.%s", promDuration(p.EtcdPeerRTTBaselineWindow), human(p.EtcdPeerRTTSlow), num(p.EtcdPeerRTTFactor), noEtcd), "s",
		q(fmt.Sprintf("%s%s", ruleEtcdPeerRTTP99, ni), leg),
		q(fmt.Sprintf("%s%s", ruleEtcdPeerRTTBaseline, ni), "median "+leg)), at(p.EtcdPeerRTTSlow.Seconds(), "red")).Span(12).Height(8))
	etcdSel := d.sel(p.EtcdSelector, fmt.Sprintf(`%s=~"$node"`, node))
	d.add(d.timeseries("Leader changes, slow applies, heartbeat send failures (increase)",
		fmt.Sprintf("etcd's own trouble counters over the verdict's window: %s with disk and network fine points at CPU or etcd itself.%s", p.etcdTroubleText(), noEtcd), "none",
		q(fmt.Sprintf(`sum by (%s) (increase(etcd_server_leader_changes_seen_total%s[%s]))`, p.etcdJoin(), etcdSel, window), "leader changes "+d.legend(leg)),
		q(fmt.Sprintf(`sum by (%s) (increase(etcd_server_slow_apply_total%s[%s]))`, p.etcdJoin(), etcdSel, window), "slow applies "+d.legend(leg)),
		q(fmt.Sprintf(`sum by (%s) (increase(etcd_server_heartbeat_send_failures_total%s[%s]))`, p.etcdJoin(), etcdSel, window), "heartbeat failures "+d.legend(leg))).Span(12).Height(8))
	d.add(withLines(d.timeseries("Canary's disk utilisation",
		fmt.Sprintf("How busy the canary's disk (etcd's) was (iostat %%util); from the dashed %s a slow disk is contention, not the disk alone.%s", pct(p.EtcdBusyUtilization), noEtcd), "percentunit",
		q(fmt.Sprintf("%s%s", ruleEtcdCanaryBusy, ni), leg)), at(p.EtcdBusyUtilization, "orange")).Span(8).Height(8))
	d.add(withLines(d.timeseries("CPU pressure (some task waiting)",
		fmt.Sprintf("Share of time some task on the node waited for a CPU (PSI); from the dashed %s the verdict can blame CPU. Empty on kernels without PSI.%s", pct(p.EtcdCPUPressure), noEtcd), "percentunit",
		q(fmt.Sprintf("%s%s", ruleEtcdCPUPressure, ni), leg)), at(p.EtcdCPUPressure, "orange")).Span(8).Height(8))
	d.add(d.timeseries("etcd process CPU (cores)",
		"CPU seconds per second etcd's process used."+noEtcd, "none",
		q(fmt.Sprintf("%s%s", ruleEtcdCPU, ni), leg)).Span(8).Height(8))

	d.row("The etcd bar: WAL fdatasync p99 < " + human(p.FdatasyncSlow))
	noWAL := " Empty without a WAL probe target on the chosen instances."
	d.add(d.stat("WAL targets meeting the bar (15m p99)",
		fmt.Sprintf("Share of WAL probe targets whose 15-minute fdatasync p99 is at most %s: green only at 100 %%.%s", human(p.FdatasyncSlow), noWAL),
		"percentunit", steps("red", at(1, "green")),
		q(fmt.Sprintf("(count(%[1]s%[2]s <= %[3]s) or vector(0))\n/\ncount(%[1]s%[2]s)", quantileRule("fdatasync", "p99", "15m"), ti, seconds(p.FdatasyncSlow)), "")).Span(6).Height(5))
	d.add(d.stat("Worst fdatasync p99 (15m)",
		fmt.Sprintf("The slowest WAL target's 15-minute fdatasync p99: orange over %s (the etcd bar), red over %s (the incident level).%s", human(p.FdatasyncSlow), human(p.FdatasyncIncidentWarning), noWAL),
		"s", steps("green", at(p.FdatasyncSlow.Seconds(), "orange"), at(p.FdatasyncIncidentWarning.Seconds(), "red")),
		q(fmt.Sprintf(`max(%s%s)`, quantileRule("fdatasync", "p99", "15m"), ti), "")).Span(6).Height(5))
	d.add(d.stat("Samples behind the p99 (15m, fewest)",
		fmt.Sprintf("The fewest fdatasync samples behind a 15-minute p99: the alerts want %d; under that a p99 is noise (red).%s", p.MinSamples, noWAL),
		"none", steps("red", at(float64(p.MinSamples), "green")),
		q(fmt.Sprintf(`min(%s%s)`, samplesRule("fdatasync", "15m"), ti), "")).Span(6).Height(5))
	d.add(d.stat("Stalled WAL targets",
		fmt.Sprintf("WAL probe targets with an fdatasync stuck right now; DiskcanaryProbeStalled pages after %s. Anything but 0 is red.", promDuration(p.StallFor)),
		"none", steps("green", at(1, "red")),
		q(fmt.Sprintf(`count(diskcanary_probe_stalled%s == 1 and on (%s) diskcanary_probe_target_info%s) or vector(0)`, ti, p.withCluster("job", "instance", "probe"), d.sel(`job="$job"`, `instance=~"$instance"`, `kind="wal"`)), "")).Span(6).Height(5))
	d.add(withLines(d.timeseries(fmt.Sprintf("diskcanary fdatasync p99 (5m) and the incident levels (%s, %s)", human(p.FdatasyncIncidentWarning), human(p.FdatasyncIncidentCritical)),
		fmt.Sprintf("Each WAL target's 5-minute fdatasync p99 against the etcd-mixin's incident levels, which DiskcanaryFdatasyncVerySlow (%s) and DiskcanaryFdatasyncCritical (%s) alert on after %s.%s", human(p.FdatasyncIncidentWarning), human(p.FdatasyncIncidentCritical), promDuration(p.FdatasyncIncidentFor), noWAL), "s",
		q(fmt.Sprintf(`%s%s`, quantileRule("fdatasync", "p99", "5m"), ti), "{{instance}} {{path}}")),
		at(p.FdatasyncIncidentWarning.Seconds(), "orange"), at(p.FdatasyncIncidentCritical.Seconds(), "red")).Span(24).Height(8))
	return d
}

// pct renders a ratio as a percentage for people: 0.8 → 80 %.
func pct(r float64) string { return num(r*100) + " %" }

// durationOf is seconds as a time.Duration, for human().
func durationOf(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }
