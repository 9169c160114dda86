package config

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

func TestCheckProbeDirRefusals(t *testing.T) {
	base := t.TempDir()
	mk := func(parts ...string) string {
		p := filepath.Join(append([]string{base}, parts...)...)
		require.NoError(t, os.MkdirAll(p, 0o700))
		return p
	}
	// An etcd data layout: data-dir/member/{wal,snap}.
	etcd := mk("etcd")
	mk("etcd", "member", "wal")
	mk("etcd", "member", "snap")
	real := mk("real")
	link := filepath.Join(base, "link")
	require.NoError(t, os.Symlink(real, link))
	file := filepath.Join(base, "file")
	require.NoError(t, os.WriteFile(file, nil, 0o600))

	for _, tc := range []struct {
		dir, want string
	}{
		{"var/tmp/diskcanary", "not an absolute path"},
		{real + "/../real", `contains ".."`},
		{base + "/x/../real", `contains ".."`},
		{link, "is a symlink"},
		{file, "is not a directory"},
		{etcd, "is an etcd data directory; use a sibling directory on the same filesystem, e.g. " + filepath.Join(base, "etcd-diskcanary")},
		{etcd + "/member", "is an etcd member directory"},
		{etcd + "/member/wal", "is etcd's wal or snap directory"},
		{etcd + "/member/snap", "is etcd's wal or snap directory"},
		{etcd + "/member/diskcanary", "is inside an etcd member directory " + etcd + "/member"},
		{etcd + "/member/wal/diskcanary", "is inside etcd's wal or snap directory"},
		{"/", "is the root of a mounted filesystem that holds other data"},
	} {
		err := CheckProbeDir(tc.dir)
		require.ErrorIs(t, err, ErrUnsafeProbeDir, tc.dir)
		require.ErrorContains(t, err, tc.want, tc.dir)
	}

	// Next to etcd's data (not in member/) is fine, as is a directory that
	// does not exist yet: the probe creates it.
	for _, ok := range []string{real, filepath.Join(base, "new"), mk("etcd", "diskcanary"), filepath.Join(etcd, "not-yet")} {
		require.NoError(t, CheckProbeDir(ok), ok)
	}
}

func TestCheckProbeDirRefusesBlockDevice(t *testing.T) {
	dev := ""
	entries, _ := os.ReadDir("/dev")
	for _, e := range entries {
		if e.Type()&os.ModeDevice != 0 && e.Type()&os.ModeCharDevice == 0 {
			dev = filepath.Join("/dev", e.Name())
			break
		}
	}
	if dev == "" {
		// Root can make one in a temporary directory instead.
		dev = filepath.Join(t.TempDir(), "blk")
		if err := unix.Mknod(dev, unix.S_IFBLK|0o600, int(unix.Mkdev(7, 0))); err != nil {
			t.Skipf("no block device in /dev and mknod failed: %v", err)
		}
	}
	err := CheckProbeDir(dev)
	require.ErrorIs(t, err, ErrUnsafeProbeDir)
	require.ErrorContains(t, err, "is a block device; write probes never write to a device")

	// Through CheckHost, the error names the probe (and its line when from a file).
	c, err := Parse([]byte("probes:\n  targets:\n    - name: wal\n      kind: wal\n      dir: " + dev + "\n"))
	require.NoError(t, err, "the file alone is valid: only the host says it is a device")
	err = c.CheckHost()
	require.ErrorContains(t, err, `line 3: probe "wal": probes.targets[].dir: `+dev)
	require.ErrorContains(t, err, "is a block device")
}

// A mounted filesystem's root is refused only when it holds someone else's
// data; a dedicated mount with nothing but lost+found and probe files is fine.
func TestCheckProbeDirMountRoot(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to mount a tmpfs")
	}
	mnt := t.TempDir()
	if err := unix.Mount("tmpfs", mnt, "tmpfs", 0, "size=1m"); err != nil {
		t.Skipf("mount tmpfs: %v", err)
	}
	t.Cleanup(func() { _ = unix.Unmount(mnt, unix.MNT_DETACH) })
	root, err := isMountRoot(mnt)
	require.NoError(t, err)
	require.True(t, root)
	notRoot, err := isMountRoot(filepath.Dir(mnt))
	require.NoError(t, err)
	require.False(t, notRoot)

	require.NoError(t, os.Mkdir(filepath.Join(mnt, "lost+found"), 0o700))
	require.NoError(t, os.WriteFile(filepath.Join(mnt, ProbeFilePrefix+"wal-wal"), nil, 0o600))
	require.NoError(t, CheckProbeDir(mnt), "only lost+found and probe files")

	require.NoError(t, os.WriteFile(filepath.Join(mnt, "data.db"), nil, 0o600))
	err = CheckProbeDir(mnt)
	require.ErrorIs(t, err, ErrUnsafeProbeDir)
	require.ErrorContains(t, err, "is the root of a mounted filesystem that holds other data (data.db); use a dedicated subdirectory, e.g. "+filepath.Join(mnt, "diskcanary"))
	require.NoError(t, CheckProbeDir(filepath.Join(mnt, "diskcanary")))
}
