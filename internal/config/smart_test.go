package config

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// The SMART defaults as docs/configuration.md ("smart") shows them; the embedded default
// config's smart: block sets only enabled, so every other value here is a
// default applied. `diskcanary smart` and the runner take theirs from the
// same constants (TestSmartHelpShowsConfigDefaults, TestRunnerDefaults).
func TestSmartDefaults(t *testing.T) {
	c, err := Parse(Default)
	require.NoError(t, err)
	s := c.Smart
	require.True(t, s.Enabled)
	require.True(t, s.Scan)
	require.Equal(t, "standby", s.NoCheck, "sleeping disks stay asleep by default")
	require.Equal(t, "smartctl", s.Smartctl)
	require.Equal(t, 5*time.Minute, s.Interval)
	require.Equal(t, 30*time.Second, s.Timeout)
	require.Equal(t, 2, s.Concurrency)
	require.Equal(t, 10*time.Minute, s.RescanInterval)
	require.Equal(t, 30*time.Minute, s.VanishedAfter)
	require.Empty(t, s.Devices)
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

// Self-tests are off unless asked for; the defaults are stated once, in
// smart.go, and every protocol inherits them.
func TestSmartSelfTestDefaults(t *testing.T) {
	c, err := Parse(Default)
	require.NoError(t, err)
	st := c.Smart.SelfTests
	require.False(t, st.Enabled)
	require.Equal(t, 24*time.Hour, st.Short)
	require.Equal(t, 168*time.Hour, st.Long)
	require.Equal(t, 2, st.StartHour)
	require.Equal(t, 6*time.Hour, st.Window)
	require.Equal(t, 12, st.MaxStandbySkips)
	for _, class := range append([]string{""}, SelfTestClasses...) {
		short, long := st.Intervals(class)
		require.Equal(t, [2]time.Duration{24 * time.Hour, 168 * time.Hour}, [2]time.Duration{short, long}, class)
	}
}

func TestSmartSelfTestValid(t *testing.T) {
	c, err := Load("testdata/smart-selftest-valid.yml")
	require.NoError(t, err)
	st := c.Smart.SelfTests
	require.True(t, st.Enabled)
	require.Equal(t, 23, st.StartHour)
	require.Equal(t, 24*time.Hour, st.Window)
	require.Equal(t, 0, st.MaxStandbySkips)
	for class, want := range map[string][2]time.Duration{
		"":     {48 * time.Hour, 720 * time.Hour},
		"ata":  {48 * time.Hour, 720 * time.Hour},
		"nvme": {48 * time.Hour, 0},
		"scsi": {0, 336 * time.Hour},
	} {
		short, long := st.Intervals(class)
		require.Equal(t, want, [2]time.Duration{short, long}, class)
	}
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
		// Self-tests: every key is refused with its full name and line.
		"smart-invalid-selftest-short.yml":         "line 4: smart.self_tests.short: 1h is below the minimum of 24h (0 turns it off)",
		"smart-invalid-selftest-hour.yml":          "line 4: smart.self_tests.start_hour: 24 is above the maximum of 23",
		"smart-invalid-selftest-window.yml":        "line 4: smart.self_tests.window: 30m is below the minimum of 1h",
		"smart-invalid-selftest-skips.yml":         "line 4: smart.self_tests.max_standby_skips: -1 is below the minimum of 0",
		"smart-invalid-selftest-class.yml":         "line 5: smart.self_tests.nvme.short: 12h is below the minimum of 24h (0 turns it off)",
		"smart-invalid-selftest-unitless.yml":      `line 3: smart.self_tests.long: "168" is not a duration such as 30s, 5m or 100ms`,
		"smart-invalid-selftest-unknown-class.yml": "line 4: field sata not found",
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
