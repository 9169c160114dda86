package config

import (
	"bytes"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// FuzzParse: whatever YAML Parse accepts has every field inside its bounds.
// The bounds are restated here as literals, not read from probeKeys, so a
// row that goes missing from the table fails the fuzz run.
//
//	go test -fuzz FuzzParse -fuzztime 60s ./internal/config/
func FuzzParse(f *testing.F) {
	seeds, err := filepath.Glob("testdata/*.yml")
	if err != nil || len(seeds) == 0 {
		f.Fatalf("no seeds: %v", err)
	}
	for _, s := range seeds {
		data, err := os.ReadFile(s)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Add(Default)
	f.Add([]byte("probes:\n  targets:\n    - &d {name: a, kind: wal, dir: /x, interval: 10ms, jitter: 0.5, gap: 0s}\n    - {<<: *d, name: b, ops: 7}\n"))
	f.Add([]byte("probes:\n  targets:\n    - {name: r, kind: randread, device: /dev/sdb, block_size: 1MiB, ops: 10000, min_free: 1EiB}\n"))

	nameRE := regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$`)
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := Parse(data)
		if err != nil {
			// A refusal never shows a number that wrapped around.
			if msg := err.Error(); strings.Contains(msg, "9223372036854775808") && !bytes.Contains(data, []byte("9223372036854775808")) {
				t.Fatalf("refusal shows a wrapped number: %s", msg)
			}
			return
		}
		check := func(ok bool, format string, args ...any) {
			t.Helper()
			if !ok {
				t.Fatalf("accepted out of bounds: "+format+"\n%s", append(args, data)...)
			}
		}
		path := func(p string) bool {
			if p == "" {
				return true
			}
			for _, el := range strings.Split(p, "/") {
				if el == ".." {
					return false
				}
			}
			return strings.HasPrefix(p, "/") && len(p) <= 4095 && !strings.ContainsRune(p, 0)
		}
		check(len(c.Probes.Targets) <= 128, "%d targets", len(c.Probes.Targets))
		for _, p := range c.Probes.Targets {
			check(nameRE.MatchString(p.Name) && !strings.Contains(p.Name, ".."), "name %q", p.Name)
			check(p.Kind == "wal" || p.Kind == "randread", "kind %q", p.Kind)
			check(p.Interval >= 10*time.Millisecond && p.Interval <= 24*time.Hour, "interval %d", p.Interval)
			check(p.Jitter >= 0 && p.Jitter < 1 && !math.IsNaN(p.Jitter), "jitter %v", p.Jitter)
			check(p.Ops >= 1 && p.Ops <= 10_000, "ops %d", p.Ops)
			check(p.BlockSize >= 1 && p.BlockSize <= 1<<20, "block_size %d", p.BlockSize)
			check(p.WorkingSet >= 0 && p.WorkingSet <= 1<<40, "working_set %d", p.WorkingSet)
			check(p.StallThreshold >= 10*time.Millisecond && p.StallThreshold <= time.Hour, "stall_threshold %d", p.StallThreshold)
			check(p.MinFree >= 1 && p.MinFree <= 1<<60, "min_free %d", p.MinFree)
			check(p.DailyWriteBudget >= 1 && p.DailyWriteBudget <= 1<<60, "daily_write_budget %d", p.DailyWriteBudget)
			check(p.SegmentSize >= 0 && p.SegmentSize <= 1<<30, "segment_size %d", p.SegmentSize)
			check(path(p.Dir) && path(p.Device), "dir %q device %q", p.Dir, p.Device)
			if p.Kind == "wal" {
				check(p.Dir != "" && p.Device == "" && p.Ops <= 50, "wal dir %q device %q ops %d", p.Dir, p.Device, p.Ops)
				check(p.Gap != nil && *p.Gap >= 0 && *p.Gap <= time.Second, "gap %v", p.Gap)
				check(p.Layout == "append" || p.Layout == "overwrite", "layout %q", p.Layout)
				check(p.Layout != "append" || p.SegmentSize >= ByteSize(p.Ops)*p.BlockSize, "segment_size %d", p.SegmentSize)
			} else {
				check((p.Dir == "") != (p.Device == "") && p.Layout == "" && p.BlockSize%512 == 0, "randread %+v", p)
				check(p.Gap == nil && p.SegmentSize == 0, "randread gap %v segment_size %d", p.Gap, p.SegmentSize)
				check(p.Device != "" || p.WorkingSet >= 2*p.BlockSize, "working_set %d", p.WorkingSet)
			}
		}
		s := c.Smart
		check(s.Interval >= 10*time.Second && s.Interval <= 24*time.Hour, "smart.interval %d", s.Interval)
		check(s.Timeout >= time.Second && s.Timeout <= 10*time.Minute, "smart.timeout %d", s.Timeout)
		check(s.Concurrency >= 1 && s.Concurrency <= 64, "smart.concurrency %d", s.Concurrency)
		check(s.RescanInterval >= 10*time.Second && s.RescanInterval <= 24*time.Hour, "smart.rescan_interval %d", s.RescanInterval)
		check(s.VanishedAfter >= s.RescanInterval && s.VanishedAfter <= 7*24*time.Hour, "smart.vanished_after %d", s.VanishedAfter)
		check(s.Smartctl != "" && !strings.HasPrefix(s.Smartctl, "-"), "smart.smartctl %q", s.Smartctl)
		check(len(s.Devices) <= 1024, "%d smart devices", len(s.Devices))
		for _, d := range s.Devices {
			check(strings.HasPrefix(d.Name, "/dev/") && path(d.Name), "smart device %q", d.Name)
		}
		_, _, err = c.Diskstats.DeviceFilter()
		check(err == nil, "diskstats filter: %v", err)
		// Accepted stays accepted: Validate again (as serve does after
		// flags) agrees with Parse.
		check(c.Validate() == nil, "second Validate: %v", c.Validate())
	})
}
