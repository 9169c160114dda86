package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/prometheus/procfs/blockdevice"
	"github.com/spf13/cobra"
	"golang.org/x/sys/unix"

	"github.com/diskcanary/diskcanary/collector/blocklatency"
	"github.com/diskcanary/diskcanary/internal/blockdev"
	"github.com/diskcanary/diskcanary/internal/hostpath"
	"github.com/diskcanary/diskcanary/internal/iostat"
)

type iostatFlags struct {
	omitSinceBoot bool
	omitIdle      bool
	json          bool
	latency       bool
	paths         hostpath.Paths
}

func newIostatCmd() *cobra.Command {
	f := &iostatFlags{}
	cmd := &cobra.Command{
		Use:   "iostat [DEVICE...] [INTERVAL [COUNT]]",
		Short: "Extended device statistics like `iostat -dx`, with sysstat's columns and formulas",
		Long: `Print extended device statistics the way sysstat's iostat -dx does: the same
columns (r/s rkB/s rrqm/s %rrqm r_await rareq-sz, the same for writes and
discards, f/s f_await, aqu-sz, %util) computed with the same formulas over the
same interval (the /proc/uptime difference), so the two agree.

The first report covers the time since boot unless -y is given. Without
DEVICE arguments it shows whole disks that have done I/O since boot; named
devices (partitions too) are always shown. INTERVAL is in seconds; without
COUNT reports repeat until interrupted. Discard and flush columns appear
when the kernel has them (Linux 4.18 and 5.5).

No row shows what a disk cannot do (%util over 100, kB/s without requests,
more queue than the requests could hold). A device first seen, re-created,
or whose counters no device could produce over the interval has no row for
that interval, and the reason is printed on stderr (under "skipped" with
--json); 32-bit counter wraps are undone where the result fits the interval.

--latency adds, after each interval's table, each whole disk's block request
latency percentiles over the interval (r_p50 r_p99 w_p50 w_p99, d_ and f_
where the kernel has them, in ms): the block layer's own issue-to-completion
times, counted in the kernel by the blocklatency eBPF program, where await is
a mean that hides the tail. It needs an INTERVAL, root or CAP_BPF and
CAP_PERFMON, and a kernel with BTF.`,
		Example: `  diskcanary iostat
  diskcanary iostat -y sda nvme0n1 2 5
  diskcanary iostat --json 1 3 | jq '.disk[] | {disk_device, util}'
  diskcanary iostat --latency -y nvme0n1 5`,
		RunE: func(cmd *cobra.Command, args []string) error {
			return f.run(cmd.Context(), cmd.OutOrStdout(), cmd.ErrOrStderr(), args)
		},
	}
	fl := cmd.Flags()
	fl.BoolVarP(&f.omitSinceBoot, "omit-since-boot", "y", false, "skip the first report (statistics since boot) when an interval is given")
	fl.BoolVarP(&f.omitIdle, "omit-idle", "z", false, "omit devices with no activity during the interval")
	fl.BoolVar(&f.json, "json", false, "print each report as one JSON object per line (sysstat's per-device keys)")
	fl.BoolVar(&f.latency, "latency", false, "also each disk's request latency p50/p99 over the interval, from the kernel's block layer (eBPF; root or CAP_BPF+CAP_PERFMON)")
	f.paths.AddFlags(fl)
	return cmd
}

// parseIostatArgs splits iostat's positional arguments: anything that starts
// with a digit is INTERVAL then COUNT, the rest are devices (sysstat's rule).
func parseIostatArgs(args []string) (devices []string, interval time.Duration, count int, err error) {
	var nums []string
	for _, a := range args {
		if a != "" && a[0] >= '0' && a[0] <= '9' {
			nums = append(nums, a)
			continue
		}
		if len(nums) > 0 {
			return nil, 0, 0, fmt.Errorf("device %q after INTERVAL: usage is iostat [DEVICE...] [INTERVAL [COUNT]]", a)
		}
		devices = append(devices, strings.TrimPrefix(a, "/dev/"))
	}
	if len(nums) > 2 {
		return nil, 0, 0, fmt.Errorf("too many numbers %v: usage is iostat [DEVICE...] [INTERVAL [COUNT]]", nums)
	}
	count = 1
	if len(nums) >= 1 {
		secs, perr := strconv.ParseFloat(nums[0], 64)
		if perr != nil || secs <= 0 {
			return nil, 0, 0, fmt.Errorf("INTERVAL %q: want a positive number of seconds", nums[0])
		}
		interval = time.Duration(secs * float64(time.Second))
		count = -1 // until interrupted
	}
	if len(nums) == 2 {
		count, err = strconv.Atoi(nums[1])
		if err != nil || count < 1 {
			return nil, 0, 0, fmt.Errorf("COUNT %q: want a positive integer", nums[1])
		}
	}
	return devices, interval, count, nil
}

func (f *iostatFlags) run(ctx context.Context, out, errOut io.Writer, args []string) error {
	devices, interval, count, err := parseIostatArgs(args)
	if err != nil {
		return &exitError{exitUsage, err}
	}
	var tracer *requestTracer
	if f.latency {
		if interval == 0 {
			return &exitError{exitUsage, errors.New("--latency needs an INTERVAL: the percentiles are over an interval")}
		}
		if tracer, err = openRequestTracer(); err != nil {
			return fmt.Errorf("--latency: %w", err)
		}
		defer tracer.close()
	}
	fs, err := blockdevice.NewFS(f.paths.Proc(), f.paths.Sys())
	if err != nil {
		return err
	}
	if ctx == nil {
		ctx = context.Background()
	}
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()

	sel := iostat.Selection{
		Names:    devices,
		OmitIdle: f.omitIdle,
		// iostat -dx without -p lists whole devices: those in /sys/block.
		WholeDisk: func(name string) bool {
			_, err := os.Stat(f.paths.Sys("block", blockdev.SysfsName(name)))
			return err == nil
		},
	}
	if !f.json {
		fmt.Fprintln(out, banner())
		fmt.Fprintln(out)
	}
	// sysstat skips the since-boot report only when there is an interval.
	skip := f.omitSinceBoot && interval > 0
	var prev iostat.Snapshot
	start := time.Now()
	for n := 0; ; n++ {
		curr, err := iostat.Read(fs, f.paths.Proc())
		if err != nil {
			return err
		}
		var latency map[string]iostat.RequestLatency
		if tracer != nil {
			// The program counts from when it was loaded: the first
			// reading only starts the first interval.
			if latency, err = tracer.interval(curr, sel.WholeDisk); err != nil {
				return err
			}
			if n == 0 {
				latency = nil
			}
		}
		if !skip {
			r := iostat.Build(prev, curr, sel, time.Now())
			r.Latency = latency
			if f.json {
				err = r.WriteJSON(out)
			} else {
				// The JSON carries the devices without a row in "skipped".
				if err = r.WriteTable(out); err == nil {
					err = r.WriteSkipped(errOut)
				}
			}
			if err != nil {
				return err
			}
			if count > 0 {
				count--
			}
		}
		skip = false
		if count == 0 {
			return nil
		}
		prev = curr
		// Fixed schedule from the start, like iostat's alarm(interval):
		// slow output never stretches the intervals.
		next := start.Add(time.Duration(n+1) * interval)
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(time.Until(next)):
		}
	}
}

// banner is iostat's first line: kernel, host, date, arch, CPUs.
func banner() string {
	var u unix.Utsname
	_ = unix.Uname(&u)
	return fmt.Sprintf("%s %s (%s) \t%s \t_%s_\t(%d CPU)",
		unix.ByteSliceToString(u.Sysname[:]), unix.ByteSliceToString(u.Release[:]),
		unix.ByteSliceToString(u.Nodename[:]), time.Now().Format("01/02/06"),
		unix.ByteSliceToString(u.Machine[:]), runtime.NumCPU())
}

// requestTracer reads the blocklatency program's histograms for iostat
// --latency: each reading's percentiles are over the requests since the
// last one.
type requestTracer struct {
	t    *blocklatency.Tracer
	last map[blocklatency.Key][]uint64
}

func openRequestTracer() (*requestTracer, error) {
	t, err := blocklatency.Open()
	if err != nil {
		var ue *blocklatency.UnavailableError
		if errors.As(err, &ue) && ue.Reason == blocklatency.ReasonPermission {
			return nil, fmt.Errorf("loading eBPF needs root or CAP_BPF and CAP_PERFMON: %w", err)
		}
		return nil, err
	}
	return &requestTracer{t: t, last: map[blocklatency.Key][]uint64{}}, nil
}

func (r *requestTracer) close() { r.t.Close() }

// interval reads the histograms and returns each disk of snap's
// percentiles since the previous call, by name; a disk without requests
// has an empty entry (its line reads 0.00, as an idle disk's await).
func (r *requestTracer) interval(snap iostat.Snapshot, wholeDisk func(string) bool) (map[string]iostat.RequestLatency, error) {
	names := map[[2]uint32]string{}
	out := map[string]iostat.RequestLatency{}
	for _, d := range snap.Devices {
		names[[2]uint32{d.Major, d.Minor}] = d.Name
		if wholeDisk(d.Name) {
			out[d.Name] = iostat.RequestLatency{}
		}
	}
	now := map[blocklatency.Key][]uint64{}
	err := r.t.Read(func(k blocklatency.Key, h blocklatency.Hist) {
		slots := append([]uint64(nil), h.Slots...)
		now[k] = slots
		name, ok := names[[2]uint32{k.Major, k.Minor}]
		if !ok {
			return
		}
		l, ok := out[name]
		if !ok {
			return
		}
		prev := r.last[k]
		l[k.Op] = iostat.Percentiles{P50: blocklatency.Quantile(0.5, prev, slots), P99: blocklatency.Quantile(0.99, prev, slots)}
	})
	r.last = now
	return out, err
}
