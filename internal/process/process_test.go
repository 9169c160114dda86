package process

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// The cap must hold through io.Copy, which is how os/exec drains a pipe:
// io.Copy prefers the destination's ReadFrom, and a capped writer that
// embedded bytes.Buffer got bytes.Buffer's, which reads everything.
func TestAdversarialCappedOutputThroughIOCopy(t *testing.T) {
	pr, pw, err := os.Pipe()
	require.NoError(t, err)
	go func() {
		chunk := make([]byte, 1<<20)
		for range 16 {
			if _, err := pw.Write(chunk); err != nil {
				break
			}
		}
		pw.Close()
	}()
	out := &cappedOutput{limit: 1 << 20}
	n, err := io.Copy(out, pr)
	require.NoError(t, err)
	require.EqualValues(t, 16<<20, n, "everything is drained")
	require.Equal(t, 1<<20, len(out.Bytes()), "only the first MiB is kept")
	require.LessOrEqual(t, cap(out.Bytes()), 2<<20)
	require.True(t, out.truncated)
}

// Stdin is handed over whole, stdout and stderr come back apart, and the
// exit code is the program's; a program that outlives its timeout is
// killed, its output dropped. smart's tests run smartctl through here with
// wrapper scripts (runner_test.go); these are the plain cases.
func TestRun(t *testing.T) {
	script := filepath.Join(t.TempDir(), "prog")
	require.NoError(t, os.WriteFile(script, []byte("#!/bin/sh\ntr a-z A-Z\necho warned >&2\nexit 3\n"), 0o755))
	o := Options{Name: "prog", Timeout: 10 * time.Second, MaxStdout: 1 << 10, MaxStderr: 1 << 10, Stdin: []byte("curve\n")}
	res := Run(context.Background(), script, o)
	require.NoError(t, res.Err)
	require.Equal(t, 3, res.Code)
	require.Equal(t, "CURVE\n", string(res.Stdout))
	require.Equal(t, "warned", res.Stderr)
	require.False(t, res.TimedOut)

	require.NoError(t, os.WriteFile(script, []byte("#!/bin/sh\nsleep 30\n"), 0o755))
	o.Timeout = 200 * time.Millisecond
	start := time.Now()
	res = Run(context.Background(), script, o)
	require.True(t, res.TimedOut)
	require.Equal(t, -1, res.Code)
	require.Less(t, time.Since(start), 10*time.Second)

	res = Run(context.Background(), filepath.Join(t.TempDir(), "missing"), o)
	require.Equal(t, -1, res.Code)
	require.ErrorContains(t, res.Err, "start ")
}
