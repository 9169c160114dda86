package config

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestSmartDefaults(t *testing.T) {
	c, err := Parse(Default)
	require.NoError(t, err)
	s := c.Smart
	require.True(t, s.Enabled)
	require.True(t, s.Scan)
	require.Equal(t, "standby", s.NoCheck, "sleeping disks stay asleep by default")
	require.Equal(t, "smartctl", s.Smartctl)
	require.Greater(t, s.Concurrency, 0)
	require.GreaterOrEqual(t, s.VanishedAfter, s.RescanInterval)
}

func TestSmartValid(t *testing.T) {
	c, err := Load("testdata/smart-valid.yml")
	require.NoError(t, err)
	s := c.Smart
	require.Equal(t, 10*time.Minute, s.Interval)
	require.Equal(t, 4, s.Concurrency)
	require.False(t, s.Scan)
	require.Equal(t, "never", s.NoCheck)
	require.Equal(t, []SmartDevice{
		{Name: "/dev/sdb", Type: "sat"},
		{Name: "/dev/bus/0", Type: "megaraid,1"},
		{Name: "/dev/bus/0", Type: "sat+megaraid,2"},
		{Name: "/dev/nvme0"},
	}, s.Devices)
}

func TestSmartInvalid(t *testing.T) {
	cases := map[string]string{
		"smart-invalid-name.yml":            `line 3: smart.devices[0].name: "sdb" is not a /dev path`,
		"smart-invalid-type.yml":            `line 4: smart.devices[0].type: "sat --json" is not a smartctl -d type`,
		"smart-invalid-duplicate.yml":       "line 5: smart.devices[1]: /dev/bus/0;megaraid,1 listed twice",
		"smart-invalid-nocheck.yml":         `line 2: smart.nocheck: "always" is not one of never, sleep, standby, idle`,
		"smart-invalid-concurrency.yml":     "line 2: smart.concurrency: 0 is below the minimum of 1",
		"smart-invalid-vanished.yml":        "line 3: smart.vanished_after: 1m0s is shorter than smart.rescan_interval 10m0s",
		"smart-invalid-interval.yml":        "line 2: smart.interval: 1ns is below the minimum of 10s",
		"smart-invalid-timeout.yml":         "line 2: smart.timeout: -1s is below the minimum of 1s",
		"smart-invalid-device-dotdot.yml":   `line 3: smart.devices[0].name: "/dev/../etc/shadow" contains ".."`,
		"smart-invalid-smartctl-option.yml": `line 2: smart.smartctl: "--scan" starts with "-"`,
		"smart-invalid-unknown-key.yml":     "line 4: field typ not found",
	}
	files, _ := filepath.Glob("testdata/smart-invalid-*.yml")
	require.Len(t, files, len(cases), "every smart-invalid-*.yml needs an expected error")
	for name, want := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := Load(filepath.Join("testdata", name))
			require.Error(t, err)
			require.Contains(t, err.Error(), want)
			require.Contains(t, err.Error(), name)
		})
	}
}
