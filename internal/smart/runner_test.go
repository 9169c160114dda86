package smart

import (
	"bufio"
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/diskcanary/diskcanary/internal/hostpath"
	"github.com/diskcanary/diskcanary/internal/smart/smarttest"
)

// fakeRig runs a Runner against the fake smartctl.
type fakeRig struct {
	t      *testing.T
	cfg    smarttest.FakeConfig
	cfgFn  string
	runner *Runner
	cancel context.CancelFunc
	done   chan struct{}
}

func newFakeRig(t *testing.T, fake smarttest.FakeConfig, rc RunnerConfig) *fakeRig {
	t.Helper()
	dir := t.TempDir()
	if fake.Log == "" {
		fake.Log = filepath.Join(dir, "runs.log")
	}
	if fake.PIDFile == "" {
		fake.PIDFile = filepath.Join(dir, "pids")
	}
	bin := smarttest.Install(t, fake)
	if rc.Smartctl == "" {
		rc.Smartctl = bin
	}
	if rc.Interval == 0 {
		rc.Interval = 200 * time.Millisecond
	}
	if rc.Timeout == 0 {
		rc.Timeout = 5 * time.Second
	}
	if rc.RescanInterval == 0 {
		rc.RescanInterval = time.Hour
	}
	if rc.VanishedAfter == 0 {
		rc.VanishedAfter = time.Hour
	}
	if rc.Concurrency == 0 {
		rc.Concurrency = 4
	}
	rig := &fakeRig{t: t, cfg: fake, cfgFn: os.Getenv("FAKESMARTCTL_CONFIG"), runner: NewRunner(rc)}
	return rig
}

func (g *fakeRig) start() {
	ctx, cancel := context.WithCancel(context.Background())
	g.cancel, g.done = cancel, make(chan struct{})
	go func() { g.runner.Run(ctx); close(g.done) }()
	g.t.Cleanup(g.stop)
}

func (g *fakeRig) stop() {
	if g.cancel != nil {
		g.cancel()
		<-g.done
		g.cancel = nil
	}
}

// update rewrites the fake's behaviour; the next smartctl run reads it.
func (g *fakeRig) update(name string, d smarttest.FakeDevice) {
	g.cfg.Devices[name] = d
	smarttest.Install(g.t, g.cfg)
}

func (g *fakeRig) device(label string) (DeviceState, bool) {
	for _, d := range g.runner.Status().Devices {
		if d.Label == label {
			return d, true
		}
	}
	return DeviceState{}, false
}

// waitFor polls the runner until cond holds for the device and returns the
// state that met it; a failure prints the state last seen.
func (g *fakeRig) waitFor(label string, within time.Duration, what string, cond func(DeviceState) bool) DeviceState {
	g.t.Helper()
	var (
		mu   sync.Mutex
		seen DeviceState
	)
	met := assert.Eventually(g.t, func() bool {
		d, ok := g.device(label)
		mu.Lock()
		defer mu.Unlock()
		seen = d
		return ok && cond(d)
	}, within, 10*time.Millisecond)
	mu.Lock()
	defer mu.Unlock()
	if !met {
		g.t.Fatalf("%s: %s not reached within %s; state %+v", label, what, within, seen)
	}
	return seen
}

func fixture(name string) string { return smarttest.Fixture(name) }

func TestRunnerExitBits(t *testing.T) {
	good := fixture("sat-hdd-reallocated-304-smartctl-exporter.json")
	rig := newFakeRig(t, smarttest.FakeConfig{Devices: map[string]smarttest.FakeDevice{"/dev/sda": {Fixture: good}}},
		RunnerConfig{Devices: []Device{{Name: "/dev/sda"}}})
	rig.start()
	first := rig.waitFor("sda", 10*time.Second, "first read", func(d DeviceState) bool { return d.Result != nil })
	require.True(t, first.Success)
	require.Equal(t, ExitStatus(0), first.ExitStatus)

	for bit := range 8 {
		code := 1 << bit
		rig.update("/dev/sda", smarttest.FakeDevice{Fixture: good, Exit: smarttest.Int(code)})
		d := rig.waitFor("sda", 10*time.Second, "exit "+strconv.Itoa(code), func(d DeviceState) bool { return d.ExitStatus == ExitStatus(code) })
		require.NotNil(t, d.Result, "bit %d: earlier data is never thrown away", bit)
		require.Equal(t, 304.0, *d.Result.Health.ReallocatedSectors)
		if bit < 2 {
			require.False(t, d.Success, "bit %d means no data", bit)
			require.True(t, d.LastSuccess.Equal(first.LastSuccess) || d.LastSuccess.Before(time.Now().Add(-0)), "bit %d", bit)
		} else {
			require.True(t, d.Success, "bit %d is a health signal, not a collection failure", bit)
			require.Equal(t, ExitStatus(code), d.Result.ExitStatus)
		}
	}
}

func TestRunnerKeepsDataThroughNoDataRuns(t *testing.T) {
	good := fixture("nvme-pct-used-51-spare-93-smartctl-exporter.json")
	rig := newFakeRig(t, smarttest.FakeConfig{Devices: map[string]smarttest.FakeDevice{"/dev/nvme0": {Fixture: good}}},
		RunnerConfig{Devices: []Device{{Name: "/dev/nvme0"}}, Paths: hostpath.Paths{SysFS: t.TempDir()}})
	rig.start()
	d := rig.waitFor("nvme0", 10*time.Second, "first read", func(d DeviceState) bool { return d.Result != nil })
	okAt := d.LastSuccess

	rig.update("/dev/nvme0", smarttest.FakeDevice{Garbage: true})
	d = rig.waitFor("nvme0", 10*time.Second, "garbage run", func(d DeviceState) bool { return !d.Success })
	require.Contains(t, strings.Join(d.Errors, ";"), "output unreadable")
	require.Equal(t, 0.51, *d.Result.Health.WearUsedRatio, "garbage does not erase the last good data")
	require.Equal(t, okAt, d.LastSuccess)

	rig.update("/dev/nvme0", smarttest.FakeDevice{Fixture: fixture("synth-ata-standby-v7.3.json")})
	d = rig.waitFor("nvme0", 10*time.Second, "standby", func(d DeviceState) bool { return d.Standby })
	require.True(t, d.Success, "a sleeping disk left asleep is a successful check")
	require.Equal(t, 0.51, *d.Result.Health.WearUsedRatio)
	require.Equal(t, okAt, d.LastSuccess, "no new data was read")
}

func TestRunnerArgs(t *testing.T) {
	rig := newFakeRig(t, smarttest.FakeConfig{Devices: map[string]smarttest.FakeDevice{
		"/dev/sda":   {Fixture: fixture("sat-hdd-reallocated-304-smartctl-exporter.json")},
		"/dev/bus/0": {Fixture: fixture("megaraid-sat-hdd-disk1-reallocated-387-rc4-v7.1-scrutiny.json")},
		"/dev/nvme0": {Fixture: fixture("nvme-pct-used-51-spare-93-smartctl-exporter.json")},
	}}, RunnerConfig{Devices: []Device{{Name: "/dev/sda"}, {Name: "/dev/bus/0", Type: "sat+megaraid,1"}, {Name: "/dev/nvme0"}}, NoCheck: "standby"})
	rig.start()
	rig.waitFor("sda", 10*time.Second, "second read", func(d DeviceState) bool { return d.Result != nil })
	rig.waitFor("bus/0:sat+megaraid,1", 10*time.Second, "read", func(d DeviceState) bool { return d.Result != nil })
	rig.waitFor("nvme0", 10*time.Second, "read", func(d DeviceState) bool { return d.Result != nil })
	time.Sleep(500 * time.Millisecond)
	rig.stop()
	runs := readRuns(t, rig.cfg.Log)
	var sdaArgs, megaArgs, nvmeArgs []string
	for _, r := range runs {
		switch r.dev {
		case "/dev/sda":
			sdaArgs = append(sdaArgs, r.args)
		case "/dev/nvme0":
			nvmeArgs = append(nvmeArgs, r.args)
		default:
			megaArgs = append(megaArgs, r.args)
		}
	}
	// Every run of every device reads the self-test log: its newest
	// result is exported, and smartctl sets exit bit 7 only while reading it.
	for _, args := range [][]string{sdaArgs, megaArgs, nvmeArgs} {
		require.NotEmpty(t, args)
		for _, a := range args {
			require.Contains(t, a, "--log=selftest")
		}
	}
	require.GreaterOrEqual(t, len(sdaArgs), 2)
	require.Contains(t, sdaArgs[0], "--nocheck=standby")
	require.NotContains(t, sdaArgs[0], "--log=devstat", "protocol not known yet")
	require.Contains(t, sdaArgs[len(sdaArgs)-1], "--log=devstat", "ATA learnt: ask for device statistics")
	require.NotContains(t, sdaArgs[0], "--device=")
	require.Contains(t, megaArgs[0], "--device=sat+megaraid,1 /dev/bus/0")
}

// TestRunnerDefaults: a zero RunnerConfig field runs with the config's
// default, as docs/configuration.md ("smart") states them (the runner once fell back to a
// concurrency of 1 against the config's 2).
func TestRunnerDefaults(t *testing.T) {
	r := NewRunner(RunnerConfig{})
	require.Equal(t, "smartctl", r.cfg.Smartctl)
	require.Equal(t, 5*time.Minute, r.cfg.Interval)
	require.Equal(t, 30*time.Second, r.cfg.Timeout)
	require.Equal(t, 2, r.cfg.Concurrency)
	require.Equal(t, 2, cap(r.sem), "smartctl runs at once")
	require.Equal(t, 10*time.Minute, r.cfg.RescanInterval)
	require.Equal(t, 30*time.Minute, r.cfg.VanishedAfter)
	require.Equal(t, "standby", r.cfg.NoCheck)
	require.Equal(t, time.Hour, r.cfg.MaxBackoff)

	set := NewRunner(RunnerConfig{Smartctl: "/opt/smartctl", Interval: time.Minute, Timeout: time.Second, Concurrency: 5,
		RescanInterval: time.Hour, VanishedAfter: 2 * time.Hour, NoCheck: "never", MaxBackoff: time.Minute})
	require.Equal(t, RunnerConfig{Smartctl: "/opt/smartctl", Interval: time.Minute, Timeout: time.Second, Concurrency: 5,
		RescanInterval: time.Hour, VanishedAfter: 2 * time.Hour, NoCheck: "never", MaxBackoff: time.Minute},
		RunnerConfig{Smartctl: set.cfg.Smartctl, Interval: set.cfg.Interval, Timeout: set.cfg.Timeout, Concurrency: set.cfg.Concurrency,
			RescanInterval: set.cfg.RescanInterval, VanishedAfter: set.cfg.VanishedAfter, NoCheck: set.cfg.NoCheck, MaxBackoff: set.cfg.MaxBackoff},
		"a set field is kept")
}

func TestRunnerMissingSmartctl(t *testing.T) {
	r := NewRunner(RunnerConfig{Smartctl: filepath.Join(t.TempDir(), "smartctl"), Interval: time.Second, Timeout: time.Second,
		Scan: true, RescanInterval: time.Hour, VanishedAfter: time.Hour, Devices: []Device{{Name: "/dev/sda"}}})
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	r.Run(ctx)
	s := r.Status()
	require.False(t, s.SmartctlFound)
	_, err := r.CollectOnce(context.Background(), nil)
	require.ErrorContains(t, err, "smartctl not found")
}

func TestRunnerTimeoutKillsProcessGroupAndQuarantines(t *testing.T) {
	rig := newFakeRig(t, smarttest.FakeConfig{Devices: map[string]smarttest.FakeDevice{
		"/dev/sdh": {Hang: true},
		"/dev/sda": {Fixture: fixture("sat-hdd-reallocated-304-smartctl-exporter.json")},
	}}, RunnerConfig{Devices: []Device{{Name: "/dev/sdh"}, {Name: "/dev/sda"}}, Timeout: 400 * time.Millisecond, Interval: 300 * time.Millisecond, MaxBackoff: 2 * time.Second})
	start := time.Now()
	rig.start()
	d := rig.waitFor("sdh", 10*time.Second, "timeout", func(d DeviceState) bool { return d.Timeouts >= 1 })
	require.GreaterOrEqual(t, time.Since(start), 400*time.Millisecond)
	require.True(t, d.Quarantined)
	require.False(t, d.Success)
	require.Contains(t, strings.Join(d.Errors, ";"), "timed out after 400ms")

	// The fake and the grandchild it started are both gone: the whole
	// process group was killed, not just smartctl.
	pids := readPIDs(t, rig.cfg.PIDFile)
	require.NotEmpty(t, pids)
	for _, pid := range pids[:2] {
		require.Eventually(t, func() bool { return !alive(pid) }, 5*time.Second, 20*time.Millisecond, "pid %d survived", pid)
	}
	// The healthy disk keeps updating meanwhile.
	a1 := rig.waitFor("sda", 10*time.Second, "read", func(d DeviceState) bool { return d.Success })
	rig.waitFor("sda", 10*time.Second, "another read", func(d DeviceState) bool { return d.LastSuccess.After(a1.LastSuccess) })

	// Back-off: the second timeout comes no sooner than interval after the first.
	rig.waitFor("sdh", 10*time.Second, "second timeout", func(d DeviceState) bool { return d.Timeouts >= 2 })
	// Recovery clears the quarantine.
	rig.update("/dev/sdh", smarttest.FakeDevice{Fixture: fixture("nvme-pct-used-51-spare-93-smartctl-exporter.json")})
	d = rig.waitFor("sdh", 15*time.Second, "recovery", func(d DeviceState) bool { return d.Success })
	require.False(t, d.Quarantined)
	require.EqualValues(t, 2, d.Timeouts, "timeouts is a counter, kept")
}

func TestRunnerNeverOverlapsAndBoundsConcurrency(t *testing.T) {
	fake := smarttest.FakeConfig{Devices: map[string]smarttest.FakeDevice{}}
	var devices []Device
	for _, n := range []string{"a", "b", "c", "d", "e", "f"} {
		name := "/dev/sd" + n
		fake.Devices[name] = smarttest.FakeDevice{Fixture: fixture("sat-hdd-reallocated-304-smartctl-exporter.json"), Sleep: "150ms"}
		devices = append(devices, Device{Name: name})
	}
	rig := newFakeRig(t, fake, RunnerConfig{Devices: devices, Concurrency: 2, Interval: 50 * time.Millisecond})
	rig.start()
	time.Sleep(2500 * time.Millisecond)
	rig.stop()
	runs := readRuns(t, rig.cfg.Log)
	require.GreaterOrEqual(t, len(runs), 12)
	type ev struct {
		at    int64
		start bool
		dev   string
	}
	var evs []ev
	perDev := map[string][]run{}
	for _, r := range runs {
		if r.end == 0 {
			continue
		}
		perDev[r.dev] = append(perDev[r.dev], r)
		evs = append(evs, ev{r.start, true, r.dev}, ev{r.end, false, r.dev})
	}
	for dev, rs := range perDev {
		for i := 1; i < len(rs); i++ {
			require.GreaterOrEqual(t, rs[i].start, rs[i-1].end, "%s: two smartctl runs at once", dev)
		}
	}
	// Sweep start/end events in time order: never more than 2 at once.
	sortEvents := func() {
		for i := 1; i < len(evs); i++ {
			for j := i; j > 0 && (evs[j].at < evs[j-1].at || evs[j].at == evs[j-1].at && !evs[j].start && evs[j-1].start); j-- {
				evs[j], evs[j-1] = evs[j-1], evs[j]
			}
		}
	}
	sortEvents()
	n, peak := 0, 0
	for _, e := range evs {
		if e.start {
			n++
		} else {
			n--
		}
		peak = max(peak, n)
	}
	require.LessOrEqual(t, peak, 2, "concurrency bound")
	require.Equal(t, 2, peak, "the bound is also used")
}

func TestRunnerScanRescanAndVanish(t *testing.T) {
	nvme := fixture("nvme-pct-used-51-spare-93-smartctl-exporter.json")
	sat := fixture("sat-hdd-reallocated-304-smartctl-exporter.json")
	fake := smarttest.FakeConfig{
		Scan: []map[string]string{
			{"name": "/dev/sda", "type": "sat", "protocol": "ATA"},
			{"name": "/dev/nvme0", "type": "nvme", "protocol": "NVMe"},
		},
		Devices: map[string]smarttest.FakeDevice{"/dev/sda": {Fixture: sat}, "/dev/nvme0": {Fixture: nvme}, "/dev/sdb": {Fixture: sat}},
	}
	sys := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(sys, "class/nvme/nvme0/nvme0c0n1"), 0o755))
	require.NoError(t, os.MkdirAll(filepath.Join(sys, "class/nvme/nvme0/nvme0n1"), 0o755))
	rig := newFakeRig(t, fake, RunnerConfig{Scan: true, RescanInterval: 200 * time.Millisecond, VanishedAfter: 600 * time.Millisecond,
		Paths: hostpath.Paths{SysFS: sys}, Devices: []Device{{Name: "/dev/sdb", Type: "sat"}}})
	rig.start()
	rig.waitFor("sda", 10*time.Second, "scanned sda read", func(d DeviceState) bool { return d.Success })
	rig.waitFor("nvme0n1", 10*time.Second, "scanned nvme read under its namespace name", func(d DeviceState) bool { return d.Success })
	rig.waitFor("sdb", 10*time.Second, "explicit sdb read", func(d DeviceState) bool { return d.Success })

	// Hot-unplug sda: it disappears after the grace period; the explicit sdb never does.
	rig.cfg.Scan = rig.cfg.Scan[1:]
	smarttest.Install(t, rig.cfg)
	time.Sleep(300 * time.Millisecond)
	_, still := rig.device("sda")
	require.True(t, still, "a device survives a scan or two (grace period)")
	require.Eventually(t, func() bool { _, ok := rig.device("sda"); return !ok }, 10*time.Second, 20*time.Millisecond)
	_, ok := rig.device("sdb")
	require.True(t, ok)
	// Hot-plug it back.
	rig.cfg.Scan = append(rig.cfg.Scan, map[string]string{"name": "/dev/sda", "type": "sat", "protocol": "ATA"})
	smarttest.Install(t, rig.cfg)
	rig.waitFor("sda", 10*time.Second, "re-plugged sda read", func(d DeviceState) bool { return d.Success })
	labels := map[string]int{}
	for _, d := range rig.runner.Status().Devices {
		labels[d.Label]++
	}
	require.Equal(t, map[string]int{"sda": 1, "sdb": 1, "nvme0n1": 1}, labels)
}

func TestRunnerExplicitWinsOverScan(t *testing.T) {
	sat := fixture("sat-hdd-reallocated-304-smartctl-exporter.json")
	rig := newFakeRig(t, smarttest.FakeConfig{
		Scan:    []map[string]string{{"name": "/dev/sda", "type": "scsi", "protocol": "SCSI"}},
		Devices: map[string]smarttest.FakeDevice{"/dev/sda": {Fixture: sat}},
	}, RunnerConfig{Scan: true, Devices: []Device{{Name: "/dev/sda", Type: "sat"}}})
	rig.start()
	rig.waitFor("sda", 10*time.Second, "read", func(d DeviceState) bool { return d.Success })
	time.Sleep(300 * time.Millisecond)
	devs := rig.runner.Status().Devices
	require.Len(t, devs, 1)
	require.Equal(t, "sat", devs[0].Device.Type)
}

func TestRunnerMissingCapability(t *testing.T) {
	proc := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(proc, "self"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(proc, "self", "status"), []byte("Name:\tx\nCapEff:\t0000000000000000\n"), 0o644))
	openFailed := fixture("error-open-failed-windows-rc2-v7.0-scrutiny.json")
	rig := newFakeRig(t, smarttest.FakeConfig{Devices: map[string]smarttest.FakeDevice{
		"/dev/sda":   {Fixture: openFailed},
		"/dev/nvme0": {Fixture: openFailed, Stderr: "open: Permission denied"},
	}}, RunnerConfig{Paths: hostpath.Paths{ProcFS: proc, SysFS: t.TempDir()}, Devices: []Device{{Name: "/dev/sda", Protocol: ProtocolATA}, {Name: "/dev/nvme0"}}})
	rig.start()
	sda := rig.waitFor("sda", 10*time.Second, "failed read", func(d DeviceState) bool { return d.ExitStatus == ExitOpenFailed })
	require.Equal(t, "CAP_SYS_RAWIO", sda.MissingCapability)
	require.Contains(t, strings.Join(sda.Errors, ";"), "missing CAP_SYS_RAWIO")
	nv := rig.waitFor("nvme0", 10*time.Second, "failed read", func(d DeviceState) bool { return d.ExitStatus == ExitOpenFailed })
	require.Equal(t, "CAP_SYS_ADMIN", nv.MissingCapability)
	require.Contains(t, strings.Join(nv.Errors, ";"), "missing CAP_SYS_ADMIN (needed for NVMe admin commands)")
}

func TestPermissionErrorWithCapabilities(t *testing.T) {
	all := capabilities{eff: 1<<capSysAdmin | 1<<capSysRawIO, known: true}
	_, missing, msg := permissionError(all, ProtocolATA, Device{Name: "/dev/sda"}, "Smartctl open device: /dev/sda failed: No such device")
	require.False(t, missing)
	require.Empty(t, msg, "not a privilege problem")
	_, missing, msg = permissionError(all, ProtocolATA, Device{Name: "/dev/sda"}, "open: Permission denied")
	require.False(t, missing)
	require.Contains(t, msg, "device node's owner and mode")

	none := capabilities{known: true}
	for _, c := range []struct {
		protocol string
		t        Device
		want     string
	}{
		{"", Device{Name: "/dev/nvme0"}, "CAP_SYS_ADMIN"},
		{"", Device{Name: "/dev/disk9", Type: "nvme"}, "CAP_SYS_ADMIN"},
		{"", Device{Name: "/dev/sdb", Type: "sntjmicron"}, "CAP_SYS_RAWIO"},
		{ProtocolNVMe, Device{Name: "/dev/sdb", Type: "sntjmicron"}, "CAP_SYS_RAWIO"},
		{ProtocolNVMe, Device{Name: "/dev/nvme1"}, "CAP_SYS_ADMIN"},
		{"", Device{Name: "/dev/bus/0", Type: "megaraid,1"}, "CAP_SYS_RAWIO"},
		{ProtocolSCSI, Device{Name: "/dev/sda"}, "CAP_SYS_RAWIO"},
	} {
		capName, missing, msg := permissionError(none, c.protocol, c.t, "")
		require.True(t, missing, "%+v", c)
		require.Equal(t, c.want, capName, "%+v", c)
		require.Contains(t, msg, "missing "+c.want)
	}
}

type run struct {
	dev        string
	start, end int64
	args       string
}

func readRuns(t *testing.T, path string) []run {
	t.Helper()
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	var runs []run
	open := map[string]int{}
	s := bufio.NewScanner(f)
	for s.Scan() {
		fields := strings.SplitN(s.Text(), " ", 4)
		if len(fields) < 3 {
			continue
		}
		at, _ := strconv.ParseInt(fields[2], 10, 64)
		switch fields[0] {
		case "start":
			r := run{dev: fields[1], start: at}
			if len(fields) == 4 {
				r.args = fields[3]
			}
			open[fields[1]] = len(runs)
			runs = append(runs, r)
		case "end":
			if i, ok := open[fields[1]]; ok {
				runs[i].end = at
				delete(open, fields[1])
			}
		}
	}
	return runs
}

func readPIDs(t *testing.T, path string) []int {
	t.Helper()
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	var pids []int
	for _, f := range strings.Fields(string(data)) {
		p, err := strconv.Atoi(f)
		require.NoError(t, err)
		pids = append(pids, p)
	}
	return pids
}

// alive reports whether pid exists and is not a zombie waiting for a
// parent (in a container PID 1 may never reap the reparented grandchild).
func alive(pid int) bool {
	if err := syscall.Kill(pid, 0); err != nil {
		return false
	}
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	s := string(data)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || i+2 >= len(s) || s[i+2] != 'Z'
}

// TestRunnerDiscoveryFromRealScan drives discovery with a real
// `smartctl --scan` output: a megaraid controller whose seven disks share
// one device node and must each get a run with their own -d type.
func TestRunnerDiscoveryFromRealScan(t *testing.T) {
	sat := fixture("megaraid-sat-hdd-disk1-reallocated-387-rc4-v7.1-scrutiny.json")
	fake := smarttest.FakeConfig{ScanFixture: fixture("scan-megaraid-10dev-v7.1-telegraf.json"), Devices: map[string]smarttest.FakeDevice{
		"/dev/sda": {Fixture: sat}, "/dev/sdb": {Fixture: sat}, "/dev/sdc": {Fixture: sat}, "/dev/bus/6": {Fixture: sat},
	}}
	rig := newFakeRig(t, fake, RunnerConfig{Scan: true, Concurrency: 4})
	rig.start()
	for _, l := range []string{"sda", "sdb", "sdc", "bus/6:megaraid,8", "bus/6:megaraid,14"} {
		rig.waitFor(l, 10*time.Second, "read", func(d DeviceState) bool { return d.Success })
	}
	require.Eventually(t, func() bool {
		n := 0
		for _, d := range rig.runner.Status().Devices {
			if d.Success {
				n++
			}
		}
		return n == 10
	}, 10*time.Second, 20*time.Millisecond)
	rig.stop()
	types := map[string]bool{}
	for _, r := range readRuns(t, rig.cfg.Log) {
		if r.dev == "/dev/bus/6" {
			i := strings.Index(r.args, "--device=")
			require.GreaterOrEqual(t, i, 0, r.args)
			types[strings.Fields(r.args[i:])[0]] = true
		}
	}
	require.Len(t, types, 7, "one -d megaraid,N per disk behind the controller")
}

func TestRunnerOneDevicePerLabel(t *testing.T) {
	sat := fixture("sat-hdd-reallocated-304-smartctl-exporter.json")
	sys := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(sys, "class/nvme/nvme0/nvme0n1"), 0o755))
	rig := newFakeRig(t, smarttest.FakeConfig{
		Scan:    []map[string]string{{"name": "/dev/nvme0", "type": "nvme", "protocol": "NVMe"}, {"name": "/dev/sdb", "type": "sat", "protocol": "ATA"}},
		Devices: map[string]smarttest.FakeDevice{"/dev/nvme0": {Fixture: sat}, "/dev/nvme0n1": {Fixture: sat}, "/dev/sdb": {Fixture: sat}},
	}, RunnerConfig{Scan: true, Paths: hostpath.Paths{SysFS: sys}, Devices: []Device{{Name: "/dev/nvme0n1"}, {Name: "/dev/sdb", Type: "sat"}, {Name: "/dev/sdb"}}})
	rig.start()
	rig.waitFor("sdb", 10*time.Second, "read", func(d DeviceState) bool { return d.Success })
	rig.waitFor("nvme0n1", 10*time.Second, "read", func(d DeviceState) bool { return d.Success })
	time.Sleep(300 * time.Millisecond)
	var labels []string
	for _, d := range rig.runner.Status().Devices {
		labels = append(labels, d.Label+"="+d.Device.Key())
	}
	require.Equal(t, []string{"nvme0n1=/dev/nvme0n1", "sdb=/dev/sdb;sat"}, labels, "the scanned nvme0 is nvme0n1, already configured")
}

// TestRunnerEscapedHelperCannotWedge: something smartctl started left the
// process group and holds the output pipe open. The run must still end
// (output pipes are abandoned shortly after the kill) and the device must
// get its next run.
func TestRunnerEscapedHelperCannotWedge(t *testing.T) {
	rig := newFakeRig(t, smarttest.FakeConfig{Devices: map[string]smarttest.FakeDevice{"/dev/sde": {Hang: true, Escape: true}}},
		RunnerConfig{Devices: []Device{{Name: "/dev/sde"}}, Timeout: 300 * time.Millisecond, Interval: 200 * time.Millisecond, MaxBackoff: 200 * time.Millisecond})
	t.Cleanup(func() {
		// The escaped grandchildren are outside any group we kill: end them by pid.
		data, _ := os.ReadFile(rig.cfg.PIDFile)
		f := strings.Fields(string(data))
		for i := 1; i < len(f); i += 2 {
			if pid, err := strconv.Atoi(f[i]); err == nil {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		}
	})
	rig.start()
	d := rig.waitFor("sde", 15*time.Second, "two timeouts", func(d DeviceState) bool { return d.Timeouts >= 2 })
	require.True(t, d.Quarantined)
}

// scriptRunner is a Runner whose smartctl is a shell script written for
// the test: hostile binaries are easiest to state as a few lines of sh.
func scriptRunner(t *testing.T, script string) *Runner {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "smartctl")
	require.NoError(t, os.WriteFile(bin, []byte("#!/bin/sh\n"+script), 0o755))
	return NewRunner(RunnerConfig{Smartctl: bin, Interval: time.Hour, Timeout: 20 * time.Second})
}

func collectOnce(t *testing.T, r *Runner, name string) DeviceState {
	t.Helper()
	st, err := r.CollectOnce(context.Background(), []Device{{Name: name}})
	require.NoError(t, err)
	require.Len(t, st.Devices, 1)
	return st.Devices[0]
}

// TestAdversarialSmartctlFloodIsAnError: a smartctl that prints far more
// than any real output, on stdout or stderr, is read to its end (it is not
// left blocked on a full pipe: the line after the flood runs) and gives
// that device a clear error instead of a parse of the first 4 MiB.
func TestAdversarialSmartctlFloodIsAnError(t *testing.T) {
	for _, c := range []struct{ stream, redirect string }{{"stdout", ""}, {"stderr", " >&2"}} {
		stream, redirect := c.stream, c.redirect
		t.Run(stream, func(t *testing.T) {
			marker := filepath.Join(t.TempDir(), "finished")
			r := scriptRunner(t, "head -c 50000000 /dev/zero"+redirect+"\ntouch "+marker+"\ncat "+fixture("sat-hdd-reallocated-304-smartctl-exporter.json")+"\n")
			d := collectOnce(t, r, "/dev/sdz")
			require.False(t, d.Success)
			require.EqualValues(t, -1, d.ExitStatus)
			require.Zero(t, d.Timeouts)
			require.Len(t, d.Errors, 1)
			require.Contains(t, d.Errors[0], "printed more than")
			require.Contains(t, d.Errors[0], " bytes on "+stream+" (the rest was discarded)")
			require.FileExists(t, marker, "the flood was drained to its end")
		})
	}
}

// TestAdversarialSmartctlOrphansReaped: a smartctl that leaves a child in
// its process group (a wrapper script's `sleep 600 &`) must not leak it,
// on successful runs too, and the child holding the output pipe must not
// turn the run into a failure.
func TestAdversarialSmartctlOrphansReaped(t *testing.T) {
	pids := filepath.Join(t.TempDir(), "orphans")
	r := scriptRunner(t, "sleep 600 &\necho $! >> "+pids+"\ncat "+fixture("sat-hdd-reallocated-304-smartctl-exporter.json")+"\n")
	t.Cleanup(func() {
		data, _ := os.ReadFile(pids)
		for _, f := range strings.Fields(string(data)) {
			if pid, err := strconv.Atoi(f); err == nil && alive(pid) {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		}
	})
	for run := 1; run <= 3; run++ {
		d := collectOnce(t, r, "/dev/sdz")
		orphans := readPIDs(t, pids)
		require.Len(t, orphans, run)
		pid := orphans[run-1]
		require.Eventually(t, func() bool { return !alive(pid) }, 5*time.Second, 10*time.Millisecond, "orphan %d survived its smartctl run", pid)
		require.True(t, d.Success, "errors: %v", d.Errors)
		require.Empty(t, d.Errors)
	}
}
