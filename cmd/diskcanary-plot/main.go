// Command diskcanary-plot draws the curve of a capacity sweep, the JSON
// `diskcanary check --profile capacity --json` prints, into an SVG or PNG:
// latency percentiles against the achieved IOPS, the bound and the knee.
// It is its own binary so the daemon does not carry the charting library
// (its code and fonts are resident file pages of every process).
package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/spf13/pflag"
	"golang.org/x/sys/unix"

	"github.com/diskcanary/diskcanary/internal/capacityjson"
)

// Exit statuses: sysexits' EX_USAGE for a usage error or an input that is
// not a capacity sweep, as the diskcanary commands use it.
const (
	exitOK    = 0
	exitWrite = 1 // the picture could not be written
	exitUsage = 64
)

// maxInput bounds the JSON read: a sweep of the most steps check allows
// (100) is about 50 KB, so 4 MiB is a mistake (a wrong file, /dev/zero).
const maxInput = 4 << 20

const usageText = `usage: diskcanary-plot -o FILE.svg|FILE.png [FILE.json]

Draws a capacity sweep, the output of
  diskcanary check --profile capacity --json DIR
read from FILE.json, or from stdin when it is absent or "-": the p50, p90
and p99 latency against the achieved IOPS, both axes logarithmic, the p99
bound as a dashed line and the knee (the last step that held) ringed.
The format follows the extension of -o; an existing file is replaced, a
symlink is not followed.

Exit status: 0 drawn, 1 the file could not be written, 64 usage error
(no -o, an unknown extension, a missing directory, input that is not a
capacity sweep or is over 4 MiB).
`

// usageError is a usage or input error: exit 64.
type usageError struct{ error }

func main() {
	os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	err := plotMain(args, stdin, stdout)
	if err == nil {
		return exitOK
	}
	if errors.Is(err, pflag.ErrHelp) {
		return exitOK
	}
	fmt.Fprintln(stderr, "diskcanary-plot:", err)
	var ue usageError
	if errors.As(err, &ue) {
		fmt.Fprintln(stderr, "usage: diskcanary-plot -o FILE.svg|FILE.png [FILE.json]")
		return exitUsage
	}
	return exitWrite
}

func plotMain(args []string, stdin io.Reader, stdout io.Writer) error {
	fl := pflag.NewFlagSet("diskcanary-plot", pflag.ContinueOnError)
	fl.SetOutput(io.Discard)
	out := fl.StringP("output", "o", "", "the picture to write, .svg or .png")
	help := fl.BoolP("help", "h", false, "print this help")
	if err := fl.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			fmt.Fprint(stdout, usageText)
			return err
		}
		return usageError{err}
	}
	if *help {
		fmt.Fprint(stdout, usageText)
		return pflag.ErrHelp
	}
	if *out == "" {
		return usageError{errors.New("-o FILE.svg or FILE.png is required")}
	}
	if fl.NArg() > 1 {
		return usageError{fmt.Errorf("one input file at most, got %d: %q", fl.NArg(), fl.Args())}
	}
	format, err := capacityjson.PlotFormat(*out)
	if err != nil {
		return usageError{fmt.Errorf("-o %w", err)}
	}
	name, in := "stdin", stdin
	if fl.NArg() == 1 && fl.Arg(0) != "-" {
		name = fl.Arg(0)
		f, err := os.Open(name)
		if err != nil {
			return usageError{err}
		}
		defer f.Close()
		in = f
	}
	sweep, err := readSweep(name, in)
	if err != nil {
		return usageError{err}
	}
	var pic bytes.Buffer
	if err := drawCurve(&pic, format, sweep); err != nil {
		return usageError{fmt.Errorf("%s: %w", name, err)}
	}
	return writeFile(*out, pic.Bytes())
}

// readSweep reads at most maxInput bytes of one capacity sweep: a JSON
// object whose profile is "capacity", with a positive bound and steps.
func readSweep(name string, in io.Reader) (*capacityjson.Result, error) {
	b, err := io.ReadAll(io.LimitReader(in, maxInput+1))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	if len(b) > maxInput {
		return nil, fmt.Errorf("%s: over 4 MiB; a capacity sweep is a few KB (is it the output of check --profile capacity --json?)", name)
	}
	var r capacityjson.Result
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("%s: not a capacity sweep (the output of check --profile capacity --json): %w", name, err)
	}
	if r.Profile != capacityjson.Profile {
		return nil, fmt.Errorf("%s: not a capacity sweep: profile %q, want %q (check --profile capacity --json)", name, r.Profile, capacityjson.Profile)
	}
	if !(r.ThresholdSeconds > 0) {
		return nil, fmt.Errorf("%s: not a capacity sweep: threshold_seconds %v, want a positive bound", name, r.ThresholdSeconds)
	}
	for i, st := range r.Steps {
		l := st.LatencySeconds
		for _, v := range []float64{st.AchievedIOPS, l.P50, l.P90, l.P99, l.P999, l.Max} {
			if !(v >= 0 && v <= maxValue) {
				return nil, fmt.Errorf("%s: not a capacity sweep: step %d has %v, not a rate or latency a disk can have", name, i+1, v)
			}
		}
	}
	return &r, nil
}

// maxValue bounds a step's rate (IOPS) and latencies (seconds) in the
// input: no disk does more, and a log axis needs finite values.
const maxValue = 1e9

// writeFile writes the drawn picture to path, never through a symlink
// (O_NOFOLLOW, as capacityjson.PlotFormat checked); an existing file is replaced.
func writeFile(path string, b []byte) error {
	fd, err := unix.Open(path, unix.O_WRONLY|unix.O_CREAT|unix.O_TRUNC|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o644)
	if errors.Is(err, unix.ELOOP) {
		return usageError{fmt.Errorf("-o %s: is a symlink; not followed: name the file itself", path)}
	}
	if err != nil {
		return fmt.Errorf("-o %s: %w", path, err)
	}
	f := os.NewFile(uintptr(fd), path)
	_, err = f.Write(b)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("-o %s: %w", path, err)
	}
	return nil
}
