package smart

import (
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"
)

// Device is one device as smartctl is pointed at it: a name and an optional
// -d type (empty: let smartctl autodetect).
type Device struct {
	Name string
	Type string
	// Protocol is what the scan said (may be wrong for SATA disks behind
	// plain --scan); used only to name the capability a failure needs.
	Protocol string
}

// Key identifies a device: several megaraid disks share one device name.
func (t Device) Key() string {
	if t.Type == "" {
		return t.Name
	}
	return t.Name + ";" + t.Type
}

// Label is the device's `device` label: the kernel name (sda, nvme0n1) so
// SMART series join diskstats and node_exporter, with the controller port
// appended for disks behind a RAID controller (sda:megaraid,1).
func (t Device) Label() string { return DeviceLabel(t.Name, t.Type) }

// ParseScan reads `smartctl --scan-open --json` (or --scan) output.
func ParseScan(data []byte) ([]Device, error) {
	var raw struct {
		Smartctl *rawSmartctl `json:"smartctl"`
		Devices  []struct {
			rawDevice
			OpenError string `json:"open_error"`
		} `json:"devices"`
	}
	if err := json.Unmarshal(data, &raw); err != nil {
		return nil, fmt.Errorf("smartctl scan json: %w", err)
	}
	if raw.Smartctl == nil {
		return nil, errors.New("smartctl scan json: no smartctl object")
	}
	out := make([]Device, 0, len(raw.Devices))
	seen := map[string]bool{}
	for _, d := range raw.Devices {
		if d.Name == "" {
			continue
		}
		t := Device{Name: d.Name, Protocol: d.Protocol}
		// The scanned type is passed on only where it selects a disk behind a
		// controller; elsewhere smartctl autodetects again, because plain
		// --scan reports SATA disks as "scsi" and -d scsi would hide their
		// ATA attributes.
		if portSelector(d.Type) {
			t.Type = d.Type
		}
		if seen[t.Key()] {
			continue
		}
		seen[t.Key()] = true
		out = append(out, t)
	}
	return out, nil
}

// portTypes are smartctl -d types that address one disk among several behind
// a controller ("megaraid,N", "cciss,N", "sat+megaraid,N", ...).
var portTypes = regexp.MustCompile(`^(?:[a-z0-9]+\+)?(?:megaraid|cciss|areca|3ware|aacraid|hpt|jmb39x|sssraid),`)

func portSelector(typ string) bool { return portTypes.MatchString(typ) }

// DeviceLabel turns a smartctl device name and type into the `device` label.
func DeviceLabel(name, typ string) string {
	l := strings.TrimPrefix(name, "/dev/")
	if portSelector(typ) {
		l += ":" + typ
	}
	return l
}
