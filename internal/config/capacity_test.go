package config

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// A capacity probe is opt-in: the default config has none, and one named
// with a directory alone gets a daily randread sweep with check's bound.
func TestCapacityProbeDefaults(t *testing.T) {
	for _, p := range DefaultProbes([]string{"/var/tmp/a"}) {
		require.NotEqual(t, KindCapacity, p.Kind)
	}
	c, err := Parse([]byte("probes:\n  targets:\n    - name: cap\n      kind: capacity\n      dir: /var/lib/canary\n"))
	require.NoError(t, err)
	p := c.Probes.Targets[0]
	require.Equal(t, 24*time.Hour, p.Interval)
	require.Equal(t, "randread", p.Pattern)
	require.Equal(t, 10*time.Millisecond, p.MaxP99)
	require.EqualValues(t, 256<<20, p.WriteBudget)
	require.EqualValues(t, 4096, p.BlockSize)
	require.EqualValues(t, 1<<30, p.WorkingSet)
	require.Nil(t, p.Rates)
	require.Zero(t, p.Ops)

	c, err = Parse([]byte("probes:\n  targets:\n    - name: cap\n      kind: capacity\n      dir: /var/lib/canary\n      pattern: wal\n      interval: 1m\n      max_p99: 25ms\n      rates: [100, 200, 400]\n      write_budget: 64MiB\n"))
	require.NoError(t, err)
	p = c.Probes.Targets[0]
	require.Equal(t, "wal", p.Pattern)
	require.EqualValues(t, 2300, p.BlockSize)
	require.Zero(t, p.WorkingSet)
	require.Equal(t, []float64{100, 200, 400}, p.Rates)
	require.Equal(t, 25*time.Millisecond, p.MaxP99)
	require.EqualValues(t, 64<<20, p.WriteBudget)
}

func TestCapacityProbeRefusals(t *testing.T) {
	const head = "probes:\n  targets:\n    - name: cap\n      kind: capacity\n      dir: /var/lib/canary\n"
	cases := map[string]string{
		"      pattern: seqread\n":                      `line 6: probe "cap": probes.targets[0].pattern: "seqread" is not one of randread, randwrite, wal`,
		"      max_p99: 0s\n":                           "", // 0 is the default
		"      max_p99: 5us\n":                          `line 6: probe "cap": probes.targets[0].max_p99: 5us is below the minimum of 10µs`,
		"      max_p99: -1ms\n":                         `line 6: probe "cap": probes.targets[0].max_p99: -1ms is below the minimum of 10µs`,
		"      rates: [100, 100]\n":                     `line 6: probe "cap": probes.targets[0].rates: the rates must rise, and 100 follows 100`,
		"      rates: [0, 100]\n":                       `line 6: probe "cap": probes.targets[0].rates: 0 is not an IOPS rate (a number over 0, at most 1000000)`,
		"      rates: [100, 2e6]\n":                     `line 6: probe "cap": probes.targets[0].rates: 2000000 is not an IOPS rate (a number over 0, at most 1000000)`,
		"      rates: []\n":                             `line 6: probe "cap": probes.targets[0].rates: an empty list; leave the key out for the default rates`,
		"      rates: 100\n":                            `line 6: probes.targets[0].rates: want a list of IOPS rates, e.g. [400, 500, 630]`,
		"      rates: [100, lots]\n":                    `line 6: probes.targets[0].rates: "lots" is not a number`,
		"      write_budget: 0B\n":                      "",
		"      write_budget: 2TiB\n":                    `line 6: probe "cap": probes.targets[0].write_budget: 2TiB is above the maximum of 1TiB`,
		"      ops: 10\n":                               `line 6: probe "cap": probes.targets[0].ops: a capacity probe's steps set their own op counts (at least 1,000 each)`,
		"      gap: 1ms\n":                              `line 6: probe "cap": probes.targets[0].gap: a capacity probe's ops come at each step's rate`,
		"      device: /dev/sdb\n":                      `line 6: probe "cap": probes.targets[0].device: a capacity probe sweeps a directory's files; set dir instead`,
		"      daily_write_budget: 1GB\n":               `line 6: probe "cap": probes.targets[0].daily_write_budget: a capacity probe is bounded by write_budget, per sweep`,
		"      pattern: wal\n      working_set: 1GiB\n": `line 7: probe "cap": probes.targets[0].working_set: the wal pattern appends to a segment of its own`,
		"      block_size: 1000\n":                      `line 6: probe "cap": probes.targets[0].block_size: 1000 is not a multiple of 512, which O_DIRECT needs`,
	}
	for extra, want := range cases {
		t.Run(extra, func(t *testing.T) {
			_, err := Parse([]byte(head + extra))
			if want == "" {
				require.NoError(t, err)
				return
			}
			require.EqualError(t, err, want)
		})
	}
	// The sweep's keys belong to capacity probes alone.
	for extra, want := range map[string]string{
		"      pattern: wal\n":      `line 6: probe "w": probes.targets[0].pattern: only capacity probes sweep`,
		"      max_p99: 10ms\n":     `line 6: probe "w": probes.targets[0].max_p99: only capacity probes sweep`,
		"      rates: [1, 2]\n":     `line 6: probe "w": probes.targets[0].rates: only capacity probes sweep`,
		"      write_budget: 1GB\n": `line 6: probe "w": probes.targets[0].write_budget: only capacity probes sweep`,
	} {
		_, err := Parse([]byte("probes:\n  targets:\n    - name: w\n      kind: wal\n      dir: /var/lib/canary\n" + extra))
		require.EqualError(t, err, want, extra)
	}
	_, err := Parse([]byte("probes:\n  targets:\n    - name: cap\n      kind: capacity\n"))
	require.EqualError(t, err, `line 3: probe "cap": probes.targets[0].dir: required for kind capacity`)
}
