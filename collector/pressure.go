package collector

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/procfs"
	"golang.org/x/sys/unix"
)

// pressureCollector exports the kernel's pressure stall information
// (/proc/pressure/{cpu,io}, Linux ≥ 4.20 with PSI on) with node_exporter's
// names and semantics: "some" is time in which at least one task waited
// for the resource, "full" (io only here) time in which every non-idle
// task did. The etcd verdict reads CPU pressure to tell a CPU-starved etcd
// member from a slow disk, and the node dashboard shows both.
type pressureCollector struct {
	procfs string
	logger *slog.Logger
	warn   sync.Once
}

var (
	pressureCPUWaitingDesc = prometheus.NewDesc(namespace+"_pressure_cpu_waiting_seconds_total",
		"Total time in seconds that at least one task on this node waited for a CPU (PSI cpu some).", nil, nil)
	pressureIOWaitingDesc = prometheus.NewDesc(namespace+"_pressure_io_waiting_seconds_total",
		"Total time in seconds that at least one task on this node waited for I/O (PSI io some).", nil, nil)
	pressureIOStalledDesc = prometheus.NewDesc(namespace+"_pressure_io_stalled_seconds_total",
		"Total time in seconds that every non-idle task on this node waited for I/O at once (PSI io full).", nil, nil)
	pressureAvailableDesc = prometheus.NewDesc(namespace+"_pressure_available",
		"Whether the kernel's pressure stall information (/proc/pressure) can be read (1) or not (0: kernel without CONFIG_PSI, or booted with psi=0).", nil, nil)
)

func newPressureCollector(o Options) (Collector, error) {
	return &pressureCollector{procfs: o.Paths.Proc(), logger: o.Logger}, nil
}

func (p *pressureCollector) Update(ch chan<- prometheus.Metric) error {
	fsys, err := procfs.NewFS(p.procfs)
	if err != nil {
		return err
	}
	cpu, cerr := fsys.PSIStatsForResource("cpu")
	io, ierr := fsys.PSIStatsForResource("io")
	if err := errors.Join(cerr, ierr); err != nil {
		// No pressure files, or PSI compiled in but off (psi=0: reads
		// fail with EOPNOTSUPP): a property of the kernel, not a failure.
		if errors.Is(err, fs.ErrNotExist) || errors.Is(err, unix.EOPNOTSUPP) {
			p.warn.Do(func() {
				p.logger.Warn("no pressure stall information: the kernel lacks CONFIG_PSI or runs with psi=0 (add psi=1 to its command line); the etcd verdict's cpu cause cannot be told", "err", err)
			})
			ch <- prometheus.MustNewConstMetric(pressureAvailableDesc, prometheus.GaugeValue, 0)
			return nil
		}
		return fmt.Errorf("pressure: %w", err)
	}
	ch <- prometheus.MustNewConstMetric(pressureAvailableDesc, prometheus.GaugeValue, 1)
	// Totals are microseconds.
	if cpu.Some != nil {
		ch <- prometheus.MustNewConstMetric(pressureCPUWaitingDesc, prometheus.CounterValue, float64(cpu.Some.Total)/1e6)
	}
	if io.Some != nil {
		ch <- prometheus.MustNewConstMetric(pressureIOWaitingDesc, prometheus.CounterValue, float64(io.Some.Total)/1e6)
	}
	if io.Full != nil {
		ch <- prometheus.MustNewConstMetric(pressureIOStalledDesc, prometheus.CounterValue, float64(io.Full.Total)/1e6)
	}
	return nil
}
