package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/prometheus/procfs/blockdevice"
	"github.com/spf13/cobra"
	"golang.org/x/sys/unix"

	"github.com/diskcanary/diskcanary/internal/iostat"
)

type iostatFlags struct {
	omitSinceBoot bool
	omitIdle      bool
	json          bool
	procfs        string
	sysfs         string
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
when the kernel has them (Linux 4.18 and 5.5).`,
		Example: `  diskcanary iostat
  diskcanary iostat -y sda nvme0n1 2 5
  diskcanary iostat --json 1 3 | jq '.disk[] | {disk_device, util}'`,
		RunE: func(cmd *cobra.Command, args []string) error {
			return f.run(cmd.Context(), cmd.OutOrStdout(), args)
		},
	}
	fl := cmd.Flags()
	fl.BoolVarP(&f.omitSinceBoot, "omit-since-boot", "y", false, "skip the first report (statistics since boot) when an interval is given")
	fl.BoolVarP(&f.omitIdle, "omit-idle", "z", false, "omit devices with no activity during the interval")
	fl.BoolVar(&f.json, "json", false, "print each report as one JSON object per line (sysstat's per-device keys)")
	fl.StringVar(&f.procfs, "path.procfs", "/proc", "procfs mountpoint")
	fl.StringVar(&f.sysfs, "path.sysfs", "/sys", "sysfs mountpoint")
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

func (f *iostatFlags) run(ctx context.Context, out io.Writer, args []string) error {
	devices, interval, count, err := parseIostatArgs(args)
	if err != nil {
		return err
	}
	fs, err := blockdevice.NewFS(f.procfs, f.sysfs)
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
			_, err := os.Stat(filepath.Join(f.sysfs, "block", strings.ReplaceAll(name, "/", "!")))
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
		curr, err := iostat.Read(fs, f.procfs)
		if err != nil {
			return err
		}
		if !skip {
			r := iostat.Build(prev, curr, sel, time.Now())
			if f.json {
				err = r.WriteJSON(out)
			} else {
				err = r.WriteTable(out)
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
