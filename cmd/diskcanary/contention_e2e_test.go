package main

import (
	"bufio"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/diskcanary/diskcanary/internal/testkit"
)

// Who slowed the disk, end to end (issue 46): two cgroup-v1 blkio groups on
// a loop device's ext4, one running fio random 4 KiB O_DIRECT writes at a
// known rate, one idle. Within two collection passes of fio's end the
// daemon's metrics name the busy group first on that device, and the
// daemon's counter and `diskcanary top --json`'s intervals summed hold the
// bytes fio reports for itself, within 5 %.
func TestContentionEndToEnd(t *testing.T) {
	testkit.E2E(t)
	testkit.RequireRoot(t)
	if _, err := exec.LookPath("fio"); err != nil {
		t.Skip("skipping: needs fio on PATH")
	}
	mnt, dev := testkit.LoopFS(t, 256<<20, "ext4")
	testkit.ActivateBlkioAccounting(t, dev)
	busy := testkit.NewBlkioGroup(t, "busy")
	idle := testkit.NewBlkioGroup(t, "idle")
	busyCgroup, idleCgroup := "/"+filepath.Base(busy.Path), "/"+filepath.Base(idle.Path)
	devName := filepath.Base(dev)

	// fio's file exists at its full size beforehand, so fio lays nothing
	// out: every byte the busy group writes is one fio counts.
	file := filepath.Join(mnt, "busy.fio")
	f, err := os.Create(file)
	require.NoError(t, err)
	require.NoError(t, unix.Fallocate(int(f.Fd()), 0, 0, 64<<20))
	require.NoError(t, f.Close())

	sleeper := testkit.StartCmd(t, idle.Command("sleep", "60"))
	_ = sleeper

	const interval = time.Second
	addr := testkit.FreeAddr(t)
	daemon := testkit.StartCmd(t, diskcanaryCmd(t, nil, "serve", "--web.listen-address", addr,
		"--no-collector.probes", "--no-collector.smart", "--no-collector.blocklatency",
		"--collector.contention.interval", interval.String()))
	daemon.WaitListening(t, addr, 30*time.Second)

	// What each workload had written on the device before fio: a loop
	// device's number is reused, and the kernel keeps its earlier
	// counters.
	series := regexp.MustCompile(`(?m)^diskcanary_cgroup_io_bytes_total\{cgroup="([^"]*)",device="` + regexp.QuoteMeta(devName) + `",op="write",workload="([^"]*)"\} (\S+)$`)
	scrapeWritten := func() map[string]float64 {
		_, body, err := get("http://" + addr + "/metrics")
		require.NoError(t, err)
		out := map[string]float64{}
		for _, m := range series.FindAllStringSubmatch(body, -1) {
			v, err := strconv.ParseFloat(m[3], 64)
			require.NoError(t, err)
			out[m[2]] = v
		}
		return out
	}
	time.Sleep(2 * interval) // a pass after the listener opened
	before := scrapeWritten()

	// top reports every second from before fio starts to after it ends.
	topOut := filepath.Join(t.TempDir(), "top.json")
	topf, err := os.Create(topOut)
	require.NoError(t, err)
	top := diskcanaryCmd(t, nil, "top", "--json", "-d", "1", "-n", "12", devName)
	top.Stdout = topf
	require.NoError(t, top.Start())
	time.Sleep(1500 * time.Millisecond)

	fio := busy.Command("fio", "--name=busy", "--filename="+file, "--rw=randwrite", "--bs=4k", "--direct=1",
		"--ioengine=psync", "--size=64m", "--rate_iops=1000", "--time_based", "--runtime=6", "--output-format=json")
	fioJSON, err := fio.Output()
	require.NoError(t, err, "fio: %s", fioJSON)
	fioEnd := time.Now()
	var fr struct {
		Jobs []struct {
			Write struct {
				IOBytes  uint64 `json:"io_bytes"`
				TotalIOs uint64 `json:"total_ios"`
			} `json:"write"`
		} `json:"jobs"`
	}
	require.NoError(t, json.Unmarshal(fioJSON, &fr))
	require.Len(t, fr.Jobs, 1)
	fioBytes := float64(fr.Jobs[0].Write.IOBytes)
	// 1,000 IOPS of 4 KiB for 6 s, as fio paced it.
	require.InDelta(t, 6000*4096, fioBytes, 0.1*6000*4096)

	// The daemon: within two passes of fio's end, the busy group wrote the
	// most on the device since fio started, fio's count within 5 %.
	var written map[string]float64
	deadline := fioEnd.Add(2*interval + 500*time.Millisecond)
	for {
		written = scrapeWritten()
		for w := range written {
			written[w] -= before[w]
		}
		if within(written[busyCgroup], fioBytes, 0.05) || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Logf("fio wrote %.0f bytes; the daemon counts %v written on %s since fio started", fioBytes, written, devName)
	require.True(t, within(written[busyCgroup], fioBytes, 0.05), "busy: %.0f bytes, fio %.0f", written[busyCgroup], fioBytes)
	for w, v := range written {
		if w != busyCgroup {
			require.Less(t, v, written[busyCgroup], "%s wrote more than the busy group", w)
		}
	}
	require.NotContains(t, written, idleCgroup, "the idle group did no I/O")

	// top: the busy group first in every report with a full second of
	// fio in it, and its bytes over the reports add up to fio's.
	require.NoError(t, top.Wait())
	require.NoError(t, topf.Close())
	rf, err := os.Open(topOut)
	require.NoError(t, err)
	defer rf.Close()
	var sum float64
	reports, first := 0, 0
	sc := bufio.NewScanner(rf)
	for sc.Scan() {
		var r topReport
		require.NoError(t, json.Unmarshal(sc.Bytes(), &r))
		reports++
		for _, d := range r.Devices {
			require.Equal(t, devName, d.Device)
			for i, w := range d.Workloads {
				require.NotEqual(t, idleCgroup, w.Workload)
				if w.Workload != busyCgroup {
					continue
				}
				sum += float64(w.WriteBytes)
				// A report with only the edge of fio's run in it may see
				// ext4's journal commit (root group) write more.
				if w.WriteBytes < 1<<20 {
					continue
				}
				require.Equal(t, 0, i, "report %d: %s is not first: %+v", reports, busyCgroup, d.Workloads)
				first++
			}
		}
	}
	require.NoError(t, sc.Err())
	require.Equal(t, 12, reports)
	require.GreaterOrEqual(t, first, 5, "fio ran 6 s: at least 5 one-second reports have the busy group, 4 MB a second")
	t.Logf("top: %d reports, %d with the busy group first, %.0f bytes", reports, first, sum)
	require.True(t, within(sum, fioBytes, 0.05), "top: %.0f bytes, fio %.0f", sum, fioBytes)
}

func within(got, want, frac float64) bool {
	return got >= want*(1-frac) && got <= want*(1+frac)
}
