package smart

// SelfTest is the most recent entry of the drive's self-test log, and the
// most recent failure the log still holds.
type SelfTest struct {
	// Type is the test as smartctl names it ("Short offline", "Extended
	// offline", "Short", "Background long"...).
	Type string `json:"type"`
	// Result is passed, failed, aborted or in_progress.
	Result string `json:"result"`
	// Status is smartctl's text for it ("Completed: read failure").
	Status string `json:"status"`
	// AgeSeconds is how much power-on time has passed since the test ran
	// (the log stamps entries with power-on hours), nil if unknown.
	AgeSeconds *float64 `json:"age_seconds"`
	// FailedLBA is the first failing LBA of the most recent failed test in
	// the log that reports one (the last test itself may have passed).
	FailedLBA *float64 `json:"failed_lba"`
}

// Self-test results.
const (
	SelfTestPassed     = "passed"
	SelfTestFailed     = "failed"
	SelfTestAborted    = "aborted"
	SelfTestInProgress = "in_progress"
)

// Self-test kinds diskcanary schedules, as smartctl --test names them and
// as the `type` label of the scheduling metrics shows them.
const (
	SelfTestShort = 0
	SelfTestLong  = 1
)

// SelfTestKinds names the kinds by index.
var SelfTestKinds = [2]string{"short", "long"}

// SelfTestProgress is what one run says about self-tests beyond the log's
// newest entry: whether one runs now, how much of it is left, and when each
// kind last ran.
type SelfTestProgress struct {
	// Reported: smartctl printed the drive's current self-test status (ATA
	// self-test execution status, the NVMe log's current operation) or a
	// self-test log to infer it from.
	Reported   bool
	InProgress bool
	// RemainingRatio is the share of a running test still to do (ATA
	// remaining_percent, NVMe 100 − completion percent); nil if unknown.
	RemainingRatio *float64
	// LastAgeSeconds is, by kind, the power-on time since the newest log
	// entry of that kind that ran (passed, failed or running; an aborted
	// test did not test the disk); nil if the log has none.
	LastAgeSeconds [2]*float64
	// ExpectedSeconds is, by kind, the drive's own estimate of the test's
	// duration (ATA polling minutes); 0 if unknown.
	ExpectedSeconds [2]float64
}

// ataSelfTestKind maps the ATA self-test log's test number (ACS-3, SMART
// self-test log, byte 0: the LBA low register of SMART EXECUTE OFF-LINE
// IMMEDIATE): 1 short and 2 extended off-line, 129 and 130 their captive
// forms. Conveyance, selective and vendor tests are neither kind.
func ataSelfTestKind(v int64) int {
	switch v {
	case 1, 129:
		return SelfTestShort
	case 2, 130:
		return SelfTestLong
	}
	return -1
}

// nvmeSelfTestKind maps the NVMe self-test code (NVMe base spec, Device
// Self-test command, STC field): 1 short, 2 extended.
func nvmeSelfTestKind(v int64) int {
	switch v {
	case 1:
		return SelfTestShort
	case 2:
		return SelfTestLong
	}
	return -1
}

// scsiSelfTestKind maps the SCSI self-test code (SPC-4, SEND DIAGNOSTIC
// SELF-TEST CODE): 1 background short, 2 background extended, 5 and 6 the
// foreground forms.
func scsiSelfTestKind(v int64) int {
	switch v {
	case 1, 5:
		return SelfTestShort
	case 2, 6:
		return SelfTestLong
	}
	return -1
}

// ran is true for a log result that exercised the disk.
func ran(result string) bool {
	return result == SelfTestPassed || result == SelfTestFailed || result == SelfTestInProgress
}

// progress fills r.Testing. The drive's current status, where smartctl
// prints it, is authoritative; otherwise the log's newest entry says
// whether a test runs (SCSI logs a running test as result 15).
func (r *Result) progress(raw *rawOutput) {
	p := &r.Testing
	now := int64(-1)
	if po := raw.PowerOnTime; po != nil && po.Hours.ok {
		now = po.Hours.v
	}
	setAge := func(kind int, age *float64) {
		if kind >= 0 && p.LastAgeSeconds[kind] == nil && age != nil {
			p.LastAgeSeconds[kind] = age
		}
	}
	if r.SelfTest != nil {
		p.Reported = true
		p.InProgress = r.SelfTest.Result == SelfTestInProgress
	}
	if d := raw.ATASmartData; d != nil && d.SelfTest != nil {
		if st := d.SelfTest.Status; st != nil && st.Value.ok {
			p.Reported = true
			// ACS-3 self-test execution status: the high nibble 15 means
			// a test is running.
			p.InProgress = st.Value.v>>4&0xf == 15
			if p.InProgress && st.RemainingPercent.ok {
				p.RemainingRatio = ptr(float64(st.RemainingPercent.v) / 100)
			}
		}
		if pm := d.SelfTest.PollingMinutes; pm != nil {
			if pm.Short.ok && pm.Short.v > 0 {
				p.ExpectedSeconds[SelfTestShort] = float64(pm.Short.v) * 60
			}
			if pm.Extended.ok && pm.Extended.v > 0 {
				p.ExpectedSeconds[SelfTestLong] = float64(pm.Extended.v) * 60
			}
		}
	}
	if l := raw.ATASelfTestLog; l != nil && l.Standard != nil {
		for _, e := range l.Standard.Table {
			if ran(ataSelfTestResult(e.Status.Value.v)) && e.LifetimeHours.ok {
				setAge(ataSelfTestKind(e.Type.Value.v), selfTestAge(now, e.LifetimeHours.v, ataHourWrap))
			}
		}
	}
	if l := raw.NVMeSelfTestLog; l != nil {
		if op := l.CurrentOperation; op != nil && op.Value.ok {
			p.Reported = true
			p.InProgress = op.Value.v&0xf != 0
			if p.InProgress && l.CompletionPercent.ok {
				p.RemainingRatio = ptr(float64(100-l.CompletionPercent.v) / 100)
			}
		}
		for _, e := range l.Table {
			if ran(nvmeSelfTestResult(e.Result.Value.v)) && e.PowerOnHours.ok {
				setAge(nvmeSelfTestKind(e.Code.Value.v), selfTestAge(now, e.PowerOnHours.v, 0))
			}
		}
	}
	if e := raw.SCSISelfTest0; e != nil && ran(scsiSelfTestResult(e.Result.Value.v)) && e.PowerOnTime != nil && e.PowerOnTime.Hours.ok {
		setAge(scsiSelfTestKind(e.Code.Value.v), selfTestAge(now, e.PowerOnTime.Hours.v, 0))
	}
}

// SelfTestResults lists every result a SelfTest can have.
var SelfTestResults = []string{SelfTestPassed, SelfTestFailed, SelfTestAborted, SelfTestInProgress}

// ataSelfTestResult reads the ATA self-test execution status (ACS-3,
// SMART self-test log, byte 1, high nibble): 0 completed without error,
// 1 aborted by the host, 2 interrupted by a reset, 3-8 failed (fatal
// error, unknown element, electrical, servo, read, handling damage), 15
// in progress.
func ataSelfTestResult(status int64) string {
	switch n := status >> 4 & 0xf; {
	case n == 0:
		return SelfTestPassed
	case n == 1 || n == 2:
		return SelfTestAborted
	case n >= 3 && n <= 8:
		return SelfTestFailed
	case n == 15:
		return SelfTestInProgress
	}
	return ""
}

// nvmeSelfTestResult reads the NVMe device self-test status (NVMe base
// spec, Self-test Result Data Structure, byte 0 bits 3:0): 0 completed
// without error, 1-4, 8, 9 aborted (by a command, a reset, a namespace
// removal, a format, an unknown reason, a sanitize), 5-7 failed (fatal
// error, unknown segment, one or more segments), 15 unused entry.
func nvmeSelfTestResult(v int64) string {
	switch v & 0xf {
	case 0:
		return SelfTestPassed
	case 1, 2, 3, 4, 8, 9:
		return SelfTestAborted
	case 5, 6, 7:
		return SelfTestFailed
	}
	return ""
}

// scsiSelfTestResult reads the SCSI self-test results log parameter
// (SPC-4, 7.3.x, SELF-TEST RESULTS field): 0 completed without error, 1-2
// aborted, 3-7 failed (unknown error, a segment failed), 15 in progress.
func scsiSelfTestResult(v int64) string {
	switch v & 0xf {
	case 0:
		return SelfTestPassed
	case 1, 2:
		return SelfTestAborted
	case 3, 4, 5, 6, 7:
		return SelfTestFailed
	case 15:
		return SelfTestInProgress
	}
	return ""
}

// ataHourWrap: the ATA self-test log stamps entries with the low 16 bits
// of the power-on hours, so a drive past 65,535 hours logs 42 for 65,578.
const ataHourWrap = 1 << 16

// selfTestAge is the power-on time between a log entry's stamp and now,
// in seconds. wrap is the stamp's modulus (0: none).
func selfTestAge(nowHours, stampHours, wrap int64) *float64 {
	if nowHours < 0 || stampHours < 0 {
		return nil
	}
	d := nowHours - stampHours
	if wrap > 0 {
		d = ((nowHours % wrap) - stampHours + wrap) % wrap
	}
	if d < 0 {
		return nil
	}
	return ptr(float64(d) * 3600)
}

func (r *Result) selfTests(raw *rawOutput) {
	now := int64(-1)
	if p := raw.PowerOnTime; p != nil && p.Hours.ok {
		now = p.Hours.v
	}
	var st *SelfTest
	switch {
	case raw.ATASelfTestLog != nil && raw.ATASelfTestLog.Standard != nil && len(raw.ATASelfTestLog.Standard.Table) > 0:
		t := raw.ATASelfTestLog.Standard.Table // newest first
		st = &SelfTest{Type: t[0].Type.String, Status: t[0].Status.String, Result: ataSelfTestResult(t[0].Status.Value.v)}
		if t[0].LifetimeHours.ok {
			st.AgeSeconds = selfTestAge(now, t[0].LifetimeHours.v, ataHourWrap)
		}
		for _, e := range t {
			if ataSelfTestResult(e.Status.Value.v) == SelfTestFailed && e.LBA.ok {
				st.FailedLBA = ptr(float64(e.LBA.v))
				break
			}
		}
	case raw.NVMeSelfTestLog != nil && len(raw.NVMeSelfTestLog.Table) > 0:
		t := raw.NVMeSelfTestLog.Table // newest first
		st = &SelfTest{Type: t[0].Code.String, Status: t[0].Result.String, Result: nvmeSelfTestResult(t[0].Result.Value.v)}
		if t[0].PowerOnHours.ok {
			st.AgeSeconds = selfTestAge(now, t[0].PowerOnHours.v, 0)
		}
		for _, e := range t {
			if nvmeSelfTestResult(e.Result.Value.v) == SelfTestFailed && e.LBA.ok {
				st.FailedLBA = ptr(float64(e.LBA.v))
				break
			}
		}
	case raw.SCSISelfTest0 != nil:
		// scsi_self_test_0 is the newest of up to 20 (smartctl names them
		// scsi_self_test_0 .. _19).
		e := raw.SCSISelfTest0
		st = &SelfTest{Type: e.Code.String, Status: e.Result.String, Result: scsiSelfTestResult(e.Result.Value.v)}
		if e.PowerOnTime != nil && e.PowerOnTime.Hours.ok {
			st.AgeSeconds = selfTestAge(now, e.PowerOnTime.Hours.v, 0)
		}
		if st.Result == SelfTestFailed && e.LBA != nil && e.LBA.Value.ok {
			st.FailedLBA = ptr(float64(e.LBA.Value.v))
		}
	}
	if st != nil && st.Result != "" {
		r.SelfTest = st
	}
}
