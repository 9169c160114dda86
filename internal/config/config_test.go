package config

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestDefaultConfig(t *testing.T) {
	c, err := Parse(Default)
	require.NoError(t, err)
	require.True(t, c.Probes.Enabled)
	require.Len(t, c.Probes.Targets, 2)
	wal, rr := c.Probes.Targets[0], c.Probes.Targets[1]
	require.Equal(t, KindWAL, wal.Kind)
	require.Equal(t, LayoutFresh, wal.Layout)
	require.EqualValues(t, 2300, wal.BlockSize)
	require.LessOrEqual(t, wal.Ops, MaxWALBurst)
	// The defaults must give >= 1,000 fdatasync samples per 15 minutes.
	perQuarter := float64(15*time.Minute) / float64(wal.Interval) * float64(wal.Ops)
	require.GreaterOrEqual(t, perQuarter, 1000.0)
	require.Equal(t, KindRandRead, rr.Kind)
	require.EqualValues(t, 4096, rr.BlockSize)
	require.GreaterOrEqual(t, int64(rr.WorkingSet), int64(1<<30))
}

func TestValidFullConfig(t *testing.T) {
	c, err := Load("testdata/valid-full.yml")
	require.NoError(t, err)
	require.False(t, c.Diskstats.Enabled)
	p := c.Probes.Targets[0]
	require.Equal(t, LayoutOverwrite, p.Layout)
	require.Equal(t, 40*time.Second, p.Interval)
	require.EqualValues(t, 512<<20, p.MinFree)
	require.EqualValues(t, 1_000_000_000, p.DailyWriteBudget)
	require.Equal(t, 4, p.Line)
	require.EqualValues(t, 2<<30, c.Probes.Targets[1].WorkingSet)
	require.Equal(t, "/dev/sdb", c.Probes.Targets[2].Device)
}

func TestInvalidConfigs(t *testing.T) {
	cases := map[string]string{
		"invalid-unknown-key.yml":  "line 6: field intervall not found",
		"invalid-burst.yml":        `line 6: probe "big": probes.targets[].ops: 51 fdatasyncs per cycle exceeds the burst limit of 50`,
		"invalid-kind.yml":         `line 3: probe "wal": probes.targets[].kind: "write" is not one of wal, randread`,
		"invalid-size.yml":         `line 6: invalid size "lots"`,
		"invalid-duration.yml":     "line 6: cannot unmarshal !!str `soon` into time.Duration",
		"invalid-device-write.yml": "a wal probe never writes to a block device",
		"invalid-duplicate.yml":    `line 6: probe "wal": probes.targets[].name: duplicate probe name "wal"`,
		"invalid-layout.yml":       `probes.targets[].layout: "sideways" is not one of fresh, overwrite`,
		"invalid-top-level.yml":    "line 1: field probe not found",
	}
	files, _ := filepath.Glob("testdata/invalid-*.yml")
	require.Len(t, files, len(cases), "every invalid-*.yml needs an expected error")
	for name, want := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := Load(filepath.Join("testdata", name))
			require.Error(t, err)
			require.Contains(t, err.Error(), want)
			require.Contains(t, err.Error(), name, "the error names the file")
		})
	}
}

func TestMissingFile(t *testing.T) {
	_, err := Load(filepath.Join(t.TempDir(), "nope.yml"))
	require.ErrorIs(t, err, os.ErrNotExist)
}

func TestDefaultProbes(t *testing.T) {
	one := DefaultProbes([]string{"/var/lib/etcd-canary"})
	require.Equal(t, []string{"wal", "randread"}, []string{one[0].Name, one[1].Name})
	two := DefaultProbes([]string{"/a/data", "/b/data", "/c/logs"})
	var names []string
	for _, p := range two {
		names = append(names, p.Name)
	}
	require.Equal(t, []string{"wal-data", "randread-data", "wal-data2", "randread-data2", "wal-logs", "randread-logs"}, names)
	c := &Config{}
	c.setDefaults()
	c.Probes.Targets = two
	require.NoError(t, c.Validate())
}

func TestParseByteSize(t *testing.T) {
	for in, want := range map[string]int64{"2300": 2300, "4KiB": 4096, "1GiB": 1 << 30, "1.5GB": 1_500_000_000, "512 MiB": 512 << 20} {
		got, err := ParseByteSize(in)
		require.NoError(t, err, in)
		require.EqualValues(t, want, got, in)
	}
	for _, bad := range []string{"", "x", "-1", "1PB"} {
		_, err := ParseByteSize(bad)
		require.Error(t, err, bad)
	}
}
