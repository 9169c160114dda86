package smart

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"regexp"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/diskcanary/diskcanary/internal/config"
	"github.com/diskcanary/diskcanary/internal/hostpath"
	"github.com/diskcanary/diskcanary/internal/process"
)

// RunnerConfig is what the smartctl runner needs; collector/smart.go fills
// it from config.Smart. NewRunner gives a zero field the config's default.
type RunnerConfig struct {
	// Smartctl is the binary, looked up in PATH when not absolute.
	Smartctl string
	// Interval between two reads of one device.
	Interval time.Duration
	// Timeout for one smartctl invocation; its whole process group is killed.
	Timeout time.Duration
	// Concurrency bounds how many smartctl processes run at once.
	Concurrency int
	// Scan enables discovery with smartctl --scan-open every RescanInterval.
	Scan           bool
	RescanInterval time.Duration
	// VanishedAfter is how long a device may be missing from the scan before
	// its series are dropped.
	VanishedAfter time.Duration
	// NoCheck is smartctl's --nocheck power mode (never, sleep, standby, idle).
	NoCheck string
	// MaxBackoff caps the back-off of a device whose smartctl keeps hanging.
	MaxBackoff time.Duration
	// Devices are configured explicitly; they win over scanned devices with
	// the same label and never vanish.
	Devices []Device
	// SelfTests schedules self-tests (off unless Enabled).
	SelfTests SelfTestConfig
	// Paths are the host's /proc and /sys (--path.procfs, --path.sysfs).
	Paths  hostpath.Paths
	Logger *slog.Logger
}

// DeviceState is what the runner knows about one device, as handed to the
// collector and the CLI.
type DeviceState struct {
	Device Device
	Label  string
	// Result is the last result that carried device data (nil before the
	// first one). A standby or failed run keeps the previous data.
	Result *Result
	// ExitStatus is the last run's smartctl exit status (-1: none finished).
	ExitStatus ExitStatus
	// Success: the last run read the device, or found it asleep and left it so.
	Success     bool
	LastSuccess time.Time
	Standby     bool
	Timeouts    uint64
	Quarantined bool
	// Errors of the last run (timeouts, missing capabilities, smartctl errors).
	Errors []string
	// MissingCapability names the capability (CAP_SYS_RAWIO, CAP_SYS_ADMIN)
	// whose absence made the last run fail, if that is why it failed.
	MissingCapability string
	// Self-test scheduling (SelfTestsEnabled false: off), by kind
	// (SelfTestShort, SelfTestLong): the controller the device staggers
	// with, starts diskcanary made, skips by reason, the last start.
	SelfTestsEnabled  bool
	Controller        string
	SelfTestStarts    [2]uint64
	SelfTestSkips     [2][numSkipReasons]uint64
	SelfTestLastStart [2]time.Time
	// Generation changes whenever the state does, so a reader can cache
	// what it builds from it.
	Generation uint64
}

// Status is the runner's own state.
type Status struct {
	// SmartctlFound is false when the binary is missing; Devices is then empty.
	SmartctlFound bool
	SmartctlPath  string
	// ScanSuccess is the outcome of the last discovery scan (true when scanning is off).
	ScanSuccess bool
	// ScanDropped counts the devices the last scan listed that are not
	// read: config.MaxSmartDevices were tracked already.
	ScanDropped int
	Devices     []DeviceState
}

// Runner runs smartctl for every known device on its own schedule (never
// inside a scrape): bounded concurrency, one run per device at a time, a
// timeout per run that kills the process group, and back-off plus
// quarantine for a device whose smartctl hangs.
type Runner struct {
	cfg  RunnerConfig
	log  *slog.Logger
	caps capabilities
	sem  chan struct{}

	mu          sync.Mutex
	path        string
	pathErr     error
	lastLookup  time.Time
	scanning    bool
	nextScan    time.Time
	scanSuccess bool
	// scanFoundNone: the last scan listed no device (logged once).
	scanFoundNone bool
	scanDropped   int
	devs          map[string]*tracked
}

type tracked struct {
	explicit bool
	lastSeen time.Time
	running  bool
	nextRun  time.Time
	// hangs counts consecutive timeouts; it drives the back-off.
	hangs int
	// controller groups devices whose self-tests are staggered (controller.go).
	controller string
	st         selfTestState
	state      DeviceState
}

// NewRunner builds a runner; Run starts it. A field left zero takes the
// config's default (config.DefaultSmart*), the one place SMART defaults
// are stated, so a caller that sets only what it cares about (the CLI's
// one-shot read, a test) runs as the daemon would.
func NewRunner(cfg RunnerConfig) *Runner {
	cfg.Smartctl = cmp.Or(cfg.Smartctl, config.DefaultSmartctl)
	cfg.Interval = cmp.Or(cfg.Interval, config.DefaultSmartInterval)
	cfg.Timeout = cmp.Or(cfg.Timeout, config.DefaultSmartTimeout)
	if cfg.Concurrency <= 0 {
		cfg.Concurrency = config.DefaultSmartConcurrency
	}
	cfg.RescanInterval = cmp.Or(cfg.RescanInterval, config.DefaultSmartRescanInterval)
	cfg.VanishedAfter = cmp.Or(cfg.VanishedAfter, config.DefaultSmartVanishedAfter)
	cfg.NoCheck = cmp.Or(cfg.NoCheck, config.DefaultSmartNoCheck)
	// Not a config key: docs/configuration.md ("smart") promises quarantine backs off to 1 h.
	if cfg.MaxBackoff <= 0 {
		cfg.MaxBackoff = time.Hour
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	r := &Runner{
		cfg:         cfg,
		log:         cfg.Logger,
		caps:        readCapabilities(cfg.Paths.Proc()),
		sem:         make(chan struct{}, cfg.Concurrency),
		devs:        map[string]*tracked{},
		scanSuccess: true,
	}
	now := time.Now()
	labels := map[string]bool{}
	for _, t := range cfg.Devices {
		d := r.newDevice(t, true, now)
		// Two devices with one label would be duplicate series, which fail
		// the whole scrape: the first wins.
		if labels[d.state.Label] {
			r.log.Warn("smart: device ignored, its device label is taken", "device", t.Name, "type", t.Type, "label", d.state.Label)
			continue
		}
		labels[d.state.Label] = true
		r.devs[t.Key()] = d
	}
	return r
}

func (r *Runner) newDevice(t Device, explicit bool, now time.Time) *tracked {
	controller := controllerOf(r.cfg.Paths.Sys(), t)
	return &tracked{
		explicit: explicit,
		lastSeen: now,
		// Spread first runs over a tenth of the interval so a host with many
		// disks does not start all their smartctl processes in one instant.
		nextRun:    now.Add(time.Duration(rand.Int64N(int64(r.cfg.Interval/10) + 1))),
		controller: controller,
		st:         selfTestState{active: -1},
		state: DeviceState{Device: t, Label: r.label(t), ExitStatus: -1,
			SelfTestsEnabled: r.cfg.SelfTests.Enabled, Controller: controller},
	}
}

// label maps a device to its `device` label; an NVMe controller (nvme0,
// what smartctl scans) becomes its first namespace (nvme0n1, what
// /proc/diskstats lists).
func (r *Runner) label(t Device) string {
	l := t.Label()
	if nvmeController.MatchString(l) {
		ents, err := os.ReadDir(r.cfg.Paths.Sys("class", "nvme", l))
		if err == nil {
			var ns []string
			for _, e := range ents {
				if m := nvmeNamespace.FindStringSubmatch(e.Name()); m != nil && m[1] == l {
					ns = append(ns, m[1]+"n"+m[2])
				}
			}
			if len(ns) > 0 {
				sort.Strings(ns)
				return ns[0]
			}
		}
	}
	return l
}

var (
	nvmeController = regexp.MustCompile(`^nvme\d+$`)
	// nvme0n1, or nvme0c0n1 under native NVMe multipath.
	nvmeNamespace = regexp.MustCompile(`^(nvme\d+)(?:c\d+)?n(\d+)$`)
)

// Run works until ctx is cancelled. It never waits on a smartctl process
// on the way out: those are killed, and a process stuck in the kernel is
// reaped whenever the kernel lets go of it.
func (r *Runner) Run(ctx context.Context) {
	if !r.cfg.Scan && len(r.cfg.Devices) == 0 {
		r.log.Warn("smart: smart.scan is off and smart.devices lists no device: there is nothing to read")
	}
	tick := r.cfg.Interval / 20
	tick = max(min(tick, time.Second), 50*time.Millisecond)
	t := time.NewTicker(tick)
	defer t.Stop()
	for {
		r.step(ctx, time.Now())
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// step starts whatever is due: a rescan, and a run of each due device that
// has no run in flight.
func (r *Runner) step(ctx context.Context, now time.Time) {
	if !r.lookup(now) {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cfg.Scan && !r.scanning && !now.Before(r.nextScan) {
		r.scanning = true
		go r.scan(ctx)
	}
	for _, d := range r.devs {
		if d.running {
			continue
		}
		// A self-test start and a read of one device never overlap: both
		// are runs of the device.
		if kind, wake, ok := r.selfTestDue(d, now); ok {
			d.running = true
			go r.startSelfTest(ctx, d, kind, wake)
			continue
		}
		if now.Before(d.nextRun) {
			continue
		}
		d.running = true
		go r.collect(ctx, d)
	}
}

// lookup resolves the smartctl binary, again every RescanInterval while it
// is missing so installing smartctl needs no restart.
func (r *Runner) lookup(now time.Time) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.path != "" {
		return true
	}
	retry := max(r.cfg.RescanInterval, time.Minute)
	if !r.lastLookup.IsZero() && now.Sub(r.lastLookup) < retry {
		return false
	}
	first := r.lastLookup.IsZero()
	r.lastLookup = now
	p, err := process.LookPath(r.cfg.Smartctl)
	if err != nil {
		r.pathErr = err
		if first {
			r.log.Warn("smartctl not found: SMART metrics are off until it is installed (package smartmontools)", "smartctl", r.cfg.Smartctl, "err", err)
		}
		return false
	}
	r.path, r.pathErr = p, nil
	if !first {
		r.log.Info("smartctl found", "path", p)
	}
	return true
}

func (r *Runner) scan(ctx context.Context) {
	out := r.exec(ctx, "--scan-open", "--json")
	if out.Reaped != nil {
		// Never two scans at once, even when one is stuck in the kernel.
		<-out.Reaped
	}
	now := time.Now()
	var devices []Device
	err := out.Err
	switch {
	case out.TimedOut:
		err = fmt.Errorf("timed out after %s and was killed", r.cfg.Timeout)
	case err == nil:
		devices, err = ParseScan(out.Stdout)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.scanning = false
	r.nextScan = now.Add(r.cfg.RescanInterval)
	r.scanSuccess = err == nil
	if err != nil {
		// A failed scan says nothing about which devices are gone: keep them all.
		r.log.Warn("smartctl --scan-open failed", "err", err)
		return
	}
	// Once when the scan finds nothing, once when it finds devices again:
	// an empty SMART section has its reason in the log.
	switch {
	case len(devices) == 0 && !r.scanFoundNone:
		r.scanFoundNone = true
		then := "; SMART series appear when it finds one"
		if len(r.cfg.Devices) > 0 {
			then = "; only smart.devices are read"
		}
		r.log.Warn("smart: "+r.NoDevice()+then, "configured_devices", len(r.cfg.Devices))
	case len(devices) > 0 && r.scanFoundNone:
		r.scanFoundNone = false
		r.log.Info("smart: smartctl --scan-open finds devices again", "count", len(devices))
	}
	// Explicit devices win over scanned ones with the same label, and a
	// label is never used twice (the scrape would fail on duplicate series).
	labels := map[string]bool{}
	for _, d := range r.devs {
		labels[d.state.Label] = true
	}
	var dropped []string
	for _, t := range devices {
		if d, ok := r.devs[t.Key()]; ok {
			d.lastSeen = now
			if d.state.Device.Protocol == "" {
				d.state.Device.Protocol = t.Protocol
			}
			continue
		}
		// The config's cap holds for the scan too: each device is ~17 series
		// and a state, and an unbounded scan (a controller listing 20,000)
		// would make scrapes outlast Prometheus's 10 s timeout
		// (TestAdversarialSmartScanOf20000Devices).
		if len(r.devs) >= config.MaxSmartDevices {
			dropped = append(dropped, t.Key())
			continue
		}
		nd := r.newDevice(t, false, now)
		if labels[nd.state.Label] {
			continue
		}
		labels[nd.state.Label] = true
		r.devs[t.Key()] = nd
		r.log.Info("smart: new device", "device", t.Name, "type", t.Type)
	}
	if len(dropped) != r.scanDropped && len(dropped) > 0 {
		r.log.Warn("smart: smartctl --scan-open listed more devices than diskcanary reads; the rest are not read",
			"limit", config.MaxSmartDevices, "dropped", len(dropped), "first_dropped", strings.Join(dropped[:min(len(dropped), 5)], " "))
	}
	r.scanDropped = len(dropped)
	for k, d := range r.devs {
		// A device with a run in flight stays until that run is reaped, so a
		// device that comes back can never get a second concurrent run.
		if !d.explicit && !d.running && now.Sub(d.lastSeen) > r.cfg.VanishedAfter {
			delete(r.devs, k)
			r.log.Info("smart: device vanished, dropping its series", "device", d.state.Device.Name)
		}
	}
}

// collect runs smartctl for one device; d.running is already set.
func (r *Runner) collect(ctx context.Context, d *tracked) {
	select {
	case r.sem <- struct{}{}:
	case <-ctx.Done():
		r.mu.Lock()
		d.running = false
		r.mu.Unlock()
		return
	}
	r.mu.Lock()
	args := r.args(d)
	r.mu.Unlock()
	out := r.exec(ctx, args...)
	<-r.sem
	now := time.Now()

	r.mu.Lock()
	r.record(d, out, now)
	if out.Reaped == nil {
		d.running = false
		r.mu.Unlock()
		return
	}
	r.mu.Unlock()
	// The process did not die at SIGKILL (uninterruptible sleep on a dead
	// disk): its concurrency slot is free again, but the device gets no
	// second run until the kernel lets go of the first.
	r.log.Warn("smartctl still not reaped after SIGKILL; the device stays quarantined until it is", "device", d.state.Device.Name)
	<-out.Reaped
	r.mu.Lock()
	d.running = false
	r.mu.Unlock()
}

func (r *Runner) args(d *tracked) []string {
	// The self-test log: its newest result is exported, and smartctl
	// sets exit bit 7 ("self-test log contains errors") only while it
	// reads it.
	args := []string{"--json", "--info", "--health", "--attributes", "--log=error", "--log=selftest", "--nocheck=" + r.cfg.NoCheck}
	// The ACS device-statistics log has the standard SSD wear indicator,
	// and the SMART data (--capabilities) the self-test execution status
	// and its remaining percent; ask for them once the device is known to
	// speak ATA. (NVMe reports a running test in its self-test log.)
	if res := d.state.Result; res != nil && res.Protocol == ProtocolATA {
		args = append(args, "--log=devstat", "--capabilities")
	}
	if d.state.Device.Type != "" {
		args = append(args, "--device="+d.state.Device.Type)
	}
	return append(args, d.state.Device.Name)
}

// record folds one run into the device state. Caller holds r.mu.
func (r *Runner) record(d *tracked, out process.Result, now time.Time) {
	st := &d.state
	st.Generation++
	prevErrs := strings.Join(st.Errors, "; ")
	defer func() {
		// Log a device's errors when they change, not on every run.
		if errs := strings.Join(st.Errors, "; "); errs != prevErrs && errs != "" {
			r.log.Warn("smart: device read failed", "device", d.state.Device.Name, "err", errs)
		}
	}()
	st.Errors = nil
	st.MissingCapability = ""
	st.Standby = false
	if out.TimedOut {
		st.Timeouts++
		st.Success = false
		st.ExitStatus = -1
		d.hangs++
		st.Quarantined = true
		backoff := min(r.cfg.Interval<<min(d.hangs-1, 20), r.cfg.MaxBackoff)
		d.nextRun = now.Add(backoff)
		st.Errors = append(st.Errors, fmt.Sprintf("smartctl timed out after %s and was killed; quarantined, next try in %s", r.cfg.Timeout, backoff))
		r.log.Warn("smartctl timed out; device quarantined", "device", d.state.Device.Name, "timeout", r.cfg.Timeout, "consecutive", d.hangs, "retry_in", backoff)
		return
	}
	d.hangs = 0
	st.Quarantined = false
	d.nextRun = now.Add(r.cfg.Interval)
	if out.Err != nil {
		st.Success = false
		st.ExitStatus = -1
		st.Errors = append(st.Errors, out.Err.Error())
		return
	}
	res, err := Parse(out.Stdout)
	if err != nil {
		st.Success = false
		st.ExitStatus = ExitStatus(out.Code & 0xff)
		msg := fmt.Sprintf("smartctl %s: exit status %d, output unreadable: %v", d.state.Device.Name, out.Code, err)
		if out.Stderr != "" {
			msg += ": " + out.Stderr
		}
		st.Errors = append(st.Errors, msg)
		if ExitStatus(out.Code).NoData() {
			r.explainPermission(st, d.state.Device.Protocol, out.Stderr)
		}
		return
	}
	// The process's exit code is authoritative; the JSON copy of it can be
	// missing from old smartctl versions.
	res.ExitStatus = ExitStatus(out.Code & 0xff)
	st.ExitStatus = res.ExitStatus
	st.Errors = append(st.Errors, res.Errors...)
	switch {
	case res.Standby():
		st.Standby = true
		st.Success = true
		d.st.decide = true
	case res.ExitStatus.NoData():
		st.Success = false
		// What smartctl says it spoke beats what the scan guessed.
		protocol := res.Protocol
		if protocol == "" {
			protocol = d.state.Device.Protocol
		}
		r.explainPermission(st, protocol, strings.Join(res.Errors, "; ")+" "+out.Stderr)
	default:
		// The first read of an ATA disk went without --capabilities (see
		// args), so without the self-test execution status: a test that
		// runs but is not in the log yet would go unseen. The next read
		// decides.
		fullRead := res.Protocol != ProtocolATA || st.Result != nil && st.Result.Protocol == ProtocolATA
		st.Success = true
		st.LastSuccess = now
		st.Result = res
		// Reads and starts of one device never overlap, so this read
		// began after any start: a test it does not see running is over.
		if d.st.active >= 0 && !res.Testing.InProgress {
			d.st.active = -1
		}
		d.st.decide = fullRead
	}
}

func (r *Runner) explainPermission(st *DeviceState, protocol, smartctlSays string) {
	capName, missing, msg := permissionError(r.caps, protocol, st.Device, smartctlSays)
	if msg == "" {
		return
	}
	st.Errors = append(st.Errors, msg)
	if missing {
		st.MissingCapability = capName
	}
}

// NoDevice says that smartctl --scan-open found no device and, when this
// process lacks what smartctl needs to open a disk (CAP_SYS_RAWIO for
// ATA/SCSI, CAP_SYS_ADMIN for NVMe), that this may be why: as root it is
// not, and the hint would send the reader the wrong way.
func (r *Runner) NoDevice() string {
	msg := "smartctl --scan-open found no device"
	if !r.caps.has(capSysRawIO) || !r.caps.has(capSysAdmin) {
		msg += " (diskcanary lacks CAP_SYS_RAWIO or CAP_SYS_ADMIN, without which smartctl cannot open a disk: run it as root)"
	}
	return msg
}

// Status returns a snapshot, devices sorted by label.
func (r *Runner) Status() Status {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := Status{SmartctlFound: r.path != "", SmartctlPath: r.path, ScanSuccess: r.scanSuccess, ScanDropped: r.scanDropped}
	if r.lastLookup.IsZero() && r.path == "" {
		// Not looked up yet: do not report smartctl missing before we know.
		s.SmartctlFound = true
	}
	s.Devices = make([]DeviceState, 0, len(r.devs))
	for _, d := range r.devs {
		s.Devices = append(s.Devices, d.state)
	}
	sort.Slice(s.Devices, func(i, j int) bool { return s.Devices[i].Label < s.Devices[j].Label })
	return s
}

// CollectOnce runs smartctl once for each device (or the scanned devices
// when devices is empty), bounded by the configured concurrency; it is the
// `diskcanary smart` live mode.
func (r *Runner) CollectOnce(ctx context.Context, devices []Device) (Status, error) {
	if !r.lookup(time.Now()) {
		return Status{}, fmt.Errorf("smartctl not found (%v): install smartmontools, or use --from-json", r.pathErr)
	}
	if len(devices) == 0 && len(r.cfg.Devices) == 0 {
		out := r.exec(ctx, "--scan-open", "--json")
		if out.Err != nil {
			return Status{}, fmt.Errorf("smartctl --scan-open: %w", out.Err)
		}
		scanned, err := ParseScan(out.Stdout)
		if err != nil {
			return Status{}, err
		}
		if n := len(scanned); n > config.MaxSmartDevices {
			r.mu.Lock()
			r.scanDropped = n - config.MaxSmartDevices
			r.mu.Unlock()
			scanned = scanned[:config.MaxSmartDevices]
		}
		devices = scanned
	}
	now := time.Now()
	r.mu.Lock()
	for _, t := range devices {
		if _, ok := r.devs[t.Key()]; !ok {
			r.devs[t.Key()] = r.newDevice(t, true, now)
		}
	}
	devs := make([]*tracked, 0, len(r.devs))
	for _, d := range r.devs {
		d.running = true
		devs = append(devs, d)
	}
	r.mu.Unlock()
	var wg sync.WaitGroup
	for _, d := range devs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r.collect(ctx, d)
		}()
	}
	wg.Wait()
	return r.Status(), nil
}

// exec runs smartctl (process.go) with the configured timeout.
func (r *Runner) exec(ctx context.Context, args ...string) process.Result {
	r.mu.Lock()
	path := r.path
	r.mu.Unlock()
	return runSmartctl(ctx, path, r.cfg.Timeout, args...)
}
