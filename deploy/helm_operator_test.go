package deploy

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"helm.sh/helm/v3/pkg/chart/loader"

	"github.com/diskcanary/diskcanary/tools/rulegen"
)

// operatorAPI is the API group/version the Prometheus Operator's CRDs
// serve: the chart renders its ServiceMonitor and PrometheusRule only where
// the cluster has it, as the community charts do.
const operatorAPI = "monitoring.coreos.com/v1"

// TestHelmWithoutTheOperator: on a cluster without the Prometheus
// Operator's CRDs the chart installs the exporter and the dashboards only,
// whatever the switches say, and NOTES says why and what to do; with the
// API both objects are there.
func TestHelmWithoutTheOperator(t *testing.T) {
	for _, values := range []string{"", "serviceMonitor: {enabled: true}\nprometheusRule: {enabled: true}\n"} {
		m := decodeChartOn(t, values)
		checkChartWiring(t, m, releaseNamespace)
		require.Nil(t, m.serviceMonitor, values)
		require.Nil(t, m.rule, values)
		require.NotNil(t, m.configMap, values)
		with := decodeChartOn(t, values, operatorAPI)
		require.NotNil(t, with.serviceMonitor, values)
		require.NotNil(t, with.rule, values)
		require.Equal(t, m.daemonSet, with.daemonSet)
	}
	// An API of the same group at another version is not the operator's v1.
	m := decodeChartOn(t, "", "monitoring.coreos.com/v1alpha1")
	require.Nil(t, m.serviceMonitor)
	require.Nil(t, m.rule)

	out, err := renderChartOn("", false)
	require.NoError(t, err)
	notes := out["diskcanary/templates/NOTES.txt"]
	require.Contains(t, notes, "No ServiceMonitor or PrometheusRule installed: this cluster serves no monitoring.coreos.com/v1 API")
	require.Contains(t, notes, "load the rules first, alerts/diskcanary-rules.yml (the diskcanary repository) in Prometheus's rule_files, or most panels stay empty.")
	require.NotContains(t, notes, "ruleSelector")
	out, err = renderChartOn("", false, operatorAPI)
	require.NoError(t, err)
	notes = out["diskcanary/templates/NOTES.txt"]
	require.NotContains(t, notes, "No ServiceMonitor")
	require.Contains(t, notes, "PrometheusRule: make sure your Prometheus's ruleSelector matches prometheusRule.additionalLabels.")
	require.Contains(t, notes, "load the rules first, as this release's PrometheusRule does once Prometheus selects it, or most panels stay empty.")
}

// TestHelmRuleSettingsAreTheGenerators: prometheusRule.grafanaURL,
// .jobSelector and .thresholds default to the generator's parameters, and
// set to other values give exactly the rules the generator writes with
// those values as flags.
func TestHelmRuleSettingsAreTheGenerators(t *testing.T) {
	out, err := renderChart("", false)
	require.NoError(t, err)
	require.NotContains(t, out["diskcanary/templates/prometheusrule.yaml"], "[[", "a placeholder left unfilled")

	p := rulegen.Defaults()
	p.GrafanaURL = "https://grafana.example.com/"
	p.JobSelector = `job="node-canary"`
	p.FdatasyncSlow = 1500 * time.Millisecond
	p.ReadSlow = 40 * time.Millisecond
	p.SmartTemperatureCelsius = 70
	p.WearWarning, p.WearCritical = 0.75, 0.95
	p.EtcdSlowApplyRate, p.EtcdLeaderChanges = 0.5, 10
	values := `
prometheusRule:
  grafanaURL: https://grafana.example.com/
  jobSelector: job="node-canary"
  thresholds: {fdatasyncSlowSeconds: 1.5, readSlowSeconds: 0.04, smartTemperatureCelsius: 70, wearWarningRatio: 0.75, wearCriticalRatio: 0.95, etcdSlowApplyRate: 0.5, etcdLeaderChanges: 10}
`
	files, err := rulegen.Files(p)
	require.NoError(t, err)
	var want struct {
		Groups []ruleGroup `json:"groups"`
	}
	require.NoError(t, decodeStrict(files[rulegen.RulesPath], &want))
	m := decodeChart(t, values)
	require.Equal(t, want.Groups, m.rule.Spec.Groups)

	// Literal spot checks, so the comparison above cannot pass on two
	// equally wrong sides.
	var slow, down rule
	for _, g := range m.rule.Spec.Groups {
		for _, r := range g.Rules {
			switch r.Alert {
			case "DiskcanaryFdatasyncSlow":
				slow = r
			case "DiskcanaryExporterDown":
				down = r
			}
		}
	}
	require.True(t, strings.HasPrefix(slow.Expr, "target:diskcanary_fdatasync_duration_seconds:p99_15m > 1.5\n"), slow.Expr)
	require.Equal(t, "fdatasync p99 above the etcd guidance of 1.5 s", slow.Annotations["summary"])
	require.True(t, strings.HasPrefix(slow.Annotations["dashboard_url"], "https://grafana.example.com/d/diskcanary-node?"), slow.Annotations["dashboard_url"])
	require.Equal(t, `up{job="node-canary"} == 0`, down.Expr)
	var verdict []string
	for _, g := range m.rule.Spec.Groups {
		for _, r := range g.Rules {
			if r.Record == "node:diskcanary_etcd_verdict:info" {
				verdict = append(verdict, r.Expr)
			}
		}
	}
	require.Contains(t, strings.Join(verdict, "\n"), "node:etcd_server_slow_apply:rate >= 0.5 or node:etcd_server_leader_changes_seen:increase >= 10 or")
}

// TestHelmRuleDefaultsAreTheGenerators: values.yaml's rule settings are
// the generator's defaults, by name (rulegen.Knobs).
func TestHelmRuleDefaultsAreTheGenerators(t *testing.T) {
	chrt, err := loader.Load(chartDir)
	require.NoError(t, err)
	vals := chrt.Values
	pr := vals["prometheusRule"].(map[string]any)
	got := map[string]any{"grafanaURL": pr["grafanaURL"], "jobSelector": pr["jobSelector"]}
	for k, v := range pr["thresholds"].(map[string]any) {
		got[k] = v
	}
	want := rulegen.KnobValues(rulegen.Defaults())
	require.Len(t, got, len(want))
	for k, v := range want {
		require.Equal(t, fmt.Sprint(v), fmt.Sprint(got[k]), k)
	}
}

// TestHelmRuleValuesAreValidated: values.schema.json refuses a misspelt
// threshold, a URL Grafana cannot be, a ratio over 1 and an empty selector.
func TestHelmRuleValuesAreValidated(t *testing.T) {
	for values, want := range map[string]string{
		`prometheusRule: {thresholds: {fdatasyncSlow: 0.02}}`:     "fdatasyncSlow",
		`prometheusRule: {thresholds: {readSlowSeconds: "25ms"}}`: "readSlowSeconds",
		`prometheusRule: {thresholds: {wearWarningRatio: 80}}`:    "wearWarningRatio",
		`prometheusRule: {thresholds: {fdatasyncSlowSeconds: 0}}`: "fdatasyncSlowSeconds",
		`prometheusRule: {grafanaURL: grafana.example.com}`:       "grafanaURL",
		`prometheusRule: {grafanaURL: "https://grafana/a'b"}`:     "grafanaURL",
		`prometheusRule: {jobSelector: ""}`:                       "jobSelector",
		`prometheusRule: {thresholds: {etcdLeaderChanges: 2.5}}`:  "etcdLeaderChanges",
	} {
		_, err := renderChart(values, false)
		require.Error(t, err, values)
		require.Contains(t, err.Error(), want, values)
	}
	_, err := renderChart(`prometheusRule: {grafanaURL: "https://grafana.example.com:3000/sub/", thresholds: {wearWarningRatio: 0.7}}`, false)
	require.NoError(t, err)
}
