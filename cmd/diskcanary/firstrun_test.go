package main

import (
	"bytes"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/diskcanary/diskcanary/internal/testkit"
)

// runBinary runs diskcanary in a new process and returns its stdout, its
// stderr and its exit code.
func runBinary(t *testing.T, cred *syscall.Credential, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	cmd := diskcanaryCmd(t, nil, args...)
	return runWith(t, cmd, cred)
}

func runWith(t *testing.T, cmd *exec.Cmd, cred *syscall.Credential) (string, string, int) {
	t.Helper()
	if cred != nil {
		cmd.SysProcAttr.Credential = cred
	}
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatalf("run %v: %v", cmd.Args, err)
	}
	return out.String(), errb.String(), cmd.ProcessState.ExitCode()
}

// startQuietDaemon starts a daemon with only the collectors the test needs
// and waits until it answers.
func startQuietDaemon(t *testing.T, args ...string) (string, *testkit.Process) {
	t.Helper()
	addr := testkit.FreeAddr(t)
	args = append([]string{"serve", "--web.listen-address", addr, "--no-collector.smart"}, args...)
	p := testkit.StartCmd(t, diskcanaryCmd(t, nil, args...))
	require.Eventually(t, func() bool {
		code, _, err := get("http://" + addr + "/metrics")
		return err == nil && code == 200
	}, 10*time.Second, 20*time.Millisecond, "daemon answering on %s", addr)
	return addr, p
}

var hrefRE = regexp.MustCompile(`href="([^"]*)"`)

// Every link on the landing page leads somewhere: the documentation link is
// not given the route prefix (it was "/https://…": 307, then 404) and there
// are no pprof links (there are no debug endpoints).
func TestLandingPageLinksAnswer(t *testing.T) {
	addr, _ := startQuietDaemon(t, "--no-collector.probes", "--no-collector.diskstats")
	code, page, err := get("http://" + addr + "/")
	require.NoError(t, err)
	require.Equal(t, 200, code)
	var links []string
	for _, m := range hrefRE.FindAllStringSubmatch(page, -1) {
		links = append(links, m[1])
	}
	require.Equal(t, []string{"/metrics", "https://github.com/diskcanary/diskcanary"}, links)
	require.NotContains(t, page, "debug/pprof")

	client := &http.Client{Timeout: 10 * time.Second} // follows redirects
	for _, l := range links {
		url := l
		if strings.HasPrefix(l, "/") {
			url = "http://" + addr + l
		}
		resp, err := client.Get(url)
		if err != nil && !strings.HasPrefix(l, "/") {
			// An external link needs the internet; a sandbox has none.
			t.Logf("not checked (no network): %s: %v", url, err)
			continue
		}
		require.NoError(t, err, url)
		resp.Body.Close()
		require.Equal(t, 200, resp.StatusCode, url)
	}
}

// `diskcanary --version` is `diskcanary version`.
func TestVersionFlag(t *testing.T) {
	flagOut, _, code := runBinary(t, nil, "--version")
	require.Equal(t, 0, code)
	cmdOut, _, code := runBinary(t, nil, "version")
	require.Equal(t, 0, code)
	require.Equal(t, cmdOut, flagOut)
	require.True(t, strings.HasPrefix(flagOut, "diskcanary, version devel (branch: , revision: "), flagOut)
	require.Contains(t, flagOut, "\n  go version:       go")
}

// --config.check says what the daemon will find: a missing parent is an
// error (exit 1) that names the probe, the path and what to do, and a
// tmpfs is a warning (exit 0, as promtool check does).
func TestConfigCheckMissingParent(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "not-mounted", "canary")
	out, stderr, code := runBinary(t, nil, "serve", "--config.check", "--probe.dir", dir)
	require.Equal(t, 1, code, out)
	require.Empty(t, out)
	parent := filepath.Dir(dir)
	want := fmt.Sprintf(`diskcanary: probe "wal": %[1]s: its parent %[2]s does not exist, and diskcanary never creates parents (a missing parent is usually a disk that is not mounted): mount it or create %[2]s
probe "randread": %[1]s: its parent %[2]s does not exist, and diskcanary never creates parents (a missing parent is usually a disk that is not mounted): mount it or create %[2]s
`, dir, parent)
	require.Equal(t, want, stderr)
}

func TestConfigCheckTmpfsIsAWarning(t *testing.T) {
	dir := filepath.Join(testkit.Tmpfs(t), "canary")
	out, stderr, code := runBinary(t, nil, "serve", "--config.check", "--probe.dir", dir)
	require.Equal(t, 0, code, stderr)
	require.Equal(t, fmt.Sprintf(`warning: probe "wal": %[1]s is on tmpfs: its latencies are not a disk's, and the daemon will export diskcanary_probe_target_warning{warning="tmpfs"} 1
warning: probe "randread": %[1]s is on tmpfs: its latencies are not a disk's, and the daemon will export diskcanary_probe_target_warning{warning="tmpfs"} 1
`, dir), stderr)
	require.Contains(t, out, "config OK: 2 probe(s)")
	// The check wrote nothing: the daemon creates the directory, not the check.
	_, err := os.Stat(dir)
	require.ErrorIs(t, err, os.ErrNotExist)

	// Existing, the same.
	require.NoError(t, os.Mkdir(dir, 0o700))
	_, stderr, code = runBinary(t, nil, "serve", "--config.check", "--probe.dir", dir)
	require.Equal(t, 0, code, stderr)
	require.Contains(t, stderr, fmt.Sprintf(`warning: probe "wal": %s is on tmpfs:`, dir))
}

// A read-only mount fails every write the daemon would make, root or not.
func TestConfigCheckReadOnlyMount(t *testing.T) {
	testkit.RequireRoot(t)
	dir := filepath.Join(t.TempDir(), "canary")
	require.NoError(t, os.Mkdir(dir, 0o700))
	if out, err := exec.Command("mount", "--bind", dir, dir).CombinedOutput(); err != nil {
		t.Skipf("cannot bind-mount (%v: %s): this test needs it", err, out)
	}
	t.Cleanup(func() { _ = exec.Command("umount", dir).Run() })
	if out, err := exec.Command("mount", "-o", "remount,bind,ro", dir).CombinedOutput(); err != nil {
		t.Skipf("cannot remount read-only (%v: %s): this test needs it", err, out)
	}
	_, stderr, code := runBinary(t, nil, "serve", "--config.check", "--probe.dir", dir)
	require.Equal(t, 1, code, stderr)
	require.Equal(t, fmt.Sprintf(`diskcanary: probe "wal": %[1]s: cannot write in it as uid 0: read-only file system
probe "randread": %[1]s: cannot write in it as uid 0: read-only file system
`, dir), stderr)
}

// As an unprivileged user: a directory it may not create, one it owns but
// may not write, and one another user owns (which the daemon refuses as
// unsafe) are each an error naming the probe, the path and the reason.
func TestConfigCheckAsNonRoot(t *testing.T) {
	testkit.RequireRoot(t)
	_, base := nobodyCmd(t)
	asNobody := func(dir string) (string, int) {
		cmd, _ := nobodyCmd(t, "serve", "--config.check", "--probe.dir", dir)
		_, stderr, code := runWith(t, cmd, nil)
		return stderr, code
	}

	// base is root's, 0755: nobody cannot create canary in it.
	missing := filepath.Join(base, "canary")
	stderr, code := asNobody(missing)
	require.Equal(t, 1, code, stderr)
	require.Equal(t, fmt.Sprintf(`diskcanary: probe "wal": %[1]s: cannot create it as uid 65534: %[2]s: permission denied: create it owned by that user (mode 0700)
probe "randread": %[1]s: cannot create it as uid 65534: %[2]s: permission denied: create it owned by that user (mode 0700)
`, missing, base), stderr)

	readOnly := filepath.Join(base, "readonly")
	require.NoError(t, os.Mkdir(readOnly, 0o500))
	require.NoError(t, os.Chown(readOnly, nobody, nobody))
	stderr, code = asNobody(readOnly)
	require.Equal(t, 1, code, stderr)
	require.Equal(t, fmt.Sprintf(`diskcanary: probe "wal": %[1]s: cannot write in it as uid 65534: permission denied
probe "randread": %[1]s: cannot write in it as uid 65534: permission denied
`, readOnly), stderr)

	rootOwned := filepath.Join(base, "rootowned")
	require.NoError(t, os.Mkdir(rootOwned, 0o755))
	stderr, code = asNobody(rootOwned)
	require.Equal(t, 1, code, stderr)
	require.Contains(t, stderr, fmt.Sprintf(`diskcanary: probe "wal": %s: refusing an unsafe probe path: owned by uid 0, not by diskcanary's uid 65534: chown it to 65534, or remove it and diskcanary creates it (mode 0700)`, rootOwned))
}

// The first start says it is laying out the read working set, where, and
// how long it took at what rate; the next start reuses it and says nothing.
func TestReadWorkingSetLayoutLogged(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(t.TempDir(), "diskcanary.yml")
	require.NoError(t, os.WriteFile(cfg, []byte(fmt.Sprintf(`probes:
  targets:
    - name: rr
      kind: randread
      dir: %s
      interval: 50ms
      working_set: 4MiB
      min_free: 1B
`, dir)), 0o600))
	start := func() (string, *testkit.Process) {
		addr, p := startQuietDaemon(t, "--config.file", cfg, "--no-collector.diskstats")
		require.Eventually(t, func() bool {
			_, body, err := get("http://" + addr + "/metrics")
			return err == nil && strings.Contains(body, `diskcanary_probe_success{probe="rr"} 1`)
		}, 20*time.Second, 20*time.Millisecond, "a successful read burst")
		return addr, p
	}
	stop := func(p *testkit.Process) string {
		require.NoError(t, p.Cmd.Process.Signal(syscall.SIGTERM))
		<-p.Done
		log, err := os.ReadFile(p.Log)
		require.NoError(t, err)
		return string(log)
	}

	_, p := start()
	log := stop(p)
	file := filepath.Join(dir, ".diskcanary-rr-readset")
	require.Contains(t, log, fmt.Sprintf(`msg="laying out the read working set: 4MiB in %s" probe=rr file=%s note="written once and kept across restarts; to remove it, stop diskcanary and delete %s"`, dir, file, file))
	done := regexp.MustCompile(`msg="laying out the read working set: done \(([0-9]+(\.[0-9]+)?) s, ([0-9]+) MB/s\)" probe=rr file=` + regexp.QuoteMeta(file) + ` bytes=4194304`)
	require.Regexp(t, done, log)
	require.Less(t, strings.Index(log, "laying out the read working set: 4MiB"), strings.Index(log, "laying out the read working set: done"))
	st, err := os.Stat(file)
	require.NoError(t, err, "the working set is kept after SIGTERM")
	require.Equal(t, int64(4<<20), st.Size())

	_, p = start()
	log = stop(p)
	require.NotContains(t, log, "laying out the read working set", "reused, not written again")
}

// A fresh daemon exports every failure reason at 0 for every probe, so a
// dashboard shows 0 rather than "No data" until the first failure.
func TestFailureReasonsStartAtZero(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(t.TempDir(), "diskcanary.yml")
	// Hourly: no cycle is likely to run during the test, and one that
	// does succeeds.
	require.NoError(t, os.WriteFile(cfg, []byte(fmt.Sprintf(`probes:
  targets:
    - name: wal
      kind: wal
      dir: %[1]s
      interval: 1h
      min_free: 1B
    - name: rr
      kind: randread
      dir: %[1]s
      interval: 1h
      working_set: 4MiB
      min_free: 1B
`, dir)), 0o600))
	addr, _ := startQuietDaemon(t, "--config.file", cfg, "--no-collector.diskstats")
	_, body, err := get("http://" + addr + "/metrics")
	require.NoError(t, err)
	var got []string
	for _, line := range strings.Split(body, "\n") {
		if strings.HasPrefix(line, "diskcanary_probe_failures_total{") {
			got = append(got, line)
		}
	}
	var want []string
	for _, probe := range []string{"rr", "wal"} {
		for _, reason := range []string{"budget_exhausted", "interrupted", "io_error", "locked", "low_space", "missing",
			"no_space", "odirect_unsupported", "other", "permission", "read_only", "short_io", "unsafe_path"} {
			want = append(want, fmt.Sprintf(`diskcanary_probe_failures_total{probe=%q,reason=%q} 0`, probe, reason))
		}
	}
	require.Equal(t, want, got)
	require.Contains(t, body, "# HELP diskcanary_probe_failures_total Failed probe cycles by reason (missing, permission, read_only, no_space, low_space, io_error, odirect_unsupported, budget_exhausted, locked, unsafe_path, short_io, interrupted, other).\n")
}

// Shells complete flag values and devices from the binary's hidden
// __complete command; the lists are exactly what the commands accept.
func TestCompletion(t *testing.T) {
	sysfs := t.TempDir()
	for _, d := range []string{"sda", "nvme0n1", "cciss!c0d0"} {
		require.NoError(t, os.MkdirAll(filepath.Join(sysfs, "block", d), 0o755))
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"check", "--profile", ""}, "etcd\nfio-etcd\nrandread\nall\ncapacity\n:4\n"},
		{[]string{"check", "--profile", "capacity", "--pattern", ""}, "randread\nrandwrite\nwal\n:4\n"},
		{[]string{"serve", "--log.level", ""}, "debug\ninfo\nwarn\nerror\n:4\n"},
		{[]string{"serve", "--log.format", ""}, "logfmt\njson\n:4\n"},
		{[]string{"iostat", "--path.sysfs", sysfs, ""}, "cciss/c0d0\nnvme0n1\nsda\n:4\n"},
		{[]string{"iostat", "--path.sysfs", sysfs, "sda", ""}, "cciss/c0d0\nnvme0n1\n:4\n"},
		{[]string{"iostat", "--path.sysfs", sysfs, "n"}, "nvme0n1\n:4\n"},
	} {
		out, stderr, code := runBinary(t, nil, append([]string{"__complete"}, tc.args...)...)
		require.Equal(t, 0, code, stderr)
		require.Equal(t, tc.want, out, "%v", tc.args)
	}

	// smart takes the same kernel names, from /sys.
	entries, err := os.ReadDir("/sys/block")
	if err != nil {
		t.Skipf("no /sys/block (%v): smart's device completion not checked", err)
	}
	var want string
	for _, e := range entries {
		want += strings.ReplaceAll(e.Name(), "!", "/") + "\n"
	}
	out, _, code := runBinary(t, nil, "__complete", "smart", "")
	require.Equal(t, 0, code)
	require.Equal(t, want+":4\n", out)

	out, _, code = runBinary(t, nil, "completion", "bash")
	require.Equal(t, 0, code)
	require.Contains(t, out, "__start_diskcanary")
}

// `diskcanary man DIR` writes one page per command, from their help.
func TestManPages(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "man1")
	_, stderr, code := runBinary(t, nil, "man", dir)
	require.Equal(t, 0, code, stderr)
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	sort.Strings(names)
	require.Equal(t, []string{
		"diskcanary-check.1", "diskcanary-completion-bash.1", "diskcanary-completion-fish.1",
		"diskcanary-completion-powershell.1", "diskcanary-completion-zsh.1", "diskcanary-completion.1",
		"diskcanary-iostat.1", "diskcanary-serve.1", "diskcanary-smart.1", "diskcanary-top.1", "diskcanary-version.1", "diskcanary.1",
	}, names)
	serve, err := os.ReadFile(filepath.Join(dir, "diskcanary-serve.1"))
	require.NoError(t, err)
	require.Contains(t, string(serve), `.TH "DISKCANARY" "1" `)
	require.Contains(t, string(serve), "diskcanary-serve - Run the daemon: probes, diskstats and SMART on /metrics (default :9742)")
	require.Contains(t, string(serve), `\fB--config.check\fP[=false]`)
	if _, err := exec.LookPath("man"); err == nil {
		// man renders it without complaint.
		cmd := exec.Command("man", "--warnings", "-l", filepath.Join(dir, "diskcanary-serve.1"))
		cmd.Env = append(os.Environ(), "MANPAGER=cat", "MANWIDTH=80")
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		require.NoError(t, err, "%s", stderr.String())
		require.Contains(t, string(out), "diskcanary serve [flags]")
		require.Empty(t, stderr.String(), "groff's warnings")
	}
}
