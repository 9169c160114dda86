package main

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// The report keeps what lies outside its markers: the runs recorded by
// hand.
func TestWriteGeneratedKeepsTheRest(t *testing.T) {
	f := filepath.Join(t.TempDir(), "benchmarks.md")
	require.NoError(t, os.WriteFile(f, []byte("# head\n"+beginMark+"old table\n"+endMark+"## by hand\n"), 0o644))
	require.NoError(t, writeGenerated(f, []byte("new table\n")))
	b, err := os.ReadFile(f)
	require.NoError(t, err)
	require.Equal(t, "# head\n"+beginMark+"new table\n"+endMark+"## by hand\n", string(b))

	require.NoError(t, os.WriteFile(f, []byte("# no markers\n"), 0o644))
	require.ErrorContains(t, writeGenerated(f, nil), "no \"<!-- go run ./bench -report: generated from here -->\"")
}

// Flags given on the command line win over a scenario's own settings;
// the others stay the scenario's.
func TestOverride(t *testing.T) {
	scenario := defaults
	scenario.Rounds, scenario.Samples = 15, 1000
	flags := defaults
	flags.Rounds, flags.Samples = 1, 300
	got := override(scenario, flags, map[string]bool{"rounds": true})
	require.Equal(t, 1, got.Rounds)
	require.Equal(t, 1000, got.Samples)
}

// The soak's log summary counts records by message: the times and the
// attributes that vary between records of one message left out.
func TestMostFrequent(t *testing.T) {
	got := mostFrequent([]string{
		`time=2026-11-25T19:23:16.254Z level=WARN msg="probe burst slow" probe=wal took=1.2s`,
		`time=2026-11-25T19:23:22.384Z level=WARN msg="probe burst slow" probe=wal took=900ms`,
		`time=2026-11-25T19:23:23.000Z level=ERROR msg="read failed" probe=rr err="input/output error" path=/x`,
		`time=2026-11-25T19:23:27.682Z level=WARN msg="probe burst slow" probe=rr took=2s`,
	}, 2)
	require.Equal(t, []counted{
		{2, `level=WARN msg="probe burst slow" probe=wal `},
		{1, `level=ERROR msg="read failed" probe=rr  `},
	}, got)
}

// A run of some scenarios replaces their rows and sections in place, adds
// the new ones at the end, and leaves the others as the last run wrote them.
func TestMergeGeneratedReplacesOnlyTheScenariosRun(t *testing.T) {
	f := filepath.Join(t.TempDir(), "benchmarks.md")
	gen := "Generated on day 1.\n\n| bench | verdict | time |\n|---|---|---|\n| a | pass | 1s |\n| b | FAIL | 2s |\n\n" +
		"### a\n\n```\nold a\n```\n\n### b\n\n```\nold b\n```\n\n"
	require.NoError(t, os.WriteFile(f, []byte("# head\n"+beginMark+gen+endMark+"tail\n"), 0o644))
	require.NoError(t, mergeGenerated(f, []reportRow{{"b", "pass", "3s"}, {"c", "pass", "4s"}},
		"### b\n\n```\nnew b\n```\n\n### c\n\n```\nnew c\n```\n\n", "Run on day 2."))
	b, err := os.ReadFile(f)
	require.NoError(t, err)
	require.Equal(t, "# head\n"+beginMark+
		"Generated on day 1.\n\n| bench | verdict | time |\n|---|---|---|\n| a | pass | 1s |\n| b | pass | 3s |\n| c | pass | 4s |\n\n"+
		"### a\n\n```\nold a\n```\n\n### b\n\nRun on day 2.\n\n```\nnew b\n```\n\n### c\n\nRun on day 2.\n\n```\nnew c\n```\n\n"+
		endMark+"tail\n", string(b))
}

// fio's IOPS at the bound is check's rule on fio's rate steps: the last
// step that held before the first that broke, whatever held after it.
func TestKneeAt(t *testing.T) {
	ms := time.Millisecond
	steps := []fioStep{{250, 250, 1000, 3 * ms}, {400, 400, 1000, 4 * ms}, {500, 500, 1000, 9 * ms}, {550, 500, 1000, 80 * ms}, {600, 600, 1000, 2 * ms}}
	require.Equal(t, 500.0, kneeAt(steps, 50*ms))
	// Short of 90 % of the rate asked breaks it too.
	require.Equal(t, 400.0, kneeAt([]fioStep{{250, 250, 1000, ms}, {400, 400, 1000, ms}, {500, 449, 1000, ms}}, 50*ms))
	require.Equal(t, 0.0, kneeAt([]fioStep{{100, 100, 1000, 11 * ms}, {125, 125, 1000, ms}}, 10*ms))
	require.Equal(t, 0.0, kneeAt(nil, 10*ms))
	// fio at 185.4 of 200 asked, its p99 5.8 ms from submission: by its
	// own schedule the 990th of 1,000 appends ended 0.99·1000·(1/185.4 −
	// 1/200) = 390 ms late, so the step broke a 10 ms bound.
	wal := []fioStep{{160, 160.2, 1000, 6 * ms}, {200, 185.4, 1000, 5800 * time.Microsecond}}
	require.Equal(t, 389805*time.Microsecond, wal[1].late().Truncate(time.Microsecond))
	require.Equal(t, time.Duration(0), wal[0].late(), "ahead of schedule is not late")
	require.Equal(t, 160.2, kneeAt(wal, 10*ms))
}
