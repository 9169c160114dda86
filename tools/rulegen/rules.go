package rulegen

import (
	"regexp"
	"slices"
	"strings"
	"time"
)

// The rules spell diskcanary's metric names inside their PromQL rather than
// import them from probes and collector: those would bring the daemon's
// dependencies (client_golang, x/sys, cilium/ebpf and its embedded BPF
// objects) into a go:generate program, for about 60 names. What keeps them
// right is TestExpressionsUseLiveMetrics: every metric a rule or dashboard
// reads must be on the /metrics of a diskcanary serve it starts.

// RuleFile is a Prometheus rule file.
type RuleFile struct {
	Groups []Group `yaml:"groups"`
}

// Group is one rule group; rules in a group are evaluated in order, so a
// rule may use the recording rules above it. Prometheus evaluates the
// groups side by side, each every Interval (empty: the global
// evaluation_interval).
type Group struct {
	Name     string `yaml:"name"`
	Interval string `yaml:"interval,omitempty"`
	Rules    []Rule `yaml:"rules"`
}

// Rule is a recording or an alerting rule.
type Rule struct {
	Record      string            `yaml:"record,omitempty"`
	Alert       string            `yaml:"alert,omitempty"`
	Expr        string            `yaml:"expr"`
	For         string            `yaml:"for,omitempty"`
	Labels      map[string]string `yaml:"labels,omitempty"`
	Annotations map[string]string `yaml:"annotations,omitempty"`
}

// Rules builds the whole rule file: every group of both layers, the
// recording groups first (a rule reads the groups above it at the same
// evaluation in promtool, and a group above it at most one interval old
// in Prometheus).
func Rules(p Params) RuleFile {
	var groups []Group
	probe := probeRecording(p)
	// The 15-minute probe figures (in the attribution group) before the
	// cohorts that read them.
	groups = append(groups, probe[0])
	groups = append(groups, attributionRecording(p)...)
	groups = append(groups, probe[1:]...)
	groups = append(groups, cohortTargetRecording(p), cohortRecording(p), iostatRecording(p))
	groups = append(groups,
		contentionRecording(p),
		etcdRecording(p),
		smartRecording(p),
		capacityRecording(p),
		probeAlerts(p),
		smartAlerts(p),
		errorsAlerts(p),
		collectionAlerts(p),
		contentionAlerts(p),
		driftAlerts(p),
		selfDriftAlerts(p),
		etcdAlerts(p),
	)
	for i := range groups {
		if groups[i].Interval == "" {
			groups[i].Interval = interval(p.Interval)
		}
	}
	return RuleFile{Groups: groups}
}

// withCluster joins labels for a by/on clause, the cluster label first.
func (p Params) withCluster(labels ...string) string {
	var out []string
	if p.ClusterLabel != "" && !slices.Contains(labels, p.ClusterLabel) {
		out = append(out, p.ClusterLabel)
	}
	return strings.Join(append(out, labels...), ", ")
}

// instanceLabels identify one diskcanary (and so one node's disks);
// deviceLabels one block device of one instance.
func (p Params) instanceLabels() string { return p.withCluster("job", "instance") }

func (p Params) deviceLabels() string { return p.withCluster("job", "instance", "device") }

func (p Params) target() string { return p.withCluster(p.TargetLabels...) }

// alert builds an alerting rule with the runbook link every alert carries.
func (p Params) alert(name, severity string, expr string, forDur time.Duration, summary, description string) Rule {
	r := Rule{
		Alert:  name,
		Expr:   expr,
		Labels: map[string]string{"severity": severity},
		Annotations: map[string]string{
			"summary":     summary,
			"description": p.clusterQueries(description),
			"runbook_url": p.RunbookBase + "#" + strings.ToLower(name),
		},
	}
	if forDur > 0 {
		r.For = promDuration(forDur)
	}
	return r
}

// The dashboards' UIDs: alerts link to them (dashboard_url).
const (
	dashboardFleet = "diskcanary-fleet"
	dashboardNode  = "diskcanary-node"
	dashboardEtcd  = "diskcanary-etcd"
)

// dashboardURL is the link to a dashboard (its uid) with its variables
// (name, or name=label where the variable and the label differ) set from
// an alert's labels, and its cluster.
func (p Params) dashboardURL(uid string, vars ...string) string {
	var q []string
	if p.ClusterLabel != "" {
		vars = append([]string{"cluster=" + p.ClusterLabel}, vars...)
	}
	for _, v := range vars {
		name, label, ok := strings.Cut(v, "=")
		if !ok {
			label = name
		}
		q = append(q, "var-"+name+"={{ $labels."+label+" | urlquery }}")
	}
	return strings.TrimSuffix(p.GrafanaURL, "/") + "/d/" + uid + "?" + strings.Join(q, "&")
}

// linkDashboard sets the dashboard_url of every alert in g that has none.
func (p Params) linkDashboard(g Group, uid string, vars ...string) Group {
	url := p.dashboardURL(uid, vars...)
	for i, r := range g.Rules {
		if _, ok := r.Annotations["dashboard_url"]; r.Alert != "" && !ok {
			g.Rules[i].Annotations["dashboard_url"] = url
		}
	}
	return g
}

// templateQuery is a query an alert text runs when it renders:
// printf "FORMAT" ARGS | query.
var templateQuery = regexp.MustCompile(`printf "([^"]*)" ([^|}]*)\| query`)

// clusterQueries makes the queries in an alert text select the alert's
// cluster as well as its instance: in a global ruler, instance names
// repeat across clusters.
func (p Params) clusterQueries(text string) string {
	if p.ClusterLabel == "" {
		return text
	}
	return templateQuery.ReplaceAllStringFunc(text, func(m string) string {
		g := templateQuery.FindStringSubmatch(m)
		format := strings.ReplaceAll(g[1], "{instance=%q", "{"+p.ClusterLabel+"=%q,instance=%q")
		args := strings.ReplaceAll(g[2], "$labels.instance", "$labels."+p.ClusterLabel+" $labels.instance")
		return `printf "` + format + `" ` + args + "| query"
	})
}

const onTarget = "{{ $labels.instance }} probe {{ $labels.probe }} ({{ $labels.path }} on {{ $labels.device }})"

// valueDuration and valuePercent render the alert's value (the left side
// of its comparison: the latency, the age, the ratio) in an alert text.
const (
	valueDuration = "{{ $value | humanizeDuration }}"
	valuePercent  = "{{ $value | humanizePercentage }}"
)
