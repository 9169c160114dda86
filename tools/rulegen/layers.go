package rulegen

import (
	"fmt"
	"slices"
	"strings"
)

// A fleet too large for one Prometheus is sharded by cluster: each
// cluster's Prometheus evaluates the per-node rules over its own nodes and
// remote-writes the recorded series to a global engine, whose ruler
// evaluates the rules that compare targets across clusters (docs/deploy.md,
// "Sharding by cluster"). The two rule files are the groups of Rules(p),
// split; the global one reads recorded series only, so the remote write
// can send those alone.
const (
	ClusterRulesPath = "deploy/sharded/diskcanary-cluster-rules.yml"
	GlobalRulesPath  = "deploy/sharded/diskcanary-global-rules.yml"
)

// globalGroups are the groups of the global layer: the cohort medians and
// the fleet drift alerts.
func globalGroups(p Params) []string {
	return []string{cohortRecording(p).Name, driftAlerts(p).Name}
}

// Layers splits Rules(p) into the per-cluster and the global rule files.
func Layers(p Params) (cluster, global RuleFile) {
	names := globalGroups(p)
	for _, g := range Rules(p).Groups {
		if slices.Contains(names, g.Name) {
			global.Groups = append(global.Groups, g)
		} else {
			cluster.Groups = append(cluster.Groups, g)
		}
	}
	return cluster, global
}

// GlobalInputs are the per-cluster layer's recorded series the global one
// reads: what a cluster's Prometheus remote-writes.
func GlobalInputs() []string {
	var out []string
	for _, op := range driftOps {
		out = append(out, quantileRule(op, "p99", "15m"), samplesRule(op, "15m"))
	}
	return append(out, ruleCohortInfo, ruleTargetBusy)
}

// RemoteWritePath is the remote_write a cluster's Prometheus adds.
const RemoteWritePath = "deploy/sharded/prometheus-remote-write.yml"

// RemoteWrite is the remote_write section of a cluster's prometheus.yml
// that sends the global layer its inputs, to url.
func RemoteWrite(url string) string {
	return fmt.Sprintf(`remote_write:
  - url: %s
    write_relabel_configs:
      - source_labels: [__name__]
        regex: %s
        action: keep
`, url, strings.Join(GlobalInputs(), "|"))
}

const remoteWriteHeader = `# A cluster's Prometheus in a fleet sharded by cluster (docs/deploy.md,
# "Sharding by cluster"): prometheus.yml's global external_labels name the
# cluster, rule_files load diskcanary-cluster-rules.yml, and this sends the
# recorded series the global ruler reads (diskcanary-global-rules.yml) to
# the global engine, here a VictoriaMetrics single node.
global:
  external_labels:
    cluster: CLUSTER-NAME
`
