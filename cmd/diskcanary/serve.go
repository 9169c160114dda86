package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"path"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	versioncollector "github.com/prometheus/client_golang/prometheus/collectors/version"
	"github.com/prometheus/common/promslog"
	"github.com/prometheus/common/version"
	"github.com/prometheus/exporter-toolkit/web"
	"github.com/spf13/cobra"

	"github.com/diskcanary/diskcanary/collector"
	"github.com/diskcanary/diskcanary/internal/cgroupio"
	"github.com/diskcanary/diskcanary/internal/config"
	"github.com/diskcanary/diskcanary/internal/hostpath"
	"github.com/diskcanary/diskcanary/probes"
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
	maxConns      int
	writeTimeout  time.Duration
	logLevel      string
	logFormat     string
	maxProcs      int
	paths         hostpath.Paths
	probeDirs     []string
	contention    collector.ContentionConfig
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
	fl.BoolVar(&f.configCheck, "config.check", false, "validate the config, check each probe target as the daemon will find it (errors exit 1, warnings are printed), and exit")
	fl.StringArrayVar(&f.probeDirs, "probe.dir", nil, "run the default probe set (wal + randread) on this directory instead of the config's probes (repeatable)")
	fl.StringSliceVar(&f.listen, "web.listen-address", []string{":9742"}, "addresses to listen on (repeatable)")
	fl.StringVar(&f.webConfig, "web.config.file", "", "exporter-toolkit web config file for TLS and basic auth")
	fl.StringVar(&f.telemetryPath, "web.telemetry-path", "/metrics", "path under which to expose metrics")
	fl.IntVar(&f.maxRequests, "web.max-requests", 100, "maximum parallel scrapes; more get 503 (0 = no limit)")
	fl.IntVar(&f.maxConns, "web.max-connections", 512, "maximum open HTTP connections; when full, a new one closes the connection idle longest "+
		"(keep-alive, TLS handshake, unfinished or unauthenticated request). The daemon's open files stay under this + 64, + 2 per probe and 3 per running smartctl")
	fl.DurationVar(&f.writeTimeout, "web.write-timeout", 30*time.Second, "longest a response may take to send; a client that does not read is cut off and frees its --web.max-requests slot")
	fl.StringVar(&f.logLevel, "log.level", "info", "log level: debug, info, warn, error")
	fl.StringVar(&f.logFormat, "log.format", "logfmt", "log format: logfmt, json")
	fl.IntVar(&f.maxProcs, "runtime.gomaxprocs", defaultMaxProcs(),
		"CPUs the daemon's Go code runs on at once (GOMAXPROCS; the GOMAXPROCS environment variable sets the default); < 1 keeps the Go runtime's choice (every CPU, or the cgroup's CPU limit). "+
			"At 1, the daemon's own scrapes cannot crowd its probes' threads off the CPUs (docs/measuring.md, \"Normal priority, one thread per probe\")")
	fl.StringVar(&f.deviceInclude, "collector.diskstats.device-include", "", "regex of kernel device names to export (replaces the config's filter)")
	fl.StringVar(&f.deviceExclude, "collector.diskstats.device-exclude", "", "regex of kernel device names to leave out (replaces the config's filter)")
	fl.DurationVar(&f.contention.Interval, "collector.contention.interval", collector.DefaultContentionInterval, "time between two passes of the contention collector over the cgroup tree")
	fl.IntVar(&f.contention.Top, "collector.contention.top", cgroupio.DefaultTop, "cgroups named per device by recent I/O; the rest are summed as workload=\"other\"")
	fl.IntVar(&f.contention.MaxCgroups, "collector.contention.max-cgroups", cgroupio.DefaultMaxCgroups, "most cgroups one contention pass visits (diskcanary_contention_truncated says when it stopped there)")
	fl.DurationVar(&f.contention.Budget, "collector.contention.budget", cgroupio.DefaultBudget, "longest one contention pass may take")
	fl.StringVar(&f.contention.Root, "collector.contention.root", "", "cgroup hierarchy to read (a v1 blkio or a v2 mountpoint); empty finds it under --path.sysfs's fs/cgroup")
	f.paths.AddFlags(fl)
	for _, p := range collector.Collectors {
		f.enable[p.Name] = fl.Bool("collector."+p.Name, p.EnabledDefault,
			fmt.Sprintf("enable the %s collector: %s (--no-collector.%s disables)", p.Name, p.Help, p.Name))
		f.disable[p.Name] = fl.Bool("no-collector."+p.Name, false, "disable the "+p.Name+" collector")
	}
	return cmd
}

// defaultMaxProcs is --runtime.gomaxprocs's default: 1, as node_exporter's
// is, unless the GOMAXPROCS environment variable (which the runtime has
// already applied) says otherwise. A node agent needs no more than a CPU,
// and its own work must not compete with its probes: scrapes on every CPU
// slow the probes more than fio (go run ./bench scrape-load). The timed
// ops are in syscall state, so they never wait for the one P; only the
// untimed work between them does.
func defaultMaxProcs() int {
	if n, err := strconv.Atoi(os.Getenv("GOMAXPROCS")); err == nil {
		return n
	}
	return 1
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
			return nil, nil, &exitError{exitUsage, fmt.Errorf("--collector.diskstats.device-include and --collector.diskstats.device-exclude are mutually exclusive")}
		}
		c.Diskstats.DeviceInclude, c.Diskstats.DeviceExclude = f.deviceInclude, f.deviceExclude
		overridden = true
	}
	if overridden {
		if err := c.Validate(); err != nil {
			return nil, nil, err
		}
	}
	given := map[string]bool{}
	for _, p := range collector.Collectors {
		if cmd.Flags().Changed("collector." + p.Name) {
			given[p.Name] = *f.enable[p.Name]
		}
		if *f.disable[p.Name] {
			given[p.Name] = false
		}
	}
	return c, collector.Enabled(c, given), nil
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
	if err := f.checkWebFlags(); err != nil {
		return &exitError{exitUsage, err}
	}
	if err := checkContentionFlags(f.contention); err != nil {
		return &exitError{exitUsage, err}
	}
	logger, err := f.logger()
	if err != nil {
		return &exitError{exitUsage, err}
	}
	c, enabled, err := f.loadConfig(cmd)
	if err != nil {
		return err
	}
	if enabled["probes"] {
		// The host, not only the file: no symlinks, devices or etcd data
		// directories as write targets, at check time and before any write.
		if err := probes.CheckHost(c); err != nil {
			return err
		}
	}
	if f.configCheck {
		if f.webConfig != "" {
			if err := web.Validate(f.webConfig); err != nil {
				return fmt.Errorf("--web.config.file %s: %w", f.webConfig, err)
			}
		}
		if enabled["probes"] {
			if err := preflight(c, cmd.ErrOrStderr()); err != nil {
				return err
			}
		}
		fmt.Fprintf(cmd.OutOrStdout(), "config OK: %d probe(s)%s\n", len(c.Probes.Targets), describeProbes(c))
		fmt.Fprintf(cmd.OutOrStdout(), "diskstats: %s\n", describeDeviceFilter(c.Diskstats))
		return nil
	}

	// A write to a closed log pipe (a log shipper that went away) must fail
	// with EPIPE, not kill the daemon before it removes its probe files. Go
	// raises SIGPIPE for a broken fd 1 or 2 unless the signal is ignored
	// (os/signal, "SIGPIPE"). Only serve: `diskcanary iostat 1 | head` should
	// still stop when head does.
	signal.Ignore(syscall.SIGPIPE)
	if f.maxProcs > 0 {
		runtime.GOMAXPROCS(f.maxProcs)
	}
	logger.Info("starting diskcanary", "version", version.Info(), "build_context", version.BuildContext(),
		"gomaxprocs", runtime.GOMAXPROCS(0))
	col, err := collector.New(collector.Options{Config: c, Paths: f.paths, Logger: logger, Contention: f.contention}, enabled)
	if err != nil {
		return err
	}
	col.Warm()
	// Loading the eBPF program parses the kernel's BTF (megabytes, and a
	// mapping of /sys/kernel/btf/vmlinux freed only with it): that garbage
	// goes back to the kernel now, not when the scavenger gets to it
	// (go run ./bench diskstats-1000, every default collector).
	debug.FreeOSMemory()
	// A scrape's heap is its series (about 300 bytes each until it is
	// written), garbage once sent: GOGC 50 keeps the peak at 1.5x that, not
	// 2x, for more GC work in a scrape that costs half node_exporter's (go
	// run ./bench diskstats-10000). The GOGC environment variable still rules.
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(50)
	}
	base := prometheus.NewRegistry()
	base.MustRegister(versioncollector.NewCollector("diskcanary"),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		collectors.NewGoCollector())

	mux := http.NewServeMux()
	// 100 parallel scrapes leave room for many Prometheus replicas and
	// ad-hoc curls (go run ./bench scrape-load runs 50 at once without a
	// 503). A client that never reads holds its slot until
	// --web.write-timeout.
	mux.Handle(f.telemetryPath, quietClientErrors(newMetricsHandler(base, col, f.maxRequests, logger), logger))
	if f.telemetryPath != "/" {
		landing, err := web.NewLandingPage(web.LandingConfig{
			Name:        "diskcanary",
			Description: "Storage-health canary: probe latency, diskstats and SMART",
			Version:     version.Info(),
			Links:       []web.LandingLinks{{Address: f.telemetryPath, Text: "Metrics"}},
			// The toolkit puts its route prefix before every link address,
			// an absolute URL included ("/https://…": a redirect, then 404),
			// so the documentation link is plain HTML.
			ExtraHTML: `<div><a href="` + docsURL + `">Documentation</a></div>`,
			// No pprof links: the daemon has no debug endpoints on purpose
			// (docs/adversarial.md), and the toolkit links them by default.
			Profiling: "false",
		})
		if err != nil {
			return err
		}
		mux.Handle("/", landing)
	}

	conns := &connLimiter{max: f.maxConns}
	listeners, err := conns.listen(f.listen)
	if err != nil {
		return err
	}
	defer func() {
		for _, l := range listeners {
			_ = l.Close()
		}
	}()

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	// SIGHUP's default action kills the daemon without removing its WAL
	// file; there is no reload, so say so instead.
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	go func() {
		for {
			select {
			case <-hup:
				logger.Info("SIGHUP ignored: diskcanary does not reload; restart it to apply a changed config or web config")
			case <-ctx.Done():
				return
			}
		}
	}()
	runDone := make(chan struct{})
	go func() { col.Run(ctx); close(runDone) }()

	srv := &http.Server{
		// web.ServeMultiple puts basic auth in front of this handler, so
		// only authenticated requests count as busy for conns.
		Handler:     conns.track(mux),
		ConnContext: conns.connContext,
		// A request is headers only; these bound what a client that sends
		// slowly, reads slowly or not at all can hold (TLS handshakes get
		// the smallest of the three).
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       15 * time.Second,
		WriteTimeout:      f.writeTimeout,
		// Longer than a 1 m scrape interval, so Prometheus reuses its
		// connection; under a flood conns closes idle ones sooner.
		IdleTimeout: 2 * time.Minute,
		// Handshake failures and timeouts are the client's doing: at info
		// level any client could write one log line per connection.
		ErrorLog: slog.NewLogLogger(logger.Handler(), slog.LevelDebug),
	}
	systemdSocket := false
	serveErr := make(chan error, 1)
	go func() {
		serveErr <- web.ServeMultiple(listeners, srv, &web.FlagConfig{
			WebListenAddresses: &f.listen, WebSystemdSocket: &systemdSocket, WebConfigFile: &f.webConfig,
		}, logger)
	}()

	select {
	case err := <-serveErr:
		stop()
		<-runDone
		if err != nil && !errors.Is(err, http.ErrServerClosed) {
			return fmt.Errorf("serve %s: %w", strings.Join(f.listen, ","), err)
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

// docsURL is the project's documentation, linked from the landing page.
const docsURL = "https://github.com/diskcanary/diskcanary"

// preflight reports what each probe will find on the host when the daemon
// opens its target: a warning line for a filesystem the daemon distrusts
// (exit 0, as promtool check does), and one error naming every target the
// daemon cannot use (exit 1).
func preflight(c *config.Config, warn io.Writer) error {
	var errs []error
	for _, p := range c.Probes.Targets {
		warnings, err := probes.Preflight(p)
		for _, w := range warnings {
			fmt.Fprintf(warn, "warning: probe %q: %s\n", p.Name, w)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("probe %q: %w", p.Name, err))
		}
	}
	return errors.Join(errs...)
}

// checkWebFlags refuses web flag values that would panic or make the
// daemon unreachable, before anything starts.
func (f *serveFlags) checkWebFlags() error {
	// An empty address (a unit's unset variable) would listen nowhere and
	// exit 0 at once, which Restart=on-failure does not restart. pflag
	// reads --web.listen-address '' as no address at all.
	if len(f.listen) == 0 {
		f.listen = []string{""}
	}
	for _, a := range f.listen {
		if strings.TrimSpace(a) == "" {
			return fmt.Errorf("--web.listen-address %q: empty; give HOST:PORT or :PORT (default :9742)", a)
		}
	}
	if err := checkTelemetryPath(f.telemetryPath); err != nil {
		return fmt.Errorf("--web.telemetry-path %q: %w", f.telemetryPath, err)
	}
	if f.maxConns < 1 {
		return fmt.Errorf("--web.max-connections %d: must be at least 1 (and above --web.max-requests)", f.maxConns)
	}
	if f.writeTimeout <= 0 {
		return fmt.Errorf("--web.write-timeout %v: must be positive", f.writeTimeout)
	}
	return nil
}

// checkContentionFlags refuses contention settings that cannot work: a
// pass needs time to run, and a budget past the interval would let passes
// queue behind each other.
func checkContentionFlags(c collector.ContentionConfig) error {
	switch {
	case c.Interval < time.Second:
		return fmt.Errorf("--collector.contention.interval %v: must be at least 1s", c.Interval)
	case c.Top < 1 || c.Top > 1000:
		return fmt.Errorf("--collector.contention.top %d: must be 1 to 1000 (each named cgroup is a series per device)", c.Top)
	case c.MaxCgroups < 1:
		return fmt.Errorf("--collector.contention.max-cgroups %d: must be at least 1", c.MaxCgroups)
	case c.Budget <= 0 || c.Budget > c.Interval:
		return fmt.Errorf("--collector.contention.budget %v: must be positive and at most --collector.contention.interval (%v)", c.Budget, c.Interval)
	}
	return nil
}

// checkTelemetryPath accepts a clean absolute URL path of unreserved
// characters: ServeMux panics on an empty path, one without a leading '/'
// or one with a space, reads '{' as a wildcard, and redirects unclean paths
// away, so nothing else could be scraped.
func checkTelemetryPath(p string) error {
	if !strings.HasPrefix(p, "/") {
		return errors.New("must start with '/', e.g. /metrics")
	}
	for _, r := range p {
		if !('a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || '0' <= r && r <= '9' || strings.ContainsRune("/-._~", r)) {
			return fmt.Errorf("%q is not allowed: use letters, digits and - . _ ~ /", r)
		}
	}
	if c := path.Clean(p); strings.Contains(p, "//") || c != p && c+"/" != p {
		return fmt.Errorf("not a clean path: use %s", c)
	}
	return nil
}

// quietClientErrors hides a failed write to the client from promhttp,
// which goes on after an error (so a failing collector still leaves a
// partial scrape) and logs one line per metric family: a client that stops
// reading would buy ~60 error lines a scrape. The failure is the client's
// doing; it is logged once, at debug level.
func quietClientErrors(next http.Handler, logger *slog.Logger) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		next.ServeHTTP(&clientWriter{ResponseWriter: w, logger: logger, client: r.RemoteAddr}, r)
	})
}

type clientWriter struct {
	http.ResponseWriter
	logger *slog.Logger
	client string
	failed bool
}

func (w *clientWriter) Write(p []byte) (int, error) {
	if !w.failed {
		if _, err := w.ResponseWriter.Write(p); err != nil {
			w.failed = true
			w.logger.Debug("scrape not delivered", "client", w.client, "err", err)
		}
	}
	return len(p), nil
}

func (w *clientWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

func describeProbes(c *config.Config) string {
	var b strings.Builder
	for _, p := range c.Probes.Targets {
		where := p.Dir
		if p.Device != "" {
			where = p.Device
		}
		if p.Kind == config.KindCapacity {
			fmt.Fprintf(&b, "\n  %s: capacity sweep, %s pattern, p99 bound %v, on %s every %v", p.Name, p.Pattern, p.MaxP99, where, p.Interval)
			continue
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
