package smart

import (
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/diskcanary/diskcanary/internal/hostpath"
	"github.com/diskcanary/diskcanary/internal/smart/smarttest"
)

// The drive's current self-test status, from real-shaped smartctl output.
func TestParseSelfTestProgress(t *testing.T) {
	ata := parseFixture(t, "synth-ata-selftest-in-progress-v7.3.json")
	require.True(t, ata.Testing.Reported)
	require.True(t, ata.Testing.InProgress)
	require.Equal(t, 0.9, *ata.Testing.RemainingRatio, "remaining_percent 90")
	require.Equal(t, [2]float64{60, 43800}, ata.Testing.ExpectedSeconds, "polling minutes 1 and 730")

	idle := parseFixture(t, "ata-hdd-healthy-hgst-hms5c4040-v7.3-libblockdev.json")
	require.True(t, idle.Testing.Reported)
	require.False(t, idle.Testing.InProgress, "status 0: completed without error")
	require.Nil(t, idle.Testing.RemainingRatio)
	require.Equal(t, [2]*float64{nil, nil}, idle.Testing.LastAgeSeconds, "no self-test log was read")

	nvme := parseFixture(t, "synth-nvme-selftest-in-progress-v7.5.json")
	require.True(t, nvme.Testing.InProgress)
	require.Equal(t, 0.7, *nvme.Testing.RemainingRatio, "30 % complete")
	nvmeIdle := parseFixture(t, "nvme-healthy-v7.5-beszel.json")
	require.True(t, nvmeIdle.Testing.Reported)
	require.False(t, nvmeIdle.Testing.InProgress, "No self-test in progress")

	// When each kind last ran, from the log: the failing USB disk at 65,592
	// power-on hours logged a short test at (wrapped) hour 42 and a failed
	// extended one at hour 4; the megaraid disk's newest short test was
	// aborted (status 0x19), so the one before it, 1,798 h ago, counts.
	failing := parseFixture(t, "ata-hdd-failing-reallocated-selftest-usbjmicron-rc216-scrutiny.json")
	require.Equal(t, 14*3600.0, *failing.Testing.LastAgeSeconds[SelfTestShort])
	require.Equal(t, 52*3600.0, *failing.Testing.LastAgeSeconds[SelfTestLong])
	require.False(t, failing.Testing.InProgress)
	mega := parseFixture(t, "megaraid-sat-hdd-disk1-reallocated-387-rc4-v7.1-scrutiny.json")
	require.Equal(t, 1798*3600.0, *mega.Testing.LastAgeSeconds[SelfTestShort])
	require.Nil(t, mega.Testing.LastAgeSeconds[SelfTestLong])

	// A SAS disk without a self-test log reports nothing: no status, no 0.
	scsi := parseFixture(t, "scsi-sas-hdd-grown-defects-260-uncorrected-smartctl-exporter.json")
	require.False(t, scsi.Testing.Reported)
}

func TestSelfTestDueKind(t *testing.T) {
	c := SelfTestConfig{Enabled: true, Default: [2]time.Duration{24 * time.Hour, 168 * time.Hour},
		StartHour: 2, Window: 6 * time.Hour, Location: time.UTC}
	at := func(s string) time.Time {
		v, err := time.Parse("2006-01-02 15:04", s)
		require.NoError(t, err)
		return v
	}
	ago := func(d time.Duration) *float64 { v := d.Seconds(); return &v }
	for _, tc := range []struct {
		name       string
		now        string
		lastShort  string
		lastLong   string
		lastTry    string // a failed short start
		logAges    [2]*float64
		protocol   string
		want       int
		wantWindow string
	}{
		{name: "before the window", now: "2026-11-24 01:59", want: -1, wantWindow: "2026-11-23 02:00"},
		{name: "after the window", now: "2026-11-24 08:00", want: -1, wantWindow: "2026-11-24 02:00"},
		{name: "never tested: long first", now: "2026-11-24 02:00", want: SelfTestLong, wantWindow: "2026-11-24 02:00"},
		{name: "long done this week: short", now: "2026-11-24 03:00", lastLong: "2026-11-20 02:30", want: SelfTestShort},
		{name: "short already started in this window", now: "2026-11-24 07:59", lastShort: "2026-11-24 02:10", lastLong: "2026-11-20 02:30", want: -1},
		// A test the stagger pushed to 07:50 yesterday is due again at
		// 02:00 today, not at 07:50.
		{name: "late start snaps back", now: "2026-11-24 02:05", lastShort: "2026-11-23 07:50", lastLong: "2026-11-20 02:30", want: SelfTestShort},
		{name: "long a week after its window opened", now: "2026-11-24 02:05", lastShort: "2026-11-23 02:10", lastLong: "2026-11-17 07:59", want: SelfTestLong},
		{name: "long six days ago", now: "2026-11-24 02:05", lastShort: "2026-11-23 02:10", lastLong: "2026-11-18 02:00", want: SelfTestShort},
		{name: "a long test counts as a short one", now: "2026-11-24 02:05", lastShort: "2026-11-20 02:10", lastLong: "2026-11-24 02:01", want: -1},
		{name: "failed start: not again in this window", now: "2026-11-24 03:00", lastLong: "2026-11-20 02:30", lastTry: "2026-11-24 02:05", want: -1},
		{name: "failed start yesterday: again today", now: "2026-11-24 03:00", lastLong: "2026-11-20 02:30", lastTry: "2026-11-23 02:05", want: SelfTestShort},
		// After a restart diskcanary knows only the drive's log.
		{name: "log: short 5 h ago, long 3 days ago", now: "2026-11-24 03:00", logAges: [2]*float64{ago(5 * time.Hour), ago(72 * time.Hour)}, want: SelfTestShort},
		{name: "log: short 1 h ago", now: "2026-11-24 03:00", logAges: [2]*float64{ago(time.Hour), ago(72 * time.Hour)}, want: -1},
		{name: "log: long 0 h ago", now: "2026-11-24 03:00", logAges: [2]*float64{nil, ago(0)}, want: -1},
		{name: "nvme: long off", now: "2026-11-24 03:00", protocol: ProtocolNVMe, want: SelfTestShort},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := c
			cfg.ByProtocol = map[string][2]time.Duration{ProtocolNVMe: {24 * time.Hour, 0}}
			st := selfTestState{active: -1}
			if tc.lastShort != "" {
				st.lastStart[SelfTestShort] = at(tc.lastShort)
			}
			if tc.lastLong != "" {
				st.lastStart[SelfTestLong] = at(tc.lastLong)
			}
			if tc.lastTry != "" {
				st.lastTry[SelfTestShort] = at(tc.lastTry)
			}
			res := &Result{Protocol: tc.protocol}
			res.Testing.LastAgeSeconds = tc.logAges
			require.Equal(t, tc.want, cfg.dueKind(&st, res, at(tc.now)))
			if tc.wantWindow != "" {
				require.Equal(t, at(tc.wantWindow), cfg.windowOpen(at(tc.now)))
			}
		})
	}
}

// fakeSysfs links /sys/class/block/NAME to a device path under /sys/devices.
func fakeSysfs(t *testing.T, links map[string]string) string {
	t.Helper()
	sys := t.TempDir()
	for name, dev := range links {
		target := filepath.Join(sys, "devices", dev)
		require.NoError(t, os.MkdirAll(target, 0o755))
		class := filepath.Join(sys, "class", filepath.Dir(name))
		require.NoError(t, os.MkdirAll(class, 0o755))
		require.NoError(t, os.Symlink(target, filepath.Join(class, filepath.Base(name))))
	}
	return sys
}

func TestControllerOf(t *testing.T) {
	sys := fakeSysfs(t, map[string]string{
		"block/sda":   "pci0000:00/0000:00:17.0/ata1/host0/target0:0:0/0:0:0:0/block/sda",
		"block/sdb":   "pci0000:00/0000:00:17.0/ata2/host1/target1:0:0/1:0:0:0/block/sdb",
		"block/sdc":   "pci0000:00/0000:00:01.0/0000:01:00.0/host2/port-2:0/end_device-2:0/target2:0:0/2:0:0:0/block/sdc",
		"nvme/nvme0":  "pci0000:00/0000:00:1d.0/0000:3d:00.0/nvme/nvme0",
		"block/sdd":   "platform/soc/host3/target3:0:0/3:0:0:0/block/sdd",
		"block/vda":   "virtual/block/vda",
		"block/sde":   "pci0000:00/0000:00:14.0/usb2/2-1/2-1:1.0/host6/target6:0:0/6:0:0:0/block/sde",
		"block/sdf":   "pci0000:00/0000:00:14.0/usb2/2-2/2-2:1.0/host7/target7:0:0/7:0:0:0/block/sdf",
		"nvme/nvme1":  "pci0000:00/0000:00:1d.4/0000:3e:00.0/nvme/nvme1",
		"block/ghost": "nowhere",
	})
	for _, c := range []struct {
		t    Device
		want string
	}{
		{Device{Name: "/dev/sda"}, "pci:0000:00:17.0"},
		{Device{Name: "/dev/sdb", Type: "sat"}, "pci:0000:00:17.0"},
		{Device{Name: "/dev/sdc"}, "pci:0000:01:00.0"},
		{Device{Name: "/dev/nvme0"}, "pci:0000:3d:00.0"},
		{Device{Name: "/dev/nvme1"}, "pci:0000:3e:00.0"},
		{Device{Name: "/dev/sdd"}, "scsi:host3"},
		{Device{Name: "/dev/vda"}, "disk:/dev/vda"},
		{Device{Name: "/dev/sde"}, "pci:0000:00:14.0"},
		{Device{Name: "/dev/sdf"}, "pci:0000:00:14.0"},
		{Device{Name: "/dev/sdz"}, "disk:/dev/sdz"},
		{Device{Name: "/dev/bus/0", Type: "megaraid,1"}, "port:/dev/bus/0"},
		{Device{Name: "/dev/bus/0", Type: "sat+megaraid,2"}, "port:/dev/bus/0"},
		{Device{Name: "/dev/sg1", Type: "cciss,3"}, "port:/dev/sg1"},
		{Device{Name: "/dev/disk/by-id/ata-X"}, "disk:/dev/disk/by-id/ata-X"},
	} {
		require.Equal(t, c.want, controllerOf(sys, c.t), "%+v", c.t)
	}
}

// selfTestRig is a runner with self-tests on and a window that is open
// all day from the current hour, so whatever is due starts now.
func selfTestRig(t *testing.T, fake smarttest.FakeConfig, sys string, devices []Device, mutate func(*SelfTestConfig)) *fakeRig {
	t.Helper()
	st := SelfTestConfig{Enabled: true, Default: [2]time.Duration{24 * time.Hour, 0}, StartHour: time.Now().Hour(), Window: 24 * time.Hour, MaxStandbySkips: 3}
	if mutate != nil {
		mutate(&st)
	}
	if sys == "" {
		sys = t.TempDir()
	}
	return newFakeRig(t, fake, RunnerConfig{Devices: devices, Paths: hostpath.Paths{SysFS: sys}, SelfTests: st, NoCheck: "standby"})
}

// starts are the self-test starts in the fake's log, in order.
func starts(runs []run) []run {
	var out []run
	for _, r := range runs {
		if strings.Contains(r.args, "--test=") {
			out = append(out, r)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].start < out[j].start })
	return out
}

const (
	hgstIdle    = "ata-hdd-healthy-hgst-hms5c4040-v7.3-libblockdev.json"
	hgstTesting = "synth-ata-selftest-in-progress-v7.3.json"
)

func TestSelfTestsOffByDefault(t *testing.T) {
	rig := newFakeRig(t, smarttest.FakeConfig{Devices: map[string]smarttest.FakeDevice{"/dev/sda": {Fixture: fixture(hgstIdle)}}},
		RunnerConfig{Devices: []Device{{Name: "/dev/sda"}}, Paths: hostpath.Paths{SysFS: t.TempDir()}})
	rig.start()
	rig.waitFor("sda", 10*time.Second, "three reads", func(d DeviceState) bool { return d.Generation >= 3 })
	rig.stop()
	runs := readRuns(t, rig.cfg.Log)
	require.GreaterOrEqual(t, len(runs), 3)
	require.Empty(t, starts(runs), "self-tests are off unless enabled")
	d, _ := rig.device("sda")
	require.False(t, d.SelfTestsEnabled)
	require.Equal(t, [2]uint64{0, 0}, d.SelfTestStarts)
}

func TestSelfTestDueShortStarts(t *testing.T) {
	rig := selfTestRig(t, smarttest.FakeConfig{Devices: map[string]smarttest.FakeDevice{
		"/dev/sda": {Fixture: fixture(hgstIdle), Testing: fixture(hgstTesting), TestingReads: 2},
	}}, "", []Device{{Name: "/dev/sda", Type: "sat"}}, nil)
	rig.start()
	// The start is read back at once: the drive's status shows it running.
	d := rig.waitFor("sda", 10*time.Second, "test seen running", func(d DeviceState) bool {
		return d.Result != nil && d.Result.Testing.InProgress
	})
	require.Equal(t, [2]uint64{1, 0}, d.SelfTestStarts)
	require.Equal(t, 0.9, *d.Result.Testing.RemainingRatio)
	require.False(t, d.SelfTestLastStart[SelfTestShort].IsZero())
	rig.waitFor("sda", 10*time.Second, "test over", func(d DeviceState) bool {
		return d.Result != nil && !d.Result.Testing.InProgress
	})
	rig.stop()
	ss := starts(readRuns(t, rig.cfg.Log))
	require.Len(t, ss, 1, "one short test per window")
	require.Equal(t, "--json --nocheck=standby --test=short --device=sat /dev/sda", ss[0].args)
	d, _ = rig.device("sda")
	require.Equal(t, [2]uint64{1, 0}, d.SelfTestStarts)
	require.Equal(t, [numSkipReasons]uint64{}, d.SelfTestSkips[SelfTestShort], "nothing was skipped")
}

func TestSelfTestLongBeforeShort(t *testing.T) {
	nvme := fixture("nvme-healthy-v7.5-beszel.json")
	rig := selfTestRig(t, smarttest.FakeConfig{Devices: map[string]smarttest.FakeDevice{"/dev/nvme0": {Fixture: nvme}}},
		"", []Device{{Name: "/dev/nvme0"}}, func(c *SelfTestConfig) { c.Default = [2]time.Duration{24 * time.Hour, 168 * time.Hour} })
	rig.start()
	rig.waitFor("nvme0", 10*time.Second, "long start", func(d DeviceState) bool { return d.SelfTestStarts[SelfTestLong] == 1 })
	time.Sleep(time.Second)
	rig.stop()
	ss := starts(readRuns(t, rig.cfg.Log))
	require.Len(t, ss, 1, "a long test counts as the short one")
	require.Equal(t, "--json --nocheck=standby --test=long /dev/nvme0", ss[0].args)
}

// Two disks on one AHCI controller never test at once: the second starts
// only after a read of the first shows its test over. A disk on another
// controller does not wait.
func TestSelfTestsStaggeredOnOneController(t *testing.T) {
	sys := fakeSysfs(t, map[string]string{
		"block/sda": "pci0000:00/0000:00:17.0/ata1/host0/target0:0:0/0:0:0:0/block/sda",
		"block/sdb": "pci0000:00/0000:00:17.0/ata2/host1/target1:0:0/1:0:0:0/block/sdb",
		"block/sdc": "pci0000:00/0000:00:01.0/0000:01:00.0/host2/target2:0:0/2:0:0:0/block/sdc",
	})
	const testingReads = 3
	dev := smarttest.FakeDevice{Fixture: fixture(hgstIdle), Testing: fixture(hgstTesting), TestingReads: testingReads}
	rig := selfTestRig(t, smarttest.FakeConfig{Devices: map[string]smarttest.FakeDevice{"/dev/sda": dev, "/dev/sdb": dev, "/dev/sdc": dev}},
		sys, []Device{{Name: "/dev/sda"}, {Name: "/dev/sdb"}, {Name: "/dev/sdc"}}, nil)
	rig.start()
	for _, l := range []string{"sda", "sdb", "sdc"} {
		rig.waitFor(l, 15*time.Second, "short start", func(d DeviceState) bool { return d.SelfTestStarts[SelfTestShort] == 1 })
	}
	rig.stop()
	runs := readRuns(t, rig.cfg.Log)
	ss := starts(runs)
	require.Len(t, ss, 3)
	var ahci []run
	var other run
	for _, s := range ss {
		if s.dev == "/dev/sdc" {
			other = s
		} else {
			ahci = append(ahci, s)
		}
	}
	require.Len(t, ahci, 2)
	first, second := ahci[0], ahci[1]
	// The first disk's reads after its start: testingReads show the test
	// running, the next one shows it over. The second start comes after.
	var reads []run
	for _, r := range runs {
		if r.dev == first.dev && r.start > first.end && !strings.Contains(r.args, "--test=") {
			reads = append(reads, r)
		}
	}
	sort.Slice(reads, func(i, j int) bool { return reads[i].start < reads[j].start })
	require.Greater(t, len(reads), testingReads, "the second disk started before reads of the first showed its test over")
	over := reads[testingReads]
	require.Greater(t, second.start, over.end, "the second disk started before a read saw the first one's test end")
	require.Less(t, other.start, second.start, "a disk on another controller does not wait")

	a, _ := rig.device("sda")
	b, _ := rig.device("sdb")
	c, _ := rig.device("sdc")
	require.Equal(t, "pci:0000:00:17.0", a.Controller)
	require.Equal(t, "pci:0000:00:17.0", b.Controller)
	require.Equal(t, "pci:0000:01:00.0", c.Controller)
	waited := a
	if second.dev == "/dev/sdb" {
		waited = b
	}
	require.GreaterOrEqual(t, waited.SelfTestSkips[SelfTestShort][SkipControllerBusy], uint64(1))
	require.Zero(t, c.SelfTestSkips[SelfTestShort][SkipControllerBusy])
}

// A sleeping disk is left asleep for max_standby_skips reads in a row, each
// counted; the next due test wakes it (--nocheck=never).
func TestSelfTestStandbySkipsThenRuns(t *testing.T) {
	rig := selfTestRig(t, smarttest.FakeConfig{Devices: map[string]smarttest.FakeDevice{
		"/dev/sda": {Fixture: fixture("synth-ata-standby-v7.3.json")},
	}}, "", []Device{{Name: "/dev/sda"}}, func(c *SelfTestConfig) { c.MaxStandbySkips = 3 })
	rig.start()
	d := rig.waitFor("sda", 10*time.Second, "start", func(d DeviceState) bool { return d.SelfTestStarts[SelfTestShort] == 1 })
	require.True(t, d.Standby)
	time.Sleep(time.Second)
	rig.stop()
	d, _ = rig.device("sda")
	require.Equal(t, uint64(3), d.SelfTestSkips[SelfTestShort][SkipStandby], "three skips, then the test")
	runs := readRuns(t, rig.cfg.Log)
	ss := starts(runs)
	require.Len(t, ss, 1)
	require.Equal(t, "--json --nocheck=never --test=short /dev/sda", ss[0].args)
	before := 0
	for _, r := range runs {
		if r.start < ss[0].start {
			require.Contains(t, r.args, "--nocheck=standby", "reads leave the disk asleep")
			before++
		}
	}
	require.GreaterOrEqual(t, before, 4, "three skipped reads and the one that decided to wake it")
}

// A disk found asleep by the start itself (it fell asleep after its last
// read) counts a standby skip, not a start.
func TestSelfTestStartFindsDiskAsleep(t *testing.T) {
	rig := selfTestRig(t, smarttest.FakeConfig{Devices: map[string]smarttest.FakeDevice{
		"/dev/sda": {Fixture: fixture(hgstIdle), SelfTest: fixture("synth-ata-standby-v7.3.json")},
	}}, "", []Device{{Name: "/dev/sda"}}, func(c *SelfTestConfig) { c.MaxStandbySkips = 2 })
	rig.start()
	d := rig.waitFor("sda", 10*time.Second, "a skipped start", func(d DeviceState) bool {
		return d.SelfTestSkips[SelfTestShort][SkipStandby] >= 1
	})
	require.Zero(t, d.SelfTestStarts[SelfTestShort])
}

// A drive that reports a self-test running, whoever started it, gets no
// second one; the skip is counted.
func TestSelfTestNotStartedWhileOneRuns(t *testing.T) {
	rig := selfTestRig(t, smarttest.FakeConfig{Devices: map[string]smarttest.FakeDevice{
		"/dev/sda":   {Fixture: fixture(hgstTesting)},
		"/dev/nvme0": {Fixture: fixture("synth-nvme-selftest-in-progress-v7.5.json")},
	}}, "", []Device{{Name: "/dev/sda"}, {Name: "/dev/nvme0"}}, nil)
	rig.start()
	for _, l := range []string{"sda", "nvme0"} {
		d := rig.waitFor(l, 10*time.Second, "two skips", func(d DeviceState) bool {
			return d.SelfTestSkips[SelfTestShort][SkipInProgress] >= 2
		})
		require.True(t, d.Result.Testing.InProgress)
	}
	rig.stop()
	require.Empty(t, starts(readRuns(t, rig.cfg.Log)))
}

// A drive that refuses the start (exit bit 2, a SMART command failed) is
// counted and not asked again in this window.
func TestSelfTestStartRefused(t *testing.T) {
	rig := selfTestRig(t, smarttest.FakeConfig{Devices: map[string]smarttest.FakeDevice{
		"/dev/sda": {Fixture: fixture(hgstIdle), SelfTest: fixture("sat-ssd-kingston-a400-rc4-smartctl-exporter.json")},
	}}, "", []Device{{Name: "/dev/sda"}}, nil)
	rig.start()
	rig.waitFor("sda", 10*time.Second, "failed start", func(d DeviceState) bool {
		return d.SelfTestSkips[SelfTestShort][SkipStartFailed] == 1
	})
	time.Sleep(time.Second)
	rig.stop()
	d, _ := rig.device("sda")
	require.Equal(t, uint64(1), d.SelfTestSkips[SelfTestShort][SkipStartFailed])
	require.Zero(t, d.SelfTestStarts[SelfTestShort])
	require.Len(t, starts(readRuns(t, rig.cfg.Log)), 1)
}
