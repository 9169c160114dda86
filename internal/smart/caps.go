package smart

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Linux capability bits (include/uapi/linux/capability.h). SCSI/ATA
// pass-through (SG_IO with ATA PASS-THROUGH) needs CAP_SYS_RAWIO; NVMe admin
// commands (the SMART / health log) need CAP_SYS_ADMIN.
const (
	capSysRawIO = 17
	capSysAdmin = 21
)

// capabilities is the effective capability set of this process, read from
// /proc/self/status; known is false when it could not be read.
type capabilities struct {
	eff   uint64
	known bool
}

func readCapabilities(procfs string) capabilities {
	f, err := os.Open(filepath.Join(procfs, "self", "status"))
	if err != nil {
		return capabilities{}
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if v, ok := strings.CutPrefix(s.Text(), "CapEff:"); ok {
			eff, err := strconv.ParseUint(strings.TrimSpace(v), 16, 64)
			if err != nil {
				return capabilities{}
			}
			return capabilities{eff: eff, known: true}
		}
	}
	return capabilities{}
}

func (c capabilities) has(bit uint) bool { return !c.known || c.eff&(1<<bit) != 0 }

// neededCapability names the capability smartctl needs to reach a device:
// by the protocol smartctl reported, else by the -d type, else by the name.
// (USB-NVMe bridges such as sntjmicron tunnel through SCSI: CAP_SYS_RAWIO.)
func neededCapability(protocol, typ, name string) (string, uint) {
	nvme := protocol == ProtocolNVMe
	switch {
	case strings.HasPrefix(typ, "snt"):
		// USB-NVMe bridges (sntjmicron, sntasmedia, sntrealtek): NVMe
		// commands wrapped in SCSI pass-through on /dev/sdX.
		nvme = false
	case protocol == "":
		if typ != "" {
			nvme = typ == "nvme" || strings.HasPrefix(typ, "nvme,")
		} else {
			nvme = strings.HasPrefix(filepath.Base(name), "nvme")
		}
	}
	if nvme {
		return "CAP_SYS_ADMIN", capSysAdmin
	}
	return "CAP_SYS_RAWIO", capSysRawIO
}

// permissionError explains a failed open in terms of the missing
// capability (missing is then true), or returns msg "" when the failure does
// not look like a privilege problem.
func permissionError(c capabilities, protocol string, t Device, smartctlSays string) (capName string, missing bool, msg string) {
	name := t.Name
	capName, bit := neededCapability(protocol, t.Type, name)
	denied := strings.Contains(smartctlSays, "Permission denied") || strings.Contains(smartctlSays, "Operation not permitted")
	if c.has(bit) {
		if denied && c.known {
			return capName, false, fmt.Sprintf("smartctl cannot open %s: permission denied although diskcanary has %s; check the device node's owner and mode", name, capName)
		}
		if !denied {
			return capName, false, ""
		}
	}
	kind := "ATA/SCSI pass-through"
	if capName == "CAP_SYS_ADMIN" {
		kind = "NVMe admin commands"
	}
	return capName, true, fmt.Sprintf("smartctl cannot read %s: missing %s (needed for %s); run diskcanary as root or grant it %s (setcap, or securityContext.capabilities.add in Kubernetes)",
		name, capName, kind, capName)
}
