package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	versioncollector "github.com/prometheus/client_golang/prometheus/collectors/version"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/prometheus/common/promslog"
	"github.com/prometheus/common/version"
	"github.com/prometheus/exporter-toolkit/web"
	"github.com/spf13/cobra"

	"github.com/diskcanary/diskcanary/collector"
	"github.com/diskcanary/diskcanary/internal/config"
)

// serveFlags are the daemon's flags. Explicit flags beat the config file.
type serveFlags struct {
	configFile    string
	configCheck   bool
	listen        []string
	webConfig     string
	telemetryPath string
	deviceInclude string
	deviceExclude string
	maxRequests   int
	logLevel      string
	logFormat     string
	procfs        string
	sysfs         string
	probeDirs     []string
	enable        map[string]*bool
	disable       map[string]*bool
}

func newServeCmd() *cobra.Command {
	f := &serveFlags{enable: map[string]*bool{}, disable: map[string]*bool{}}
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run the daemon: probes, diskstats and SMART on /metrics (default :9742)",
		Long: `Run the diskcanary daemon. With no flags it runs on the embedded default config:
an etcd-WAL write probe and a 4 KiB random-read probe on /var/tmp/diskcanary,
diskstats, and SMART when smartctl is installed.

Probes run on their own schedule; a scrape only reads their last results, so
a hung disk shows up as diskcanary_probe_stalled=1 and never blocks /metrics.`,
		Example: `  diskcanary serve
  diskcanary serve --probe.dir /var/lib/etcd/diskcanary
  diskcanary serve --config.file /etc/diskcanary.yml --config.check`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return f.run(cmd) },
	}
	fl := cmd.Flags()
	fl.SortFlags = false
	fl.StringVar(&f.configFile, "config.file", "", "YAML config file (strict: unknown keys are errors); empty = embedded default")
	fl.BoolVar(&f.configCheck, "config.check", false, "validate the config (and the probe directories) and exit")
	fl.StringArrayVar(&f.probeDirs, "probe.dir", nil, "run the default probe set (wal + randread) on this directory instead of the config's probes (repeatable)")
	fl.StringSliceVar(&f.listen, "web.listen-address", []string{":9742"}, "addresses to listen on (repeatable)")
	fl.StringVar(&f.webConfig, "web.config.file", "", "exporter-toolkit web config file for TLS and basic auth")
	fl.StringVar(&f.telemetryPath, "web.telemetry-path", "/metrics", "path under which to expose metrics")
	fl.IntVar(&f.maxRequests, "web.max-requests", 100, "maximum parallel scrapes; more get 503 (0 = no limit)")
	fl.StringVar(&f.logLevel, "log.level", "info", "log level: debug, info, warn, error")
	fl.StringVar(&f.logFormat, "log.format", "logfmt", "log format: logfmt, json")
	fl.StringVar(&f.deviceInclude, "collector.diskstats.device-include", "", "regex of kernel device names to export (replaces the config's filter)")
	fl.StringVar(&f.deviceExclude, "collector.diskstats.device-exclude", "", "regex of kernel device names to leave out (replaces the config's filter)")
	fl.StringVar(&f.procfs, "path.procfs", "/proc", "procfs mountpoint (the host's /proc in a container)")
	fl.StringVar(&f.sysfs, "path.sysfs", "/sys", "sysfs mountpoint (the host's /sys in a container)")
	for _, p := range collector.Parts {
		f.enable[p.Name] = fl.Bool("collector."+p.Name, p.EnabledDefault,
			fmt.Sprintf("enable the %s collector: %s (--no-collector.%s disables)", p.Name, p.Help, p.Name))
		f.disable[p.Name] = fl.Bool("no-collector."+p.Name, false, "disable the "+p.Name+" collector")
	}
	return cmd
}

// loadConfig reads the file (or the embedded default) and applies flags on top.
func (f *serveFlags) loadConfig(cmd *cobra.Command) (*config.Config, map[string]bool, error) {
	var c *config.Config
	var err error
	if f.configFile != "" {
		c, err = config.Load(f.configFile)
	} else {
		c, err = config.Parse(config.Default)
	}
	if err != nil {
		return nil, nil, err
	}
	// Explicit flags beat the file; the result is validated like the file.
	overridden := len(f.probeDirs) > 0
	if overridden {
		c.Probes.Targets = config.DefaultProbes(f.probeDirs)
	}
	// A device filter flag replaces the file's filter (include and exclude
	// are exclusive, as in the file).
	if inc, exc := cmd.Flags().Changed("collector.diskstats.device-include"), cmd.Flags().Changed("collector.diskstats.device-exclude"); inc || exc {
		if inc && exc {
			return nil, nil, fmt.Errorf("--collector.diskstats.device-include and --collector.diskstats.device-exclude are mutually exclusive")
		}
		c.Diskstats.DeviceInclude, c.Diskstats.DeviceExclude = f.deviceInclude, f.deviceExclude
		overridden = true
	}
	if overridden {
		if err := c.Validate(); err != nil {
			return nil, nil, err
		}
	}
	c.ProcFS, c.SysFS = f.procfs, f.sysfs
	enabled := map[string]bool{
		"probes":    c.Probes.Enabled,
		"diskstats": c.Diskstats.Enabled,
		"smart":     c.Smart.Enabled,
	}
	for _, p := range collector.Parts {
		if cmd.Flags().Changed("collector." + p.Name) {
			enabled[p.Name] = *f.enable[p.Name]
		}
		if *f.disable[p.Name] {
			enabled[p.Name] = false
		}
	}
	return c, enabled, nil
}

func (f *serveFlags) logger() (*slog.Logger, error) {
	lvl := promslog.NewLevel()
	if err := lvl.Set(f.logLevel); err != nil {
		return nil, fmt.Errorf("--log.level: %w", err)
	}
	format := promslog.NewFormat()
	if err := format.Set(f.logFormat); err != nil {
		return nil, fmt.Errorf("--log.format: %w", err)
	}
	return promslog.New(&promslog.Config{Level: lvl, Format: format}), nil
}

func (f *serveFlags) run(cmd *cobra.Command) error {
	logger, err := f.logger()
	if err != nil {
		return err
	}
	c, enabled, err := f.loadConfig(cmd)
	if err != nil {
		return err
	}
	if enabled["probes"] {
		// The host, not only the file: no symlinks, devices or etcd data
		// directories as write targets, at check time and before any write.
		if err := c.CheckHost(); err != nil {
			return err
		}
	}
	if f.configCheck {
		if f.webConfig != "" {
			if err := web.Validate(f.webConfig); err != nil {
				return fmt.Errorf("--web.config.file %s: %w", f.webConfig, err)
			}
		}
		fmt.Fprintf(cmd.OutOrStdout(), "config OK: %d probe(s)%s\n", len(c.Probes.Targets), describeProbes(c))
		fmt.Fprintf(cmd.OutOrStdout(), "diskstats: %s\n", describeDeviceFilter(c.Diskstats))
		return nil
	}

	logger.Info("starting diskcanary", "version", version.Info(), "build_context", version.BuildContext())
	col, err := collector.New(collector.Options{Config: c, Logger: logger}, enabled)
	if err != nil {
		return err
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(col,
		versioncollector.NewCollector("diskcanary"),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		collectors.NewGoCollector())

	mux := http.NewServeMux()
	mux.Handle(f.telemetryPath, promhttp.HandlerFor(reg, promhttp.HandlerOpts{
		ErrorLog:      slog.NewLogLogger(logger.Handler(), slog.LevelError),
		ErrorHandling: promhttp.ContinueOnError,
		// Scrapes only read memory; this bounds a scrape storm, not slow
		// disks. 100 leaves room for many Prometheus replicas and ad-hoc
		// curls (bench/scrape-load runs 50 at once without a 503).
		MaxRequestsInFlight: f.maxRequests,
	}))
	if f.telemetryPath != "/" {
		landing, err := web.NewLandingPage(web.LandingConfig{
			Name:        "diskcanary",
			Description: "Storage-health canary: probe latency, diskstats and SMART",
			Version:     version.Info(),
			Links: []web.LandingLinks{
				{Address: f.telemetryPath, Text: "Metrics"},
				{Address: "https://github.com/diskcanary/diskcanary", Text: "Documentation"},
			},
		})
		if err != nil {
			return err
		}
		mux.Handle("/", landing)
	}

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	runDone := make(chan struct{})
	go func() { col.Run(ctx); close(runDone) }()

	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	systemdSocket := false
	serveErr := make(chan error, 1)
	go func() {
		serveErr <- web.ListenAndServe(srv, &web.FlagConfig{
			WebListenAddresses: &f.listen, WebSystemdSocket: &systemdSocket, WebConfigFile: &f.webConfig,
		}, logger)
	}()

	select {
	case err := <-serveErr:
		stop()
		<-runDone
		if err != nil && !errors.Is(err, http.ErrServerClosed) {
			return fmt.Errorf("listen %s: %w", strings.Join(f.listen, ","), err)
		}
		return nil
	case <-ctx.Done():
	}
	logger.Info("shutting down: stopping probes and removing their files")
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = srv.Shutdown(shutdownCtx)
	<-runDone
	logger.Info("stopped")
	return nil
}

func describeProbes(c *config.Config) string {
	var b strings.Builder
	for _, p := range c.Probes.Targets {
		where := p.Dir
		if p.Device != "" {
			where = p.Device
		}
		fmt.Fprintf(&b, "\n  %s: %s on %s, %d ops every %v", p.Name, p.Kind, where, p.Ops, p.Interval)
	}
	return b.String()
}

func describeDeviceFilter(d config.Diskstats) string {
	switch {
	case d.DeviceInclude != "":
		return "devices matching " + d.DeviceInclude
	case d.DeviceExclude != "":
		return "devices not matching " + d.DeviceExclude
	}
	return "devices not matching " + config.DefaultDeviceExclude + " (default)"
}
