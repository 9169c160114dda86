// Command dashshot draws a Grafana dashboard's panels into one PNG without
// Grafana: it reads the dashboard JSON (dashboards/*.json, made by
// tools/rulegen), resolves its template variables against a Prometheus,
// runs every panel's PromQL through the Prometheus HTTP API and draws the
// results in the dashboard's grid: time series with their legends and
// threshold lines, heatmaps, stat panels as big numbers, tables as text.
// It draws what the queries return, plainly; it is not a copy of
// Grafana's look.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// Exit statuses: sysexits' EX_USAGE for a usage error, as diskcanary's
// commands use it.
const (
	exitOK    = 0
	exitFail  = 1 // Prometheus failed a query, or the PNG could not be written
	exitUsage = 64
)

const usageText = `usage: dashshot -prometheus URL -o FILE.png [flags] DASHBOARD.json

Draws the panels of a Grafana dashboard into one PNG from a Prometheus's
HTTP API (/api/v1/query_range, /api/v1/query for stat and table panels),
without Grafana. Template variables take the -var values, else All where
the variable has it, else the first value Prometheus returns. Grafana's
$__interval is the step, $__rate_interval the larger of step + scrape
interval and 4 scrape intervals, $__range the range.

Exit status: 0 drawn, 1 a query or the write failed, 64 usage error.

Flags:
`

// usageError is a usage or input error: exit 64.
type usageError struct{ error }

// multiFlag is a repeatable name=value flag.
type multiFlag map[string]string

func (m multiFlag) String() string { return fmt.Sprint(map[string]string(m)) }

func (m multiFlag) Set(s string) error {
	k, v, ok := strings.Cut(s, "=")
	if !ok || k == "" {
		return errors.New("want name=value")
	}
	m[strings.TrimPrefix(k, "$")] = v
	return nil
}

type options struct {
	prometheus, out, file, theme string
	vars                         multiFlag
	rng, step, scrape, timeout   time.Duration
	end                          time.Time
	width                        int
	json                         bool
}

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	o, err := parseArgs(args, stderr)
	if err == nil {
		err = shoot(o, stdout, stderr)
	}
	var ue usageError
	switch {
	case err == nil:
		return exitOK
	case errors.Is(err, flag.ErrHelp):
		return exitOK
	case errors.As(err, &ue):
		fmt.Fprintf(stderr, "dashshot: %v\n%s", err, strings.SplitN(usageText, "\n", 2)[0]+"\n")
		return exitUsage
	default:
		fmt.Fprintf(stderr, "dashshot: %v\n", err)
		return exitFail
	}
}

func parseArgs(args []string, stderr io.Writer) (*options, error) {
	o := &options{vars: multiFlag{}}
	fs := flag.NewFlagSet("dashshot", flag.ContinueOnError)
	// The flag package's own messages are off: a usage error is reported
	// once, by run; -help prints the whole usage.
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	fs.StringVar(&o.prometheus, "prometheus", "", "the Prometheus `URL` (http://host:9090)")
	fs.StringVar(&o.out, "o", "", "the PNG to write (replaced if it exists)")
	fs.Var(o.vars, "var", "a template variable's value, `name=value` (repeatable)")
	fs.DurationVar(&o.rng, "range", time.Hour, "the time range drawn, ending at -end")
	end := fs.String("end", "now", "the end of the range: now, RFC 3339 or Unix seconds")
	fs.DurationVar(&o.step, "step", 0, "the query step (0: the range over 240, at least the scrape interval)")
	fs.DurationVar(&o.scrape, "scrape-interval", 15*time.Second, "the scrape interval of the Prometheus, for $__rate_interval")
	fs.DurationVar(&o.timeout, "timeout", 2*time.Minute, "the time all queries together may take")
	fs.IntVar(&o.width, "width", 1600, "the picture's width in pixels (400-6000)")
	fs.StringVar(&o.theme, "theme", "light", "light or dark")
	fs.BoolVar(&o.json, "json", false, "print what each panel got (series, last and largest values) as JSON on stdout")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprint(stderr, usageText)
			fs.SetOutput(stderr)
			fs.PrintDefaults()
			return nil, err
		}
		return nil, usageError{err}
	}
	switch {
	case fs.NArg() != 1:
		return nil, usageError{errors.New("want exactly one dashboard JSON file")}
	case o.prometheus == "":
		return nil, usageError{errors.New("-prometheus is required")}
	case o.out == "":
		return nil, usageError{errors.New("-o is required")}
	case !strings.HasSuffix(strings.ToLower(o.out), ".png"):
		return nil, usageError{fmt.Errorf("-o %s: dashshot writes PNG only", o.out)}
	case o.rng <= 0 || o.scrape <= 0 || o.step < 0 || o.timeout <= 0:
		return nil, usageError{errors.New("-range, -scrape-interval and -timeout must be positive, -step not negative")}
	case o.width < 400 || o.width > 6000:
		return nil, usageError{fmt.Errorf("-width %d: want 400 to 6000", o.width)}
	case o.theme != "light" && o.theme != "dark":
		return nil, usageError{fmt.Errorf("-theme %s: want light or dark", o.theme)}
	}
	u, err := url.Parse(o.prometheus)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, usageError{fmt.Errorf("-prometheus %s: want an http or https URL", o.prometheus)}
	}
	if o.end, err = parseEnd(*end); err != nil {
		return nil, usageError{err}
	}
	o.file = fs.Arg(0)
	if o.step == 0 {
		o.step = max((o.rng / 240).Round(time.Second), o.scrape, time.Second)
	}
	return o, nil
}

func parseEnd(s string) (time.Time, error) {
	if s == "now" {
		return time.Now(), nil
	}
	if t, err := time.Parse(time.RFC3339, s); err == nil {
		return t, nil
	}
	if f, err := strconv.ParseFloat(s, 64); err == nil {
		return time.UnixMilli(int64(f * 1000)), nil
	}
	return time.Time{}, fmt.Errorf("-end %s: want now, RFC 3339 or Unix seconds", s)
}

// panelResult is what a panel's queries returned, series named by their
// legends, keyed by refId.
type panelResult struct {
	panel  panel
	series map[string][]named
	err    error
}

type named struct {
	name string
	series
}

func shoot(o *options, stdout, stderr io.Writer) error {
	b, err := os.ReadFile(o.file)
	if err != nil {
		return usageError{err}
	}
	d, err := parseDashboard(b)
	if err != nil {
		return usageError{fmt.Errorf("%s: %w", o.file, err)}
	}
	ctx, cancel := context.WithTimeout(context.Background(), o.timeout)
	defer cancel()
	c := &promClient{base: strings.TrimRight(o.prometheus, "/"), http: &http.Client{}}
	start := o.end.Add(-o.rng)
	m := newMacros(o.step, o.scrape, o.rng)
	values, empty, err := resolveVars(ctx, c, d, o.vars, start, o.end, m)
	if err != nil {
		return err
	}
	if len(empty) > 0 {
		fmt.Fprintf(stderr, "dashshot: no value for variable %s: Prometheus returned none\n", strings.Join(empty, ", "))
	}
	vars := map[string]variable{}
	for _, v := range d.Templating.List {
		vars[v.Name] = v
	}
	var results []panelResult
	for _, p := range d.drawable() {
		r := panelResult{panel: p, series: map[string][]named{}}
		for _, t := range p.Targets {
			if t.Hide || t.Expr == "" {
				continue
			}
			q := interpolate(t.Expr, vars, values, m)
			var res []series
			var err error
			if t.Instant || p.Type == "stat" || p.Type == "table" {
				res, err = c.query(ctx, q, o.end)
			} else {
				res, err = c.queryRange(ctx, q, start, o.end, o.step)
			}
			if err != nil {
				if ctx.Err() != nil {
					return fmt.Errorf("panel %q: %w", p.Title, err)
				}
				// One bad query is that panel's error, drawn in it.
				r.err = err
				continue
			}
			for _, s := range res {
				r.series[t.RefID] = append(r.series[t.RefID], named{legend(t.LegendFormat, s.Labels), s})
			}
		}
		results = append(results, r)
	}
	img, lay := render(d, results, values, span{start, o.end, o.step}, o.width, themes[o.theme])
	if err := writePNG(o.out, img); err != nil {
		return err
	}
	if o.json {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(summarize(d, results, values, lay))
	}
	return nil
}

// writePNG writes the picture to a temporary file beside path and renames
// it over path, so a failed write leaves no half picture.
func writePNG(path string, write func(io.Writer) error) error {
	f, err := os.CreateTemp(filepath.Dir(path), ".dashshot-*.png")
	if err != nil {
		return err
	}
	tmp := f.Name()
	err = write(f)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(tmp, 0o644)
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}
