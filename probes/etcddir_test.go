package probes

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/diskcanary/diskcanary/internal/config"
	"github.com/diskcanary/diskcanary/internal/testkit"
)

// A WAL probe told which etcd data directory it stands in for names the
// device under that directory: the same as its own beside etcd, another
// when the canary sits on another disk, none when it cannot be resolved.
func TestWALProbeNamesTheDeviceUnderEtcdsDataDir(t *testing.T) {
	testkit.RequireRoot(t)
	mntA, devA := testkit.LoopFS(t, 64<<20, "ext4")
	mntB, devB := testkit.LoopFS(t, 64<<20, "ext4")
	require.NoError(t, os.Mkdir(filepath.Join(mntA, "etcd"), 0o700))
	probe := func(name, etcdDir string) config.Probe {
		return config.Probe{Name: name, Kind: config.KindWAL, Dir: filepath.Join(mntA, name),
			Interval: 50 * time.Millisecond, Ops: 2, SegmentSize: 1 << 20, MinFree: 1, EtcdDataDir: etcdDir}
	}
	_, gather, stop := startEngine(t,
		probe("beside", filepath.Join(mntA, "etcd")),
		probe("elsewhere", mntB),
		probe("unresolved", filepath.Join(mntB, "no-such-dir")))
	defer stop()
	got := map[string]string{}
	require.Eventually(t, func() bool {
		for _, m := range gather()["diskcanary_probe_etcd_data_dir_info"] {
			l := map[string]string{}
			for _, p := range m.GetLabel() {
				l[p.GetName()] = p.GetValue()
			}
			got[l["probe"]] = l["etcd_data_dir"] + " on " + l["device"]
		}
		return len(got) == 3
	}, 10*time.Second, 20*time.Millisecond, "three etcd data dir series")
	a, b := filepath.Base(devA), filepath.Base(devB)
	require.Equal(t, map[string]string{
		"beside":     filepath.Join(mntA, "etcd") + " on " + a,
		"elsewhere":  mntB + " on " + b,
		"unresolved": filepath.Join(mntB, "no-such-dir") + " on ",
	}, got)
}
