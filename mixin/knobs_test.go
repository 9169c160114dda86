package mixin_test

import (
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/google/go-jsonnet"
	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"

	"github.com/diskcanary/diskcanary/tools/rulegen"
)

// TestMixinConfigDefaultsAreTheGenerators: _config's grafanaURL,
// jobSelector and thresholds are the generator's defaults, by name
// (rulegen.Knobs).
func TestMixinConfigDefaultsAreTheGenerators(t *testing.T) {
	out, err := jsonnet.MakeVM().EvaluateAnonymousSnippet("mixin_test.jsonnet", `(import 'mixin.libsonnet')._config`)
	require.NoError(t, err)
	var cfg map[string]any
	require.NoError(t, json.Unmarshal([]byte(out), &cfg))
	want, err := json.Marshal(rulegen.KnobValues(rulegen.Defaults()))
	require.NoError(t, err)
	var wantCfg map[string]any
	require.NoError(t, json.Unmarshal(want, &wantCfg))
	for k, v := range wantCfg {
		require.Equal(t, v, cfg[k], k)
	}
}

// TestMixinConfigKnobs: _config set to other values gives exactly the rules
// the generator writes with those values as flags.
func TestMixinConfigKnobs(t *testing.T) {
	m := evaluate(t, `{
  _config+:: {
    grafanaURL: 'https://grafana.example.com/',
    jobSelector: 'job="node-canary"',
    fdatasyncSlowSeconds: 1.5,
    readSlowSeconds: 0.04,
    smartTemperatureCelsius: 70,
    wearWarningRatio: 0.75,
    wearCriticalRatio: 0.95,
    etcdSlowApplyRate: 0.5,
    etcdLeaderChanges: 10,
  },
}`)
	p := rulegen.Defaults()
	p.GrafanaURL = "https://grafana.example.com/"
	p.JobSelector = `job="node-canary"`
	p.FdatasyncSlow = 1500 * time.Millisecond
	p.ReadSlow = 40 * time.Millisecond
	p.SmartTemperatureCelsius = 70
	p.WearWarning, p.WearCritical = 0.75, 0.95
	p.EtcdSlowApplyRate, p.EtcdLeaderChanges = 0.5, 10
	files, err := rulegen.Files(p)
	require.NoError(t, err)
	var doc any
	require.NoError(t, yaml.Unmarshal(files[rulegen.RulesPath], &doc))
	var want ruleFile
	roundTrip(t, doc, &want)
	got := append(m.Rules.Groups, m.Alerts.Groups...)
	require.Equal(t, want.Groups, got)

	// Literal spot checks, so the comparison cannot pass on two equally
	// wrong sides.
	text, err := json.Marshal(got)
	require.NoError(t, err)
	for _, s := range []string{`"up{job=\"node-canary\"} == 0"`, `"fdatasync p99 above the etcd guidance of 1.5 s"`,
		`"O_DIRECT random-read p99 above 40 ms"`, `"SSD wear above 75 %"`, `0.5 or more slow applies a second, 10 or more leader changes in 15m`, `"https://grafana.example.com/d/diskcanary-node?`} {
		require.Contains(t, string(text), s)
	}
	require.NotContains(t, string(text), "[[")
}

// TestJsonnetfile: jsonnetfile.json is what jsonnet-bundler reads in a
// mixin's directory: no dependencies (the mixin imports only its own
// generated/), version 1.
func TestJsonnetfile(t *testing.T) {
	b, err := os.ReadFile("jsonnetfile.json")
	require.NoError(t, err)
	var jf struct {
		Version       int   `json:"version"`
		Dependencies  []any `json:"dependencies"`
		LegacyImports bool  `json:"legacyImports"`
	}
	dec := json.NewDecoder(strings.NewReader(string(b)))
	dec.DisallowUnknownFields()
	require.NoError(t, dec.Decode(&jf))
	require.Equal(t, 1, jf.Version)
	require.Empty(t, jf.Dependencies)
	require.True(t, jf.LegacyImports)
}
