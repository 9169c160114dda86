// Package mixin_test evaluates mixin.libsonnet with go-jsonnet, the
// evaluator jsonnet-bundler users and kube-prometheus run, against what
// tools/rulegen generates now.
package mixin_test

import (
	"encoding/json"
	"os"
	"path"
	"strings"
	"testing"

	"github.com/google/go-jsonnet"
	"github.com/google/go-jsonnet/formatter"
	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"

	"github.com/diskcanary/diskcanary/tools/rulegen"
)

// mixinOutput is what a kube-prometheus set-up reads from a mixin.
type mixinOutput struct {
	Rules      ruleFile       `json:"rules"`
	Alerts     ruleFile       `json:"alerts"`
	Dashboards map[string]any `json:"dashboards"`
}

type ruleFile struct {
	Groups []map[string]any `json:"groups"`
}

// evaluate imports mixin.libsonnet the way a user's jsonnet does, with
// overrides (a jsonnet object expression) added to it.
func evaluate(t *testing.T, overrides string) mixinOutput {
	t.Helper()
	vm := jsonnet.MakeVM()
	snippet := `local mixin = (import 'mixin.libsonnet') + ` + overrides + `;
{
  rules: mixin.prometheusRules,
  alerts: mixin.prometheusAlerts,
  dashboards: mixin.grafanaDashboards,
}`
	// The file name places the snippet in this directory, where imports resolve.
	out, err := vm.EvaluateAnonymousSnippet("mixin_test.jsonnet", snippet)
	require.NoError(t, err)
	var m mixinOutput
	require.NoError(t, json.Unmarshal([]byte(out), &m))
	return m
}

// generated is the generator's output now, in the shapes the mixin returns.
func generated(t *testing.T) (groups []map[string]any, dashboards map[string]any) {
	t.Helper()
	files, err := rulegen.Files(rulegen.Defaults())
	require.NoError(t, err)
	var doc any
	require.NoError(t, yaml.Unmarshal(files[rulegen.RulesPath], &doc))
	var rules ruleFile
	roundTrip(t, doc, &rules)
	require.NotEmpty(t, rules.Groups)
	dashboards = map[string]any{}
	for name, b := range files {
		if dir, base := path.Split(name); dir == "dashboards/" {
			var d any
			require.NoError(t, json.Unmarshal(b, &d), name)
			dashboards[base] = d
		}
	}
	require.NotEmpty(t, dashboards)
	return rules.Groups, dashboards
}

// roundTrip converts v into out through JSON, so both sides compare as
// JSON values (float64 numbers, map[string]any objects).
func roundTrip(t *testing.T, v, out any) {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(b, out))
}

func rules(g map[string]any) []map[string]any {
	var out []map[string]any
	for _, r := range g["rules"].([]any) {
		out = append(out, r.(map[string]any))
	}
	return out
}

// TestMixinIsTheGeneratedRulesAndDashboards: with no overrides the mixin is
// exactly the generator's rules, split into recording groups
// (prometheusRules) and alert groups (prometheusAlerts) in the generated
// order, and its dashboards.
func TestMixinIsTheGeneratedRulesAndDashboards(t *testing.T) {
	wantGroups, wantDashboards := generated(t)
	m := evaluate(t, "{}")

	require.NotEmpty(t, m.Rules.Groups)
	require.NotEmpty(t, m.Alerts.Groups)
	for _, g := range m.Rules.Groups {
		for _, r := range rules(g) {
			require.Contains(t, r, "record", g["name"])
		}
	}
	for _, g := range m.Alerts.Groups {
		alerts := 0
		for _, r := range rules(g) {
			if _, ok := r["alert"]; ok {
				alerts++
			}
		}
		require.Positive(t, alerts, "%s: a group without alerts is in prometheusAlerts", g["name"])
	}
	// Recording groups come first in the rule file, so the two lists put
	// back together are the file, in order; kube-prometheus concatenates
	// them into one PrometheusRule, where a repeated group name is refused.
	require.Equal(t, wantGroups, append(m.Rules.Groups, m.Alerts.Groups...))
	names := map[any]bool{}
	for _, g := range wantGroups {
		require.False(t, names[g["name"]], "group %s twice", g["name"])
		names[g["name"]] = true
	}

	require.Equal(t, wantDashboards, m.Dashboards)
	require.Len(t, m.Dashboards, 3, "fleet, node and etcd")
}

// TestMixinConfig: each _config field changes what it says and nothing else.
func TestMixinConfig(t *testing.T) {
	wantGroups, wantDashboards := generated(t)
	m := evaluate(t, `{
  _config+:: {
    alertLabels: { team: 'storage', severity: 'ignored' },
    runbookURLBase: 'https://wiki.example.com/storage/diskcanary',
    dashboardTags: ['storage', 'kubernetes'],
    dashboardRefresh: '30s',
    dashboardTimezone: 'utc',
  },
}`)

	// Recording rules untouched: a label there would change the series.
	require.Equal(t, wantGroups[:len(m.Rules.Groups)], m.Rules.Groups)

	var fdatasyncSlow map[string]any
	alerts := 0
	for gi, g := range m.Alerts.Groups {
		want := wantGroups[len(m.Rules.Groups)+gi]
		require.Equal(t, want["name"], g["name"])
		for ri, r := range rules(g) {
			orig := rules(want)[ri]
			name, ok := r["alert"]
			if !ok {
				require.Equal(t, orig, r)
				continue
			}
			alerts++
			if name == "DiskcanaryFdatasyncSlow" {
				fdatasyncSlow = r
			}
			labels := r["labels"].(map[string]any)
			require.Equal(t, "storage", labels["team"], name)
			require.Equal(t, orig["labels"].(map[string]any)["severity"], labels["severity"], "%s: its own severity wins", name)
			url := r["annotations"].(map[string]any)["runbook_url"].(string)
			require.True(t, strings.HasPrefix(url, "https://wiki.example.com/storage/diskcanary#"), url)
			// Put back what the config changed: the rest is the generated alert.
			var back map[string]any
			roundTrip(t, r, &back)
			delete(back["labels"].(map[string]any), "team")
			back["annotations"].(map[string]any)["runbook_url"] = orig["annotations"].(map[string]any)["runbook_url"]
			require.Equal(t, orig, back)
		}
	}
	require.Positive(t, alerts)
	require.NotNil(t, fdatasyncSlow)
	require.Equal(t, "https://wiki.example.com/storage/diskcanary#diskcanaryfdatasyncslow",
		fdatasyncSlow["annotations"].(map[string]any)["runbook_url"])
	require.Equal(t, map[string]any{"team": "storage", "severity": "warning"}, fdatasyncSlow["labels"])

	require.Equal(t, len(wantDashboards), len(m.Dashboards))
	for name, d := range m.Dashboards {
		got := d.(map[string]any)
		require.Equal(t, []any{"storage", "kubernetes"}, got["tags"], name)
		require.Equal(t, "30s", got["refresh"], name)
		require.Equal(t, "utc", got["timezone"], name)
		var back map[string]any
		roundTrip(t, got, &back)
		want := wantDashboards[name].(map[string]any)
		for _, k := range []string{"tags", "refresh", "timezone"} {
			back[k] = want[k]
		}
		require.Equal(t, want, back, name)
	}
}

// TestMixinIsFormatted: mixin.libsonnet is as jsonnetfmt writes it.
func TestMixinIsFormatted(t *testing.T) {
	src, err := os.ReadFile("mixin.libsonnet")
	require.NoError(t, err)
	out, err := formatter.Format("mixin.libsonnet", string(src), formatter.DefaultOptions())
	require.NoError(t, err)
	require.Equal(t, out, string(src), "run: jsonnetfmt -i mixin/mixin.libsonnet")
}
