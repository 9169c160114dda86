package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sort"
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
	smartctl   string
	devType    string
	timeout    time.Duration
	nocheck    string
	concurrent int
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

--from-json reads saved smartctl --json output instead of running smartctl.
Values a disk does not report are shown as "-" (null in --json), never 0.

Exit status: 0 shown, 2 nothing could be read (smartctl missing, bad file).`,
		Example: `  diskcanary smart
  diskcanary smart sda nvme0 '/dev/bus/0;megaraid,1'
  diskcanary smart --from-json saved/*.json --json`,
		RunE: func(cmd *cobra.Command, args []string) error {
			return f.run(cmd, args)
		},
	}
	fl := cmd.Flags()
	fl.SortFlags = false
	fl.StringSliceVar(&f.fromJSON, "from-json", nil, "read saved smartctl --json output from these files instead of running smartctl (repeatable; remaining arguments are files too)")
	fl.BoolVar(&f.jsonOut, "json", false, "print a machine-readable result")
	fl.StringVar(&f.smartctl, "smartctl", config.DefaultSmartctl, "the smartctl binary")
	fl.StringVarP(&f.devType, "device-type", "d", "", "smartctl -d TYPE for every DEVICE given (sat, nvme, megaraid,N, ...)")
	fl.DurationVar(&f.timeout, "timeout", config.DefaultSmartTimeout, "kill a smartctl run after this long")
	fl.StringVar(&f.nocheck, "nocheck", config.DefaultSmartNoCheck, "smartctl --nocheck: never, sleep, standby or idle")
	fl.IntVar(&f.concurrent, "concurrency", config.DefaultSmartConcurrency, "smartctl runs at once")
	return cmd
}

func (f *smartFlags) run(cmd *cobra.Command, args []string) error {
	var states []smart.DeviceState
	if len(f.fromJSON) > 0 {
		var err error
		if states, err = f.readFiles(cmd.ErrOrStderr(), append(f.fromJSON, args...)); err != nil {
			return &exitError{code: 2, err: err}
		}
	} else {
		var err error
		if states, err = f.live(cmd.Context(), args); err != nil {
			return &exitError{code: 2, err: err}
		}
	}
	reports := make([]smart.Report, len(states))
	for i := range states {
		reports[i] = smart.NewReport(&states[i])
	}
	// Worst signal first; ties by device name so the order is stable.
	sort.SliceStable(reports, func(i, j int) bool {
		wi, wj := reports[i].Worst(), reports[j].Worst()
		if wi != wj {
			return wi > wj
		}
		return reports[i].Device < reports[j].Device
	})
	out := cmd.OutOrStdout()
	if f.jsonOut {
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		return enc.Encode(reports)
	}
	writeSmartTable(out, reports)
	return nil
}

// readFiles parses saved smartctl output. A --scan file names devices but
// holds no SMART data: it is noted on stderr and skipped.
func (f *smartFlags) readFiles(stderr io.Writer, files []string) ([]smart.DeviceState, error) {
	var states []smart.DeviceState
	for _, file := range files {
		data, err := os.ReadFile(file)
		if err != nil {
			return nil, fmt.Errorf("smart --from-json: %w", err)
		}
		r, err := smart.Parse(data)
		if err != nil {
			return nil, fmt.Errorf("smart --from-json %s: %w", file, err)
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
		states = append(states, st)
	}
	return states, nil
}

func (f *smartFlags) live(parent context.Context, args []string) ([]smart.DeviceState, error) {
	if parent == nil {
		parent = context.Background()
	}
	ctx, stop := signal.NotifyContext(parent, os.Interrupt, syscall.SIGTERM)
	defer stop()
	targets := make([]smart.Target, 0, len(args))
	for _, a := range args {
		name, typ, _ := strings.Cut(a, ";")
		if !strings.HasPrefix(name, "/") {
			name = "/dev/" + name
		}
		if typ == "" {
			typ = f.devType
		}
		targets = append(targets, smart.Target{Name: name, Type: typ})
	}
	r := smart.NewRunner(smart.RunnerConfig{
		Smartctl:    f.smartctl,
		Interval:    time.Hour,
		Timeout:     f.timeout,
		Concurrency: f.concurrent,
		NoCheck:     f.nocheck,
	})
	st, err := r.CollectOnce(ctx, targets)
	if err != nil {
		return nil, err
	}
	if len(st.Devices) == 0 {
		return nil, errors.New("smartctl --scan-open found no devices; name them (diskcanary smart /dev/sda) or check that diskcanary runs as root")
	}
	return st.Devices, nil
}

func writeSmartTable(out io.Writer, reports []smart.Report) {
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "DEVICE\tPROTOCOL\tMODEL\tHEALTH\tTEMP\tPOWER-ON\tWEAR\tMEDIA-ERR\tREALLOC\tPENDING\tSPARE\tSIGNAL")
	for i := range reports {
		r := &reports[i]
		health := "-"
		if r.Healthy != nil {
			health = map[bool]string{true: "PASSED", false: "FAILED"}[*r.Healthy]
		}
		signal := "OK"
		if s := r.Signals(); len(s) > 0 {
			signal = s[0].Severity.String() + ": " + s[0].Text
			if len(s) > 1 {
				signal += fmt.Sprintf(" (+%d more)", len(s)-1)
			}
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
