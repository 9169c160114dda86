package main

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// A go test -json stream: in package a, a pass, a skip with its reason, a
// subtest and a failure; package b timed out while TestHang ran; package c
// has no test files.
const stream = `{"Action":"run","Package":"github.com/diskcanary/diskcanary/a","Test":"TestOK"}
{"Action":"pass","Package":"github.com/diskcanary/diskcanary/a","Test":"TestOK","Elapsed":0.1}
{"Action":"run","Package":"github.com/diskcanary/diskcanary/a","Test":"TestRoot"}
{"Action":"output","Package":"github.com/diskcanary/diskcanary/a","Test":"TestRoot","Output":"=== RUN   TestRoot\n"}
{"Action":"output","Package":"github.com/diskcanary/diskcanary/a","Test":"TestRoot","Output":"    a_test.go:9: skipping: needs root\n"}
{"Action":"output","Package":"github.com/diskcanary/diskcanary/a","Test":"TestRoot","Output":"--- SKIP: TestRoot (0.00s)\n"}
{"Action":"skip","Package":"github.com/diskcanary/diskcanary/a","Test":"TestRoot"}
{"Action":"run","Package":"github.com/diskcanary/diskcanary/a","Test":"TestBad"}
{"Action":"run","Package":"github.com/diskcanary/diskcanary/a","Test":"TestBad/sub"}
{"Action":"pass","Package":"github.com/diskcanary/diskcanary/a","Test":"TestBad/sub"}
{"Action":"output","Package":"github.com/diskcanary/diskcanary/a","Test":"TestBad","Output":"    a_test.go:20: want 2, got 3\n"}
{"Action":"fail","Package":"github.com/diskcanary/diskcanary/a","Test":"TestBad"}
{"Action":"fail","Package":"github.com/diskcanary/diskcanary/a","Elapsed":1.5}
{"Action":"run","Package":"github.com/diskcanary/diskcanary/b","Test":"TestHang"}
{"Action":"output","Package":"github.com/diskcanary/diskcanary/b","Test":"TestHang","Output":"panic: test timed out after 15m0s\n"}
{"Action":"output","Package":"github.com/diskcanary/diskcanary/b","Test":"TestHang","Output":"\trunning tests:\n"}
{"Action":"fail","Package":"github.com/diskcanary/diskcanary/b","Elapsed":900}
not JSON: a build error line
{"Action":"skip","Package":"github.com/diskcanary/diskcanary/c"}
`

func TestSummary(t *testing.T) {
	var b strings.Builder
	ok := summarize(strings.NewReader(stream), &b)
	require.False(t, ok)
	require.Equal(t, `=== FAIL github.com/diskcanary/diskcanary/a TestBad
    a_test.go:20: want 2, got 3
=== FAIL github.com/diskcanary/diskcanary/b (package)
still running when the package ended: TestHang
panic: test timed out after 15m0s
	running tests:
---- skipped tests ----
SKIP a TestRoot: a_test.go:9: skipping: needs root
---- test summary ----
fail github.com/diskcanary/diskcanary/a                               1.5s  pass   1  skip  1  fail  1
fail github.com/diskcanary/diskcanary/b                             900.0s  pass   0  skip  0  fail  0
none github.com/diskcanary/diskcanary/c                               0.0s  pass   0  skip  0  fail  0
tests: 1 passed, 1 skipped, 1 failed; packages: 0 ok, 2 failed
`, b.String())
}

func TestSummaryAllPassed(t *testing.T) {
	var b strings.Builder
	ok := summarize(strings.NewReader(`{"Action":"pass","Package":"p","Test":"TestX"}
{"Action":"pass","Package":"p","Elapsed":0.2}
`), &b)
	require.True(t, ok)
	require.Contains(t, b.String(), "tests: 1 passed, 0 skipped, 0 failed; packages: 1 ok, 0 failed\n")
}

// CI tests one module in two runs: a package that failed in the first stays
// failed when the second passes.
func TestSummaryPackageInTwoRuns(t *testing.T) {
	var b strings.Builder
	ok := summarize(strings.NewReader(`{"Action":"output","Package":"p","Output":"panic: boom\n"}
{"Action":"fail","Package":"p","Elapsed":0.2}
{"Action":"pass","Package":"p","Test":"TestY"}
{"Action":"pass","Package":"p","Elapsed":3.5}
`), &b)
	require.False(t, ok)
	require.Contains(t, b.String(), "=== FAIL p (package)\npanic: boom\n")
	require.Contains(t, b.String(), "tests: 1 passed, 0 skipped, 0 failed; packages: 0 ok, 1 failed\n")
}
