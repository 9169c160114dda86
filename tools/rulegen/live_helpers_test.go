package rulegen

import (
	"context"
	"fmt"
	"net/http"
	"os/exec"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/diskcanary/diskcanary/internal/testkit"
)

// daemon is a diskcanary serve started by a test.
type daemon struct {
	cmd  *exec.Cmd
	addr string
	url  string
}

// startServe runs `diskcanary serve` on a free port and waits for /metrics.
func startServe(t *testing.T, bin string, args ...string) *daemon {
	t.Helper()
	addr := testkit.FreeAddr(t)
	p := testkit.StartProcess(t, bin, append([]string{"serve", "--web.listen-address", addr, "--log.level", "warn"}, args...)...)
	d := &daemon{cmd: p.Cmd, addr: addr, url: "http://" + addr + "/metrics"}
	p.WaitListening(t, addr, 30*time.Second)
	return d
}

// scrape reads a /metrics page into metric families.
func scrape(t *testing.T, url string) map[string]*dto.MetricFamily {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	req.Header.Set("Accept", "text/plain; version=0.0.4")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("scrape %s: %v", url, err)
	}
	defer resp.Body.Close()
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("parse %s: %v", url, err)
	}
	return fams
}

// grafanaVars resolves a dashboard's template variables against a live
// Prometheus the way Grafana does when the dashboard loads: in order, each
// query interpolated with the values before it, label_values(selector,
// label) as the label's values on the selector's series, query_result(expr)
// as Grafana's result lines (name{label="value",...} value timestamp)
// filtered by the variable's regex, sorted as the variable says. A
// variable takes pick[name] when given, else All for one that includes
// All, else its first option. It returns the raw values (All is "$__all")
// and each variable's options.
func grafanaVars(t *testing.T, prom *testkit.Prometheus, d gDashboard, pick map[string]string) (values map[string]string, options map[string][]string) {
	t.Helper()
	values, options = map[string]string{}, map[string][]string{}
	for _, v := range d.Templating.List {
		if v.Type != "query" {
			continue
		}
		def := interpolate(t, d, v.Definition, values)
		var opts []string
		seen := map[string]bool{}
		addOpt := func(s string) {
			if s != "" && !seen[s] {
				seen[s] = true
				opts = append(opts, s)
			}
		}
		if m := labelValues.FindStringSubmatch(def); m != nil {
			for _, s := range prom.Query(t, fmt.Sprintf("group by (%s) (%s)", m[2], m[1])) {
				addOpt(s.Metric[m[2]])
			}
		} else if m := queryResult.FindStringSubmatch(def); m != nil {
			var re *regexp.Regexp
			if v.Regex != "" {
				re = regexp.MustCompile(strings.TrimSuffix(strings.TrimPrefix(v.Regex, "/"), "/"))
			}
			for _, s := range prom.Query(t, m[1]) {
				line := grafanaResultLine(s)
				if re == nil {
					addOpt(line)
				} else if sm := re.FindStringSubmatch(line); sm != nil {
					addOpt(sm[len(sm)-1])
				}
			}
		} else {
			t.Fatalf("%s: variable %s: unknown query %s", d.UID, v.Name, def)
		}
		if v.Sort == 1 {
			sort.Strings(opts)
		}
		options[v.Name] = opts
		switch {
		case pick[v.Name] != "":
			values[v.Name] = pick[v.Name]
		case v.IncludeAll:
			values[v.Name] = "$__all"
		case len(opts) > 0:
			values[v.Name] = opts[0]
		default:
			values[v.Name] = ""
		}
	}
	return values, options
}

// grafanaResultLine is one line of Grafana's query_result: the metric name,
// its labels sorted, the value and the timestamp in milliseconds.
func grafanaResultLine(s testkit.Sample) string {
	var ls []string
	for k, v := range s.Metric {
		if k != "__name__" {
			ls = append(ls, fmt.Sprintf("%s=%q", k, v))
		}
	}
	sort.Strings(ls)
	ts, _ := s.Value[0].(float64)
	return fmt.Sprintf("%s{%s} %v %d", s.Metric["__name__"], strings.Join(ls, ","), s.Value[1], int64(ts*1000))
}

// interpolate replaces a dashboard's variables in a query as Grafana's
// Prometheus data source does: All becomes the variable's all value; a
// value of a variable that can hold several is regex-escaped (inside a
// PromQL string); Grafana's own $__ variables become 1m.
func interpolate(t *testing.T, d gDashboard, q string, values map[string]string) string {
	t.Helper()
	vars := map[string]gVar{}
	for _, v := range d.Templating.List {
		vars[v.Name] = v
	}
	return grafanaVar.ReplaceAllStringFunc(q, func(m string) string {
		name := grafanaVar.FindStringSubmatch(m)[1]
		if strings.HasPrefix(name, "__") {
			return "1m"
		}
		val, ok := values[name]
		if !ok {
			t.Errorf("%s: no value for $%s in %s", d.UID, name, q)
			return m
		}
		v := vars[name]
		if val == "$__all" {
			return v.AllValue
		}
		if v.Multi || v.IncludeAll {
			return strings.ReplaceAll(regexp.QuoteMeta(val), `\`, `\\`)
		}
		return val
	})
}
