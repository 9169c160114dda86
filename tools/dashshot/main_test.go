package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"image"
	"image/png"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// onCall is the generated on-call dashboard of this checkout.
var onCall = filepath.Join("..", "..", "dashboards", "diskcanary-node.json")

// onCallShape is what the on-call dashboard's JSON says dashshot must
// draw: its panels that are not rows, and its height in grid units.
func onCallShape(t *testing.T) (panels, height int) {
	t.Helper()
	b, err := os.ReadFile(onCall)
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Panels []struct {
			Type    string
			GridPos struct{ Y, H int }
		}
	}
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatal(err)
	}
	for _, p := range d.Panels {
		if p.Type != "row" {
			panels++
		}
		height = max(height, p.GridPos.Y+p.GridPos.H)
	}
	// The generator's on-call dashboard has had these since it began.
	if panels < 28 || height < 87 {
		t.Fatalf("%s: %d panels, %d grid units high: not the on-call dashboard", onCall, panels, height)
	}
	return panels, height
}

// fakeProm answers the Prometheus API with made-up series: label values
// for the variables, a histogram's cumulative buckets for _bucket queries,
// two series for other range queries and one for instant ones. It records
// every query it was asked.
func fakeProm(t *testing.T, queries *[]string) *httptest.Server {
	t.Helper()
	ok := func(w http.ResponseWriter, data any) {
		_ = json.NewEncoder(w).Encode(map[string]any{"status": "success", "data": data})
	}
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		q := r.FormValue("query")
		switch {
		case strings.HasPrefix(r.URL.Path, "/api/v1/label/"):
			ok(w, []string{"b-" + strings.TrimSuffix(strings.TrimPrefix(r.URL.Path, "/api/v1/label/"), "/values"), "a-value"})
		case r.URL.Path == "/api/v1/query" && strings.HasPrefix(q, "max by (disk)"):
			*queries = append(*queries, q)
			ok(w, map[string]any{"resultType": "vector", "result": []any{
				map[string]any{"metric": map[string]string{"disk": "loop7"}, "value": []any{1000.0, "1"}}}})
		case r.URL.Path == "/api/v1/query":
			*queries = append(*queries, q)
			ok(w, map[string]any{"resultType": "vector", "result": []any{
				map[string]any{"metric": map[string]string{"probe": "wal", "device": "loop7", "verdict": "stack"}, "value": []any{1000.0, "1"}}}})
		case r.URL.Path == "/api/v1/query_range":
			*queries = append(*queries, q)
			var res []any
			start, end := parseF(r.FormValue("start")), parseF(r.FormValue("end"))
			step := parseF(r.FormValue("step"))
			curve := func(labels map[string]string, f func(x float64) float64) {
				var vals []any
				for ts := start; ts <= end; ts += step {
					vals = append(vals, []any{ts, fmt.Sprint(f((ts - start) / (end - start)))})
				}
				res = append(res, map[string]any{"metric": labels, "values": vals})
			}
			if strings.Contains(q, "_bucket") {
				for i, le := range []string{"0.001", "0.002", "0.004", "0.008", "+Inf"} {
					curve(map[string]string{"le": le}, func(x float64) float64 { return float64(i+1) * 10 * (1 + x) })
				}
			} else {
				curve(map[string]string{"probe": "wal"}, func(x float64) float64 { return 0.002 + 0.03*x })
				curve(map[string]string{"probe": "randread"}, func(x float64) float64 { return 0.001 + 0.001*math.Sin(6*x) })
			}
			ok(w, map[string]any{"resultType": "matrix", "result": res})
		default:
			http.NotFound(w, r)
		}
	}))
}

func parseF(s string) float64 {
	var f float64
	_, _ = fmt.Sscan(s, &f)
	return f
}

func runShot(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code := run(args, &out, &errOut)
	return code, out.String(), errOut.String()
}

// The on-call dashboard against the fake Prometheus: every query has its
// variables and Grafana macros replaced (first value of each variable, All
// for probe, the disk from query_result through the variable's regex);
// the PNG is as wide as asked, one panel per non-row panel of the
// dashboard, each with the series the fake returned for it.
func TestDrawsTheOnCallDashboard(t *testing.T) {
	var queries []string
	srv := fakeProm(t, &queries)
	defer srv.Close()
	out := filepath.Join(t.TempDir(), "d.png")
	code, stdout, stderr := runShot(t, "-prometheus", srv.URL, "-o", out, "-range", "30m", "-end", "2026-11-28T12:00:00Z",
		"-scrape-interval", "5s", "-json", "-var", "job=diskcanary", onCall)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var s summary
	if err := json.Unmarshal([]byte(stdout), &s); err != nil {
		t.Fatalf("-json: %v\n%s", err, stdout)
	}
	want := map[string]string{"job": "diskcanary", "instance": "a-value", "probe": "$__all", "disk": "loop7", "cluster": "$__all"}
	for k, v := range want {
		if s.Variables[k] != v {
			t.Errorf("variable %s = %q, want %q", k, s.Variables[k], v)
		}
	}
	for _, q := range queries {
		if strings.Contains(strings.ReplaceAll(q, `"$1"`, ""), "$") {
			t.Errorf("a query still has a variable: %s", q)
		}
	}
	// step 30m/240 = 8s (over the 5 s scrape interval): rate interval
	// max(8s+5s, 4×5s) = 20s.
	joined := strings.Join(queries, "\n")
	for _, w := range []string{`[20s]`, `instance="a-value"`, `probe=~".*"`, `device="loop7"`, `job="diskcanary"`} {
		if !strings.Contains(joined, w) {
			t.Errorf("no query has %s", w)
		}
	}
	wantPanels, gridH := onCallShape(t)
	if len(s.Panels) != wantPanels {
		t.Errorf("%d panels drawn, want the dashboard's %d", len(s.Panels), wantPanels)
	}
	for _, p := range s.Panels {
		if p.Error != "" || p.Series == 0 {
			t.Errorf("panel %q: %d series, error %q", p.Title, p.Series, p.Error)
		}
		if p.Box[2] < 100 || p.Box[3] < 80 || p.Box[0]+p.Box[2] > s.Width || p.Box[1]+p.Box[3] > s.Height {
			t.Errorf("panel %q at %v, outside the %dx%d picture or too small", p.Title, p.Box, s.Width, s.Height)
		}
	}
	f, err := os.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatal(err)
	}
	if b := img.Bounds(); b.Dx() != 1600 || b.Dy() != s.Height || s.Height != headerH+gridH*unitH {
		t.Errorf("picture %v, height %d in -json; want 1600 wide, %d high", b, s.Height, headerH+gridH*unitH)
	}
	checkColors(t, img, s, themes["light"])

	// The dark theme, narrower.
	queries = nil
	code, stdout, stderr = runShot(t, "-prometheus", srv.URL, "-o", out, "-theme", "dark", "-width", "1000", "-json",
		"-var", "probe=wal", "-var", "cluster=All", "-var", "instance=h:1", onCall)
	if code != 0 {
		t.Fatalf("dark: exit %d: %s", code, stderr)
	}
	if err := json.Unmarshal([]byte(stdout), &s); err != nil {
		t.Fatal(err)
	}
	g, err := os.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	if img, err = png.Decode(g); err != nil {
		t.Fatal(err)
	}
	joined = strings.Join(queries, "\n")
	for _, w := range []string{`instance="h:1"`, `probe=~"wal"`, `cluster=~".*"`} {
		if !strings.Contains(joined, w) {
			t.Errorf("with -var: no query has %s", w)
		}
	}
	if img.Bounds().Dx() != 1000 || s.Width != 1000 {
		t.Errorf("dark picture %v, -json width %d; want 1000", img.Bounds(), s.Width)
	}
	checkColors(t, img, s, themes["dark"])
}

// checkColors checks the picture's background and each panel's bottom
// right corner inside its border against the theme.
func checkColors(t *testing.T, img image.Image, s summary, th theme) {
	t.Helper()
	if got := img.At(2, 2); fmt.Sprint(got) != fmt.Sprint(th.bg) {
		t.Errorf("background %v, want %v", got, th.bg)
	}
	for _, p := range s.Panels {
		x, y := p.Box[0]+p.Box[2]-3, p.Box[1]+p.Box[3]-3
		if got := img.At(x, y); fmt.Sprint(got) != fmt.Sprint(th.panel) {
			t.Errorf("panel %q: pixel (%d, %d) is %v, not the panel colour %v", p.Title, x, y, got, th.panel)
		}
	}
}

// Usage errors exit 64 and write nothing; a Prometheus that does not
// answer exits 1.
func TestUsageErrors(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "x.png")
	notDash := filepath.Join(dir, "n.json")
	if err := os.WriteFile(notDash, []byte(`{"title": "x"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	var queries []string
	srv := fakeProm(t, &queries)
	defer srv.Close()
	for _, args := range [][]string{
		{},
		{"-o", out, onCall},
		{"-prometheus", srv.URL, onCall},
		{"-prometheus", srv.URL, "-o", filepath.Join(dir, "x.svg"), onCall},
		{"-prometheus", "localhost:9090", "-o", out, onCall},
		{"-prometheus", srv.URL, "-o", out},
		{"-prometheus", srv.URL, "-o", out, onCall, onCall},
		{"-prometheus", srv.URL, "-o", out, "-range", "0s", onCall},
		{"-prometheus", srv.URL, "-o", out, "-width", "10", onCall},
		{"-prometheus", srv.URL, "-o", out, "-theme", "pink", onCall},
		{"-prometheus", srv.URL, "-o", out, "-end", "yesterday", onCall},
		{"-prometheus", srv.URL, "-o", out, "-var", "novalue", onCall},
		{"-prometheus", srv.URL, "-o", out, "-var", "nosuchvar=1", onCall},
		{"-prometheus", srv.URL, "-o", out, "-no-such-flag", onCall},
		{"-prometheus", srv.URL, "-o", out, filepath.Join(dir, "missing.json")},
		{"-prometheus", srv.URL, "-o", out, notDash},
	} {
		code, _, stderr := runShot(t, args...)
		if code != exitUsage || !strings.Contains(stderr, "usage: dashshot") {
			t.Errorf("%v: exit %d, stderr %q; want 64 and the usage line", args, code, stderr)
		}
	}
	if _, err := os.Stat(out); !os.IsNotExist(err) {
		t.Errorf("a usage error wrote %s", out)
	}
	code, _, stderr := runShot(t, "-help")
	if code != exitOK || !strings.Contains(stderr, "usage: dashshot") || !strings.Contains(stderr, "-scrape-interval") {
		t.Errorf("-help: exit %d, stderr %q; want 0 and the usage with the flags", code, stderr)
	}
	// A port nothing listens on.
	dead := httptest.NewServer(http.NotFoundHandler())
	dead.Close()
	code, _, stderr = runShot(t, "-prometheus", dead.URL, "-o", out, "-timeout", "5s", onCall)
	if code != exitFail || !strings.Contains(stderr, "dashshot: ") {
		t.Errorf("dead Prometheus: exit %d, stderr %q; want 1", code, stderr)
	}
}

func TestMacrosAndUnits(t *testing.T) {
	m := newMacros(15*time.Second, 30*time.Second, 6*time.Hour)
	vars := map[string]variable{"probe": {Name: "probe", Multi: true, IncludeAll: true, AllValue: ".*"}, "instance": {Name: "instance"}}
	got := interpolate(`rate(x{probe=~"$probe", instance="${instance}"}[$__rate_interval]) / $__range_s [$__interval] [$__range]`,
		vars, map[string]string{"probe": "a.b", "instance": "h:9"}, m)
	if want := `rate(x{probe=~"a\\.b", instance="h:9"}[2m]) / 21600 [30s] [6h]`; got != want {
		t.Errorf("interpolate = %s, want %s", got, want)
	}
	if got := interpolate(`label_replace(x{a="$nope"}, "d", "$1", "e", "(.+)")`, vars, nil, m); got != `label_replace(x{a="$nope"}, "d", "$1", "e", "(.+)")` {
		t.Errorf("references to no variable were replaced: %s", got)
	}
	for _, c := range []struct {
		v    float64
		unit string
		want string
	}{
		{0.0123, "s", "12.3 ms"}, {0.00004, "s", "40 µs"}, {2.5, "s", "2.5 s"}, {0.91, "percentunit", "91%"},
		{1536, "bytes", "1.5 KiB"}, {2.5e6, "Bps", "2.5 MB/s"}, {120, "iops", "120 io/s"}, {1234, "none", "1.23K"},
		{3, "suffix:×", "3×"}, {41, "celsius", "41 °C"}, {0, "s", "0 s"},
	} {
		if got := formatValue(c.v, c.unit); got != c.want {
			t.Errorf("formatValue(%v, %s) = %q, want %q", c.v, c.unit, got, c.want)
		}
	}
}
