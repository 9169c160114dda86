package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/signal"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/diskcanary/diskcanary/internal/config"
	"github.com/diskcanary/diskcanary/internal/smart"
)

type smartFlags struct {
	fromJSON   []string
	jsonOut    bool
	verbose    bool
	smartctl   string
	devType    string
	devices    []smart.Device // the DEVICE arguments, read by validate
	timeout    time.Duration
	nocheck    string
	concurrent int
}

// The exit status of `diskcanary smart`, one per verdict, so a script can
// act on it without parsing. When disks disagree, the worst wins in the
// order of smart.Severity: failing, then unknown, then degraded.
const (
	smartExitHealthy  = 0
	smartExitFailing  = 1 // as check's 1: the verdict is bad
	smartExitUnknown  = 2 // as check's 2: could not measure
	smartExitDegraded = 3
)

// smartExitCode maps a severity to its exit status.
func smartExitCode(s smart.Severity) int {
	switch {
	case s >= smart.SeverityFailing:
		return smartExitFailing
	case s >= smart.SeverityUnknown:
		return smartExitUnknown
	case s >= smart.SeverityWarning:
		return smartExitDegraded
	}
	return smartExitHealthy
}

func newSmartCmd() *cobra.Command {
	f := &smartFlags{}
	cmd := &cobra.Command{
		Use:   "smart [DEVICE...]",
		Short: "SMART health per disk, the worst first (live via smartctl, or from saved smartctl --json files)",
		Long: `Show one row of normalised SMART health per disk: the same fields for ATA,
NVMe and SCSI (health, temperature, power-on time, wear, media errors,
reallocated and pending sectors, NVMe spare), with the worst signal first.

Without DEVICE, the disks come from smartctl --scan-open. A DEVICE is a
kernel name (sda), a path (/dev/nvme0), or a path with a smartctl type
(/dev/bus/0;megaraid,1). Sleeping disks are left asleep (--nocheck standby).

--from-json reads saved smartctl --json output instead of running smartctl;
the FILE column names the file each row came from. Values a disk does not
report are shown as "-" (null in --json), never 0; a disk with no health
verdict is UNKNOWN, never OK. SIGNAL shows the worst finding and how many
more there are; -v lists them all.

Exit status (when disks differ, the first that applies wins):
  1   FAILING: a disk's SMART health check failed, an NVMe critical warning
      is set, or a pre-failure attribute is at its threshold
  2   UNKNOWN: a disk could not be read or gave no health verdict (smartctl
      missing, failed or timed out, open failed, asleep under --nocheck, a
      saved file without health data, unreadable, not a regular file or
      too large to be smartctl output), or reported a value no disk can
      have (a temperature below -273 °C, a negative count, a ratio out of
      range); smartctl --scan-open listed more disks than are read (` + strconv.Itoa(config.MaxSmartDevices) + `,
      as in the daemon); or there was no disk: the scan found none (--json
      prints []), or every --from-json file was --scan output. Nothing
      read is not healthy, as smartd will not run with no device to watch
  3   DEGRADED or WARN: pending, reallocated or media errors, >= 90% wear,
      failed self-tests, device error log entries, an attribute below
      threshold in the past
  0   every disk read and healthy (INFO findings do not count)
  64  usage error (unknown flag, bad value); nothing was read
A failure is certain and most urgent, so nothing hides it; a disk that
cannot be read may be the one that is dying, so it outranks a degraded one.`,
		Example: `  diskcanary smart
  diskcanary smart sda nvme0 '/dev/bus/0;megaraid,1'
  diskcanary smart --from-json saved/*.json --json
  diskcanary smart -v; case $? in 1) page;; 2) recheck;; 3) ticket;; esac`,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := f.validate(cmd, args); err != nil {
				return &exitError{exitUsage, err}
			}
			return f.run(cmd, args)
		},
	}
	fl := cmd.Flags()
	fl.SortFlags = false
	fl.StringSliceVar(&f.fromJSON, "from-json", nil, "read saved smartctl --json output from these files instead of running smartctl (repeatable; remaining arguments are files too)")
	fl.BoolVar(&f.jsonOut, "json", false, "print a machine-readable result")
	fl.BoolVarP(&f.verbose, "verbose", "v", false, "list every finding in SIGNAL, not only the worst")
	fl.StringVar(&f.smartctl, "smartctl", config.DefaultSmartctl, "the smartctl binary")
	fl.StringVarP(&f.devType, "device-type", "d", "", "smartctl -d TYPE for every DEVICE given (sat, nvme, megaraid,N, ...)")
	fl.DurationVar(&f.timeout, "timeout", config.DefaultSmartTimeout, "kill a smartctl run after this long")
	fl.StringVar(&f.nocheck, "nocheck", config.DefaultSmartNoCheck, "smartctl --nocheck: "+orList(config.SmartNoCheckModes))
	fl.IntVar(&f.concurrent, "concurrency", config.DefaultSmartConcurrency, "smartctl runs at once")
	return cmd
}

// validate refuses what would otherwise be silently ignored or misread,
// and reads the DEVICE arguments of a live read into f.devices.
func (f *smartFlags) validate(cmd *cobra.Command, args []string) error {
	if len(f.fromJSON) > 0 {
		for _, name := range []string{"smartctl", "device-type", "timeout", "nocheck", "concurrency"} {
			if cmd.Flags().Changed(name) {
				return fmt.Errorf("--%s is for live reads; --from-json files already hold smartctl's output", name)
			}
		}
		return nil
	}
	if key, problem := config.CheckSmartRead(f.smartctl, f.timeout, f.concurrent, f.nocheck); problem != "" {
		return fmt.Errorf("--%s: %s", key, problem)
	}
	if f.devType != "" {
		if _, problem := config.CheckSmartDevice("/dev/sda", f.devType); problem != "" {
			return fmt.Errorf("--device-type: %s", problem)
		}
	}
	// A DEVICE obeys smart.devices' rules: a /dev path, a smartctl type.
	f.devices = make([]smart.Device, 0, len(args))
	for _, a := range args {
		name, typ, _ := strings.Cut(a, ";")
		if !strings.HasPrefix(name, "/") {
			name = "/dev/" + name
		}
		typ = cmp.Or(typ, f.devType)
		if key, problem := config.CheckSmartDevice(name, typ); problem != "" {
			return fmt.Errorf("DEVICE %q: %s: %s", a, key, problem)
		}
		f.devices = append(f.devices, smart.Device{Name: name, Type: typ})
	}
	return nil
}

// orList reads a list of choices as prose: "a, b or c".
func orList(choices []string) string {
	return strings.Join(choices[:len(choices)-1], ", ") + " or " + choices[len(choices)-1]
}

func (f *smartFlags) run(cmd *cobra.Command, args []string) error {
	var (
		reports    []smart.Report
		unreadable int    // --from-json files that hold no smartctl output
		notRead    int    // scanned devices over the limit, not read
		noDevice   string // why a live read found no device
	)
	if len(f.fromJSON) > 0 {
		reports, unreadable = readSmartFiles(cmd.ErrOrStderr(), append(f.fromJSON, args...))
	} else {
		st, none, err := f.live(cmd.Context())
		if err != nil {
			// --json always prints an array, so a pipe into jq never reads nothing.
			if f.jsonOut {
				fmt.Fprintln(cmd.OutOrStdout(), "[]")
			}
			return &exitError{smartExitUnknown, err}
		}
		noDevice, notRead = none, st.ScanDropped
		for i := range st.Devices {
			reports = append(reports, smart.NewReport(&st.Devices[i]))
		}
	}
	// Worst signal first; ties by device name, then file, so the order is stable.
	worst := make(map[*smart.Report]smart.Severity, len(reports))
	severities := make([]smart.Severity, len(reports))
	sorted := make([]*smart.Report, len(reports))
	for i := range reports {
		severities[i] = reports[i].Worst()
		worst[&reports[i]] = severities[i]
		sorted[i] = &reports[i]
	}
	sort.SliceStable(sorted, func(i, j int) bool {
		a, b := sorted[i], sorted[j]
		if worst[a] != worst[b] {
			return worst[a] > worst[b]
		}
		if a.Device != b.Device {
			return a.Device < b.Device
		}
		return a.Source < b.Source
	})
	out := cmd.OutOrStdout()
	if f.jsonOut {
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		if err := enc.Encode(sorted); err != nil {
			return err
		}
	} else if len(sorted) > 0 {
		writeSmartTable(out, sorted, len(f.fromJSON) > 0, f.verbose)
	}
	if noDevice != "" {
		return &exitError{smartExitUnknown, errors.New(noDevice)}
	}
	return smartVerdict(severities, unreadable, notRead)
}

// smartVerdict is the exit status, with a one-line count for stderr. A
// file that could not be read, or a scanned device left unread, may be the
// failing disk: the verdict is then UNKNOWN at best.
func smartVerdict(worst []smart.Severity, unreadable, notRead int) error {
	if len(worst) == 0 {
		if unreadable > 0 {
			return &exitError{smartExitUnknown, errors.New("smart: no file could be read")}
		}
		return &exitError{smartExitUnknown, errors.New("smart: no SMART data in the given files (smartctl --scan output only)")}
	}
	all := smart.SeverityOK
	if unreadable > 0 || notRead > 0 {
		all = smart.SeverityUnknown
	}
	count := map[int]int{}
	for _, w := range worst {
		count[smartExitCode(w)]++
		all = max(all, w)
	}
	code := smartExitCode(all)
	if code == smartExitHealthy {
		return nil
	}
	msg := fmt.Sprintf("smart: %d failing, %d unknown, %d degraded or warned, of %s",
		count[smartExitFailing], count[smartExitUnknown], count[smartExitDegraded], plural(len(worst), "disk"))
	if unreadable > 0 {
		msg += fmt.Sprintf("; %s unreadable", plural(unreadable, "file"))
	}
	if notRead > 0 {
		msg += fmt.Sprintf("; %s listed by smartctl --scan-open not read (at most %d are; name others as DEVICE)",
			plural(notRead, "more device"), config.MaxSmartDevices)
	}
	return &exitError{code, errors.New(msg)}
}

func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// readSmartFiles parses saved smartctl output. A --scan file names devices
// but holds no SMART data, and a file that is not smartctl output holds
// none either: each is noted on stderr and skipped; the latter are counted.
func readSmartFiles(stderr io.Writer, files []string) (reports []smart.Report, unreadable int) {
	for _, file := range files {
		data, err := smart.ReadSaved(file)
		var r *smart.Result
		if err == nil {
			r, err = smart.Parse(data)
		}
		if err != nil {
			var pe *fs.PathError
			if errors.As(err, &pe) {
				err = pe.Err
			}
			fmt.Fprintf(stderr, "%s: could not read: %v\n", file, err)
			unreadable++
			continue
		}
		if r.Name == "" && r.Protocol == "" {
			if ts, err := smart.ParseScan(data); err == nil && len(ts) > 0 {
				fmt.Fprintf(stderr, "%s: smartctl --scan output listing %d devices, no SMART data; skipped\n", file, len(ts))
				continue
			}
		}
		st := smart.StateFromResult(r)
		if st.Label == "" {
			st.Label = file
		}
		rep := smart.NewReport(&st)
		rep.Source = file
		reports = append(reports, rep)
	}
	return reports, unreadable
}

// live reads the DEVICE arguments, or what smartctl --scan-open finds;
// when it finds none, noDevice says so, and what to do.
func (f *smartFlags) live(parent context.Context) (st smart.Status, noDevice string, err error) {
	if parent == nil {
		parent = context.Background()
	}
	ctx, stop := signal.NotifyContext(parent, os.Interrupt, syscall.SIGTERM)
	defer stop()
	r := smart.NewRunner(smart.RunnerConfig{
		Smartctl:    f.smartctl,
		Interval:    time.Hour,
		Timeout:     f.timeout,
		Concurrency: f.concurrent,
		NoCheck:     f.nocheck,
	})
	st, err = r.CollectOnce(ctx, f.devices)
	if err != nil {
		return st, "", err
	}
	if len(st.Devices) == 0 {
		return st, "smart: " + r.NoDevice() + "; name a disk to read it (diskcanary smart /dev/sda)", nil
	}
	return st, "", nil
}

func writeSmartTable(out io.Writer, reports []*smart.Report, files, verbose bool) {
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	if files {
		fmt.Fprint(tw, "FILE\t")
	}
	fmt.Fprintln(tw, "DEVICE\tPROTOCOL\tMODEL\tHEALTH\tTEMP\tPOWER-ON\tWEAR\tMEDIA-ERR\tREALLOC\tPENDING\tSPARE\tSIGNAL")
	for _, r := range reports {
		health := "UNKNOWN"
		if r.Healthy != nil {
			health = map[bool]string{true: "PASSED", false: "FAILED"}[*r.Healthy]
		}
		signal := "OK"
		if s := r.Signals(); len(s) > 0 {
			signal = s[0].String()
			switch {
			case verbose:
				for _, more := range s[1:] {
					signal += "; " + more.String()
				}
			case len(s) > 1:
				signal += fmt.Sprintf(" (+%d more, -v lists them)", len(s)-1)
			}
		}
		if files {
			fmt.Fprintf(tw, "%s\t", r.Source)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n",
			r.Device, dash(r.Protocol), dash(r.Model), health,
			fmtOpt(r.TemperatureCelsius, "%.0f°C", 1), fmtPowerOn(r.PowerOnSeconds),
			fmtOpt(r.WearUsedRatio, "%.0f%%", 100), fmtOpt(r.MediaErrors, "%.0f", 1),
			fmtOpt(r.ReallocatedSectors, "%.0f", 1), fmtOpt(r.PendingSectors, "%.0f", 1),
			fmtOpt(r.AvailableSpare, "%.0f%%", 100), signal)
	}
	tw.Flush()
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func fmtOpt(v *float64, format string, scale float64) string {
	if v == nil {
		return "-"
	}
	return fmt.Sprintf(format, *v*scale)
}

func fmtPowerOn(v *float64) string {
	if v == nil {
		return "-"
	}
	h := *v / 3600
	if h >= 24*365 {
		return fmt.Sprintf("%.1fy", h/24/365)
	}
	if h >= 48 {
		return fmt.Sprintf("%.0fd", h/24)
	}
	return fmt.Sprintf("%.0fh", h)
}
