package config

import (
	"fmt"
	"regexp"

	"go.yaml.in/yaml/v3"
)

// DefaultDeviceExclude is the device filter when none is set: like
// node_exporter's it drops RAM disks, floppies and partitions (counted on
// their whole disk, as iostat -dx shows), but it keeps loop devices, whose
// filesystems a probe may be on.
const DefaultDeviceExclude = `^(z?ram\d+|fd\d+|(h|s|v|xv)d[a-z]+\d+|nvme\d+n\d+p\d+|mmcblk\d+p\d+)$`

// Diskstats is the diskstats collector section.
type Diskstats struct {
	Enabled bool `yaml:"enabled"`
	// DeviceInclude / DeviceExclude are regexes on the kernel device name;
	// at most one may be set. With neither set, DefaultDeviceExclude
	// applies; device_include: ".*" keeps every device.
	DeviceInclude string `yaml:"device_include"`
	DeviceExclude string `yaml:"device_exclude"`
}

func (d *Diskstats) setDefaults() {
	d.Enabled = true
}

var diskstatsKeys = []key[Diskstats]{
	field("device_include", func(d *Diskstats) *string { return &d.DeviceInclude }, text, compiles),
	field("device_exclude", func(d *Diskstats) *string { return &d.DeviceExclude }, text, compiles),
}

// validate checks the section; src locates keys in the file (may be nil).
func (d *Diskstats) validate(src map[string]*yaml.Node) error {
	if key, line, problem := checkKeys(diskstatsKeys, d, src, "diskstats"); problem != "" {
		return at(line, "diskstats.%s: %s", key, problem)
	}
	if d.DeviceInclude != "" && d.DeviceExclude != "" {
		line := 0
		if n := src["diskstats.device_exclude"]; n != nil {
			line = n.Line
		}
		return at(line, "diskstats: device_include and device_exclude are mutually exclusive")
	}
	return nil
}

// DeviceFilter returns the compiled filter: include, when set, keeps only
// matching devices; otherwise exclude (DeviceExclude or the default) drops
// matching ones. Exactly one of the two is non-nil.
func (d *Diskstats) DeviceFilter() (include, exclude *regexp.Regexp, err error) {
	if d.DeviceInclude != "" {
		include, err = regexp.Compile(d.DeviceInclude)
		if err != nil {
			return nil, nil, fmt.Errorf("diskstats.device_include: %w", err)
		}
		return include, nil, nil
	}
	pattern := d.DeviceExclude
	if pattern == "" {
		pattern = DefaultDeviceExclude
	}
	exclude, err = regexp.Compile(pattern)
	if err != nil {
		return nil, nil, fmt.Errorf("diskstats.device_exclude: %w", err)
	}
	return nil, exclude, nil
}
