package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// --config.check and serve's startup run the host checks: a config that is
// valid on paper but points a probe at etcd's data or through a symlink is
// refused before anything is written.
func TestConfigCheckRefusesUnsafeProbeDirs(t *testing.T) {
	base := t.TempDir()
	etcd := filepath.Join(base, "etcd")
	require.NoError(t, os.MkdirAll(filepath.Join(etcd, "member", "wal"), 0o700))
	link := filepath.Join(base, "link")
	require.NoError(t, os.Symlink(base, link))

	for dir, want := range map[string]string{
		etcd:                 "is an etcd data directory",
		etcd + "/member/wal": "is etcd's wal or snap directory",
		link:                 "is a symlink",
		base + "/a/../b":     `contains ".."`,
	} {
		_, code, err := runCLI(t, "serve", "--config.check", "--probe.dir", dir)
		require.Equal(t, 1, code, dir)
		require.ErrorContains(t, err, want, dir)

		// The daemon itself refuses to start, before it listens.
		_, _, err = runCLI(t, "serve", "--probe.dir", dir, "--web.listen-address", "127.0.0.1:0")
		require.ErrorContains(t, err, want, dir)
	}

	// With the probes collector off there is nothing to write, nothing to refuse.
	out, _, err := runCLI(t, "serve", "--config.check", "--probe.dir", etcd, "--no-collector.probes")
	require.NoError(t, err, out)

	out, _, err = runCLI(t, "serve", "--config.check", "--probe.dir", filepath.Join(base, "etcd-diskcanary"))
	require.NoError(t, err)
	require.Contains(t, out, "config OK: 2 probe(s)")
}
