package main

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestAdversarialUsageErrorsExit64 (issue 43): every usage error of every
// command exits 64 (sysexits.h EX_USAGE), never 1, which for check and
// smart means "a disk is bad": a typo in a CI gate must not read as a
// failing disk. Nothing is printed on stdout.
func TestAdversarialUsageErrorsExit64(t *testing.T) {
	for _, tc := range []struct {
		args []string
		msg  string
	}{
		{[]string{"bogus"}, `unknown command "bogus" for "diskcanary"`},
		{[]string{"smrt"}, `unknown command "smrt" for "diskcanary"; did you mean smart?`},
		{[]string{"--bogus"}, "unknown flag: --bogus"},
		{[]string{"smart", "--bogus"}, "unknown flag: --bogus"},
		{[]string{"iostat", "--bogus"}, "unknown flag: --bogus"},
		{[]string{"top", "--bogus"}, "unknown flag: --bogus"},
		{[]string{"check", "--bogus"}, "unknown flag: --bogus"},
		{[]string{"serve", "--bogus"}, "unknown flag: --bogus"},
		{[]string{"version", "--bogus"}, "unknown flag: --bogus"},
		{[]string{"completion", "--bogus"}, "unknown flag: --bogus"},
		{[]string{"completion", "bash", "--bogus"}, "unknown flag: --bogus"},
		{[]string{"help", "--bogus"}, "unknown flag: --bogus"},
		// wrong argument counts
		{[]string{"serve", "x"}, `unknown command "x" for "diskcanary serve"`},
		{[]string{"version", "x"}, `unknown command "x" for "diskcanary version"`},
		{[]string{"man"}, "accepts 1 arg(s), received 0"},
		{[]string{"completion", "bogus"}, `unknown command "bogus" for "diskcanary completion"`},
		{[]string{"help", "bogus"}, `unknown help topic "bogus"`},
		{[]string{"iostat", "1", "2", "3"}, "too many numbers [1 2 3]: usage is iostat [DEVICE...] [INTERVAL [COUNT]]"},
		{[]string{"iostat", "1", "sda"}, `device "sda" after INTERVAL: usage is iostat [DEVICE...] [INTERVAL [COUNT]]`},
		// bad values
		{[]string{"iostat", "0"}, `INTERVAL "0": want a positive number of seconds`},
		{[]string{"iostat", "1", "x1"}, `device "x1" after INTERVAL: usage is iostat [DEVICE...] [INTERVAL [COUNT]]`},
		{[]string{"iostat", "1", "0"}, `COUNT "0": want a positive integer`},
		{[]string{"top", "-d", "0"}, "--delay 0s: must be at least 10ms"},
		{[]string{"top", "-n", "x"}, `invalid argument "x" for "-n, --iterations" flag: strconv.ParseInt: parsing "x": invalid syntax`},
		{[]string{"serve", "--collector.contention.budget", "10s"}, "--collector.contention.budget 10s: must be positive and at most --collector.contention.interval (5s)"},
		{[]string{"smart", "--concurrency", "x"}, `invalid argument "x" for "--concurrency" flag: strconv.ParseInt: parsing "x": invalid syntax`},
		{[]string{"serve", "--log.level", "loud"}, "--log.level: unrecognized log level loud"},
		{[]string{"serve", "--log.format", "xml"}, "--log.format: unrecognized log format xml"},
		{[]string{"serve", "--collector.diskstats.device-include", "sd", "--collector.diskstats.device-exclude", "loop"},
			"--collector.diskstats.device-include and --collector.diskstats.device-exclude are mutually exclusive"},
		// A templated unit with an unset variable: before, "starting", no
		// listener, exit 0, and Restart=on-failure never restarted it.
		{[]string{"serve", "--web.listen-address", ""}, `--web.listen-address "": empty; give HOST:PORT or :PORT (default :9742)`},
		{[]string{"serve", "--web.listen-address", " "}, `--web.listen-address " ": empty; give HOST:PORT or :PORT (default :9742)`},
		{[]string{"serve", "--web.listen-address", ":0", "--web.listen-address", "\t"}, `--web.listen-address "\t": empty; give HOST:PORT or :PORT (default :9742)`},
		{[]string{"serve", "--web.listen-address", ":0,"}, `--web.listen-address "": empty; give HOST:PORT or :PORT (default :9742)`},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			out, code, err := runCLI(t, tc.args...)
			require.Equal(t, exitUsage, code, "%v\n%s", err, out)
			require.EqualError(t, err, tc.msg)
			require.NotContains(t, out, "starting diskcanary")
		})
	}
	// Help is not an error.
	for _, args := range [][]string{{}, {"--help"}, {"help"}, {"help", "smart"}, {"completion"}, {"smart", "--help"}} {
		out, code, err := runCLI(t, args...)
		require.NoError(t, err, "%v", args)
		require.Equal(t, 0, code, "%v", args)
		require.Contains(t, out, "Usage:", "%v", args)
	}
}

// The root help says what a usage error exits with, for every command.
func TestRootHelpNamesTheUsageExitStatus(t *testing.T) {
	out, code, err := runCLI(t, "--help")
	require.NoError(t, err)
	require.Equal(t, 0, code)
	require.Contains(t, out, "Every command exits 64 (sysexits' EX_USAGE) on a usage error: an unknown\ncommand or flag, a bad value, a wrong number of arguments.\n")
}
