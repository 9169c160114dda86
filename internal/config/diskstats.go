package config

import (
	"fmt"
	"regexp"
)

// DefaultDeviceExclude is the device filter used when neither device_include
// nor device_exclude is set. Like node_exporter's default it drops RAM disks
// (ram, zram), floppies and the partitions of sd/hd/vd/xvd, NVMe and MMC
// disks (their I/O is already counted on the whole disk, and iostat -dx also
// shows whole disks only). Unlike node_exporter it keeps loop devices: they
// carry real I/O for snaps, images and test filesystems, and a probe on a
// loop-device filesystem must find its device's diskstats.
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
