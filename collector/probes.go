package collector

import (
	"context"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/diskcanary/diskcanary/probes"
)

// probesCollector exposes the probe engine's results. The probes run in Run on
// their own schedule; a scrape only reads their metrics.
type probesCollector struct {
	engine *probes.Engine
}

func newProbesCollector(o Options) (Collector, error) {
	c := o.Config
	return &probesCollector{engine: probes.NewEngine(c.Probes.Targets, o.Paths, o.Logger)}, nil
}

func (p *probesCollector) Update(ch chan<- prometheus.Metric) error {
	p.engine.Collect(ch)
	return nil
}

func (p *probesCollector) Run(ctx context.Context) { p.engine.Run(ctx) }
