package rulegen

import (
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
	"time"
)

// A Knob is a parameter that installers set without running the generator:
// the Helm chart's prometheusRule values and the mixin's _config. Their
// copies of the rule file (copies.go) hold it as placeholders, [[Name]] and
// [[Name.form]], which the chart's template and mixin.libsonnet fill in:
//
//	[[Name]]          the value as given (seconds for a latency, a ratio, °C)
//	[[Name.human]]    a latency as the alert text writes it: 10 ms, 1.5 s
//	[[Name.percent]]  a ratio as a percentage: 80
//
// The placeholders are made by generating the rules with an odd sentinel
// value for each knob and replacing its text; makeTemplate proves that
// filling in the given parameters gives back exactly Rules(p).
type Knob struct {
	Name     string
	value    func(Params) any // the Helm value and _config field: a float64 or a string
	sentinel func(*Params)
	forms    []knobForm
}

type knobForm struct {
	suffix   string              // "", ".human", ".percent"
	sentinel string              // the text the sentinel value gives
	format   func(Params) string // the text the real value gives
}

// Knobs are the parameters the chart and the mixin expose: where Grafana
// is (every alert's dashboard_url), the scrape job, the thresholds of the
// main alerts, and what the etcd verdict counts as trouble.
var Knobs = []Knob{
	{Name: "grafanaURL",
		value:    func(p Params) any { return p.GrafanaURL },
		sentinel: func(p *Params) { p.GrafanaURL = "http://grafana.knob.invalid" },
		forms:    []knobForm{{"", "http://grafana.knob.invalid", func(p Params) string { return strings.TrimSuffix(p.GrafanaURL, "/") }}}},
	{Name: "jobSelector",
		value:    func(p Params) any { return p.JobSelector },
		sentinel: func(p *Params) { p.JobSelector = `job="knob.invalid"` },
		forms:    []knobForm{{"", `job="knob.invalid"`, func(p Params) string { return p.JobSelector }}}},
	latencyKnob("fdatasyncSlowSeconds", func(p *Params) *time.Duration { return &p.FdatasyncSlow }, 10062500),
	latencyKnob("readSlowSeconds", func(p *Params) *time.Duration { return &p.ReadSlow }, 25062500),
	{Name: "smartTemperatureCelsius",
		value:    func(p Params) any { return p.SmartTemperatureCelsius },
		sentinel: func(p *Params) { p.SmartTemperatureCelsius = 65.25 },
		forms:    []knobForm{{"", "65.25", func(p Params) string { return num(p.SmartTemperatureCelsius) }}}},
	ratioKnob("wearWarningRatio", func(p *Params) *float64 { return &p.WearWarning }, 0.8125),
	ratioKnob("wearCriticalRatio", func(p *Params) *float64 { return &p.WearCritical }, 0.9375),
	{Name: "etcdSlowApplyRate",
		value:    func(p Params) any { return p.EtcdSlowApplyRate },
		sentinel: func(p *Params) { p.EtcdSlowApplyRate = 0.171875 },
		forms:    []knobForm{{"", "0.171875", func(p Params) string { return num(p.EtcdSlowApplyRate) }}}},
	{Name: "etcdLeaderChanges",
		value:    func(p Params) any { return float64(p.EtcdLeaderChanges) },
		sentinel: func(p *Params) { p.EtcdLeaderChanges = 9173 },
		forms:    []knobForm{{"", "9173", func(p Params) string { return fmt.Sprint(p.EtcdLeaderChanges) }}}},
}

// latencyKnob: the sentinel is a number of nanoseconds whose seconds and
// milliseconds appear nowhere else in the rules.
func latencyKnob(name string, field func(*Params) *time.Duration, sentinel time.Duration) Knob {
	get := func(p Params) time.Duration { return *field(&p) }
	return Knob{Name: name,
		value:    func(p Params) any { return get(p).Seconds() },
		sentinel: func(p *Params) { *field(p) = sentinel },
		forms: []knobForm{
			{"", seconds(sentinel), func(p Params) string { return seconds(get(p)) }},
			{".human", human(sentinel), func(p Params) string { return human(get(p)) }},
		}}
}

// ratioKnob: the sentinel is a binary fraction, so its percentage is exact.
func ratioKnob(name string, field func(*Params) *float64, sentinel float64) Knob {
	get := func(p Params) float64 { return *field(&p) }
	return Knob{Name: name,
		value:    func(p Params) any { return get(p) },
		sentinel: func(p *Params) { *field(p) = sentinel },
		forms: []knobForm{
			{"", num(sentinel), func(p Params) string { return num(get(p)) }},
			{".percent", num(sentinel * 100), func(p Params) string { return num(get(p) * 100) }},
		}}
}

// KnobValues are the knobs' values in p, by name: the chart's and the
// mixin's defaults are Defaults()'s (tests compare them).
func KnobValues(p Params) map[string]any {
	out := map[string]any{}
	for _, k := range Knobs {
		out[k.Name] = k.value(p)
	}
	return out
}

// placeholder is the text a knob's form takes in the template.
func placeholder(name, suffix string) string { return "[[" + name + suffix + "]]" }

// RuleTemplate is Rules(p) with every knob as its placeholders, for the
// chart's and the mixin's copies.
func RuleTemplate(p Params) (RuleFile, error) { return makeTemplate(p) }

func makeTemplate(p Params) (RuleFile, error) {
	if strings.Contains(fmt.Sprint(Rules(p)), "[[") {
		return RuleFile{}, fmt.Errorf("the rules hold [[, which the template's placeholders use")
	}
	s := p
	for _, k := range Knobs {
		k.sentinel(&s)
	}
	var toPlaceholder, toValue []string
	for _, k := range Knobs {
		for _, f := range k.forms {
			toPlaceholder = append(toPlaceholder, f.sentinel, placeholder(k.Name, f.suffix))
			toValue = append(toValue, placeholder(k.Name, f.suffix), f.format(p))
		}
	}
	tmpl := mapStrings(Rules(s), strings.NewReplacer(toPlaceholder...).Replace)
	// A knob that feeds a number derived from it, or a sentinel text that
	// occurs by chance, would leave the template wrong for other values.
	if back := mapStrings(tmpl, strings.NewReplacer(toValue...).Replace); !reflect.DeepEqual(back, Rules(p)) {
		return RuleFile{}, fmt.Errorf("the rule template filled in with the parameters is not the rule file")
	}
	return tmpl, nil
}

// mapStrings applies f to every expression, label and annotation value.
func mapStrings(rf RuleFile, f func(string) string) RuleFile {
	out := RuleFile{}
	for _, g := range rf.Groups {
		ng := Group{Name: g.Name, Interval: g.Interval}
		for _, r := range g.Rules {
			r.Expr = f(r.Expr)
			r.Labels = mapValues(r.Labels, f)
			r.Annotations = mapValues(r.Annotations, f)
			ng.Rules = append(ng.Rules, r)
		}
		out.Groups = append(out.Groups, ng)
	}
	return out
}

func mapValues(m map[string]string, f func(string) string) map[string]string {
	if m == nil {
		return nil
	}
	out := make(map[string]string, len(m))
	for _, k := range slices.Sorted(maps.Keys(m)) {
		out[k] = f(m[k])
	}
	return out
}
