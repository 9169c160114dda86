package main

import (
	"bufio"
	"compress/gzip"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/prometheus/common/expfmt"

	"github.com/diskcanary/diskcanary/collector"
)

// metricsHandler serves /metrics. A text-format scrape (what Prometheus
// asks for unless its native histograms are on) gathers the registry, then
// lets the collectors with many plain series write them straight to the
// response (collector.TextCollector): at a thousand disks that is most of
// the series, and building a client_golang metric for each was most of a
// scrape's heap (go run ./bench diskstats-1000). A protobuf scrape goes
// through promhttp with every series as a metric, native histograms
// included.
type metricsHandler struct {
	base     prometheus.Gatherer // the exporter's own series: version, process, Go runtime
	node     *collector.NodeCollector
	proto    http.Handler
	inFlight chan struct{} // nil: no limit
	logger   *slog.Logger
}

func newMetricsHandler(base prometheus.Gatherer, node *collector.NodeCollector, maxRequests int, logger *slog.Logger) *metricsHandler {
	reg := prometheus.NewRegistry()
	reg.MustRegister(node)
	h := &metricsHandler{base: base, node: node, logger: logger,
		proto: promhttp.HandlerFor(prometheus.Gatherers{base, reg}, promhttp.HandlerOpts{
			ErrorLog:      slog.NewLogLogger(logger.Handler(), slog.LevelError),
			ErrorHandling: promhttp.ContinueOnError,
		})}
	if maxRequests > 0 {
		h.inFlight = make(chan struct{}, maxRequests)
	}
	return h
}

var gzipWriters = sync.Pool{New: func() any { return gzip.NewWriter(io.Discard) }}

func (h *metricsHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	// Scrapes only read memory; this bounds a scrape storm, not slow disks.
	if h.inFlight != nil {
		select {
		case h.inFlight <- struct{}{}:
			defer func() { <-h.inFlight }()
		default:
			http.Error(w, fmt.Sprintf("Limit of concurrent requests reached (%d), try again later.", cap(h.inFlight)),
				http.StatusServiceUnavailable)
			return
		}
	}
	format := expfmt.NegotiateAccept(r.Header, expfmt.DefaultAcceptedFormats()...)
	if format.FormatType() != expfmt.TypeTextPlain {
		h.proto.ServeHTTP(w, r)
		return
	}
	scrape := h.node.Scrape(true)
	reg := prometheus.NewRegistry()
	reg.MustRegister(scrape)
	mfs, err := prometheus.Gatherers{h.base, reg}.Gather()
	if err != nil {
		// As promhttp.ContinueOnError: what was gathered is served.
		h.logger.Error("error gathering metrics", "err", err)
	}
	want := familyFilter(r)

	w.Header().Add("Vary", "Accept")
	w.Header().Add("Vary", "Accept-Encoding")
	w.Header().Set("Content-Type", string(format))
	var out io.Writer = w
	if acceptsGzip(r.Header.Get("Accept-Encoding")) {
		w.Header().Set("Content-Encoding", "gzip")
		gz := gzipWriters.Get().(*gzip.Writer)
		gz.Reset(w)
		defer func() { gz.Close(); gzipWriters.Put(gz) }()
		out = gz
	}
	bw := bufio.NewWriterSize(out, 32<<10)
	enc := expfmt.NewEncoder(bw, format)
	for _, mf := range mfs {
		if !want(mf.GetName()) {
			continue
		}
		if err := enc.Encode(mf); err != nil {
			h.logger.Error("error encoding metric family", "family", mf.GetName(), "err", err)
		}
	}
	if err := scrape.WriteText(bw, want); err != nil {
		h.logger.Error("error writing metrics", "err", err)
	}
	bw.Flush()
}

// familyFilter is the name[] query parameter promhttp honours: only the
// families named, or every family when there is none.
func familyFilter(r *http.Request) func(string) bool {
	names := r.URL.Query()["name[]"]
	if len(names) == 0 {
		return func(string) bool { return true }
	}
	set := make(map[string]struct{}, len(names))
	for _, n := range names {
		set[n] = struct{}{}
	}
	return func(f string) bool { _, ok := set[f]; return ok }
}

// acceptsGzip reports whether an Accept-Encoding header lists gzip (or *)
// with a quality above zero.
func acceptsGzip(header string) bool {
	gzipQ, starQ := -1.0, -1.0
	for _, part := range strings.Split(header, ",") {
		name, params, _ := strings.Cut(strings.TrimSpace(part), ";")
		q := 1.0
		if v, ok := strings.CutPrefix(strings.TrimSpace(params), "q="); ok {
			if _, err := fmt.Sscanf(v, "%g", &q); err != nil {
				q = 0
			}
		}
		switch strings.ToLower(strings.TrimSpace(name)) {
		case "gzip":
			gzipQ = q
		case "*":
			starQ = q
		}
	}
	if gzipQ >= 0 {
		return gzipQ > 0
	}
	return starQ > 0
}
