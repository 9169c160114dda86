package smart

import (
	"context"
	"fmt"
	"time"

	"github.com/diskcanary/diskcanary/internal/process"
)

// SelfTestConfig schedules SMART self-tests (config.SelfTests explains the
// schedule; collector/smart.go fills this from it).
type SelfTestConfig struct {
	Enabled bool
	// Intervals by protocol (ProtocolATA, ProtocolNVMe, ProtocolSCSI) and
	// kind (SelfTestShort, SelfTestLong); Default for any other protocol.
	// 0 turns a kind off.
	Default    [2]time.Duration
	ByProtocol map[string][2]time.Duration
	// StartHour is the local hour the daily window opens, Window its length.
	StartHour int
	Window    time.Duration
	// MaxStandbySkips: after this many due tests skipped in a row because
	// the disk slept, the next one wakes it.
	MaxStandbySkips int
	// Location of StartHour; nil is the local time zone.
	Location *time.Location
}

// Skip reasons of diskcanary_smart_selftest_skips_total.
const (
	SkipStandby        = iota // the disk is asleep (--nocheck), below the skip limit
	SkipInProgress            // a self-test already runs on the disk
	SkipControllerBusy        // another disk behind its controller is testing
	SkipStartFailed           // smartctl did not start the test (error, timeout, refused)
	numSkipReasons
)

// SelfTestSkipReasons names the skip reasons by index.
var SelfTestSkipReasons = [numSkipReasons]string{"standby", "in_progress", "controller_busy", "start_failed"}

// Without the drive's own estimate, a test holds its controller at most
// this long, however long it seems to run: a disk whose reads fail must
// not stop its neighbours' tests for good. A long test of a large HDD
// takes a day (polling minutes ~1,700 on 20 TB drives).
var defaultHold = [2]time.Duration{2 * time.Hour, 48 * time.Hour}

// selfTestState is the scheduler's memory of one device.
type selfTestState struct {
	// decide: a read came in since the last decision. Decisions follow
	// reads, so skips count once per SMART read, as smartd counts them
	// once per check.
	decide bool
	// active is the kind diskcanary started and the drive has not been
	// seen to finish (-1: none); it holds the controller.
	active      int
	activeSince time.Time
	activeHold  time.Duration
	// lastStart and lastTry (a start that failed) by kind.
	lastStart    [2]time.Time
	lastTry      [2]time.Time
	standbySkips int
}

func (c *SelfTestConfig) location() *time.Location {
	if c.Location != nil {
		return c.Location
	}
	return time.Local
}

// windowOpen is when the daily window that t falls in (or last opened
// before t) opened: the latest StartHour:00 at or before t.
func (c *SelfTestConfig) windowOpen(t time.Time) time.Time {
	t = t.In(c.location())
	open := time.Date(t.Year(), t.Month(), t.Day(), c.StartHour, 0, 0, 0, t.Location())
	if open.After(t) {
		open = time.Date(t.Year(), t.Month(), t.Day()-1, c.StartHour, 0, 0, 0, t.Location())
	}
	return open
}

func (c *SelfTestConfig) intervals(protocol string) [2]time.Duration {
	if iv, ok := c.ByProtocol[protocol]; ok {
		return iv
	}
	return c.Default
}

// dueKind is the kind of test due on d now (long before short), or -1.
// Intervals count from the opening of the window the last test started
// in: a test the stagger pushed late into one window does not push the
// next one a day later. A long test counts as a short one too.
func (c *SelfTestConfig) dueKind(st *selfTestState, res *Result, now time.Time) int {
	open := c.windowOpen(now)
	if now.Sub(open) >= c.Window {
		return -1
	}
	iv := c.intervals(res.Protocol)
	var last [2]time.Time
	for k := range last {
		last[k] = st.lastStart[k]
		if age := res.Testing.LastAgeSeconds[k]; age != nil {
			// The log counts power-on hours: an entry stamped one hour
			// may be up to an hour older than its age says.
			t := now.Add(-time.Duration(*age) * time.Second).Add(time.Hour)
			if t.After(now) {
				t = now
			}
			if t.After(last[k]) {
				last[k] = t
			}
		}
	}
	if last[SelfTestLong].After(last[SelfTestShort]) {
		last[SelfTestShort] = last[SelfTestLong]
	}
	for _, k := range []int{SelfTestLong, SelfTestShort} {
		if iv[k] == 0 || !st.lastTry[k].Before(open) {
			continue // off, or a start failed in this window already
		}
		if last[k].IsZero() || !now.Before(c.windowOpen(last[k]).Add(iv[k])) {
			return k
		}
	}
	return -1
}

// selfTestDue decides, after a read, whether d starts a test now: the kind
// and whether to wake a sleeping disk for it. It counts the skips. Caller
// holds r.mu; d has no run in flight.
func (r *Runner) selfTestDue(d *tracked, now time.Time) (kind int, wake, ok bool) {
	c := &r.cfg.SelfTests
	st := &d.st
	if !c.Enabled || !st.decide {
		return -1, false, false
	}
	st.decide = false
	res := d.state.Result
	if res == nil {
		if !d.state.Standby {
			return -1, false, false // nothing read yet: protocol and log unknown
		}
		// Asleep since diskcanary started: nothing is known but that it
		// sleeps, and it still gets its test after the skips.
		res = &Result{}
	}
	if st.active >= 0 && now.Sub(st.activeSince) > st.activeHold {
		r.log.Warn("smart: self-test not seen to finish; releasing its controller", "device", d.state.Device.Name, "type", SelfTestKinds[st.active], "after", st.activeHold)
		st.active = -1
	}
	kind = c.dueKind(st, res, now)
	if kind < 0 {
		return -1, false, false
	}
	skip := func(reason int) (int, bool, bool) {
		d.state.SelfTestSkips[kind][reason]++
		d.state.Generation++
		return -1, false, false
	}
	if d.state.Standby {
		if st.standbySkips < c.MaxStandbySkips {
			st.standbySkips++
			return skip(SkipStandby)
		}
		wake = true
	} else {
		st.standbySkips = 0 // awake: the run of skips is broken
	}
	if !d.state.Standby && (res.Testing.InProgress || st.active >= 0) {
		// smartctl would refuse too (it never aborts a running test
		// without -t force), but a refusal is not a skip.
		return skip(SkipInProgress)
	}
	if r.controllerBusy(d, now) {
		return skip(SkipControllerBusy)
	}
	// The controller is taken from now on, so no other device decided in
	// this step starts a test beside this one.
	st.active, st.activeSince = kind, now
	st.activeHold = defaultHold[kind]
	if e := res.Testing.ExpectedSeconds[kind]; e > 0 {
		st.activeHold = max(2*time.Duration(e)*time.Second, time.Hour)
	}
	return kind, wake, true
}

// controllerBusy: another device behind d's controller is testing, one
// diskcanary started or one its last read saw running.
func (r *Runner) controllerBusy(d *tracked, now time.Time) bool {
	for _, o := range r.devs {
		if o == d || o.controller != d.controller {
			continue
		}
		if o.st.active >= 0 && now.Sub(o.st.activeSince) <= o.st.activeHold {
			return true
		}
		if res := o.state.Result; res != nil && res.Testing.InProgress && !o.state.Standby {
			return true
		}
	}
	return false
}

// startSelfTest runs `smartctl --test=KIND` for d; d.running and d.st.active
// are already set. The drive runs the test; the next read (scheduled at
// once) shows its progress.
func (r *Runner) startSelfTest(ctx context.Context, d *tracked, kind int, wake bool) {
	select {
	case r.sem <- struct{}{}:
	case <-ctx.Done():
		r.mu.Lock()
		d.running = false
		d.st.active = -1
		r.mu.Unlock()
		return
	}
	nocheck := r.cfg.NoCheck
	if wake {
		nocheck = "never"
	}
	args := []string{"--json", "--nocheck=" + nocheck, "--test=" + SelfTestKinds[kind]}
	if d.state.Device.Type != "" {
		args = append(args, "--device="+d.state.Device.Type)
	}
	args = append(args, d.state.Device.Name)
	out := r.exec(ctx, args...)
	<-r.sem
	now := time.Now()

	r.mu.Lock()
	r.recordStart(d, kind, out, now)
	if out.Reaped == nil {
		d.running = false
		r.mu.Unlock()
		return
	}
	r.mu.Unlock()
	<-out.Reaped
	r.mu.Lock()
	d.running = false
	r.mu.Unlock()
}

// recordStart folds a start's outcome into d. Caller holds r.mu.
func (r *Runner) recordStart(d *tracked, kind int, out process.Result, now time.Time) {
	st := &d.st
	d.state.Generation++
	fail := func(why string) {
		st.active = -1
		st.lastTry[kind] = now
		d.state.SelfTestSkips[kind][SkipStartFailed]++
		r.log.Warn("smart: self-test not started; next try in the next window", "device", d.state.Device.Name, "type", SelfTestKinds[kind], "err", why)
	}
	switch {
	case out.TimedOut:
		fail(fmt.Sprintf("smartctl timed out after %s and was killed", r.cfg.Timeout))
		return
	case out.Err != nil:
		fail(out.Err.Error())
		return
	}
	code := ExitStatus(out.Code & 0xff)
	if res, err := Parse(out.Stdout); err == nil && res.Standby() {
		// Asleep since the last read: a skip like any other.
		st.active = -1
		st.standbySkips++
		d.state.SelfTestSkips[kind][SkipStandby]++
		return
	}
	// Bits 0-2: the command line, the open or a SMART command failed (a
	// drive without self-tests, a test smartctl would not abort). The
	// others are health findings, which a start does not look for.
	if code&0x7 != 0 {
		why := fmt.Sprintf("smartctl exit status %d", code)
		if res, err := Parse(out.Stdout); err == nil && len(res.Errors) > 0 {
			why += ": " + res.Errors[0]
		} else if out.Stderr != "" {
			why += ": " + out.Stderr
		}
		fail(why)
		return
	}
	st.lastStart[kind] = now
	st.activeSince = now
	st.standbySkips = 0
	d.state.SelfTestStarts[kind]++
	d.state.SelfTestLastStart[kind] = now
	// Read it back at once: the progress metrics start from the drive's own status.
	d.nextRun = now
	r.log.Info("smart: self-test started", "device", d.state.Device.Name, "type", SelfTestKinds[kind], "controller", d.controller)
}
