package smart

import (
	"path/filepath"
	"regexp"
	"strings"
)

// One controller, for staggering self-tests: disks whose tests would compete
// for one host adapter, so at most one of them runs a scheduled self-test at
// a time. A disk addressed through a controller port (-d megaraid,N, ...)
// groups by its device node (/dev/bus/0); any other disk by the PCI
// function nearest to it in its sysfs path (the function, not the slot: a
// dual-port HBA is two controllers; an NVMe drive is its own), else by its
// SCSI host, else it is a controller of its own.

var (
	// pciAddress is a PCI function's sysfs name, domain:bus:device.function.
	pciAddress = regexp.MustCompile(`^[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]$`)
	scsiHost   = regexp.MustCompile(`^host[0-9]+$`)
)

// controllerOf returns the controller key of t (see above).
func controllerOf(sysfs string, t Device) string {
	if portSelector(t.Type) {
		return "port:" + t.Name
	}
	name := strings.TrimPrefix(t.Name, "/dev/")
	if name == "" || strings.Contains(name, "/") || name == "." || name == ".." {
		return "disk:" + t.Name
	}
	// sda and nvme0n1 are block devices, nvme0 (what smartctl scans) an
	// NVMe controller, sg1 a SCSI generic node.
	for _, class := range []string{"block", "nvme", "scsi_generic"} {
		p, err := filepath.EvalSymlinks(filepath.Join(sysfs, "class", class, name))
		if err != nil {
			continue
		}
		elems := strings.Split(filepath.ToSlash(p), "/")
		for i := len(elems) - 1; i >= 0; i-- {
			if pciAddress.MatchString(elems[i]) {
				return "pci:" + elems[i]
			}
		}
		for i := len(elems) - 1; i >= 0; i-- {
			if scsiHost.MatchString(elems[i]) {
				return "scsi:" + elems[i]
			}
		}
		break
	}
	return "disk:" + t.Name
}
