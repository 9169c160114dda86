package config

import (
	"fmt"
	"regexp"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// Smart is the SMART collector section.
type Smart struct {
	Enabled bool `yaml:"enabled"`
	// Smartctl is the smartctl binary (looked up in PATH when not absolute).
	Smartctl string `yaml:"smartctl"`
	// Interval between SMART reads of one device; SMART never runs inside a scrape.
	Interval time.Duration `yaml:"interval"`
	// Timeout per smartctl invocation; the whole process group is killed.
	Timeout time.Duration `yaml:"timeout"`
	// Concurrency bounds how many smartctl processes run at once.
	Concurrency int `yaml:"concurrency"`
	// Scan discovers devices with `smartctl --scan-open` every RescanInterval
	// (hot-plug); a device missing from the scan for VanishedAfter loses its series.
	Scan           bool          `yaml:"scan"`
	RescanInterval time.Duration `yaml:"rescan_interval"`
	VanishedAfter  time.Duration `yaml:"vanished_after"`
	// NoCheck is smartctl's --nocheck: with "standby" (the default) a
	// sleeping disk is left asleep and reported as such.
	NoCheck string `yaml:"nocheck"`
	// Devices are read in addition to the scanned ones, with an explicit
	// smartctl -d type where autodetection cannot work (RAID controllers,
	// some USB bridges).
	Devices []SmartDevice `yaml:"devices"`
	// SelfTests schedules SMART self-tests; off by default.
	SelfTests SelfTests `yaml:"self_tests"`
}

// SelfTests schedules short and long SMART self-tests: diskcanary starts
// them (smartctl --test), the drive runs them, and the self-test log every
// SMART read fetches gives the result. The schedule is an interval per kind
// plus one daily window, easier to write and read back than smartd's -s
// regex. A kind is due when none of it (a long counts as a short) started in
// this window and its last start, seen or dated by the drive's log, is at
// least interval − window ago, so a restart does not start the cycle over.
type SelfTests struct {
	Enabled bool `yaml:"enabled"`
	// Short and Long are how often each disk gets that test; 0 turns the
	// kind off. The per-protocol sections override them.
	Short time.Duration `yaml:"short"`
	Long  time.Duration `yaml:"long"`
	// StartHour is the local hour (0-23) the daily window opens; tests
	// start only within Window of it (24h: at any time of day).
	StartHour int           `yaml:"start_hour"`
	Window    time.Duration `yaml:"window"`
	// MaxStandbySkips is smartd's -n standby,N: a due test is skipped while
	// the disk sleeps (counted once per SMART read), and after this many
	// skips in a row it is started anyway, waking the disk. 0: never skip.
	MaxStandbySkips int `yaml:"max_standby_skips"`
	// Per-protocol overrides, by what smartctl reports the disk speaks.
	ATA  SelfTestClass `yaml:"ata"`
	NVMe SelfTestClass `yaml:"nvme"`
	SCSI SelfTestClass `yaml:"scsi"`
}

// SelfTestClass overrides the intervals for one protocol; nil inherits.
type SelfTestClass struct {
	Short *time.Duration `yaml:"short"`
	Long  *time.Duration `yaml:"long"`
}

// SelfTestClasses are the keys of the per-protocol sections.
var SelfTestClasses = []string{"ata", "nvme", "scsi"}

// Class returns the per-protocol section named by one of SelfTestClasses.
func (s *SelfTests) Class(name string) *SelfTestClass {
	switch name {
	case "ata":
		return &s.ATA
	case "nvme":
		return &s.NVMe
	case "scsi":
		return &s.SCSI
	}
	return nil
}

// Intervals returns the short and long intervals for a class (one of
// SelfTestClasses, or "" for the defaults), overrides applied.
func (s *SelfTests) Intervals(class string) (short, long time.Duration) {
	short, long = s.Short, s.Long
	if c := s.Class(class); c != nil {
		if c.Short != nil {
			short = *c.Short
		}
		if c.Long != nil {
			long = *c.Long
		}
	}
	return short, long
}

// SmartDevice is one explicitly configured device.
type SmartDevice struct {
	// Name is the device node (/dev/sdb, /dev/bus/0). "/dev/bus/0;megaraid,1"
	// (smartd's NAME;TYPE form) is accepted too.
	Name string `yaml:"name"`
	// Type is smartctl's -d TYPE (sat, nvme, megaraid,1, sat+megaraid,1, ...).
	Type string `yaml:"type"`
}

// SMART defaults: the only place they are stated. The `diskcanary smart`
// CLI and the runner should take theirs from here.
const (
	DefaultSmartctl            = "smartctl"
	DefaultSmartInterval       = 5 * time.Minute
	DefaultSmartTimeout        = 30 * time.Second
	DefaultSmartConcurrency    = 2
	DefaultSmartRescanInterval = 10 * time.Minute
	DefaultSmartVanishedAfter  = 30 * time.Minute
	DefaultSmartNoCheck        = "standby"

	// Self-tests, when enabled: a short test daily and a long one weekly
	// (what drive vendors and smartd.conf's examples suggest), started in
	// the small hours, and a sleeping disk woken for its test after an
	// hour of skips at the default 5 min SMART interval.
	DefaultSelfTestShort           = 24 * time.Hour
	DefaultSelfTestLong            = 7 * 24 * time.Hour
	DefaultSelfTestStartHour       = 2
	DefaultSelfTestWindow          = 6 * time.Hour
	DefaultSelfTestMaxStandbySkips = 12
)

// SmartNoCheckModes are smartctl's --nocheck power modes: never wakes
// every disk for a read; sleep, standby and idle leave alone a disk in
// that power mode or a deeper one.
var SmartNoCheckModes = []string{"never", "sleep", "standby", "idle"}

// smartType is what a smartctl -d TYPE looks like: lower-case words joined
// by '+', with ',N' arguments. It rules out spaces and option injection.
var smartType = regexp.MustCompile(`^[a-z0-9]+(?:,[a-z0-9x/]+)*(?:\+[a-z0-9]+(?:,[a-z0-9x/]+)*)*$`)

// smartKeys bounds the SMART section. A smartctl run wakes a controller
// and may take seconds: reads and rescans more often than every 10 s are
// load, not information; a timeout is at least 1 s (a slow USB bridge
// answers in hundreds of ms) and at most 10 min.
var smartKeys = []key[Smart]{
	field("smartctl", func(s *Smart) *string { return &s.Smartctl }, text, command),
	field("interval", func(s *Smart) *time.Duration { return &s.Interval }, duration, within(10*time.Second, 24*time.Hour)),
	field("timeout", func(s *Smart) *time.Duration { return &s.Timeout }, duration, within(time.Second, 10*time.Minute)),
	field("concurrency", func(s *Smart) *int { return &s.Concurrency }, count, within(1, 64)),
	field("rescan_interval", func(s *Smart) *time.Duration { return &s.RescanInterval }, duration, within(10*time.Second, 24*time.Hour)),
	field("vanished_after", func(s *Smart) *time.Duration { return &s.VanishedAfter }, duration, within(10*time.Second, 7*24*time.Hour)),
	field("nocheck", func(s *Smart) *string { return &s.NoCheck }, text, oneOf(SmartNoCheckModes...)),
}

// selfTestKeys bounds smart.self_tests. A test kind runs at most once per
// daily window, so an interval under 24h could only mean "daily"; a year
// is the longest that still tests a disk in service. The window is at
// least an hour (the scheduler decides once per SMART read) and at most
// the whole day.
var selfTestKeys = []key[SelfTests]{
	field("short", func(s *SelfTests) *time.Duration { return &s.Short }, duration, offOr(within(24*time.Hour, 366*24*time.Hour))),
	field("long", func(s *SelfTests) *time.Duration { return &s.Long }, duration, offOr(within(24*time.Hour, 366*24*time.Hour))),
	field("start_hour", func(s *SelfTests) *int { return &s.StartHour }, count, within(0, 23)),
	field("window", func(s *SelfTests) *time.Duration { return &s.Window }, duration, within(time.Hour, 24*time.Hour)),
	field("max_standby_skips", func(s *SelfTests) *int { return &s.MaxStandbySkips }, count, within(0, 10_000)),
}

var selfTestClassKeys = []key[SelfTestClass]{
	field("short", func(c *SelfTestClass) *time.Duration { return c.Short }, duration, offOr(within(24*time.Hour, 366*24*time.Hour))),
	field("long", func(c *SelfTestClass) *time.Duration { return c.Long }, duration, offOr(within(24*time.Hour, 366*24*time.Hour))),
}

var smartDeviceKeys = []key[SmartDevice]{
	field("name", func(d *SmartDevice) *string { return &d.Name }, text, devPath),
	field("type", func(d *SmartDevice) *string { return &d.Type }, text,
		optional(matches(smartType, "a smartctl -d type (sat, nvme, megaraid,N, ...)"))),
}

func (s *Smart) setDefaults() {
	s.Enabled = true
	s.Smartctl = DefaultSmartctl
	s.Interval = DefaultSmartInterval
	s.Timeout = DefaultSmartTimeout
	s.Concurrency = DefaultSmartConcurrency
	s.Scan = true
	s.RescanInterval = DefaultSmartRescanInterval
	s.VanishedAfter = DefaultSmartVanishedAfter
	s.NoCheck = DefaultSmartNoCheck
	s.SelfTests = SelfTests{
		Short:           DefaultSelfTestShort,
		Long:            DefaultSelfTestLong,
		StartHour:       DefaultSelfTestStartHour,
		Window:          DefaultSelfTestWindow,
		MaxStandbySkips: DefaultSelfTestMaxStandbySkips,
	}
}

// validate checks the section; src locates keys in the file (may be nil).
func (s *Smart) validate(src map[string]*yaml.Node) error {
	if key, line, problem := checkKeys(smartKeys, s, src, "smart"); problem != "" {
		return at(line, "smart.%s: %s", key, problem)
	}
	line := func(path string) int {
		if n := src[path]; n != nil {
			return n.Line
		}
		return 0
	}
	if key, line, problem := checkKeys(selfTestKeys, &s.SelfTests, src, "smart.self_tests"); problem != "" {
		return at(line, "smart.self_tests.%s: %s", key, problem)
	}
	for _, class := range SelfTestClasses {
		path := "smart.self_tests." + class
		if key, line, problem := checkKeys(selfTestClassKeys, s.SelfTests.Class(class), src, path); problem != "" {
			return at(line, "%s.%s: %s", path, key, problem)
		}
	}
	if s.VanishedAfter < s.RescanInterval {
		return at(line("smart.vanished_after"), "smart.vanished_after: %s is shorter than smart.rescan_interval %s; a device would vanish between two scans", s.VanishedAfter, s.RescanInterval)
	}
	if n := len(s.Devices); n > MaxSmartDevices {
		return at(line("smart.devices"), "smart.devices: %d devices exceed the limit of %d", n, MaxSmartDevices)
	}
	seen := map[string]bool{}
	for i := range s.Devices {
		d := &s.Devices[i]
		path := fmt.Sprintf("smart.devices[%d]", i)
		if name, typ, found := strings.Cut(d.Name, ";"); found && d.Type == "" {
			d.Name, d.Type = name, typ
		}
		if key, keyLine, problem := checkKeys(smartDeviceKeys, d, src, path); problem != "" {
			if keyLine == 0 {
				keyLine = line(path)
			}
			return at(keyLine, "%s.%s: %s", path, key, problem)
		}
		key := d.Name + ";" + d.Type
		if seen[key] {
			return at(line(path), "%s: %s listed twice", path, key)
		}
		seen[key] = true
	}
	return nil
}

// CheckSmartDevice applies a smart.devices entry's rules to a device named
// on the command line (`diskcanary smart DEVICE`, its type from ";TYPE" or
// --device-type): the key refused ("name" or "type") and why, or "".
func CheckSmartDevice(name, typ string) (key, problem string) {
	d := SmartDevice{Name: name, Type: typ}
	key, _, problem = checkKeys(smartDeviceKeys, &d, nil, "")
	return key, problem
}

// CheckSmartRead applies the smart section's rules to a one-shot read's
// settings (`diskcanary smart`, whose flags are named as these keys are):
// the key refused and why, or "" when they hold. The command line and the
// file have one set of limits.
func CheckSmartRead(smartctl string, timeout time.Duration, concurrency int, nocheck string) (key, problem string) {
	var s Smart
	s.setDefaults()
	s.Smartctl, s.Timeout, s.Concurrency, s.NoCheck = smartctl, timeout, concurrency, nocheck
	key, _, problem = checkKeys(smartKeys, &s, nil, "smart")
	return key, problem
}
