package config

import (
	"fmt"
	"regexp"
)

// Diskstats is the diskstats collector section.
type Diskstats struct {
	Enabled bool `yaml:"enabled"`
	// DeviceInclude / DeviceExclude are regexes on the kernel device name;
	// at most one may be set.
	DeviceInclude string `yaml:"device_include"`
	DeviceExclude string `yaml:"device_exclude"`
}

func (d *Diskstats) setDefaults() {
	d.Enabled = true
}

func (d *Diskstats) validate() error {
	if d.DeviceInclude != "" && d.DeviceExclude != "" {
		return fmt.Errorf("diskstats: device_include and device_exclude are mutually exclusive")
	}
	for key, re := range map[string]string{"device_include": d.DeviceInclude, "device_exclude": d.DeviceExclude} {
		if _, err := regexp.Compile(re); err != nil {
			return fmt.Errorf("diskstats.%s: %w", key, err)
		}
	}
	return nil
}
