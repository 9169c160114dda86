package cgroupio

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

const (
	podDir  = "/kubepods/burstable/pod0f2c6a7e-1b2d-4c3e-9f40-5a6b7c8d9e0f/3f4e5d6c7b8a99887766554433221100ffeeddccbbaa99887766554433221100"
	podV2   = "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod0f2c6a7e_1b2d_4c3e_9f40_5a6b7c8d9e0f.slice/cri-containerd-3f4e5d6c7b8a99887766554433221100ffeeddccbbaa99887766554433221100.scope"
	podName = "pod/0f2c6a7e-1b2d-4c3e-9f40-5a6b7c8d9e0f/3f4e5d6c7b8a"
)

var sda, nvme = Dev{8, 0}, Dev{259, 0}

func read(t *testing.T, src Source, lim Limits) *Pass {
	t.Helper()
	var p Pass
	require.NoError(t, NewReader(src, lim).Read(&p))
	return &p
}

// byPath is a pass's cgroups by path, each device's counters by device.
func byPath(p *Pass) map[string]map[Dev]Counts {
	out := map[string]map[Dev]Counts{}
	for _, c := range p.Cgroups {
		m := map[Dev]Counts{}
		for _, s := range c.Stats {
			m[s.Dev] = s.Counts
		}
		out[c.Path] = m
	}
	return out
}

func TestReadV1(t *testing.T) {
	p := read(t, Source{Version: 1, Root: "testdata/v1/blkio"}, Limits{})
	require.Equal(t, 11, p.Walked)
	require.Equal(t, 4, p.Malformed)
	require.Equal(t, "", p.Truncated)
	require.Equal(t, map[string]map[Dev]Counts{
		"/": {sda: {ReadBytes: 1048576, WriteBytes: 4096, ReadOps: 256, WriteOps: 1}},
		"/system.slice/etcd.service": {
			sda:  {WriteBytes: 230000000, WriteOps: 100000},
			nvme: {ReadBytes: 8192, ReadOps: 2},
		},
		"/system.slice/diskcanary.service": {sda: {ReadBytes: 4194304, WriteBytes: 2300000, ReadOps: 1024, WriteOps: 1000}},
		podDir:                             {sda: {ReadBytes: 524288000, WriteBytes: 1073741824, DiscardBytes: 65536, ReadOps: 128000, WriteOps: 262144, DiscardOps: 1}},
		// The good lines of a file with bad ones are kept.
		"/user.slice/broken.scope": {sda: {ReadBytes: 12288, ReadOps: 3}},
	}, byPath(p))
}

func TestReadV2(t *testing.T) {
	src, err := Detect(pathsNone, "testdata/v2/cgroup")
	require.NoError(t, err)
	require.Equal(t, Source{Version: 2, Root: "testdata/v2/cgroup"}, src)
	p := read(t, src, Limits{})
	require.Equal(t, 9, p.Walked)
	require.Equal(t, 1, p.Malformed)
	got := byPath(p)
	require.Len(t, got, 8) // cron.service's io.stat is empty
	require.Equal(t, map[Dev]Counts{
		sda:  {WriteBytes: 230000000, WriteOps: 100000, WaitUsec: 1500000, HasWait: true},
		nvme: {ReadBytes: 8192, ReadOps: 2},
	}, got["/system.slice/etcd.service"])

	r := NewReader(src, Limits{})
	some, full, ok := r.Pressure(podV2)
	require.True(t, ok)
	require.Equal(t, []uint64{7250000, 6100000}, []uint64{some, full})
	_, _, ok = r.Pressure("/system.slice")
	require.False(t, ok, "no io.pressure file")
}

func TestDetect(t *testing.T) {
	src, err := Detect(pathsNone, "testdata/v1/blkio")
	require.NoError(t, err)
	require.Equal(t, 1, src.Version)

	noIO := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(noIO, "cgroup.controllers"), []byte("cpu memory hugetlb\n"), 0o644))
	_, err = Detect(pathsNone, noIO)
	require.ErrorContains(t, err, "without the io controller")
	_, err = Detect(pathsNone, t.TempDir())
	require.ErrorContains(t, err, "neither a cgroup v1 blkio hierarchy")
}

// The v1 tree ranked with room for one cgroup: the largest by bytes (no
// recent I/O is known on a first pass), the daemon's own cgroup as itself,
// the rest summed.
func TestTrackerV1FirstPass(t *testing.T) {
	tr := NewTracker(TrackerConfig{Version: 1, Top: 1, Decay: 0.5, SelfPath: "/system.slice/diskcanary.service"})
	snap := tr.Observe(read(t, Source{Version: 1, Root: "testdata/v1/blkio"}, Limits{}), time.Unix(1000, 0))
	require.Equal(t, []Ranking{
		{Dev: sda, Rows: []Row{
			{Workload: podName, Cgroup: podDir,
				Total: Counts{ReadBytes: 524288000, WriteBytes: 1073741824, DiscardBytes: 65536, ReadOps: 128000, WriteOps: 262144, DiscardOps: 1},
				Delta: Counts{ReadBytes: 524288000, WriteBytes: 1073741824, DiscardBytes: 65536, ReadOps: 128000, WriteOps: 262144, DiscardOps: 1}},
			{Workload: "diskcanary", Cgroup: "/system.slice/diskcanary.service",
				Total: Counts{ReadBytes: 4194304, WriteBytes: 2300000, ReadOps: 1024, WriteOps: 1000},
				Delta: Counts{ReadBytes: 4194304, WriteBytes: 2300000, ReadOps: 1024, WriteOps: 1000}},
			// etcd 230000000 written, the root cgroup 1048576 read and 4096
			// written, broken.scope 12288 read.
			{Workload: "other",
				Total: Counts{ReadBytes: 1060864, WriteBytes: 230004096, ReadOps: 259, WriteOps: 100001},
				Delta: Counts{ReadBytes: 1060864, WriteBytes: 230004096, ReadOps: 259, WriteOps: 100001}},
		}},
		{Dev: nvme, Rows: []Row{
			{Workload: "etcd.service", Cgroup: "/system.slice/etcd.service",
				Total: Counts{ReadBytes: 8192, ReadOps: 2}, Delta: Counts{ReadBytes: 8192, ReadOps: 2}},
		}},
	}, snap.Devices)
}

// copyTree copies a fixture tree to a temp dir the test may change.
func copyTree(t *testing.T, from string) string {
	t.Helper()
	to := t.TempDir()
	require.NoError(t, os.CopyFS(to, os.DirFS(from)))
	return to
}

func write(t *testing.T, path, content string) {
	t.Helper()
	require.NoError(t, os.WriteFile(path, []byte(content), 0o644))
}

func rowsOf(r []Ranking, dev Dev) map[string]Counts {
	out := map[string]Counts{}
	for _, rk := range r {
		if rk.Dev != dev {
			continue
		}
		for _, row := range rk.Rows {
			out[row.Workload] = row.Total
		}
	}
	return out
}

func order(r []Ranking, dev Dev) []string {
	var out []string
	for _, rk := range r {
		if rk.Dev == dev {
			for _, row := range rk.Rows {
				out = append(out, row.Workload)
			}
		}
	}
	return out
}

// The second pass ranks by what each cgroup did since the first: etcd,
// which wrote, takes the one named place; the pod moves to other with its
// increase only; a removed cgroup's row goes and other never goes down; a
// reset counter (blkio.reset_stats) is no I/O.
func TestTrackerV1CountersOnlyGoUp(t *testing.T) {
	root := copyTree(t, "testdata/v1/blkio")
	src := Source{Version: 1, Root: root}
	r := NewReader(src, Limits{})
	tr := NewTracker(TrackerConfig{Version: 1, Top: 1, Decay: 0.5, SelfPath: "/system.slice/diskcanary.service"})
	var p Pass
	require.NoError(t, r.Read(&p))
	tr.Observe(&p, time.Unix(1000, 0))

	etcd := filepath.Join(root, "system.slice/etcd.service")
	write(t, filepath.Join(etcd, "blkio.throttle.io_service_bytes"), "8:0 Read 0\n8:0 Write 240000000\n8:0 Total 240000000\nTotal 240000000\n")
	write(t, filepath.Join(etcd, "blkio.throttle.io_serviced"), "8:0 Read 0\n8:0 Write 102000\n8:0 Total 102000\nTotal 102000\n")
	pod := filepath.Join(root, podDir)
	write(t, filepath.Join(pod, "blkio.throttle.io_service_bytes"), "8:0 Read 524288000\n8:0 Write 1073745920\n8:0 Discard 65536\nTotal 1598099456\n")
	write(t, filepath.Join(pod, "blkio.throttle.io_serviced"), "8:0 Read 128000\n8:0 Write 262145\n8:0 Discard 1\nTotal 390146\n")
	require.NoError(t, os.RemoveAll(filepath.Join(root, "user.slice/broken.scope")))
	// The root's counters were reset.
	write(t, filepath.Join(root, "blkio.throttle.io_service_bytes"), "8:0 Read 4096\n8:0 Write 0\nTotal 4096\n")
	write(t, filepath.Join(root, "blkio.throttle.io_serviced"), "8:0 Read 1\n8:0 Write 0\nTotal 1\n")

	require.NoError(t, r.Read(&p))
	snap := tr.Observe(&p, time.Unix(1005, 0))
	require.Equal(t, 5*time.Second, snap.Interval)
	require.Equal(t, []string{"etcd.service", "diskcanary", "other"}, order(snap.Devices, sda))
	require.Equal(t, map[string]Counts{
		"etcd.service": {WriteBytes: 240000000, WriteOps: 102000},
		"diskcanary":   {ReadBytes: 4194304, WriteBytes: 2300000, ReadOps: 1024, WriteOps: 1000},
		// First pass's other (etcd left it: its 230000000 stay), plus the
		// pod's 4096 bytes and 1 write since; the root's reset adds nothing.
		"other": {ReadBytes: 1060864, WriteBytes: 230008192, ReadOps: 259, WriteOps: 100002},
	}, rowsOf(snap.Devices, sda))

	// The root reads again, 8192 bytes since its reset: only that is new.
	write(t, filepath.Join(root, "blkio.throttle.io_service_bytes"), "8:0 Read 12288\n8:0 Write 0\nTotal 12288\n")
	require.NoError(t, r.Read(&p))
	snap = tr.Observe(&p, time.Unix(1010, 0))
	require.Equal(t, Counts{ReadBytes: 1069056, WriteBytes: 230008192, ReadOps: 259, WriteOps: 100002}, rowsOf(snap.Devices, sda)["other"])
}

// v2's io.stat is hierarchical: each cgroup's row is its own I/O, its
// children's taken out, so the slices above the pod's container and
// system.slice show nothing of their own, and the root shows only what no
// child did.
func TestTrackerV2OwnIO(t *testing.T) {
	tr := NewTracker(TrackerConfig{Version: 2, Top: 10, Decay: 0.5, SelfPath: "/system.slice/diskcanary.service"})
	snap := tr.Observe(read(t, Source{Version: 2, Root: "testdata/v2/cgroup"}, Limits{}), time.Unix(1000, 0))
	require.Equal(t, []string{podName, "etcd.service", "/", "diskcanary"}, order(snap.Devices, sda))
	require.Equal(t, map[string]Counts{
		podName:        {ReadBytes: 524288000, WriteBytes: 1073741824, DiscardBytes: 65536, ReadOps: 128000, WriteOps: 262144, DiscardOps: 1},
		"etcd.service": {WriteBytes: 230000000, WriteOps: 100000, WaitUsec: 1500000, HasWait: true},
		"/":            {ReadBytes: 1048576, WriteBytes: 4096, ReadOps: 256, WriteOps: 1, HasWait: true},
		"diskcanary":   {ReadBytes: 4194304, WriteBytes: 2300000, ReadOps: 1024, WriteOps: 1000},
	}, rowsOf(snap.Devices, sda))
	require.Equal(t, []string{"etcd.service"}, order(snap.Devices, nvme))
}

// A v2 cgroup removed between passes leaves its I/O in its parents'
// counters, as the kernel keeps it; that is not the parents' own I/O.
func TestTrackerV2VanishedChildIsNotItsParentsIO(t *testing.T) {
	root := copyTree(t, "testdata/v2/cgroup")
	r := NewReader(Source{Version: 2, Root: root}, Limits{})
	tr := NewTracker(TrackerConfig{Version: 2, Top: 10, Decay: 0.5})
	var p Pass
	require.NoError(t, r.Read(&p))
	tr.Observe(&p, time.Unix(1000, 0))
	require.NoError(t, os.RemoveAll(filepath.Join(root, podV2)))
	require.NoError(t, r.Read(&p))
	snap := tr.Observe(&p, time.Unix(1005, 0))
	// Nobody did I/O since: the order is by totals.
	require.Equal(t, []string{"etcd.service", "diskcanary.service", "/"}, order(snap.Devices, sda))
	require.Equal(t, Counts{ReadBytes: 1048576, WriteBytes: 4096, ReadOps: 256, WriteOps: 1, HasWait: true}, rowsOf(snap.Devices, sda)["/"])
}

func TestLimits(t *testing.T) {
	p := read(t, Source{Version: 1, Root: "testdata/v1/blkio"}, Limits{MaxCgroups: 3})
	require.Equal(t, 3, p.Walked)
	require.Equal(t, TruncatedCount, p.Truncated)

	// A clock that moves a minute per reading: the budget is spent at the
	// first check, after 31 directories.
	root := t.TempDir()
	for i := range 100 {
		dir := filepath.Join(root, "c"+strings.Repeat("x", i%3)+string(rune('a'+i%26))+string(rune('a'+i/26)))
		require.NoError(t, os.Mkdir(dir, 0o755))
		write(t, filepath.Join(dir, "io.stat"), "")
	}
	write(t, filepath.Join(root, "io.stat"), "")
	r := NewReader(Source{Version: 2, Root: root}, Limits{Budget: 10 * time.Second})
	clock := time.Unix(0, 0)
	r.now = func() time.Time { clock = clock.Add(time.Minute); return clock }
	var pass Pass
	require.NoError(t, r.Read(&pass))
	require.Equal(t, TruncatedTime, pass.Truncated)
	require.Equal(t, 31, pass.Walked)
}

// A cgroup that vanishes mid-walk (listed in its parent, gone when its
// turn comes) is counted and skipped; an unreadable root is the only error.
func TestVanishedMidWalk(t *testing.T) {
	root := copyTree(t, "testdata/v1/blkio")
	r := NewReader(Source{Version: 1, Root: root}, Limits{})
	r.visited = func(rel string) {
		if rel == "/" {
			require.NoError(t, os.RemoveAll(filepath.Join(root, "user.slice")))
		}
	}
	var p Pass
	require.NoError(t, r.Read(&p))
	require.Equal(t, 9, p.Walked)
	require.Equal(t, 1, p.Vanished)
	require.Equal(t, 0, p.Malformed)
	require.Len(t, p.Cgroups, 4)

	err := NewReader(Source{Version: 1, Root: filepath.Join(root, "nope")}, Limits{}).Read(&p)
	require.ErrorIs(t, err, os.ErrNotExist)
}

func TestWorkload(t *testing.T) {
	for path, want := range map[string]string{
		"/":                          "/",
		"/system.slice":              "system.slice",
		"/system.slice/etcd.service": "etcd.service",
		"/user.slice/user-1000.slice/user@1000.service/app.slice/app-foo.scope": "app-foo.scope",
		podDir: podName,
		podV2:  podName,
		"/kubepods.slice/kubepods-pod0f2c6a7e_1b2d_4c3e_9f40_5a6b7c8d9e0f.slice":                                                                          "pod/0f2c6a7e-1b2d-4c3e-9f40-5a6b7c8d9e0f",
		"/kubepods/besteffort/pod0f2c6a7e-1b2d-4c3e-9f40-5a6b7c8d9e0f/crio-conmon-3f4e5d6c7b8a99887766554433221100ffeeddccbbaa99887766554433221100.scope": podName,
		"/system.slice/docker-3f4e5d6c7b8a99887766554433221100ffeeddccbbaa99887766554433221100.scope":                                                     "docker/3f4e5d6c7b8a",
		"/docker/3f4e5d6c7b8a99887766554433221100ffeeddccbbaa99887766554433221100":                                                                        "docker/3f4e5d6c7b8a",
		"/machine.slice/libpod-3f4e5d6c7b8a99887766554433221100ffeeddccbbaa99887766554433221100.scope":                                                    "podman/3f4e5d6c7b8a",
		"/diskcanary-test-42-busy": "/diskcanary-test-42-busy",
		"/kubepods/burstable":      "/kubepods/burstable",
	} {
		require.Equal(t, want, Workload(path), path)
	}
}

func TestParseV2StatKeepsGoodLines(t *testing.T) {
	stats, bad := parseV2Stat([]byte("8:0 rbytes=1 wbytes=2 rios=3 wios=4 dbytes=5 dios=6 depth=1 avg_lat=100 win=50\n8:16 rbytes=x\n8:32\nnope rbytes=1\n253:1 wbytes=18446744073709551615\n"), nil)
	require.Equal(t, 2, bad)
	require.Equal(t, []DevStat{
		{Dev: sda, Counts: Counts{ReadBytes: 1, WriteBytes: 2, ReadOps: 3, WriteOps: 4, DiscardBytes: 5, DiscardOps: 6}},
		{Dev: Dev{8, 32}},
		{Dev: Dev{253, 1}, Counts: Counts{WriteBytes: 18446744073709551615}},
	}, stats)
}

// A v2 cgroup without io.stat (io not in its parent's subtree_control) is
// walked, not counted as vanished, and its subtree is left alone; a root
// without io.stat still has its children read.
func TestV2WithoutTheIOController(t *testing.T) {
	root := t.TempDir()
	write(t, filepath.Join(root, "cgroup.controllers"), "cpu io memory\n")
	for _, dir := range []string{"a.slice", "plain", "plain/child"} {
		require.NoError(t, os.Mkdir(filepath.Join(root, dir), 0o755))
		write(t, filepath.Join(root, dir, "cgroup.controllers"), "cpu memory\n")
	}
	write(t, filepath.Join(root, "a.slice", "io.stat"), "8:0 rbytes=1 wbytes=2 rios=3 wios=4 dbytes=0 dios=0\n")
	// plain/child has an io.stat no kernel would give it: it is not read.
	write(t, filepath.Join(root, "plain", "child", "io.stat"), "8:0 rbytes=9 wbytes=9 rios=9 wios=9 dbytes=0 dios=0\n")
	p := read(t, Source{Version: 2, Root: root}, Limits{})
	require.Equal(t, 3, p.Walked)
	require.Equal(t, 0, p.Vanished)
	require.Equal(t, map[string]map[Dev]Counts{"/a.slice": {sda: {ReadBytes: 1, WriteBytes: 2, ReadOps: 3, WriteOps: 4}}}, byPath(p))
}

// A truncated pass keeps the rows of the cgroups it did not reach, with
// their counters as they were: no series drops out and comes back.
func TestTruncatedPassKeepsRows(t *testing.T) {
	tr := NewTracker(TrackerConfig{Version: 1, Top: 10, Decay: 0.5})
	full := read(t, Source{Version: 1, Root: "testdata/v1/blkio"}, Limits{})
	first := tr.Observe(full, time.Unix(1000, 0))
	part := read(t, Source{Version: 1, Root: "testdata/v1/blkio"}, Limits{MaxCgroups: 2})
	require.Equal(t, TruncatedCount, part.Truncated)
	require.Less(t, len(part.Cgroups), len(full.Cgroups))
	second := tr.Observe(part, time.Unix(1005, 0))
	require.Equal(t, rowsOf(first.Devices, sda), rowsOf(second.Devices, sda))
	require.Equal(t, rowsOf(first.Devices, nvme), rowsOf(second.Devices, nvme))
}

// On v2 a truncated pass that reaches a parent but not its child takes the
// child's last counters off the parent: the pod's slices still show no I/O
// of their own.
func TestTruncatedV2PassKeepsParentsOwn(t *testing.T) {
	tr := NewTracker(TrackerConfig{Version: 2, Top: 10, Decay: 0.5})
	first := tr.Observe(read(t, Source{Version: 2, Root: "testdata/v2/cgroup"}, Limits{}), time.Unix(1000, 0))
	for limit := 1; limit < 9; limit++ {
		p := read(t, Source{Version: 2, Root: "testdata/v2/cgroup"}, Limits{MaxCgroups: limit})
		require.Equal(t, TruncatedCount, p.Truncated)
		snap := tr.Observe(p, time.Unix(int64(1000+5*limit), 0))
		require.Equal(t, rowsOf(first.Devices, sda), rowsOf(snap.Devices, sda), "walk cut at %d cgroups", limit)
	}
}
