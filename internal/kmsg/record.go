// Package kmsg reads the kernel log's structured records from /dev/kmsg
// and sorts the storage ones into counted events: block-layer request
// errors by status, driver timeouts, aborts and resets, filesystem errors,
// shutdowns and read-only remounts, hung tasks. It does not decide names
// (a SCSI address or an NVMe controller becomes a disk in the collector,
// which has sysfs).
package kmsg

import (
	"bytes"
	"errors"
	"strconv"
)

// Record is one /dev/kmsg record (Documentation/ABI/testing/dev-kmsg):
//
//	"<prio>,<seq>,<usec>,<flag>[,...];<message>\n"
//	" SUBSYSTEM=block\n DEVICE=b7:0\n"   (optional dictionary lines)
//
// prio is facility<<3 | level. Non-printable bytes in the message arrive
// escaped as \xNN; Text keeps them escaped.
type Record struct {
	Facility int // 0: the kernel; userspace writes to /dev/kmsg get 1 (LOG_USER) or what they ask, never 0
	Level    int // 0 emerg … 7 debug
	Seq      uint64
	Usec     uint64 // since boot, CLOCK_MONOTONIC
	Text     string
	// Subsystem and Device come from the dictionary that dev_printk adds
	// (SUBSYSTEM=scsi, DEVICE=+scsi:0:0:0:0; SUBSYSTEM=block, DEVICE=b8:0).
	Subsystem, Device string
}

// ErrMalformed is a record that does not have the documented shape.
var ErrMalformed = errors.New("kmsg: malformed record")

// Kernel is the facility of the kernel's own records.
const Kernel = 0

// Parse reads one record as a read(2) of /dev/kmsg returns it.
func Parse(b []byte) (Record, error) {
	var r Record
	semi := bytes.IndexByte(b, ';')
	if semi < 0 {
		return r, ErrMalformed
	}
	head, body := b[:semi], b[semi+1:]
	var fields [3][]byte
	for i := range fields {
		comma := bytes.IndexByte(head, ',')
		if comma < 0 {
			if i < 2 {
				return r, ErrMalformed
			}
			comma = len(head) // "<prio>,<seq>,<usec>" with no flag
		}
		fields[i], head = head[:comma], head[min(comma+1, len(head)):]
	}
	prio, err := strconv.ParseUint(string(fields[0]), 10, 32)
	if err != nil {
		return r, ErrMalformed
	}
	if r.Seq, err = strconv.ParseUint(string(fields[1]), 10, 64); err != nil {
		return r, ErrMalformed
	}
	if r.Usec, err = strconv.ParseUint(string(fields[2]), 10, 64); err != nil {
		return r, ErrMalformed
	}
	r.Facility, r.Level = int(prio>>3), int(prio&7)
	text, dict, _ := bytes.Cut(body, []byte{'\n'})
	r.Text = string(text)
	for len(dict) > 0 {
		var line []byte
		line, dict, _ = bytes.Cut(dict, []byte{'\n'})
		if len(line) == 0 || line[0] != ' ' {
			continue
		}
		k, v, ok := bytes.Cut(line[1:], []byte{'='})
		if !ok {
			continue
		}
		switch string(k) {
		case "SUBSYSTEM":
			r.Subsystem = string(v)
		case "DEVICE":
			r.Device = string(v)
		}
	}
	return r, nil
}
