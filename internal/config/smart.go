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
)

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
	field("nocheck", func(s *Smart) *string { return &s.NoCheck }, text, oneOf("never", "sleep", "standby", "idle")),
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
