package config

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
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
	require.Equal(t, LayoutAppend, wal.Layout)
	require.EqualValues(t, 2300, wal.BlockSize)
	require.LessOrEqual(t, wal.Ops, MaxWALBurst)
	// The defaults must give >= 1,000 fdatasync samples per 15 minutes:
	// 900 s / 44 s × 49 timed ops a burst.
	require.InDelta(t, 1002.27, wal.SamplesPer(15*time.Minute), 0.01)
	require.InDelta(t, 3000.0, c.Probes.Targets[1].SamplesPer(15*time.Minute), 1e-9)
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
		"invalid-burst.yml":        `line 9: probe "big": probes.targets[1].ops: 51 fdatasyncs per cycle exceeds the burst limit of 50`,
		"invalid-kind.yml":         `line 4: probe "wal": probes.targets[0].kind: "write" is not one of wal, randread`,
		"invalid-size.yml":         `line 6: probes.targets[0].working_set: invalid size "lots"`,
		"invalid-duration.yml":     `line 6: probes.targets[0].interval: "soon" is not a duration such as 30s, 5m or 100ms`,
		"invalid-device-write.yml": `line 5: probe "wal": probes.targets[0].device: a wal probe never writes to a block device`,
		"invalid-duplicate.yml":    `line 6: probe "wal": probes.targets[1].name: duplicate probe name "wal"`,
		"invalid-layout.yml":       `line 6: probe "wal": probes.targets[0].layout: "sideways" is not one of append, overwrite`,
		"invalid-top-level.yml":    "line 1: field probe not found",
		// Hostile input (issue "Hostile input never wins"): every value is
		// refused with its key and line, in the user's own text.
		"invalid-interval-1ns.yml":      `line 6: probe "wal": probes.targets[0].interval: 1ns is below the minimum of 10ms`,
		"invalid-interval-unitless.yml": `line 6: probes.targets[0].interval: "30" is not a duration such as 30s, 5m or 100ms`,
		"invalid-jitter-nan.yml":        `line 6: probe "wal": probes.targets[0].jitter: .nan is not in [0, 1)`,
		"invalid-min-free-overflow.yml": `line 6: probes.targets[0].min_free: size "1e30TB" is too large (the limit is 8EiB)`,
		"invalid-budget-inf.yml":        `line 6: probes.targets[0].daily_write_budget: invalid size ".inf"`,
		"invalid-budget-int64-wrap.yml": `line 6: probes.targets[0].daily_write_budget: size "9223372036854775808" is too large (the limit is 8EiB)`,
		"invalid-stall-negative.yml":    `line 6: probe "wal": probes.targets[0].stall_threshold: -1s is below the minimum of 10ms`,
		"invalid-ops-minus-inf.yml":     `line 6: probes.targets[0].ops: "-.inf" is not a whole number`,
		"invalid-block-size-huge.yml":   `line 6: probe "rr": probes.targets[0].block_size: 1TiB is above the maximum of 1MiB`,
		"invalid-name-traversal.yml":    `line 3: probe "a/../../victim": probes.targets[0].name: "a/../../victim" is not a probe name`,
		"invalid-device-relative.yml":   `line 5: probe "raw": probes.targets[0].device: "dev/sdb" is not an absolute path`,
		"invalid-device-dotdot.yml":     `line 5: probe "raw": probes.targets[0].device: "/dev/../var/lib/etcd/member/wal/0.wal" contains ".."`,
		"invalid-diskstats-regex.yml":   "line 3: diskstats.device_exclude: \"(sd\" does not compile: error parsing regexp: missing closing ): `(sd`",
		"invalid-too-many-targets.yml":  "line 3: probes.targets: 129 targets exceed the limit of 128",
		"invalid-gap-negative.yml":      `line 6: probe "wal": probes.targets[0].gap: -1ms is below the minimum of 0s`,
		"invalid-segment-small.yml":     `line 6: probe "wal": probes.targets[0].segment_size: 4KiB does not hold one burst (ops × block_size = 115000 bytes)`,
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
	require.Equal(t, []Probe{{Name: "wal", Kind: KindWAL, Dir: "/var/lib/etcd-canary"}, {Name: "randread", Kind: KindRandRead, Dir: "/var/lib/etcd-canary"}}, one)
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
	for in, want := range map[string]int64{"2300": 2300, "4KiB": 4096, "1GiB": 1 << 30, "1.5GB": 1_500_000_000, "512 MiB": 512 << 20,
		// fio's spellings: k, m, g are powers of 1024.
		"4k": 4096, "4K": 4096, "22m": 22 << 20, "1G": 1 << 30, "1g": 1 << 30, "2T": 2 << 40, "1.5k": 1536, "1e3": 1000} {
		got, err := ParseByteSize(in)
		require.NoError(t, err, in)
		require.EqualValues(t, want, got, in)
	}
	for _, bad := range []string{"", "x", "-1", "1ZB", "NaN", "Inf", "+Inf", "-0", "0x10", "1e", "1..5", "4kk", "k", "1x"} {
		_, err := ParseByteSize(bad)
		require.ErrorContains(t, err, `invalid size "`+bad+`"`)
	}
}

// A size an int64 cannot hold is refused in the user's text; it never
// wraps to a negative floor or budget.
func TestParseByteSizeOverflow(t *testing.T) {
	for in, want := range map[string]int64{
		"9223372036854775807": 9223372036854775807, "8EiB": -1, "8191PiB": 8191 << 50, "1EiB": 1 << 60,
		"9223372036854775808": -1, "9.3e18": -1, "1e400": -1, "1e30TB": -1, "16777216TiB": -1, "0.5KiB": 512, "1e3": 1000,
	} {
		got, err := ParseByteSize(in)
		if want < 0 {
			require.EqualError(t, err, `size "`+in+`" is too large (the limit is 8EiB)`)
			continue
		}
		require.NoError(t, err, in)
		require.EqualValues(t, want, got, in)
	}
}

// Values that do not come from the file (--probe.dir, code) meet the same
// bounds, without a line to name.
func TestValidateBoundsWithoutFile(t *testing.T) {
	c, err := Parse(nil)
	require.NoError(t, err)
	c.Probes.Targets = DefaultProbes([]string{"/var/tmp/a"})
	c.Probes.Targets[0].Interval = time.Nanosecond
	require.EqualError(t, c.Validate(), `probe "wal": probes.targets[0].interval: 1ns is below the minimum of 10ms`)

	c.Probes.Targets = DefaultProbes([]string{"/var/tmp/a"})
	c.Probes.Targets[1].MinFree = -1
	require.EqualError(t, c.Validate(), `probe "randread": probes.targets[1].min_free: -1B is below the minimum of 1B`)

	c.Probes.Targets = DefaultProbes(make([]string, 65))
	require.EqualError(t, c.Validate(), "probes.targets: 130 targets exceed the limit of 128 (each probe holds an OS thread for its life)")

	// A flag replacing the file's filter is not blamed on the file's line.
	c, err = Parse([]byte("diskstats:\n  device_exclude: '^ram'\n"))
	require.NoError(t, err)
	c.Diskstats.DeviceExclude = "(["
	require.EqualError(t, c.Validate(), "diskstats.device_exclude: \"([\" does not compile: error parsing regexp: missing closing ]: `[`")
}

// The names --probe.dir makes are probe names, however long or odd the
// directory's name.
func TestDefaultProbesNamesAreValid(t *testing.T) {
	long := "/srv/" + strings.Repeat("x", 200)
	ps := DefaultProbes([]string{long, long + "/", "/srv/é..", "/"})
	var names []string
	for _, p := range ps {
		names = append(names, p.Name)
	}
	x48 := strings.Repeat("x", 48)
	require.Equal(t, []string{"wal-" + x48, "randread-" + x48, "wal-" + x48 + "2", "randread-" + x48 + "2",
		"wal-root", "randread-root", "wal-root2", "randread-root2"}, names)
	c := &Config{}
	c.setDefaults()
	c.Probes.Targets = ps
	require.NoError(t, c.Validate())
}

// The config file takes the sizes check's flags take, fio's among them.
func TestConfigSizesTakeFioSpellings(t *testing.T) {
	c, err := Parse([]byte("probes:\n  targets:\n    - name: rr\n      kind: randread\n      dir: /var/lib/canary\n      block_size: 4k\n      working_set: 1G\n      min_free: 22m\n"))
	require.NoError(t, err)
	p := c.Probes.Targets[0]
	require.EqualValues(t, 4096, p.BlockSize)
	require.EqualValues(t, 1<<30, p.WorkingSet)
	require.EqualValues(t, 22<<20, p.MinFree)
}

// TestLoadRefusesAFileThatIsNotRegular (issue 43): a config path that is a
// FIFO once blocked Load for ever in open(2); a device is refused too, and
// a regular file over MaxConfigBytes still is, with Parse's wording.
func TestLoadRefusesAFileThatIsNotRegular(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "diskcanary.yml")
	require.NoError(t, syscall.Mkfifo(fifo, 0o600))
	big := filepath.Join(dir, "big.yml")
	require.NoError(t, os.WriteFile(big, []byte("# "+strings.Repeat("x", MaxConfigBytes)), 0o600))
	for path, want := range map[string]string{
		fifo:        "config: open " + fifo + ": not a regular file: it is a FIFO",
		"/dev/zero": "config: open /dev/zero: not a regular file: it is a character device",
		big:         "config " + big + ": larger than 1048576 bytes; a diskcanary config is a few kilobytes",
	} {
		done := make(chan error, 1)
		go func() {
			_, err := Load(path)
			done <- err
		}()
		select {
		case err := <-done:
			require.EqualError(t, err, want)
		case <-time.After(5 * time.Second):
			t.Fatalf("Load(%s) still blocked after 5 s", path)
		}
	}
}
