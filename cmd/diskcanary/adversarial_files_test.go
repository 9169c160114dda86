package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/diskcanary/diskcanary/internal/testkit"
)

// Hostile input never wins: a local user who can plant files, links or a
// FIFO, or a config that points through a symlink, never makes the daemon
// write, delete or hang outside its own probe files. These run the real
// daemon; probes/files_test.go has the unit tests.

// serveConfig starts the daemon on cfg (a probes: section) and returns a
// function that reads /metrics.
func serveConfig(t *testing.T, probesYAML string) (*testkit.Process, func() string) {
	t.Helper()
	cfg := filepath.Join(t.TempDir(), "diskcanary.yml")
	require.NoError(t, os.WriteFile(cfg, []byte(probesYAML+"smart:\n  enabled: false\n"), 0o600))
	addr := testkit.FreeAddr(t)
	daemon := testkit.StartCmd(t, diskcanaryCmd(t, nil, "serve", "--config.file", cfg, "--web.listen-address", addr))
	daemon.WaitListening(t, addr, 10*time.Second)
	return daemon, func() string {
		code, body, err := get("http://" + addr + "/metrics")
		if err != nil || code != 200 {
			return ""
		}
		return body
	}
}

func waitMetrics(t *testing.T, metrics func() string, what string, want ...string) string {
	t.Helper()
	var body string
	require.Eventuallyf(t, func() bool {
		body = metrics()
		for _, w := range want {
			if !strings.Contains(body, w) {
				return false
			}
		}
		return true
	}, 15*time.Second, 50*time.Millisecond, "%s: /metrics lacks one of %q", what, want)
	return body
}

// waitFailure waits until probe has failed for reason at least once (every
// reason is exported at 0 from the start) and /metrics has each of also.
func waitFailure(t *testing.T, metrics func() string, probe, reason string, also ...string) string {
	t.Helper()
	re := regexp.MustCompile(fmt.Sprintf(`(?m)^diskcanary_probe_failures_total\{probe=%q,reason=%q\} [1-9]`, probe, reason))
	var body string
	require.Eventuallyf(t, func() bool {
		body = metrics()
		if !re.MatchString(body) {
			return false
		}
		for _, w := range also {
			if !strings.Contains(body, w) {
				return false
			}
		}
		return true
	}, 15*time.Second, 50*time.Millisecond, "no %s failure of probe %s, or /metrics lacks one of %q", reason, probe, also)
	return body
}

// `dir: /x/lnk/wal` with lnk -> .../etcd/member: the lexical path passes
// the etcd guard, the resolved one is etcd's WAL directory.
func TestAdversarialSymlinkedEtcdMemberDirRefused(t *testing.T) {
	base, err := filepath.EvalSymlinks(t.TempDir())
	require.NoError(t, err)
	etcd := filepath.Join(base, "etcd")
	require.NoError(t, os.MkdirAll(filepath.Join(etcd, "member", "wal"), 0o700))
	require.NoError(t, os.Mkdir(filepath.Join(base, "x"), 0o700))
	require.NoError(t, os.Symlink(filepath.Join(etcd, "member"), filepath.Join(base, "x", "lnk")))
	dir := filepath.Join(base, "x", "lnk", "wal")
	want := dir + ": unsafe probe directory: resolves through symlinks to " + etcd + "/member/wal, which is etcd's wal or snap directory"

	_, code, err := runCLI(t, "serve", "--config.check", "--probe.dir", dir)
	require.Equal(t, 1, code)
	require.ErrorContains(t, err, want)

	out, code := runRefused(t, "serve", "--probe.dir", dir, "--web.listen-address", testkit.FreeAddr(t))
	require.Equal(t, 1, code, "the daemon refuses to start")
	require.Contains(t, out, want)
	entries, err := os.ReadDir(filepath.Join(etcd, "member", "wal"))
	require.NoError(t, err)
	require.Empty(t, entries, "nothing written into etcd's WAL directory")
}

// device: a FIFO (open would block the probe forever) or /dev/zero (zeros
// at memory speed: a perfect disk) is refused before anything opens it.
func TestAdversarialDeviceThatIsNotADiskRefused(t *testing.T) {
	base := t.TempDir()
	fifo := filepath.Join(base, "fifo")
	require.NoError(t, unix.Mkfifo(fifo, 0o600))
	for dev, want := range map[string]string{
		fifo:        `line 3: probe "rr": probes.targets[].device: ` + fifo + ": not a block device: it is a FIFO; device: takes a disk, e.g. /dev/disk/by-id/...",
		"/dev/zero": `line 3: probe "rr": probes.targets[].device: /dev/zero: not a block device: it is a character device; device: takes a disk, e.g. /dev/disk/by-id/...`,
	} {
		cfg := filepath.Join(t.TempDir(), "diskcanary.yml")
		require.NoError(t, os.WriteFile(cfg, []byte(fmt.Sprintf("probes:\n  targets:\n    - name: rr\n      kind: randread\n      device: %s\n", dev)), 0o600))
		start := time.Now()
		_, code, err := runCLI(t, "serve", "--config.check", "--config.file", cfg)
		require.Equal(t, 1, code, dev)
		require.ErrorContains(t, err, want)
		require.Less(t, time.Since(start), 5*time.Second, "the check never blocks")
	}
}

// A FIFO planted at the read working set's name: the probe fails with a
// reason within seconds instead of hanging in open(2) with no trace, the
// FIFO is left for the operator to see, and every other probe and /metrics
// carry on.
func TestAdversarialFIFOAsReadsetFailsFast(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, ".diskcanary-rr-readset")
	require.NoError(t, unix.Mkfifo(fifo, 0o600))
	t.Cleanup(func() {
		// Unblocks an open stuck on it (a failing run), so cleanup ends.
		if fd, err := unix.Open(fifo, unix.O_RDWR|unix.O_NONBLOCK, 0); err == nil {
			unix.Close(fd)
		}
	})
	daemon, metrics := serveConfig(t, fmt.Sprintf(`probes:
  targets:
    - {name: wal, kind: wal, dir: %[1]s, interval: 100ms, ops: 5, min_free: 1B}
    - {name: rr, kind: randread, dir: %[1]s, interval: 100ms, working_set: 1MiB, min_free: 1B}
`, dir))
	body := waitFailure(t, metrics, "rr", "unsafe_path", `diskcanary_probe_success{probe="wal"} 1`)
	require.Contains(t, body, `diskcanary_probe_success{probe="rr"} 0`)
	fi, err := os.Lstat(fifo)
	require.NoError(t, err)
	require.Equal(t, os.ModeNamedPipe, fi.Mode().Type())
	log, err := os.ReadFile(daemon.Log)
	require.NoError(t, err)
	require.Contains(t, string(log), fifo+": refusing an unsafe probe path: not a regular file (a FIFO); remove it")
}

// A hard link planted at the overwrite layout's file name, to a same-size,
// fully written file elsewhere on the filesystem: that file is never
// written; the probe replaces the name with a file of its own.
func TestAdversarialHardLinkedOverwriteFileUntouched(t *testing.T) {
	base := t.TempDir()
	dir := filepath.Join(base, "probe")
	require.NoError(t, os.Mkdir(dir, 0o700))
	precious := bytes.Repeat([]byte("precious"), 5*4096/8)
	victim := filepath.Join(base, "victim")
	require.NoError(t, os.WriteFile(victim, precious, 0o600))
	f, err := os.Open(victim)
	require.NoError(t, err)
	require.NoError(t, f.Sync())
	f.Close()
	require.NoError(t, os.Link(victim, filepath.Join(dir, ".diskcanary-ow-overwrite")))

	_, metrics := serveConfig(t, fmt.Sprintf(`probes:
  targets:
    - {name: ow, kind: wal, layout: overwrite, dir: %s, interval: 50ms, ops: 5, block_size: 4096, min_free: 1B}
`, dir))
	waitMetrics(t, metrics, "overwrite cycles", `diskcanary_probe_success{probe="ow"} 1`)
	time.Sleep(300 * time.Millisecond) // a few more cycles
	got, err := os.ReadFile(victim)
	require.NoError(t, err)
	require.Equal(t, precious, got, "the daemon wrote a hard-linked file outside its directory")
	var st unix.Stat_t
	require.NoError(t, unix.Stat(victim, &st))
	require.EqualValues(t, 1, st.Nlink)
}

// A probe directory made first by another user (the default
// /var/tmp/diskcanary sits in a world-writable directory): refused with
// the reason, nothing written in it.
func TestAdversarialProbeDirOwnedByAnotherUserRefused(t *testing.T) {
	testkit.RequireRoot(t)
	dir := filepath.Join(t.TempDir(), "diskcanary")
	require.NoError(t, os.Mkdir(dir, 0o700))
	require.NoError(t, os.Chown(dir, 65534, 65534))
	daemon, metrics := serveConfig(t, fmt.Sprintf(`probes:
  targets:
    - {name: wal, kind: wal, dir: %s, interval: 100ms, ops: 5, min_free: 1B}
`, dir))
	body := waitFailure(t, metrics, "wal", "unsafe_path")
	require.Contains(t, body, `diskcanary_probe_success{probe="wal"} 0`)
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.Empty(t, entries)
	log, err := os.ReadFile(daemon.Log)
	require.NoError(t, err)
	require.Contains(t, string(log), dir+": refusing an unsafe probe path: owned by uid 65534, not by diskcanary's uid 0: chown it to 0, or remove it and diskcanary creates it (mode 0700)")
}

// `umount -l` of the probe filesystem, then a failed cycle (here the
// detached filesystem aborts): the probe must not recreate its
// directory under the bare mountpoint, on the root disk, and report that
// disk as healthy.
func TestAdversarialLazyUnmountNotProbedElsewhere(t *testing.T) {
	mnt, _ := testkit.LoopFS(t, 32<<20, "ext4")
	// A second mount of the same filesystem, to reach it after umount -l.
	other := t.TempDir()
	if out, err := exec.Command("mount", "--bind", mnt, other).CombinedOutput(); err != nil {
		t.Fatalf("mount --bind: %v: %s", err, out)
	}
	t.Cleanup(func() { _ = unix.Unmount(other, unix.MNT_DETACH) })
	dir := filepath.Join(mnt, "canary")
	// The overwrite layout: a small file, where a WAL segment would not fit.
	daemon, metrics := serveConfig(t, fmt.Sprintf(`probes:
  targets:
    - {name: wal, kind: wal, layout: overwrite, dir: %s, interval: 100ms, ops: 5, min_free: 1B}
`, dir))
	waitMetrics(t, metrics, "probing the loop filesystem", `diskcanary_probe_success{probe="wal"} 1`)

	require.NoError(t, unix.Unmount(mnt, unix.MNT_DETACH))
	// ext4's abort: the filesystem fails every write from now on (a
	// plain remount,ro is refused while the probe holds its file open).
	if out, err := exec.Command("mount", "-o", "remount,abort", other).CombinedOutput(); err != nil {
		t.Fatalf("remount abort: %v: %s", err, out)
	}
	body := waitFailure(t, metrics, "wal", "missing")
	require.Contains(t, body, `diskcanary_probe_success{probe="wal"} 0`)
	time.Sleep(500 * time.Millisecond) // several more setups
	require.Contains(t, metrics(), `diskcanary_probe_success{probe="wal"} 0`)
	entries, err := os.ReadDir(mnt)
	require.NoError(t, err)
	require.Empty(t, entries, "the probe directory was recreated under the bare mountpoint")
	log, err := os.ReadFile(daemon.Log)
	require.NoError(t, err)
	require.Contains(t, string(log), dir+": the probe directory's filesystem is gone: no such file or directory: it was on device ")
}
