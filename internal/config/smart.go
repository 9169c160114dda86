package config

import (
	"fmt"
	"regexp"
	"strings"
	"time"
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

// NoCheck values smartctl accepts.
var smartNoCheck = []string{"never", "sleep", "standby", "idle"}

// smartType is what a smartctl -d TYPE looks like: lower-case words joined
// by '+', with ',N' arguments. It rules out spaces and option injection.
var smartType = regexp.MustCompile(`^[a-z0-9]+(?:,[a-z0-9x/]+)*(?:\+[a-z0-9]+(?:,[a-z0-9x/]+)*)*$`)

func (s *Smart) setDefaults() {
	s.Enabled = true
	s.Smartctl = "smartctl"
	s.Interval = 5 * time.Minute
	s.Timeout = 30 * time.Second
	s.Concurrency = 2
	s.Scan = true
	s.RescanInterval = 10 * time.Minute
	s.VanishedAfter = 30 * time.Minute
	s.NoCheck = "standby"
}

func (s *Smart) validate() error {
	if s.Interval <= 0 {
		return fmt.Errorf("smart.interval: must be positive")
	}
	if s.Timeout <= 0 {
		return fmt.Errorf("smart.timeout: must be positive")
	}
	if s.Smartctl == "" {
		return fmt.Errorf("smart.smartctl: must name the smartctl binary")
	}
	if s.Concurrency < 1 || s.Concurrency > 64 {
		return fmt.Errorf("smart.concurrency: %d is not between 1 and 64", s.Concurrency)
	}
	if s.RescanInterval <= 0 {
		return fmt.Errorf("smart.rescan_interval: must be positive")
	}
	if s.VanishedAfter < s.RescanInterval {
		return fmt.Errorf("smart.vanished_after: %s is shorter than smart.rescan_interval %s; a device would vanish between two scans", s.VanishedAfter, s.RescanInterval)
	}
	ok := false
	for _, v := range smartNoCheck {
		ok = ok || s.NoCheck == v
	}
	if !ok {
		return fmt.Errorf("smart.nocheck: %q is not one of %s", s.NoCheck, strings.Join(smartNoCheck, ", "))
	}
	seen := map[string]bool{}
	for i := range s.Devices {
		d := &s.Devices[i]
		if name, typ, found := strings.Cut(d.Name, ";"); found && d.Type == "" {
			d.Name, d.Type = name, typ
		}
		if !strings.HasPrefix(d.Name, "/dev/") {
			return fmt.Errorf("smart.devices[%d].name: %q is not a /dev path", i, d.Name)
		}
		if d.Type != "" && !smartType.MatchString(d.Type) {
			return fmt.Errorf("smart.devices[%d].type: %q is not a smartctl -d type (sat, nvme, megaraid,N, ...)", i, d.Type)
		}
		key := d.Name + ";" + d.Type
		if seen[key] {
			return fmt.Errorf("smart.devices[%d]: %s listed twice", i, key)
		}
		seen[key] = true
	}
	return nil
}
