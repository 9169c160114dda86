package probes

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/diskcanary/diskcanary/internal/config"
	"github.com/diskcanary/diskcanary/internal/testkit"
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
		require.ErrorIs(t, err, errUnsafeProbeDir, tc.dir)
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
	require.ErrorIs(t, err, errUnsafeProbeDir)
	require.ErrorContains(t, err, "is a block device; write probes never write to a device")

	// Through CheckHost, the error names the probe (and its line when from a file).
	c, err := config.Parse([]byte("probes:\n  targets:\n    - name: wal\n      kind: wal\n      dir: " + dev + "\n"))
	require.NoError(t, err, "the file alone is valid: only the host says it is a device")
	err = CheckHost(c)
	require.ErrorContains(t, err, `line 3: probe "wal": probes.targets[].dir: `+dev)
	require.ErrorContains(t, err, "is a block device")
}

// A mounted filesystem's root is refused only when it holds someone else's
// data; a dedicated mount with nothing but lost+found and probe files is fine.
func TestCheckProbeDirMountRoot(t *testing.T) {
	mnt := testkit.Tmpfs(t)
	root, err := isMountRoot(mnt)
	require.NoError(t, err)
	require.True(t, root)
	notRoot, err := isMountRoot(filepath.Dir(mnt))
	require.NoError(t, err)
	require.False(t, notRoot)

	require.NoError(t, os.Mkdir(filepath.Join(mnt, "lost+found"), 0o700))
	require.NoError(t, os.WriteFile(filepath.Join(mnt, filePrefix+"wal-wal"), nil, 0o600))
	require.NoError(t, CheckProbeDir(mnt), "only lost+found and probe files")

	require.NoError(t, os.WriteFile(filepath.Join(mnt, "data.db"), nil, 0o600))
	err = CheckProbeDir(mnt)
	require.ErrorIs(t, err, errUnsafeProbeDir)
	require.ErrorContains(t, err, "is the root of a mounted filesystem that holds other data (data.db); use a dedicated subdirectory, e.g. "+filepath.Join(mnt, "diskcanary"))
	require.NoError(t, CheckProbeDir(filepath.Join(mnt, "diskcanary")))
}

// A symlinked parent does not hide etcd's data: /x/lnk/wal with
// lnk -> .../etcd/member is etcd's WAL directory, whatever the path says.
func TestCheckProbeDirThroughSymlinkedParents(t *testing.T) {
	base, err := filepath.EvalSymlinks(t.TempDir())
	require.NoError(t, err)
	etcd := filepath.Join(base, "etcd")
	require.NoError(t, os.MkdirAll(filepath.Join(etcd, "member", "wal"), 0o700))
	require.NoError(t, os.MkdirAll(filepath.Join(base, "real"), 0o700))
	require.NoError(t, os.Mkdir(filepath.Join(base, "x"), 0o700))
	require.NoError(t, os.Symlink(filepath.Join(etcd, "member"), filepath.Join(base, "x", "lnk")))
	require.NoError(t, os.Symlink(base, filepath.Join(base, "x", "up")))
	require.NoError(t, os.Symlink(filepath.Join(base, "real"), filepath.Join(base, "x", "ok")))

	for dir, want := range map[string]string{
		base + "/x/lnk/wal": base + "/x/lnk/wal: unsafe probe directory: resolves through symlinks to " + etcd +
			"/member/wal, which is etcd's wal or snap directory; use a sibling directory on the same filesystem, e.g. " + base + "/etcd-diskcanary",
		base + "/x/lnk/diskcanary": base + "/x/lnk/diskcanary: unsafe probe directory: resolves through symlinks to " + etcd +
			"/member/diskcanary, which is inside an etcd member directory " + etcd + "/member; use a sibling of the etcd data directory on the same filesystem",
	} {
		err := CheckProbeDir(dir)
		require.ErrorIs(t, err, errUnsafeProbeDir, dir)
		require.EqualError(t, err, want)
	}
	// Symlinked parents that lead elsewhere are fine, existing or not.
	require.NoError(t, CheckProbeDir(base+"/x/ok/canary"))
	require.NoError(t, CheckProbeDir(base+"/x/up/etcd-diskcanary"))
}

// device: must be a block device, checked by stat alone: a FIFO would block
// the probe's open forever, /dev/zero would read as a perfect disk.
func TestCheckProbeDevice(t *testing.T) {
	base := t.TempDir()
	fifo := filepath.Join(base, "fifo")
	require.NoError(t, unix.Mkfifo(fifo, 0o600))
	file := filepath.Join(base, "disk.img")
	require.NoError(t, os.WriteFile(file, make([]byte, 4096), 0o600))
	for dev, want := range map[string]string{
		fifo:                        fifo + ": not a block device: it is a FIFO; device: takes a disk, e.g. /dev/disk/by-id/...",
		"/dev/zero":                 "/dev/zero: not a block device: it is a character device; device: takes a disk, e.g. /dev/disk/by-id/...",
		file:                        file + ": not a block device: it is a regular file; device: takes a disk, e.g. /dev/disk/by-id/...",
		filepath.Join(base, "nope"): filepath.Join(base, "nope") + ": not a block device: it does not exist; name a disk, e.g. /dev/disk/by-id/...",
	} {
		done := make(chan error, 1)
		go func() { done <- CheckProbeDevice(dev) }()
		select {
		case err := <-done:
			require.ErrorIs(t, err, errNotBlockDevice, dev)
			require.EqualError(t, err, want)
		case <-time.After(2 * time.Second):
			t.Fatalf("CheckProbeDevice(%s) blocked", dev)
		}
	}

	// Through CheckHost, before the daemon opens anything.
	c, err := config.Parse([]byte("probes:\n  targets:\n    - name: rr\n      kind: randread\n      device: " + fifo + "\n"))
	require.NoError(t, err, "the file alone is valid: only the host says it is a FIFO")
	require.EqualError(t, CheckHost(c), `line 3: probe "rr": probes.targets[].device: `+fifo+": not a block device: it is a FIFO; device: takes a disk, e.g. /dev/disk/by-id/...")

	// A block device, also through a symlink as in /dev/disk/by-id.
	dev := ""
	entries, _ := os.ReadDir("/dev")
	for _, e := range entries {
		if e.Type()&os.ModeDevice != 0 && e.Type()&os.ModeCharDevice == 0 {
			dev = filepath.Join("/dev", e.Name())
			break
		}
	}
	if dev == "" {
		t.Skip("no block device in /dev for the positive case")
	}
	require.NoError(t, CheckProbeDevice(dev))
	link := filepath.Join(base, "by-id")
	require.NoError(t, os.Symlink(dev, link))
	require.NoError(t, CheckProbeDevice(link))
}
