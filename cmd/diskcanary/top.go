package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/sys/unix"

	"github.com/diskcanary/diskcanary/internal/cgroupio"
	"github.com/diskcanary/diskcanary/internal/hostpath"
)

type topFlags struct {
	delay      time.Duration
	iterations int
	batch      bool
	json       bool
	top        int
	root       string
	maxCgroups int
	paths      hostpath.Paths
}

func newTopCmd() *cobra.Command {
	f := &topFlags{}
	cmd := &cobra.Command{
		Use:   "top [DEVICE...]",
		Short: "Who is doing I/O on each disk, live: workloads ranked per device from the kernel's cgroup accounting",
		Long: `Rank the workloads doing I/O on each block device, like iotop but per disk and
per cgroup: Kubernetes pod and container, systemd unit, or the cgroup path.
It reads the kernel's cgroup I/O accounting directly (cgroup v2 io.stat, or
the v1 blkio controller where v2's io controller is not in use), with the
same code as the daemon's contention collector; no Prometheus is needed.

Each report covers the last DELAY: bytes and operations per second by
device, busiest workload first, the top N named and the rest as "other";
workloads without I/O in the interval are left out. Without DEVICE
arguments every device with I/O is shown. The first report comes after one
DELAY (a baseline is taken at start).

On a terminal the screen is redrawn each DELAY until interrupted; when
stdout is not a terminal, or with --batch, reports follow one another
(iotop's batch mode). --json prints one JSON object per report and line;
without --iterations it prints one report.

On cgroup v1 the kernel counts a device per cgroup only once blk-throttle
is active on it (docs/metrics.md); such a device shows no workloads.`,
		Example: `  diskcanary top
  diskcanary top -d 5 nvme0n1
  diskcanary top --json -n 3 | jq '.devices[] | {device, top: .workloads[0].workload}'`,
		RunE: func(cmd *cobra.Command, args []string) error {
			return f.run(cmd.Context(), cmd.OutOrStdout(), args, cmd.Flags().Changed("iterations"))
		},
	}
	fl := cmd.Flags()
	fl.DurationVarP(&f.delay, "delay", "d", 2*time.Second, "time between reports (a number is seconds, as iotop's -d)")
	fl.IntVarP(&f.iterations, "iterations", "n", 0, "reports to print, then exit (0: until interrupted; with --json the default is 1)")
	fl.BoolVarP(&f.batch, "batch", "b", false, "print reports one after another instead of redrawing the screen (the default when stdout is not a terminal)")
	fl.BoolVar(&f.json, "json", false, "print each report as one JSON object per line")
	fl.IntVar(&f.top, "top", cgroupio.DefaultTop, "workloads named per device; the rest are summed as \"other\"")
	fl.IntVar(&f.maxCgroups, "max-cgroups", cgroupio.DefaultMaxCgroups, "most cgroups one pass visits (a report says when it stopped there)")
	fl.StringVar(&f.root, "cgroup.root", "", "cgroup hierarchy to read (a v1 blkio or a v2 mountpoint); empty finds it under --path.sysfs's fs/cgroup")
	f.paths.AddFlags(fl)
	// iotop's -d takes seconds: a bare number is read as such.
	fl.Lookup("delay").Value = secondsValue{&f.delay}
	return cmd
}

// secondsValue is a duration flag that also takes a bare number of seconds.
type secondsValue struct{ d *time.Duration }

func (v secondsValue) String() string { return v.d.String() }
func (v secondsValue) Type() string   { return "duration" }
func (v secondsValue) Set(s string) error {
	if d, err := time.ParseDuration(s); err == nil {
		*v.d = d
		return nil
	}
	secs, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsNaN(secs) || math.IsInf(secs, 0) {
		return fmt.Errorf("%q: want a duration (2s, 500ms) or a number of seconds", s)
	}
	*v.d = time.Duration(secs * float64(time.Second))
	return nil
}

func (f *topFlags) run(ctx context.Context, out io.Writer, args []string, iterationsGiven bool) error {
	switch {
	case f.delay < 10*time.Millisecond:
		return &exitError{exitUsage, fmt.Errorf("--delay %v: must be at least 10ms", f.delay)}
	case f.iterations < 0:
		return &exitError{exitUsage, fmt.Errorf("--iterations %d: must be 0 (until interrupted) or more", f.iterations)}
	case f.top < 1 || f.top > 1000:
		return &exitError{exitUsage, fmt.Errorf("--top %d: must be 1 to 1000", f.top)}
	case f.maxCgroups < 1:
		return &exitError{exitUsage, fmt.Errorf("--max-cgroups %d: must be at least 1", f.maxCgroups)}
	}
	iterations := f.iterations
	if f.json && !iterationsGiven {
		iterations = 1
	}
	names, err := cgroupio.DeviceNames(f.paths, nil)
	if err != nil {
		return fmt.Errorf("device names: %w", err)
	}
	want := map[string]bool{}
	for _, a := range args {
		name := strings.TrimPrefix(a, "/dev/")
		if !knownDevice(names, name) {
			return &exitError{exitUsage, fmt.Errorf("device %q: not in %s", a, f.paths.Proc("diskstats"))}
		}
		want[name] = true
	}
	src, err := cgroupio.Detect(f.paths, f.root)
	if err != nil {
		return err
	}
	reader := cgroupio.NewReader(src, cgroupio.Limits{MaxCgroups: f.maxCgroups, Budget: cgroupio.DefaultBudget})
	// Decay 0: each report ranks by its own interval, as iotop does.
	tracker := cgroupio.NewTracker(cgroupio.TrackerConfig{Version: src.Version, Top: f.top})
	redraw := !f.batch && !f.json && isTerminal(out)

	if ctx == nil {
		ctx = context.Background()
	}
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	var pass cgroupio.Pass
	start := time.Now()
	for n := 0; ; n++ {
		if err := reader.Read(&pass); err != nil {
			return err
		}
		if names, err = cgroupio.DeviceNames(f.paths, names); err != nil {
			return fmt.Errorf("device names: %w", err)
		}
		snap := tracker.Observe(&pass, time.Now())
		if n > 0 {
			r := buildTopReport(&snap, src, names, want)
			switch {
			case f.json:
				err = json.NewEncoder(out).Encode(r)
			default:
				if redraw {
					_, _ = io.WriteString(out, "\x1b[H\x1b[2J")
				}
				err = r.writeTable(out)
			}
			if err != nil {
				return err
			}
			if iterations > 0 && n == iterations {
				return nil
			}
		}
		// A fixed schedule from the start: slow output never stretches
		// the intervals.
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(time.Until(start.Add(time.Duration(n+1) * f.delay))):
		}
	}
}

func knownDevice(names map[cgroupio.Dev]cgroupio.DeviceName, name string) bool {
	for _, n := range names {
		if n.Name == name {
			return true
		}
	}
	return false
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	return err == nil
}

// topReport is one report: `diskcanary top --json` prints it as it is.
type topReport struct {
	Time            time.Time   `json:"time"`
	IntervalSeconds float64     `json:"interval_seconds"`
	CgroupVersion   int         `json:"cgroup_version"`
	Root            string      `json:"root"`
	Cgroups         int         `json:"cgroups"`
	Truncated       string      `json:"truncated,omitempty"`
	Devices         []topDevice `json:"devices"`
}

type topDevice struct {
	Device    string        `json:"device"`
	Major     uint32        `json:"major"`
	Minor     uint32        `json:"minor"`
	Workloads []topWorkload `json:"workloads"`
}

// topWorkload is one workload's I/O over the interval: counts, and the
// same per second.
type topWorkload struct {
	Workload            string   `json:"workload"`
	Cgroup              string   `json:"cgroup"`
	ReadBytes           uint64   `json:"read_bytes"`
	WriteBytes          uint64   `json:"write_bytes"`
	DiscardBytes        uint64   `json:"discard_bytes"`
	ReadOps             uint64   `json:"read_ops"`
	WriteOps            uint64   `json:"write_ops"`
	DiscardOps          uint64   `json:"discard_ops"`
	ReadBytesPerSecond  float64  `json:"read_bytes_per_second"`
	WriteBytesPerSecond float64  `json:"write_bytes_per_second"`
	ReadOpsPerSecond    float64  `json:"read_ops_per_second"`
	WriteOpsPerSecond   float64  `json:"write_ops_per_second"`
	IOCostWaitSeconds   *float64 `json:"iocost_wait_seconds"`
}

// buildTopReport keeps the rows with I/O in the interval, of the devices
// in want (all when empty), by kernel name.
func buildTopReport(snap *cgroupio.Snapshot, src cgroupio.Source, names map[cgroupio.Dev]cgroupio.DeviceName, want map[string]bool) topReport {
	secs := snap.Interval.Seconds()
	r := topReport{Time: snap.Time.UTC(), IntervalSeconds: secs, CgroupVersion: src.Version, Root: src.Root,
		Cgroups: snap.Pass.Walked, Truncated: snap.Pass.Truncated, Devices: []topDevice{}}
	per := func(v uint64) float64 {
		if secs <= 0 {
			return 0
		}
		return float64(v) / secs
	}
	for _, rk := range snap.Devices {
		name := rk.Dev.String()
		if n, ok := names[rk.Dev]; ok {
			name = n.Name
		}
		if len(want) > 0 && !want[name] {
			continue
		}
		d := topDevice{Device: name, Major: rk.Dev.Major, Minor: rk.Dev.Minor}
		for _, row := range rk.Rows {
			c := row.Delta
			if c.Bytes() == 0 && c.Ops() == 0 {
				continue
			}
			w := topWorkload{Workload: row.Workload, Cgroup: row.Cgroup,
				ReadBytes: c.ReadBytes, WriteBytes: c.WriteBytes, DiscardBytes: c.DiscardBytes,
				ReadOps: c.ReadOps, WriteOps: c.WriteOps, DiscardOps: c.DiscardOps,
				ReadBytesPerSecond: per(c.ReadBytes), WriteBytesPerSecond: per(c.WriteBytes),
				ReadOpsPerSecond: per(c.ReadOps), WriteOpsPerSecond: per(c.WriteOps)}
			if c.HasWait {
				v := float64(c.WaitUsec) / 1e6
				w.IOCostWaitSeconds = &v
			}
			d.Workloads = append(d.Workloads, w)
		}
		if len(d.Workloads) > 0 {
			r.Devices = append(r.Devices, d)
		}
	}
	return r
}

// writeTable prints the report as iotop's batch mode does: a header line,
// then one line per device and workload.
func (r *topReport) writeTable(w io.Writer) error {
	head := fmt.Sprintf("%s  interval %.1fs  %d cgroups (cgroup v%d, %s)", r.Time.UTC().Format("15:04:05Z07:00"), r.IntervalSeconds, r.Cgroups, r.CgroupVersion, r.Root)
	if r.Truncated != "" {
		head += "  TRUNCATED at " + r.Truncated + ": some cgroups not read"
	}
	width := len("DEVICE")
	for _, d := range r.Devices {
		width = max(width, len(d.Device))
	}
	lines := []string{head, fmt.Sprintf("%-*s %11s %11s %9s %9s  %s", width, "DEVICE", "READ/s", "WRITE/s", "r/s", "w/s", "WORKLOAD")}
	for _, d := range r.Devices {
		for _, x := range d.Workloads {
			name := x.Workload
			if x.Cgroup != "" && x.Cgroup != x.Workload {
				name += "  (" + x.Cgroup + ")"
			}
			lines = append(lines, fmt.Sprintf("%-*s %11s %11s %9.1f %9.1f  %s", width, d.Device, humanBytes(x.ReadBytesPerSecond),
				humanBytes(x.WriteBytesPerSecond), x.ReadOpsPerSecond, x.WriteOpsPerSecond, name))
		}
	}
	if _, err := io.WriteString(w, strings.Join(lines, "\n")+"\n"); err != nil {
		return err
	}
	if len(r.Devices) == 0 {
		fmt.Fprintln(w, "(no cgroup did I/O in the interval)")
	}
	_, err := fmt.Fprintln(w)
	return err
}

// humanBytes is a rate in binary units, as iotop prints them.
func humanBytes(v float64) string {
	units := []string{"B", "KiB", "MiB", "GiB", "TiB"}
	i := 0
	for v >= 1024 && i < len(units)-1 {
		v /= 1024
		i++
	}
	return fmt.Sprintf("%.2f %s", v, units[i])
}
