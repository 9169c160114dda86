package main

import (
	"bytes"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/diskcanary/diskcanary/internal/cgroupio"
)

// A report keeps the workloads with I/O in the interval, per device by its
// kernel name, with counts over the interval and the same per second.
func TestTopReport(t *testing.T) {
	snap := cgroupio.Snapshot{
		Time: time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC), Interval: 2 * time.Second,
		Pass: cgroupio.Pass{Walked: 42},
		Devices: []cgroupio.Ranking{
			{Dev: cgroupio.Dev{Major: 8, Minor: 0}, Rows: []cgroupio.Row{
				{Workload: "etcd.service", Cgroup: "/system.slice/etcd.service", Delta: cgroupio.Counts{WriteBytes: 8 << 20, WriteOps: 2048, WaitUsec: 500000, HasWait: true}},
				{Workload: "cron.service", Cgroup: "/system.slice/cron.service"}, // idle in the interval
				{Workload: "other", Delta: cgroupio.Counts{ReadBytes: 4096, ReadOps: 1}},
			}},
			{Dev: cgroupio.Dev{Major: 7, Minor: 3}, Rows: []cgroupio.Row{
				{Workload: "/", Cgroup: "/", Delta: cgroupio.Counts{ReadBytes: 512, ReadOps: 1}},
			}},
			{Dev: cgroupio.Dev{Major: 259, Minor: 0}, Rows: []cgroupio.Row{{Workload: "/", Cgroup: "/"}}},
		},
	}
	names := map[cgroupio.Dev]cgroupio.DeviceName{{Major: 8, Minor: 0}: {Name: "sda"}, {Major: 259, Minor: 0}: {Name: "nvme0n1"}}
	src := cgroupio.Source{Version: 2, Root: "/sys/fs/cgroup"}
	r := buildTopReport(&snap, src, names, nil)
	half := 0.5
	require.Equal(t, topReport{Time: snap.Time, IntervalSeconds: 2, CgroupVersion: 2, Root: "/sys/fs/cgroup", Cgroups: 42, Devices: []topDevice{
		{Device: "sda", Major: 8, Workloads: []topWorkload{
			{Workload: "etcd.service", Cgroup: "/system.slice/etcd.service", WriteBytes: 8 << 20, WriteOps: 2048,
				WriteBytesPerSecond: 4 << 20, WriteOpsPerSecond: 1024, IOCostWaitSeconds: &half},
			{Workload: "other", ReadBytes: 4096, ReadOps: 1, ReadBytesPerSecond: 2048, ReadOpsPerSecond: 0.5},
		}},
		// A device diskstats does not name keeps its number.
		{Device: "7:3", Major: 7, Minor: 3, Workloads: []topWorkload{
			{Workload: "/", Cgroup: "/", ReadBytes: 512, ReadOps: 1, ReadBytesPerSecond: 256, ReadOpsPerSecond: 0.5},
		}},
	}}, r)

	var out bytes.Buffer
	require.NoError(t, r.writeTable(&out))
	require.Equal(t, "12:00:00Z  interval 2.0s  42 cgroups (cgroup v2, /sys/fs/cgroup)\n"+
		"DEVICE      READ/s     WRITE/s       r/s       w/s  WORKLOAD\n"+
		"sda         0.00 B    4.00 MiB       0.0    1024.0  etcd.service  (/system.slice/etcd.service)\n"+
		"sda       2.00 KiB      0.00 B       0.5       0.0  other\n"+
		"7:3       256.00 B      0.00 B       0.5       0.0  /\n\n", out.String())

	only := buildTopReport(&snap, src, names, map[string]bool{"nvme0n1": true})
	require.Equal(t, []topDevice{}, only.Devices, "nvme0n1 was idle")
}

func TestTopUsageErrors(t *testing.T) {
	for _, args := range [][]string{
		{"top", "-d", "0"},
		{"top", "-d", "soon"},
		{"top", "-n", "-1"},
		{"top", "--top", "0"},
		{"top", "--max-cgroups", "0"},
		{"top", "--path.procfs", "../../collector/testdata/contention/proc", "nosuchdisk"},
	} {
		cmd := newRootCmd()
		cmd.SetOut(&bytes.Buffer{})
		cmd.SetErr(&bytes.Buffer{})
		cmd.SetArgs(args)
		err := cmd.Execute()
		var ee *exitError
		require.True(t, errors.As(err, &ee), "%v: %v", args, err)
		require.Equal(t, exitUsage, ee.code, args)
	}
}

// --json without --iterations is one report, after one delay, from the
// fixture tree (which does not change: no device has I/O in it).
func TestTopJSONOneReport(t *testing.T) {
	var out bytes.Buffer
	cmd := newRootCmd()
	cmd.SetOut(&out)
	cmd.SetArgs([]string{"top", "--json", "-d", "10ms", "--path.procfs", "../../collector/testdata/contention/proc",
		"--cgroup.root", "../../internal/cgroupio/testdata/v1/blkio"})
	require.NoError(t, cmd.Execute())
	require.Equal(t, 1, bytes.Count(out.Bytes(), []byte("\n")))
	require.Contains(t, out.String(), `"cgroup_version":1,"root":"../../internal/cgroupio/testdata/v1/blkio","cgroups":11,"devices":[]}`)
}
