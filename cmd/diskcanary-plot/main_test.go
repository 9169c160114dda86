package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// runPlot runs the command in-process with stdin and returns its exit
// status, stdout and stderr.
func runPlot(t *testing.T, stdin string, args ...string) (int, string, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code := run(args, strings.NewReader(stdin), &out, &errOut)
	return code, out.String(), errOut.String()
}

// The sweep of ext4 on a loop device the blkio throttle holds to 500 read
// IOPS (testdata/sweep-read500.json, a real run): the SVG names the
// percentiles, the bound and the knee at 500 IOPS; the PNG is a PNG; the
// input comes from a file, from stdin, or from "-".
func TestPlotDrawsTheSweep(t *testing.T) {
	dir := t.TempDir()
	fixture := filepath.Join("testdata", "sweep-read500.json")
	in, err := os.ReadFile(fixture)
	require.NoError(t, err)

	svg := filepath.Join(dir, "curve.svg")
	code, stdout, stderr := runPlot(t, "", "-o", svg, fixture)
	require.Equal(t, 0, code, stderr)
	require.Empty(t, stdout)
	require.Empty(t, stderr)
	b, err := os.ReadFile(svg)
	require.NoError(t, err)
	s := string(b)
	require.True(t, strings.HasPrefix(s, "<?xml"), "an SVG")
	for _, want := range []string{">p50<", ">p90<", ">p99<", ">p99 bound 10ms<", ">  knee: 500 IOPS<",
		">diskcanary capacity: /mnt/capplot-read/canary (ext4 on loop0)<",
		">achieved read IOPS (4096-byte O_DIRECT random reads, open loop)<"} {
		require.Contains(t, s, want)
	}

	// From stdin, twice (no file, "-"), the flag after the input.
	for _, args := range [][]string{{"-o", filepath.Join(dir, "a.png")}, {"-", "--output", filepath.Join(dir, "b.PNG")}} {
		code, _, stderr = runPlot(t, string(in), args...)
		require.Equal(t, 0, code, stderr)
	}
	for _, name := range []string{"a.png", "b.PNG"} {
		b, err = os.ReadFile(filepath.Join(dir, name))
		require.NoError(t, err)
		require.True(t, bytes.HasPrefix(b, []byte("\x89PNG\r\n\x1a\n")), "%s is a PNG", name)
	}

	// An existing file is replaced.
	require.NoError(t, os.WriteFile(svg, []byte("old"), 0o644))
	code, _, stderr = runPlot(t, string(in), "-o", svg)
	require.Equal(t, 0, code, stderr)
	b, err = os.ReadFile(svg)
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(string(b), "<?xml"))
}

// Usage errors exit 64 with the reason and the usage line, before anything
// is written: a missing -o, an unknown extension, a missing directory, a
// symlink, input that is not a capacity sweep or is over 4 MiB.
func TestPlotUsageErrors(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "curve.svg")
	link := filepath.Join(dir, "link.svg")
	require.NoError(t, os.Symlink(filepath.Join(dir, "elsewhere.svg"), link))
	sweep, err := os.ReadFile(filepath.Join("testdata", "sweep-read500.json"))
	require.NoError(t, err)
	bad := func(from, to string) string { return strings.Replace(string(sweep), from, to, 1) }
	for _, tc := range []struct {
		stdin string
		args  []string
		err   string
	}{
		{string(sweep), nil, "-o FILE.svg or FILE.png is required"},
		{string(sweep), []string{"-o", filepath.Join(dir, "curve.pdf")}, "-o " + filepath.Join(dir, "curve.pdf") + ": want a .svg or .png file"},
		{string(sweep), []string{"-o", dir + "/"}, "-o " + dir + "/: want a .svg or .png file"},
		{string(sweep), []string{"-o", filepath.Join(dir, "missing", "c.svg")}, "-o " + filepath.Join(dir, "missing", "c.svg") + ": directory " + filepath.Join(dir, "missing") + " does not exist"},
		{string(sweep), []string{"-o", link}, "-o " + link + ": is a symlink; not followed: name the file itself"},
		{string(sweep), []string{"-o", out, "--plot"}, "unknown flag: --plot"},
		{string(sweep), []string{"-o", out, "a.json", "b.json"}, `one input file at most, got 2: ["a.json" "b.json"]`},
		{"", []string{"-o", out, filepath.Join(dir, "none.json")}, "open " + filepath.Join(dir, "none.json") + ": no such file or directory"},
		{"", []string{"-o", out}, "stdin: not a capacity sweep (the output of check --profile capacity --json): unexpected end of JSON input"},
		{"[]", []string{"-o", out}, "stdin: not a capacity sweep (the output of check --profile capacity --json): json: cannot unmarshal array into Go value of type capacityjson.Result"},
		{`{"profile": "etcd", "threshold_seconds": 0.01}`, []string{"-o", out}, `stdin: not a capacity sweep: profile "etcd", want "capacity" (check --profile capacity --json)`},
		{bad(`"threshold_seconds": 0.01`, `"threshold_seconds": 0`), []string{"-o", out}, "stdin: not a capacity sweep: threshold_seconds 0, want a positive bound"},
		{bad(`"achieved_iops": 200,`, `"achieved_iops": -200,`), []string{"-o", out}, "stdin: not a capacity sweep: step 1 has -200, not a rate or latency a disk can have"},
		{bad(`"p99": 0.002406167`, `"p99": 1e300`), []string{"-o", out}, "stdin: not a capacity sweep: step 1 has 1e+300, not a rate or latency a disk can have"},
		{`{"profile": "capacity", "threshold_seconds": 0.01, "steps": []}`, []string{"-o", out}, "stdin: no step of the sweep completed an op: nothing to draw"},
		{strings.Repeat(" ", 4<<20) + string(sweep), []string{"-o", out}, "stdin: over 4 MiB; a capacity sweep is a few KB (is it the output of check --profile capacity --json?)"},
	} {
		code, stdout, stderr := runPlot(t, tc.stdin, tc.args...)
		require.Equal(t, 64, code, "%q: %s", tc.args, stderr)
		require.Empty(t, stdout)
		require.Equal(t, "diskcanary-plot: "+tc.err+"\nusage: diskcanary-plot -o FILE.svg|FILE.png [FILE.json]\n", stderr, "%q", tc.args)
	}
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.Len(t, entries, 1, "only the test's symlink")
}

func TestPlotHelp(t *testing.T) {
	code, stdout, stderr := runPlot(t, "", "--help")
	require.Equal(t, 0, code)
	require.Empty(t, stderr)
	require.True(t, strings.HasPrefix(stdout, "usage: diskcanary-plot -o FILE.svg|FILE.png [FILE.json]\n"), stdout)
}

// The x axis names the sweep's pattern; a sweep from before patterns (no
// "pattern" key, as the fixture) is of reads.
func TestPlotNamesThePattern(t *testing.T) {
	sweep, err := os.ReadFile(filepath.Join("testdata", "sweep-read500.json"))
	require.NoError(t, err)
	for pattern, want := range map[string]string{
		"randwrite": ">achieved write IOPS (4096-byte O_DIRECT random writes, open loop)<",
		"wal":       ">achieved appends/s (4096-byte WAL appends + fdatasync, one writer, open loop)<",
		"randread":  ">achieved read IOPS (4096-byte O_DIRECT random reads, open loop)<",
	} {
		in := strings.Replace(string(sweep), `"profile": "capacity",`, `"profile": "capacity", "pattern": "`+pattern+`",`, 1)
		out := filepath.Join(t.TempDir(), "c.svg")
		code, _, stderr := runPlot(t, in, "-o", out)
		require.Equal(t, 0, code, stderr)
		b, err := os.ReadFile(out)
		require.NoError(t, err)
		require.Contains(t, string(b), want, pattern)
	}
}
