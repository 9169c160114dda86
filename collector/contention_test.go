package collector

import (
	"bytes"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/diskcanary/diskcanary/internal/config"
	"github.com/diskcanary/diskcanary/internal/hostpath"
	"github.com/diskcanary/diskcanary/internal/testkit"
)

const (
	contentionV2Root = "../internal/cgroupio/testdata/v2/cgroup"
	contentionV1Root = "../internal/cgroupio/testdata/v1/blkio"
	contentionPod    = "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod0f2c6a7e_1b2d_4c3e_9f40_5a6b7c8d9e0f.slice/cri-containerd-3f4e5d6c7b8a99887766554433221100ffeeddccbbaa99887766554433221100.scope"
)

func newTestContention(t testing.TB, cfg ContentionConfig, log *bytes.Buffer) *contentionCollector {
	t.Helper()
	h := slog.Handler(slog.DiscardHandler)
	if log != nil {
		h = slog.NewTextHandler(log, nil)
	}
	p, err := newContentionCollector(Options{Config: &config.Config{}, Paths: hostpath.Paths{ProcFS: "testdata/contention/proc", SysFS: "/nonexistent"},
		Logger: slog.New(h), Contention: cfg})
	require.NoError(t, err)
	return p.(*contentionCollector)
}

// Before the first pass a scrape has the collector's state only; after
// it, the v2 fixture's cgroups per device by their kernel names, the
// daemon's own cgroup as diskcanary, the pod's container by its pod UID
// and container ID, and io.pressure for the cgroups that have it.
func TestContentionV2(t *testing.T) {
	c := newTestContention(t, ContentionConfig{Root: contentionV2Root, Top: 2}, nil)
	require.Equal(t, map[string]float64{
		"diskcanary_contention_available{}":                                                     1,
		`diskcanary_contention_source_info{cgroup_version="2",root="` + contentionV2Root + `"}`: 1,
		"diskcanary_contention_truncated_passes_total{}":                                        0,
		"diskcanary_contention_malformed_lines_total{}":                                         0,
		"diskcanary_contention_vanished_cgroups_total{}":                                        0,
	}, scrape(t, c))

	c.collect(func() time.Time { return time.Unix(1700000000, 0) })
	got := scrape(t, c)
	require.NotZero(t, got["diskcanary_contention_pass_duration_seconds{}"])
	delete(got, "diskcanary_contention_pass_duration_seconds{}")
	const pod = `cgroup="` + contentionPod + `",device="sda"`
	const podW = `workload="pod/0f2c6a7e-1b2d-4c3e-9f40-5a6b7c8d9e0f/3f4e5d6c7b8a"`
	const etcd = `cgroup="/system.slice/etcd.service"`
	const self = `cgroup="/system.slice/diskcanary.service",device="sda"`
	require.Equal(t, map[string]float64{
		"diskcanary_contention_available{}":                                                     1,
		`diskcanary_contention_source_info{cgroup_version="2",root="` + contentionV2Root + `"}`: 1,
		"diskcanary_contention_truncated_passes_total{}":                                        0,
		"diskcanary_contention_malformed_lines_total{}":                                         1,
		"diskcanary_contention_vanished_cgroups_total{}":                                        0,
		"diskcanary_contention_cgroups{}":                                                       9,
		"diskcanary_contention_truncated{}":                                                     0,
		"diskcanary_contention_last_pass_timestamp_seconds{}":                                   1700000000,

		"diskcanary_cgroup_io_bytes_total{" + pod + `,op="read",` + podW + "}":                             524288000,
		"diskcanary_cgroup_io_bytes_total{" + pod + `,op="write",` + podW + "}":                            1073741824,
		"diskcanary_cgroup_io_bytes_total{" + pod + `,op="discard",` + podW + "}":                          65536,
		"diskcanary_cgroup_io_ops_total{" + pod + `,op="read",` + podW + "}":                               128000,
		"diskcanary_cgroup_io_ops_total{" + pod + `,op="write",` + podW + "}":                              262144,
		"diskcanary_cgroup_io_ops_total{" + pod + `,op="discard",` + podW + "}":                            1,
		`diskcanary_cgroup_io_pressure_waiting_seconds_total{cgroup="` + contentionPod + `",` + podW + "}": 7.25,
		`diskcanary_cgroup_io_pressure_stalled_seconds_total{cgroup="` + contentionPod + `",` + podW + "}": 6.1,

		"diskcanary_cgroup_io_bytes_total{" + etcd + `,device="sda",op="read",workload="etcd.service"}`:  0,
		"diskcanary_cgroup_io_bytes_total{" + etcd + `,device="sda",op="write",workload="etcd.service"}`: 230000000,
		"diskcanary_cgroup_io_ops_total{" + etcd + `,device="sda",op="read",workload="etcd.service"}`:    0,
		"diskcanary_cgroup_io_ops_total{" + etcd + `,device="sda",op="write",workload="etcd.service"}`:   100000,
		"diskcanary_cgroup_io_wait_seconds_total{" + etcd + `,device="sda",workload="etcd.service"}`:     1.5,

		"diskcanary_cgroup_io_bytes_total{" + self + `,op="read",workload="diskcanary"}`:  4194304,
		"diskcanary_cgroup_io_bytes_total{" + self + `,op="write",workload="diskcanary"}`: 2300000,
		"diskcanary_cgroup_io_ops_total{" + self + `,op="read",workload="diskcanary"}`:    1024,
		"diskcanary_cgroup_io_ops_total{" + self + `,op="write",workload="diskcanary"}`:   1000,

		// The root cgroup's own I/O, third on sda with room for two.
		`diskcanary_cgroup_io_bytes_total{cgroup="",device="sda",op="read",workload="other"}`:  1048576,
		`diskcanary_cgroup_io_bytes_total{cgroup="",device="sda",op="write",workload="other"}`: 4096,
		`diskcanary_cgroup_io_ops_total{cgroup="",device="sda",op="read",workload="other"}`:    256,
		`diskcanary_cgroup_io_ops_total{cgroup="",device="sda",op="write",workload="other"}`:   1,
		`diskcanary_cgroup_io_wait_seconds_total{cgroup="",device="sda",workload="other"}`:     0,

		"diskcanary_cgroup_io_bytes_total{" + etcd + `,device="nvme0n1",op="read",workload="etcd.service"}`:  8192,
		"diskcanary_cgroup_io_bytes_total{" + etcd + `,device="nvme0n1",op="write",workload="etcd.service"}`: 0,
		"diskcanary_cgroup_io_ops_total{" + etcd + `,device="nvme0n1",op="read",workload="etcd.service"}`:    2,
		"diskcanary_cgroup_io_ops_total{" + etcd + `,device="nvme0n1",op="write",workload="etcd.service"}`:   0,
	}, got)
}

// A host without cgroup I/O accounting: a gauge and one log line, not a
// failing collector; an explicit root that is not a hierarchy is a
// startup error.
func TestContentionUnavailable(t *testing.T) {
	var log bytes.Buffer
	p, err := newContentionCollector(Options{Config: &config.Config{}, Paths: hostpath.Paths{ProcFS: "testdata/contention/proc", SysFS: t.TempDir()},
		Logger: slog.New(slog.NewTextHandler(&log, nil))})
	require.NoError(t, err)
	want := map[string]float64{"diskcanary_contention_available{}": 0}
	require.Equal(t, want, scrape(t, p))
	require.Equal(t, want, scrape(t, p))
	require.Equal(t, 1, bytes.Count(log.Bytes(), []byte("no per-cgroup I/O to read")), log.String())

	_, err = newContentionCollector(Options{Config: &config.Config{}, Contention: ContentionConfig{Root: t.TempDir()}})
	require.ErrorContains(t, err, "--collector.contention.root")
}

// On v1 a device with I/O in diskstats that no cgroup accounts (blk-throttle
// never activated on it) is named once in the log, with the fix.
func TestContentionV1NamesUnaccountedDevicesOnce(t *testing.T) {
	var log bytes.Buffer
	c := newTestContention(t, ContentionConfig{Root: contentionV1Root}, &log)
	c.collect(time.Now)
	c.collect(time.Now)
	require.Equal(t, 1, bytes.Count(log.Bytes(), []byte("blk-throttle is active")), log.String())
	require.Contains(t, log.String(), `devices="loop0=7:0"`)
	require.Equal(t, 1, bytes.Count(log.Bytes(), []byte("lines=4")), "malformed lines are logged when their number changes: "+log.String())
	got := scrape(t, c)
	require.Equal(t, 8.0, got["diskcanary_contention_malformed_lines_total{}"])
	require.Equal(t, 230000000.0, got[`diskcanary_cgroup_io_bytes_total{cgroup="/system.slice/etcd.service",device="sda",op="write",workload="etcd.service"}`])
}

// 100,000 cgroups: the pass stops at the limit, says so in a metric and a
// log line, and a scrape still answers from memory.
func TestContention100kCgroupsIsBounded(t *testing.T) {
	testkit.E2E(t) // making 100,000 directories is slow
	root := t.TempDir()
	writeFile := func(p, s string) { require.NoError(t, os.WriteFile(p, []byte(s), 0o644)) }
	writeFile(filepath.Join(root, "cgroup.controllers"), "io\n")
	writeFile(filepath.Join(root, "io.stat"), "8:0 rbytes=100000 wbytes=0 rios=100000 wios=0 dbytes=0 dios=0\n")
	for i := range 100 {
		parent := filepath.Join(root, "p"+strconv.Itoa(i))
		require.NoError(t, os.Mkdir(parent, 0o755))
		writeFile(filepath.Join(parent, "io.stat"), "8:0 rbytes=1000 wbytes=0 rios=1000 wios=0 dbytes=0 dios=0\n")
		for j := range 1000 {
			child := filepath.Join(parent, "c"+strconv.Itoa(j))
			require.NoError(t, os.Mkdir(child, 0o755))
			writeFile(filepath.Join(child, "io.stat"), "8:0 rbytes=1 wbytes=0 rios=1 wios=0 dbytes=0 dios=0\n")
		}
	}
	var log bytes.Buffer
	c := newTestContention(t, ContentionConfig{Root: root, MaxCgroups: 5000, Budget: time.Minute}, &log)
	start := time.Now()
	c.collect(time.Now)
	t.Logf("a pass over 5,000 of 100,000 cgroups took %v", time.Since(start))
	got := scrape(t, c)
	require.Equal(t, 5000.0, got["diskcanary_contention_cgroups{}"])
	require.Equal(t, 1.0, got["diskcanary_contention_truncated{}"])
	require.Equal(t, 1.0, got["diskcanary_contention_truncated_passes_total{}"])
	require.Contains(t, log.String(), "reason=max_cgroups")
	named := 0
	for k := range got {
		if bytes.HasPrefix([]byte(k), []byte(`diskcanary_cgroup_io_bytes_total{`)) {
			named++
		}
	}
	// Ten named cgroups and other, read and write each.
	require.Equal(t, 22, named)
}

// A pass stuck in a cgroup file (here a FIFO that no one writes: the open
// blocks) holds up only itself: scrapes answer from the last pass.
func TestContentionScrapeNeverWaitsForAPass(t *testing.T) {
	root := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(root, "cgroup.controllers"), []byte("io\n"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(root, "io.stat"), []byte("8:0 rbytes=4096 wbytes=0 rios=1 wios=0 dbytes=0 dios=0\n"), 0o644))
	c := newTestContention(t, ContentionConfig{Root: root}, nil)
	c.collect(time.Now)
	before := scrape(t, c)
	require.Equal(t, 4096.0, before[`diskcanary_cgroup_io_bytes_total{cgroup="/",device="sda",op="read",workload="/"}`])

	hung := filepath.Join(root, "hung")
	require.NoError(t, os.Mkdir(hung, 0o755))
	fifo := filepath.Join(hung, "io.stat")
	require.NoError(t, unix.Mkfifo(fifo, 0o644))
	passed := make(chan struct{})
	go func() { c.collect(time.Now); close(passed) }()
	t.Cleanup(func() {
		// Unblock the pass: a writer opens the FIFO and closes it (EOF).
		if f, err := os.OpenFile(fifo, os.O_WRONLY, 0); err == nil {
			f.Close()
		}
		<-passed
	})
	time.Sleep(50 * time.Millisecond) // the pass is in the FIFO's open
	scraped := make(chan map[string]float64, 1)
	go func() { scraped <- scrape(t, c) }()
	select {
	case got := <-scraped:
		require.Equal(t, before, got)
	case <-time.After(10 * time.Second):
		t.Fatal("a scrape waited for the stuck pass")
	}
	select {
	case <-passed:
		t.Fatal("the pass was not stuck: the test tests nothing")
	default:
	}
}
