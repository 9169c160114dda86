package rulegen

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// TestRuleTemplateHoldsEveryKnob: each knob's placeholders are in the rule
// template, where the rule file has its value, and the template is the
// same whatever the knobs' values (makeTemplate checks that filling it in
// gives the rule file back).
func TestRuleTemplateHoldsEveryKnob(t *testing.T) {
	tmpl, err := RuleTemplate(Defaults())
	if err != nil {
		t.Fatal(err)
	}
	text := func(v any) string { b, _ := json.Marshal(v); return string(b) }
	got := text(tmpl)
	for placeholder, count := range map[string]int{
		"[[grafanaURL]]": 41, "[[jobSelector]]": 1,
		"[[fdatasyncSlowSeconds]]": 25, "[[fdatasyncSlowSeconds.human]]": 2,
		"[[readSlowSeconds]]": 7, "[[readSlowSeconds.human]]": 2,
		"[[smartTemperatureCelsius]]": 2,
		"[[wearWarningRatio]]":        1, "[[wearWarningRatio.percent]]": 2,
		"[[wearCriticalRatio]]": 1, "[[wearCriticalRatio.percent]]": 2,
		"[[etcdSlowApplyRate]]": 5, "[[etcdLeaderChanges]]": 5,
	} {
		if n := strings.Count(got, placeholder); n != count {
			t.Errorf("%s: %d in the template, want %d", placeholder, n, count)
		}
	}
	for _, gone := range []string{"localhost:3000", `job="diskcanary"`, "> 0.01\\n", "above 80 %", "> 65 "} {
		if strings.Contains(got, gone) {
			t.Errorf("the template still holds %q", gone)
		}
	}
	p := Defaults()
	p.GrafanaURL = "https://grafana.example.com/"
	p.JobSelector = `job="node-canary"`
	p.FdatasyncSlow = 1500 * time.Millisecond
	p.ReadSlow = 40 * time.Millisecond
	p.SmartTemperatureCelsius = 70
	p.WearWarning, p.WearCritical = 0.75, 0.95
	p.EtcdSlowApplyRate, p.EtcdLeaderChanges = 0.5, 10
	other, err := RuleTemplate(p)
	if err != nil {
		t.Fatal(err)
	}
	if text(other) != got {
		t.Error("the template changes with the knobs' values")
	}
	want := map[string]any{"grafanaURL": "https://grafana.example.com/", "jobSelector": `job="node-canary"`,
		"fdatasyncSlowSeconds": 1.5, "readSlowSeconds": 0.04, "smartTemperatureCelsius": 70.0,
		"wearWarningRatio": 0.75, "wearCriticalRatio": 0.95, "etcdSlowApplyRate": 0.5, "etcdLeaderChanges": 10}
	if text(KnobValues(p)) != text(want) {
		t.Errorf("KnobValues: %s, want %s", text(KnobValues(p)), text(want))
	}
}
