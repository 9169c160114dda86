package read

import (
	"fmt"
	"io"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// Metrics is a /metrics page in the text format, by family name.
type Metrics map[string]*dto.MetricFamily

// ParseText reads a text exposition (diskcanary's, node_exporter's).
func ParseText(r io.Reader) (Metrics, error) {
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(r)
	if err != nil {
		return nil, fmt.Errorf("metrics text: %w", err)
	}
	return Metrics(fams), nil
}

// Sum is the sum of the counter, gauge or untyped samples of family name
// whose labels include want, and how many there were: one series' value,
// or a total over several (every probe's written bytes).
func (m Metrics) Sum(name string, want map[string]string) (sum float64, n int) {
	for _, s := range m[name].GetMetric() {
		if !hasLabels(s, want) {
			continue
		}
		switch {
		case s.Counter != nil:
			sum += s.GetCounter().GetValue()
		case s.Gauge != nil:
			sum += s.GetGauge().GetValue()
		case s.Untyped != nil:
			sum += s.GetUntyped().GetValue()
		default:
			continue
		}
		n++
	}
	return sum, n
}
