package main

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/diskcanary/diskcanary/bench/read"
	"github.com/diskcanary/diskcanary/bench/stats"
	"github.com/diskcanary/diskcanary/internal/testkit"
	"github.com/diskcanary/diskcanary/probes"
)

// etcd-vs-daemon: does the daemon's paced WAL probe predict a real etcd's
// WAL fdatasync distribution (docs/contract.md, measurement rule 4)? Per
// rate (puts/s) and interleaved round, on one filesystem: etcd loaded by
// hey (2,200-byte values), its WAL fdatasyncs timed by bpftrace (the db's
// syncs left out, their overlap reported); the daemon's own histogram;
// check --gap; fio with --thinktime. By default (-beside measured) each
// probe runs beside an etcd at the rate, as on a control-plane node, and is
// held to etcd alone; "etcd beside" is what the probe costs etcd. The gap
// is 1/rate minus opTime unless -gap is given. Samples are pooled over
// rounds that take turns, so each pool spans the same minutes. Verdict:
// ±10 % at p50 and ±15 % at p99 at the rates the default gap models; at
// the other rates it is a curve.

const (
	opTime     = 400 * time.Microsecond
	valueBytes = 2200
	warmUp     = 2 * time.Second
)

var etcdSources = []string{"etcd", "daemon", "check", "fio"}

type etcdRow struct {
	n     int
	p     percentiles
	notes []string
	num   map[string]float64 // etcd's numeric notes, medianed over rounds
	// The phase's samples, to pool over the rounds.
	s samples
}

// pooled is a source's percentiles over its rows (the rounds' phases).
func pooled(r *run, rows []*etcdRow) (p percentiles, n int) {
	var all samples
	for _, x := range rows {
		all.addSamples(r, &x.s)
	}
	return all.percentiles(), int(all.count())
}

func etcdVsDaemon(r *run, p params) bool {
	r.need("etcd", "hey", "bpftrace", "fio")
	r.needRoot("bpftrace")
	if _, err := os.Stat("/sys/kernel/tracing/events/syscalls"); err != nil {
		_ = exec.Command("mount", "-t", "tracefs", "nodev", "/sys/kernel/tracing").Run()
		if _, err := os.Stat("/sys/kernel/tracing/events/syscalls"); err != nil {
			r.Skip("tracefs with syscall tracepoints is missing (mount -t tracefs nodev /sys/kernel/tracing)")
		}
	}
	if err := os.MkdirAll(p.Dir, 0o755); err != nil {
		r.Fatal(err)
	}
	put := r.putBody()
	gapGiven := p.Gap != defaults.Gap
	rows := map[string]*etcdRow{} // by round/rate/source; "source/etcd": the etcd measured beside it
	key := func(i, rate int, s string) string { return fmt.Sprint(i, "/", rate, "/", s) }
	r.printf("etcd vs daemon on %s: rates %v puts/s, %d rounds, %s, %s\n", where(p.Dir), p.Rates, p.Rounds, nodeBPFSaid(p.NodeBPF), besideSaid[p.Beside])
	for i := range p.Rounds {
		k := i % len(etcdSources)
		order := append(slices.Clone(etcdSources[k:]), etcdSources[:k]...)
		for _, rate := range p.Rates {
			phase := time.Duration(max(3, min(p.MaxPhase.Seconds(), math.Ceil(float64(p.Samples)/float64(rate))))) * time.Second
			gap := max(0, time.Second/time.Duration(rate)-opTime)
			if gapGiven {
				gap = p.Gap
			}
			fmt.Printf("--- round %d, %d puts/s, %v per source, gap %v, order %v\n", i+1, rate, phase, gap, order)
			n := max(100, int(phase/(gap+opTime)))
			for _, s := range order {
				probe := func() *etcdRow {
					switch s {
					case "daemon":
						return r.daemonPhase(filepath.Join(p.Dir, "daemon"), gap, phase)
					case "check":
						return r.checkPhase(filepath.Join(p.Dir, "check"), gap, n)
					}
					return r.fioPhase(filepath.Join(p.Dir, "fio"), gap, n)
				}
				var row, its *etcdRow
				stop := r.nodeBPF(p.NodeBPF && s != "daemon")
				switch {
				case s == "etcd":
					row, _ = r.etcdPhase(filepath.Join(p.Dir, "etcd"), rate, phase, put, nil)
				case p.Beside == "measured":
					its, row = r.etcdPhase(filepath.Join(p.Dir, "etcd"), rate, phase, put, probe)
					rows[key(i, rate, s+"/etcd")] = its
				default:
					beside := r.besideEtcd(p.Beside == "tmpfs", rate, put)
					row = probe()
					beside()
				}
				stop()
				rows[key(i, rate, s)] = row
				fmt.Printf("  %s: %d samples, p50 %.1f p90 %.1f p99 %.1f µs %s\n", s, row.n, row.p.p50, row.p.p90, row.p.p99, strings.Join(row.notes, " "))
				if its != nil {
					fmt.Printf("  etcd beside %s: %d samples, p50 %.1f p90 %.1f p99 %.1f µs %s\n", s, its.n, its.p.p50, its.p.p90, its.p.p99, strings.Join(its.notes, " "))
				}
			}
		}
	}
	r.printf("etcd WAL fdatasync vs the paced probes: each source's samples pooled over %d interleaved rounds (µs)\n", p.Rounds)
	r.printf("'*' = p99 from < 1,000 samples; ratio = source/etcd alone, pooled; per round = the spread of the rounds' own p99 ratios\n")
	if p.Beside == "measured" {
		r.printf("same minutes = a probe/the etcd timed beside it (p50, p99); etcd beside = that etcd, what a probe running without pause costs it\n")
	}
	r.printf("%5s %-12s %8s %7s %7s %8s  %9s %9s  %-11s  %-13s  notes\n", "rate", "source", "samples", "p50", "p90", "p99", "p50 ratio", "p99 ratio", "per round", "same minutes")
	var verdicts []string // the bounds the daemon missed
	for _, rate := range p.Rates {
		// ratios is s's pooled percentiles against ref's: p50, p99 and
		// the rounds' own p99 ratios.
		ratios := func(s, ref string) (r50, r99 float64, rounds []float64) {
			var rs, refs []*etcdRow
			for i := range p.Rounds {
				x, y := rows[key(i, rate, s)], rows[key(i, rate, ref)]
				rs, refs, rounds = append(rs, x), append(refs, y), append(rounds, x.p.p99/y.p.p99)
			}
			sp, _ := pooled(r, rs)
			rp, _ := pooled(r, refs)
			return sp.p50 / rp.p50, sp.p99 / rp.p99, rounds
		}
		// line prints source s's pooled row, with its ratios to etcd
		// alone and, given same, to the etcd timed in its minutes.
		line := func(name, s, same string) (r50, r99 float64) {
			var rs []*etcdRow
			for i := range p.Rounds {
				rs = append(rs, rows[key(i, rate, s)])
			}
			sp, n := pooled(r, rs)
			star := " "
			if n < 1000 {
				star = "*"
			}
			cols, rounds, sameCol := fmt.Sprintf("%9s %9s", "", ""), "", ""
			if s != "etcd" {
				var rr []float64
				r50, r99, rr = ratios(s, "etcd")
				cols, rounds = fmt.Sprintf("%9.2f %9.2f", r50, r99), spread(rr)
			}
			if same != "" {
				s50, s99, _ := ratios(s, same)
				sameCol = fmt.Sprintf("×%.2f/×%.2f", s50, s99)
			}
			notes := strings.Join(rs[len(rs)-1].notes, " ")
			if rs[0].num != nil { // an etcd's: medians over the rounds
				var ns []string
				for _, name := range etcdNotes {
					vs := make([]float64, len(rs))
					for i, x := range rs {
						vs[i] = x.num[name]
					}
					ns = append(ns, fmt.Sprintf("%s=%.4g", name, stats.Median(vs)))
				}
				notes = strings.Join(ns, " ")
			}
			r.printf("%5d %-12s %8d %7.0f %7.0f %7.0f%s  %s  %-11s  %-13s  %s\n", rate, name, n, sp.p50, sp.p90, sp.p99, star, cols, rounds, sameCol, notes)
			return r50, r99
		}
		line("etcd alone", "etcd", "")
		for _, s := range etcdSources[1:] {
			same := ""
			if p.Beside == "measured" {
				same = s + "/etcd"
			}
			r50, r99 := line(s, s, same)
			if same != "" {
				line(" etcd beside", same, "")
			}
			judge := func(q string, r float64, b stats.Bound) {
				if !b.Holds(r) {
					verdicts = append(verdicts, fmt.Sprintf("FAIL: at %d puts/s the daemon's %s reads etcd's ×%.2f, outside %s", rate, q, r, b))
				}
			}
			if s == "daemon" && rate >= 50 && rate <= 100 { // the rates the default gap models
				judge("p50", r50, stats.Within(0.10))
				judge("p99", r99, stats.Within(0.15))
			}
		}
	}
	for _, v := range verdicts {
		r.printf("%s\n", v)
	}
	return len(verdicts) == 0
}

// besideSaid is each -beside mode for a heading.
var besideSaid = map[string]string{
	"measured": "the probes beside the etcd, on its filesystem, both timed in the same minutes",
	"tmpfs":    "the probes beside an etcd on tmpfs at the rate",
	"none":     "the probes on idle CPUs",
}

var etcdNotes = []string{"puts/s", "non200", "syncs/s", "idle_us", "db_overlap_pct", "alone_p50", "alone_p99"}

// putBody is the gateway's put request: a fixed key and a random value,
// base64 as the gateway wants.
func (r *run) putBody() string {
	v := make([]byte, valueBytes)
	_, _ = rand.Read(v)
	b, _ := json.Marshal(map[string]string{
		"key":   base64.StdEncoding.EncodeToString([]byte("diskcanary-bench")),
		"value": base64.StdEncoding.EncodeToString(v),
	})
	f := filepath.Join(r.TempDir(), "put.json")
	if err := os.WriteFile(f, b, 0o644); err != nil {
		r.Fatal(err)
	}
	return f
}

// etcdPhase runs an etcd on dataDir loaded at rate and times its WAL
// fdatasyncs for the phase; during, when given, runs meanwhile (a probe
// beside it on the same filesystem) and its row is returned too.
func (r *run) etcdPhase(dataDir string, rate int, phase time.Duration, put string, during func() *etcdRow) (etcd, beside *etcdRow) {
	client, pid, stop := r.startEtcd(dataDir)
	defer stop()
	hey := r.loadEtcd(client, rate, phase+warmUp+3*time.Second, put)
	time.Sleep(warmUp)
	fd := walFD(r, pid)
	script := fmt.Sprintf(`tracepoint:syscalls:sys_enter_fdatasync,tracepoint:syscalls:sys_enter_fsync /pid == %[1]d/ { @s[tid] = nsecs; @fd[tid] = args->fd; }
tracepoint:syscalls:sys_exit_fdatasync,tracepoint:syscalls:sys_exit_fsync /@s[tid]/ { printf("S %%lld %%lld %%d\n", @s[tid], nsecs - @s[tid], @fd[tid]); delete(@s[tid]); delete(@fd[tid]); }
tracepoint:syscalls:sys_enter_pwrite64 /pid == %[1]d && args->fd != %[2]d/ { @w[tid] = nsecs; }
tracepoint:syscalls:sys_exit_pwrite64 /@w[tid]/ { printf("W %%lld %%lld\n", @w[tid], nsecs - @w[tid]); delete(@w[tid]); }
interval:s:%[3]d { exit(); }
END { clear(@s); clear(@fd); clear(@w); }
`, pid, fd, int(phase.Seconds()))
	traced := filepath.Join(r.TempDir(), "bt.out")
	if during == nil {
		r.exec("bpftrace", "-o", traced, "-e", script)
	} else {
		// bpftrace in the background (a failure there is re-raised
		// here), the probe once it has attached (~1 s).
		failed := make(chan any, 1)
		go func() {
			defer func() { failed <- recover() }()
			r.exec("bpftrace", "-o", traced, "-e", script)
		}()
		time.Sleep(time.Second)
		beside = during()
		if v := <-failed; v != nil {
			panic(v)
		}
	}
	h := hey.wait(r)
	b, err := os.ReadFile(traced)
	if err != nil {
		r.Fatal(err)
	}
	return etcdRowFrom(r, b, fd, phase, h, rate), beside
}

// startEtcd starts a single-member etcd with its data in dataDir (made
// afresh) and waits for it to serve; stop ends it and removes dataDir.
func (r *run) startEtcd(dataDir string) (client string, pid int, stop func()) {
	os.RemoveAll(dataDir)
	client, peer := testkit.FreeAddr(r), testkit.FreeAddr(r)
	e := testkit.StartProcess(r, "etcd", "--name", "bench", "--data-dir", dataDir,
		"--listen-client-urls", "http://"+client, "--advertise-client-urls", "http://"+client,
		"--listen-peer-urls", "http://"+peer, "--initial-advertise-peer-urls", "http://"+peer,
		"--initial-cluster", "bench=http://"+peer, "--logger", "zap", "--log-level", "error")
	stop = func() { _ = e.Cmd.Process.Signal(syscall.SIGTERM); <-e.Done; os.RemoveAll(dataDir) }
	if !waitFor(10*time.Second, 100*time.Millisecond, func() bool {
		resp, err := http.Get("http://" + client + "/health")
		if err == nil {
			resp.Body.Close()
		}
		return err == nil && resp.StatusCode == http.StatusOK
	}) {
		stop()
		r.Fatal("etcd did not start")
	}
	return client, e.Cmd.Process.Pid, stop
}

// loadEtcd puts to client at rate puts/s for d with hey.
func (r *run) loadEtcd(client string, rate int, d time.Duration, put string) *heyRun {
	// One worker per 250 puts/s (a put takes ~0.5-1 ms); hey's -q is per
	// worker. One worker spaces the puts evenly, as the probes' fixed gap
	// does; it falls a few % short of the rate on a busy machine (a slow
	// put drops its tick), which the achieved rate in the notes shows.
	workers := (rate + 249) / 250
	h := &heyRun{cmd: exec.Command("hey", "-z", d.String(), "-c", strconv.Itoa(workers),
		"-q", strconv.FormatFloat(float64(rate)/float64(workers), 'f', -1, 64),
		"-m", "POST", "-T", "application/json", "-D", put, "http://"+client+"/v3/kv/put")}
	h.cmd.Stdout, h.cmd.Stderr = &h.out, &h.out
	if err := h.cmd.Start(); err != nil {
		r.Fatal(err)
	}
	r.Cleanup(func() { _ = h.cmd.Process.Kill() }) // a failed phase's; after wait, a no-op
	return h
}

type heyRun struct {
	cmd *exec.Cmd
	out bytes.Buffer
}

// wait waits for hey to end and reads its summary.
func (h *heyRun) wait(r *run) read.Hey {
	_ = h.cmd.Wait()
	s, err := read.ParseHey(&h.out)
	if err != nil {
		r.Fatalf("%v\n%s", err, h.out.Bytes())
	}
	return s
}

// stop ends hey before its -z is up, its summary unread.
func (h *heyRun) stop() { _ = h.cmd.Process.Signal(os.Interrupt); _ = h.cmd.Wait() }

// besideEtcd is the etcd a probe runs beside on a control-plane node: an
// etcd with its data on tmpfs, loaded at the rate while the daemon, check
// or fio runs. It makes the CPUs as busy as in etcd's own phase without a
// second writer on the disk. On a VM that decides the tail: a sync that
// wakes an idle vCPU waits for the host to run it (docs/findings.md).
func (r *run) besideEtcd(on bool, rate int, put string) (stop func()) {
	if !on {
		return func() {}
	}
	dir, err := os.MkdirTemp("/dev/shm", "diskcanary-bench-etcd-")
	if err != nil {
		r.Fatal(err)
	}
	// stop removes dir, but an interrupt or a failed phase never calls it;
	// the run's cleanups (after the etcd's own) do.
	r.Cleanup(func() { os.RemoveAll(dir) })
	client, _, stopEtcd := r.startEtcd(dir)
	hey := r.loadEtcd(client, rate, time.Hour, put) // until stop
	time.Sleep(warmUp)
	return func() { hey.stop(); stopEtcd() }
}

// walFD is the fd of the newest .wal file etcd holds open (a fresh data
// dir: one).
func walFD(r *run, pid int) int {
	dir := fmt.Sprintf("/proc/%d/fd", pid)
	ents, err := os.ReadDir(dir)
	if err != nil {
		r.Fatal(err)
	}
	fd, newest := -1, ""
	for _, e := range ents {
		t, err := os.Readlink(filepath.Join(dir, e.Name()))
		if err == nil && strings.HasSuffix(t, ".wal") && t > newest {
			newest = t
			fd, _ = strconv.Atoi(e.Name())
		}
	}
	if fd < 0 {
		r.Fatalf("no .wal file open in etcd (pid %d)", pid)
	}
	return fd
}

type span struct{ start, end int64 }

// etcdRowFrom reads bpftrace's lines: "S start dur fd" for an
// fdatasync/fsync, "W start dur" for a pwrite outside the WAL.
func etcdRowFrom(r *run, traced []byte, walFD int, phase time.Duration, h read.Hey, rate int) *etcdRow {
	var wal []span
	type event struct {
		span
		sync bool
	}
	var db []event
	sc := bufio.NewScanner(bytes.NewReader(traced))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 3 || (f[0] != "S" && f[0] != "W") {
			continue
		}
		t, _ := strconv.ParseInt(f[1], 10, 64)
		d, _ := strconv.ParseInt(f[2], 10, 64)
		s := span{t, t + d}
		switch {
		case f[0] == "W":
			db = append(db, event{s, false})
		case len(f) == 4 && f[3] == strconv.Itoa(walFD):
			wal = append(wal, s)
		default:
			db = append(db, event{s, true})
		}
	}
	if len(wal) == 0 {
		r.Fatalf("bpftrace saw no WAL fdatasync:\n%s", traced)
	}
	// etcd's backend commit (bolt, every 100 ms by default): pwrites of
	// the db, then its fdatasync. A WAL fdatasync overlapping a commit
	// window (first pwrite after the previous db sync .. end of the next
	// db sync) shares the disk and the journal with it.
	slices.SortFunc(db, func(a, b event) int { return int(a.start - b.start) })
	var commits []span
	begin := int64(-1)
	for _, e := range db {
		if begin < 0 {
			begin = e.start
		}
		if e.sync {
			commits = append(commits, span{begin, e.end})
			begin = -1
		}
	}
	var all, alone []time.Duration
	var idle []float64
	for k, s := range wal {
		d := time.Duration(s.end - s.start)
		all = append(all, d)
		if !slices.ContainsFunc(commits, func(c span) bool { return c.start < s.end && s.start < c.end }) {
			alone = append(alone, d)
		}
		if k > 0 {
			idle = append(idle, float64(s.start-wal[k-1].end)/1e3)
		}
	}
	slices.Sort(all)
	slices.Sort(alone)
	if h.RequestsPerSec < 0.95*float64(rate) {
		fmt.Fprintf(os.Stderr, "warning: hey achieved %.1f puts/s of %d\n", h.RequestsPerSec, rate)
	}
	non200 := 0
	for code, n := range h.Statuses {
		if code != http.StatusOK {
			non200 += n
		}
	}
	for _, n := range h.Errors {
		non200 += n
	}
	pct := func(s []time.Duration, q float64) float64 { return us(probes.Percentile(s, q)) }
	row := &etcdRow{n: len(all), p: percentiles{pct(all, 50), pct(all, 90), pct(all, 99)}, num: map[string]float64{
		"puts/s": h.RequestsPerSec, "non200": float64(non200), "syncs/s": float64(len(all)) / phase.Seconds(),
		"idle_us": stats.Median(idle), "db_overlap_pct": 100 * float64(len(all)-len(alone)) / float64(len(all)),
		"alone_p50": pct(alone, 50), "alone_p99": pct(alone, 99),
	}}
	for _, name := range etcdNotes {
		row.notes = append(row.notes, fmt.Sprintf("%s=%.4g", name, row.num[name]))
	}
	ops := read.Pool{}
	for _, d := range all {
		ops.Add(d)
	}
	row.s.addOps(ops)
	return row
}

func (r *run) daemonPhase(dir string, gap, phase time.Duration) *etcdRow {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		r.Fatal(err)
	}
	defer os.RemoveAll(dir)
	// Bursts of 50 (rule 5); the interval is the pause after a burst, so
	// one gap (at least the 10 ms minimum) keeps the pacing even.
	interval := max(10*time.Millisecond, gap.Round(time.Millisecond))
	d := r.serve(fmt.Sprintf(`probes:
  targets:
    - {name: wal, kind: wal, dir: %s, layout: append, gap: %s, ops: 50, interval: %s, jitter: 0, daily_write_budget: 1TB}
smart: {enabled: false}
diskstats: {enabled: false}
`, dir, gap, interval))
	defer d.stop()
	w := d.window(r, "diskcanary_fdatasync_duration_seconds", "wal", 0, phase)
	return &etcdRow{n: int(w.Count), p: histogramPercentiles(w), s: samples{hist: w}, notes: []string{"gap=" + gap.String(), "interval=" + interval.String()}}
}

func (r *run) checkPhase(dir string, gap time.Duration, n int) *etcdRow {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		r.Fatal(err)
	}
	defer os.RemoveAll(dir)
	log := filepath.Join(r.TempDir(), "lat.csv")
	c := r.check(dir, "--gap", gap.String(), "--samples", strconv.Itoa(n), "--lat-log", log)
	return &etcdRow{n: c.Samples, p: checkPercentiles(c), s: samples{ops: r.latLog(log)}, notes: []string{"gap=" + gap.String()}}
}

func (r *run) fioPhase(dir string, gap time.Duration, n int) *etcdRow {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		r.Fatal(err)
	}
	defer os.RemoveAll(dir)
	j := r.fioWAL(dir, n, gap)
	row := &etcdRow{n: j.Sync.Lat.N, p: fioPercentiles(r, j.Sync.Lat), notes: []string{"gap=" + gap.String()}}
	row.s.addFIO(r, j.Sync.Lat)
	return row
}
