package collector

import (
	"context"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/diskcanary/diskcanary/probes"
)

// probesPart exposes the probe engine's results. The probes run in Run on
// their own schedule; a scrape only reads their metrics.
type probesPart struct {
	engine *probes.Engine
}

func newProbesPart(o Options) (Part, error) {
	c := o.Config
	return &probesPart{engine: probes.NewEngine(c.Probes.Targets, o.Paths, o.Logger)}, nil
}

func (p *probesPart) Update(ch chan<- prometheus.Metric) error {
	p.engine.Collect(ch)
	return nil
}

func (p *probesPart) Run(ctx context.Context) { p.engine.Run(ctx) }
