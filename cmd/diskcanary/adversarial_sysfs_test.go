package main

import (
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/diskcanary/diskcanary/internal/testkit"
)

// TestAdversarialSysfsSlavesCycle: a sysfs tree whose dm devices list each
// other as slaves (dm-0 -> dm-1 -> dm-0, and every other pair of dm-0..dm-3,
// dm-0 also over sda). Walking every path to the depth limit took hours at
// 100% CPU while the first scrape held the collector's lock, so /metrics
// never answered again. It must answer within 2 s, with one parent_info
// series per device.
func TestAdversarialSysfsSlavesCycle(t *testing.T) {
	root := t.TempDir()
	sys, proc := filepath.Join(root, "sys"), filepath.Join(root, "proc")
	mkdir := func(p string) { require.NoError(t, os.MkdirAll(filepath.Join(sys, p), 0o755)) }
	mkdir("block/sda")
	mkdir("block/dm-0/slaves/sda")
	dms := []string{"dm-0", "dm-1", "dm-2", "dm-3"}
	for _, dm := range dms {
		for _, slave := range dms {
			mkdir(filepath.Join("block", dm, "slaves", slave))
		}
	}
	require.NoError(t, os.MkdirAll(proc, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(proc, "diskstats"), []byte(
		"   8       0 sda 100 0 800 10 100 0 800 10 0 20 20 0 0 0 0 0 0\n"+
			" 253       0 dm-0 100 0 800 10 100 0 800 10 0 20 20 0 0 0 0 0 0\n"+
			" 253       1 dm-1 100 0 800 10 100 0 800 10 0 20 20 0 0 0 0 0 0\n"+
			" 253       2 dm-2 100 0 800 10 100 0 800 10 0 20 20 0 0 0 0 0 0\n"+
			" 253       3 dm-3 100 0 800 10 100 0 800 10 0 20 20 0 0 0 0 0 0\n"), 0o644))

	addr := testkit.FreeAddr(t)
	daemon := testkit.StartCmd(t, diskcanaryCmd(t, nil, "serve", "--web.listen-address", addr,
		"--path.procfs", proc, "--path.sysfs", sys, "--no-collector.probes", "--no-collector.smart"))
	daemon.WaitListening(t, addr, 20*time.Second)

	client := &http.Client{Timeout: 2 * time.Second}
	start := time.Now()
	resp, err := client.Get("http://" + addr + "/metrics")
	require.NoError(t, err, "/metrics within 2s of a slaves cycle")
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.NoError(t, err)
	t.Logf("/metrics answered in %s", time.Since(start))
	require.Equal(t, 200, resp.StatusCode)

	var parents []string
	for _, line := range strings.Split(string(body), "\n") {
		if strings.HasPrefix(line, "diskcanary_disk_parent_info{") {
			parents = append(parents, line)
		}
	}
	require.Equal(t, []string{
		`diskcanary_disk_parent_info{device="dm-0",disk="sda"} 1`,
		`diskcanary_disk_parent_info{device="dm-1",disk="sda"} 1`,
		`diskcanary_disk_parent_info{device="dm-2",disk="sda"} 1`,
		`diskcanary_disk_parent_info{device="dm-3",disk="sda"} 1`,
		`diskcanary_disk_parent_info{device="sda",disk="sda"} 1`,
	}, parents)
	require.Contains(t, string(body), `diskcanary_collector_success{collector="diskstats"} 1`)
}
