package main

import (
	"fmt"
	"io"
	"os"
	"time"

	"golang.org/x/sys/unix"

	"github.com/diskcanary/diskcanary/internal/config"
	"github.com/diskcanary/diskcanary/probes"
)

// statusLine is check's fio-like progress on stderr. On a terminal it is
// one line rewritten in place about once a second. Elsewhere (a CI log, a
// pipe) it is one plain line every plainStatusEvery, as fio --eta=always
// prints, so a two-minute run does not look hung; with --json too, as the
// JSON is stdout's alone. On a terminal --json silences it: the JSON is
// read on that terminal. --quiet turns it off.
type statusLine struct {
	w       io.Writer
	tty     bool
	written bool
	last    time.Time // when the last plain line was printed
}

// plainStatusEvery is how often a non-terminal gets a status line; tests
// shorten it.
var plainStatusEvery = 10 * time.Second

// newStatusLine returns nil when there is to be no status.
func newStatusLine(w io.Writer, quiet, jsonOut bool) *statusLine {
	if quiet {
		return nil
	}
	s := &statusLine{w: w, last: time.Now()}
	if f, ok := w.(*os.File); ok {
		_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
		s.tty = err == nil
	}
	if s.tty && jsonOut {
		return nil
	}
	return s
}

// progress is the callback for one profile's run (nil without a status).
func (s *statusLine) progress(profile string) func(probes.CheckProgress) {
	if s == nil {
		return nil
	}
	return func(p probes.CheckProgress) {
		if !s.tty {
			if time.Since(s.last) >= plainStatusEvery {
				s.last = time.Now()
				fmt.Fprintln(s.w, statusText(profile, p))
			}
			return
		}
		s.written = true
		fmt.Fprintf(s.w, "\r%s\x1b[K", statusText(profile, p))
	}
}

// clear erases the terminal's line before the result is printed.
func (s *statusLine) clear() {
	if s != nil && s.written {
		fmt.Fprint(s.w, "\r\x1b[K")
		s.written = false
	}
}

// statusText is the line itself, fio's bracketed fields:
//
//	randread: [laying out 12.5%][128MiB of 1GiB, 250 MB/s][eta 00m:04s]
//	etcd: [45.2%][4520 of 10000 ops][p50=160.0µs p99=270.0µs][eta 01m:12s]
func statusText(profile string, p probes.CheckProgress) string {
	if p.Done == 0 && p.WorkingSet > 0 {
		rate := float64(p.LaidOut) / p.Elapsed.Seconds()
		var eta time.Duration
		if rate > 0 {
			eta = time.Duration(float64(p.WorkingSet-p.LaidOut) / rate * float64(time.Second))
		}
		return fmt.Sprintf("%s: [laying out %.1f%%][%s of %s, %.0f MB/s][eta %s]", profile,
			100*float64(p.LaidOut)/float64(p.WorkingSet), config.ByteSize(p.LaidOut).Show(),
			config.ByteSize(p.WorkingSet).Show(), rate/1e6, fmtETA(eta))
	}
	if p.Done == 0 {
		return fmt.Sprintf("%s: [starting][%s]", profile, fmtETA(p.Elapsed))
	}
	return fmt.Sprintf("%s: [%.1f%%][%d of %d ops][p50=%s p99=%s][eta %s]", profile,
		100*float64(p.Done)/float64(p.Planned), p.Done, p.Planned, fmtDur(p.P50), fmtDur(p.P99), fmtETA(p.ETA))
}

// fmtETA is fio's "01m:12s".
func fmtETA(d time.Duration) string {
	s := int(d.Round(time.Second).Seconds())
	if s >= 3600 {
		return fmt.Sprintf("%dh:%02dm:%02ds", s/3600, s/60%60, s%60)
	}
	return fmt.Sprintf("%02dm:%02ds", s/60, s%60)
}
