package main

import (
	"compress/gzip"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/stretchr/testify/require"

	"github.com/diskcanary/diskcanary/collector"
	"github.com/diskcanary/diskcanary/internal/config"
	"github.com/diskcanary/diskcanary/internal/hostpath"
)

const protoAccept = "application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=delimited"

// metricsFixture is the handler over diskstats of the collector package's
// 20-field fixture (sysfs included) and one series of the exporter's own.
func metricsFixture(t *testing.T, maxRequests int) *metricsHandler {
	t.Helper()
	fixtures := filepath.Join("..", "..", "collector", "testdata", "diskstats")
	c := &config.Config{Diskstats: config.Diskstats{DeviceInclude: ".*"}}
	node, err := collector.New(collector.Options{Config: c, Logger: slog.New(slog.DiscardHandler),
		Paths: hostpath.Paths{ProcFS: filepath.Join(fixtures, "k20", "proc"), SysFS: filepath.Join(fixtures, "sys")}},
		map[string]bool{"diskstats": true})
	require.NoError(t, err)
	base := prometheus.NewRegistry()
	g := prometheus.NewGauge(prometheus.GaugeOpts{Name: "diskcanary_build_test", Help: "A series of the base registry."})
	g.Set(7)
	base.MustRegister(g)
	return newMetricsHandler(base, node, maxRequests, slog.New(slog.DiscardHandler))
}

func serveMetrics(t *testing.T, h http.Handler, target string, header map[string]string) *httptest.ResponseRecorder {
	t.Helper()
	req := httptest.NewRequest(http.MethodGet, target, nil)
	for k, v := range header {
		req.Header.Set(k, v)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

// samples decodes an exposition into "name{labels} value" lines, sorted,
// leaving out the collectors' durations (timings differ by nature).
func samples(t *testing.T, body io.Reader, format expfmt.Format) []string {
	t.Helper()
	dec := expfmt.NewDecoder(body, format)
	var out []string
	for {
		var mf dto.MetricFamily
		err := dec.Decode(&mf)
		if err == io.EOF {
			break
		}
		require.NoError(t, err)
		if mf.GetName() == "diskcanary_collector_duration_seconds" {
			continue
		}
		vec, err := expfmt.ExtractSamples(&expfmt.DecodeOptions{Timestamp: 1}, &mf)
		require.NoError(t, err)
		for _, s := range vec {
			out = append(out, s.Metric.String()+" "+s.Value.String())
		}
	}
	sort.Strings(out)
	return out
}

// A text scrape, gzip or not, and a protobuf scrape carry the same series
// with the same values: the diskstats the collector writes itself and the
// registry's.
func TestMetricsTextAndProtobufAgree(t *testing.T) {
	h := metricsFixture(t, 0)
	text := serveMetrics(t, h, "/metrics", nil)
	require.Equal(t, http.StatusOK, text.Code)
	require.Equal(t, "text/plain; version=0.0.4; charset=utf-8; escaping=underscores", text.Header().Get("Content-Type"))
	textSamples := samples(t, text.Body, expfmt.NewFormat(expfmt.TypeTextPlain))

	zipped := serveMetrics(t, h, "/metrics", map[string]string{"Accept-Encoding": "gzip"})
	require.Equal(t, "gzip", zipped.Header().Get("Content-Encoding"))
	zr, err := gzip.NewReader(zipped.Body)
	require.NoError(t, err)
	require.Equal(t, textSamples, samples(t, zr, expfmt.NewFormat(expfmt.TypeTextPlain)))

	proto := serveMetrics(t, h, "/metrics", map[string]string{"Accept": protoAccept})
	require.True(t, strings.HasPrefix(proto.Header().Get("Content-Type"), "application/vnd.google.protobuf"), proto.Header().Get("Content-Type"))
	require.Equal(t, textSamples, samples(t, proto.Body, expfmt.NewFormat(expfmt.TypeProtoDelim)))

	// 12 devices in k20 with the include-all filter: 17 families each, an
	// info series each, 17 joins; the base series and the collector's success.
	require.Len(t, textSamples, 12*17+12+17+2)
	require.Contains(t, textSamples, `diskcanary_disk_reads_completed_total{device="sda"} 1000`)
	require.Contains(t, textSamples, `diskcanary_collector_success{collector="diskstats"} 1`)
	require.Contains(t, textSamples, `diskcanary_build_test 7`)
}

// name[] keeps only the families named, as promhttp does.
func TestMetricsNameFilter(t *testing.T) {
	h := metricsFixture(t, 0)
	rec := serveMetrics(t, h, "/metrics?name[]=diskcanary_disk_io_now&name[]=diskcanary_build_test", nil)
	got := samples(t, rec.Body, expfmt.NewFormat(expfmt.TypeTextPlain))
	names := map[string]int{}
	for _, s := range got {
		names[s[:strings.IndexAny(s, "{ ")]]++
	}
	require.Equal(t, map[string]int{"diskcanary_disk_io_now": 12, "diskcanary_build_test": 1}, names)
}

// Beyond --web.max-requests a scrape gets 503 at once.
func TestMetricsInFlightLimit(t *testing.T) {
	h := metricsFixture(t, 1)
	h.inFlight <- struct{}{}
	rec := serveMetrics(t, h, "/metrics", nil)
	require.Equal(t, http.StatusServiceUnavailable, rec.Code)
	require.Equal(t, "Limit of concurrent requests reached (1), try again later.\n", rec.Body.String())
	<-h.inFlight
	require.Equal(t, http.StatusOK, serveMetrics(t, h, "/metrics", nil).Code)
}

func TestAcceptsGzip(t *testing.T) {
	for header, want := range map[string]bool{
		"": false, "gzip": true, "deflate, gzip, br, zstd": true, "gzip;q=0": false, "gzip;q=0.5": true,
		"*": true, "*;q=0": false, "identity": false, "gzip;q=0, *": false, "br, *;q=0.1": true,
	} {
		require.Equal(t, want, acceptsGzip(header), header)
	}
}

// Concurrent scrapes, text and protobuf, share the collectors' caches
// (go test -race checks the sharing) and each gets the whole exposition.
func TestMetricsConcurrentScrapes(t *testing.T) {
	h := metricsFixture(t, 0)
	want := samples(t, serveMetrics(t, h, "/metrics", nil).Body, expfmt.NewFormat(expfmt.TypeTextPlain))
	errs := make(chan error, 8)
	for i := range 8 {
		go func() {
			header := map[string]string{}
			format := expfmt.NewFormat(expfmt.TypeTextPlain)
			if i%2 == 1 {
				header["Accept"] = protoAccept
				format = expfmt.NewFormat(expfmt.TypeProtoDelim)
			}
			req := httptest.NewRequest(http.MethodGet, "/metrics", nil)
			for k, v := range header {
				req.Header.Set(k, v)
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			dec := expfmt.NewDecoder(rec.Body, format)
			n := 0
			for {
				var mf dto.MetricFamily
				if err := dec.Decode(&mf); err == io.EOF {
					break
				} else if err != nil {
					errs <- err
					return
				}
				if mf.GetName() != "diskcanary_collector_duration_seconds" {
					n += len(mf.GetMetric())
				}
			}
			if n != len(want) {
				errs <- fmt.Errorf("scrape %d: %d series, want %d", i, n, len(want))
				return
			}
			errs <- nil
		}()
	}
	for range 8 {
		require.NoError(t, <-errs)
	}
}
