package collector

import (
	"io"
	"os"
	"regexp"
	"sort"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/stretchr/testify/require"
)

func writeMetricFamily(w io.Writer, mf *dto.MetricFamily) error {
	_, err := expfmt.MetricFamilyToText(w, mf)
	return err
}

func regexpMust(t *testing.T, re string) *regexp.Regexp {
	t.Helper()
	r, err := regexp.Compile(re)
	require.NoError(t, err)
	return r
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(to, b, 0o644))
}

func label(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

// gatherPairs returns diskcanary_disk_parent_info as device → sorted disks.
func gatherPairs(t *testing.T, g prometheus.Gatherer) map[string][]string {
	t.Helper()
	mfs, err := g.Gather()
	require.NoError(t, err)
	out := map[string][]string{}
	for _, mf := range mfs {
		if mf.GetName() != "diskcanary_disk_parent_info" {
			continue
		}
		for _, m := range mf.GetMetric() {
			out[label(m, "device")] = append(out[label(m, "device")], label(m, "disk"))
		}
	}
	for _, v := range out {
		sort.Strings(v)
	}
	return out
}

// gatherDevices returns the sorted device labels of one family.
func gatherDevices(t *testing.T, g prometheus.Gatherer, family string) []string {
	t.Helper()
	mfs, err := g.Gather()
	require.NoError(t, err)
	var out []string
	for _, mf := range mfs {
		if mf.GetName() == family {
			for _, m := range mf.GetMetric() {
				out = append(out, label(m, "device"))
			}
		}
	}
	sort.Strings(out)
	return out
}
