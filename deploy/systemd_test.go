package deploy

import (
	"bufio"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/diskcanary/diskcanary/internal/testkit"
)

var unitFile = filepath.Join(repoRoot, "deploy/systemd/diskcanary.service")

// unit is a parsed systemd unit: section → key → values in order (a key
// may repeat; systemd accumulates most list settings).
type unit map[string]map[string][]string

func parseUnit(t *testing.T, data []byte) unit {
	t.Helper()
	u := unit{}
	section := ""
	sc := bufio.NewScanner(strings.NewReader(string(data)))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		switch {
		case line == "" || line[0] == '#' || line[0] == ';':
		case line[0] == '[':
			section = strings.Trim(line, "[]")
			u[section] = map[string][]string{}
		default:
			k, v, ok := strings.Cut(line, "=")
			require.True(t, ok, "line %d: %q", n, line)
			require.NotEmpty(t, section, "line %d outside a section", n)
			u[section][k] = append(u[section][k], v)
		}
	}
	return u
}

func (u unit) one(t *testing.T, key string) string {
	t.Helper()
	v := u["Service"][key]
	require.Len(t, v, 1, "Service.%s", key)
	return v[0]
}

// The capabilities SMART, the eBPF block-latency collector and the kernel
// log need, and not one more.
var unitCaps = []string{"CAP_SYS_RAWIO", "CAP_SYS_ADMIN", "CAP_BPF", "CAP_PERFMON", "CAP_SYSLOG"}

func TestSystemdUnit(t *testing.T) {
	data, err := os.ReadFile(unitFile)
	require.NoError(t, err)
	u := parseUnit(t, data)

	exec := strings.Fields(u.one(t, "ExecStart"))
	require.Equal(t, []string{"/usr/local/bin/diskcanary", "serve"}, exec[:2])
	var probeDirs []string
	for _, a := range exec[2:] {
		if d, ok := strings.CutPrefix(a, "--probe.dir="); ok {
			probeDirs = append(probeDirs, d)
		}
	}
	require.NotEmpty(t, probeDirs, "ExecStart names its probe directories")

	// Not root; SMART's two capabilities, ambient so smartctl inherits them,
	// the block-latency collector's two, and a bounding set that holds
	// nothing else.
	require.NotContains(t, []string{"", "root", "0"}, u.one(t, "User"))
	require.ElementsMatch(t, unitCaps, strings.Fields(u.one(t, "AmbientCapabilities")))
	require.ElementsMatch(t, unitCaps, strings.Fields(u.one(t, "CapabilityBoundingSet")))
	require.Equal(t, "yes", u.one(t, "NoNewPrivileges"))

	// Writes only in the probe directories.
	require.Equal(t, "strict", u.one(t, "ProtectSystem"))
	require.ElementsMatch(t, probeDirs, strings.Fields(strings.Join(u["Service"]["ReadWritePaths"], " ")))
	for _, d := range probeDirs {
		require.Contains(t, u["Unit"]["RequiresMountsFor"], d, "the probe directory's mount comes first")
	}
	require.Equal(t, "yes", u.one(t, "ProtectHome"))
	require.Equal(t, "yes", u.one(t, "PrivateTmp"))

	// Devices: closed policy, read-only block devices (and NVMe
	// controllers) and the kernel log.
	require.Equal(t, "closed", u.one(t, "DevicePolicy"))
	require.NotEmpty(t, u["Service"]["DeviceAllow"])
	for _, d := range u["Service"]["DeviceAllow"] {
		spec, mode, _ := strings.Cut(d, " ")
		require.Equal(t, "r", mode, "DeviceAllow=%s: read-only", d)
		require.True(t, strings.HasPrefix(spec, "block-") || spec == "char-nvme" || spec == "/dev/kmsg", d)
	}
	require.NotContains(t, u["Service"], "PrivateDevices", "it would hide the disks from smartctl")
	require.NotContains(t, u["Service"], "CPUQuota", "throttling is measured as disk latency")
	for _, k := range []string{"ProtectKernelTunables", "ProtectKernelModules", "ProtectControlGroups", "RestrictSUIDSGID", "LockPersonality", "MemoryDenyWriteExecute"} {
		require.Equal(t, "yes", u.one(t, k), k)
	}
}

// TestSystemdAnalyzeVerify runs `systemd-analyze verify` on the unit with
// ExecStart pointed at a freshly built binary (verify insists it exists).
// Any warning fails the test: verify exits 0 on, say, an unknown key.
func TestSystemdAnalyzeVerify(t *testing.T) {
	analyze, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Skip("systemd-analyze not installed")
	}
	bin := testkit.Binary(t)
	data, err := os.ReadFile(unitFile)
	require.NoError(t, err)
	require.Contains(t, string(data), "ExecStart=/usr/local/bin/diskcanary ")
	local := strings.ReplaceAll(string(data), "/usr/local/bin/diskcanary", bin)
	verify := func(text string) (string, error) {
		path := filepath.Join(t.TempDir(), "diskcanary.service")
		require.NoError(t, os.WriteFile(path, []byte(text), 0o644))
		out, err := exec.Command(analyze, "verify", "--man=no", path).CombinedOutput()
		return string(out), err
	}
	out, err := verify(local)
	require.NoError(t, err, out)
	require.Empty(t, out, "systemd-analyze verify warnings")
	t.Logf("systemd-analyze verify: exit 0, no output")

	// The check can fail.
	out, _ = verify(strings.Replace(local, "NoNewPrivileges=yes", "NoNewPrivileges=yes\nNoNewPrivilege=yes", 1))
	require.Contains(t, out, "Unknown key")
	_, err = verify(strings.ReplaceAll(string(data), "/usr/local/bin/diskcanary", "/nonexistent/diskcanary"))
	require.Error(t, err)

	// For the record (not a pass/fail criterion): the exposure score.
	path := filepath.Join(t.TempDir(), "diskcanary.service")
	require.NoError(t, os.WriteFile(path, []byte(local), 0o644))
	sec, _ := exec.Command(analyze, "security", "--offline=yes", "--no-pager", path).CombinedOutput()
	if m := regexp.MustCompile(`Overall exposure level for \S+: [^\n]*`).Find(sec); m != nil {
		t.Logf("systemd-analyze security --offline=yes: %s", m)
	}
}

// syscallFilter expands `systemd-analyze syscall-filter` groups into the
// set of system calls the unit's SystemCallFilter= lines allow.
func syscallFilter(t *testing.T, analyze string, lines []string) map[string]bool {
	t.Helper()
	out, err := exec.Command(analyze, "syscall-filter", "--no-pager").Output()
	require.NoError(t, err)
	groups := map[string][]string{}
	cur := ""
	for _, l := range strings.Split(string(out), "\n") {
		switch {
		case strings.HasPrefix(l, "@"):
			cur = strings.TrimSpace(l)
		case strings.HasPrefix(l, "    ") && cur != "":
			if e := strings.TrimSpace(l); !strings.HasPrefix(e, "#") {
				groups[cur] = append(groups[cur], e)
			}
		}
	}
	var expand func(string, map[string]bool)
	expand = func(name string, into map[string]bool) {
		if !strings.HasPrefix(name, "@") {
			into[name] = true
			return
		}
		members, ok := groups[name]
		require.True(t, ok, "unknown syscall group %s", name)
		for _, m := range members {
			expand(m, into)
		}
	}
	allowed := map[string]bool{}
	for _, l := range lines {
		deny := strings.HasPrefix(l, "~")
		set := map[string]bool{}
		for _, name := range strings.Fields(strings.TrimPrefix(l, "~")) {
			expand(name, set)
		}
		for s := range set {
			if deny {
				delete(allowed, s)
			} else {
				allowed[s] = true
			}
		}
	}
	return allowed
}

// TestSystemdClosestRun runs the daemon the way the unit would, as far as
// this machine allows: PID 1 here is not systemd, so there is no
// systemd-run. It takes the unit's settings and applies them by hand:
//   - User: uid/gid 65534 (nobody; the diskcanary user is not created on a
//     shared machine) with supplementary group disk;
//   - AmbientCapabilities / CapabilityBoundingSet / NoNewPrivileges: setpriv;
//   - ProtectSystem=strict + ReadWritePaths: a private mount namespace in
//     which / is read-only and only the probe directory is bind-mounted
//     writable, as systemd does;
//   - SystemCallFilter: not enforced (no seccomp loader here); instead the
//     daemon runs under strace and every system call it and smartctl make
//     must be in the filter's allow list as systemd-analyze expands it.
//
// Not reproduced: DeviceAllow (the eBPF device filter), the other Protect*
// namespaces, MemoryMax.
func TestSystemdClosestRun(t *testing.T) {
	testkit.RequireRoot(t) // the mount namespace, setpriv
	tools := map[string]string{}
	for _, tool := range []string{"unshare", "setpriv", "mount", "systemd-analyze", "strace", "smartctl"} {
		p, err := exec.LookPath(tool)
		if err != nil {
			t.Skipf("%s not installed", tool)
		}
		tools[tool] = p
	}
	bin := testkit.Binary(t)
	data, err := os.ReadFile(unitFile)
	require.NoError(t, err)
	u := parseUnit(t, data)

	// Inside: the unit's probe directory, writable. Outside: a directory the
	// unit does not list, which ProtectSystem=strict must make read-only.
	// Both on the root filesystem, which the namespace makes read-only.
	base, err := os.MkdirTemp("/var/tmp", "diskcanary-systemd-test")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(base) })
	var rootSt, baseSt syscall.Stat_t
	require.NoError(t, syscall.Stat("/", &rootSt))
	require.NoError(t, syscall.Stat(base, &baseSt))
	if rootSt.Dev != baseSt.Dev {
		t.Skip("/var/tmp is not on the root filesystem")
	}
	inside, outside := filepath.Join(base, "inside"), filepath.Join(base, "outside")
	for _, d := range []string{inside, outside} {
		require.NoError(t, os.Mkdir(d, 0o700))
		require.NoError(t, os.Chown(d, 65534, 65534))
	}
	require.NoError(t, os.Chmod(base, 0o755))
	cfg := filepath.Join(base, "diskcanary.yml")
	require.NoError(t, os.WriteFile(cfg, []byte(fmt.Sprintf(`probes:
  targets:
    - {name: inside, kind: wal, dir: %s, interval: 300ms, ops: 5, min_free: 1}
    - {name: outside, kind: wal, dir: %s, interval: 300ms, ops: 5, min_free: 1}
`, inside, outside)), 0o644))

	// The unit's ExecStart, with the probe set from the small config above
	// (--probe.dir would run the 1 GiB read working set) on a free port.
	args := []string{}
	for _, a := range strings.Fields(u.one(t, "ExecStart"))[1:] {
		if !strings.HasPrefix(a, "--probe.dir=") {
			args = append(args, a)
		}
	}
	addr := testkit.FreeAddr(t)
	args = append(args, "--config.file="+cfg, "--web.listen-address="+addr)

	caps := []string{}
	for _, c := range strings.Fields(u.one(t, "AmbientCapabilities")) {
		caps = append(caps, "+"+strings.ToLower(strings.TrimPrefix(c, "CAP_")))
	}
	capList := "-all," + strings.Join(caps, ",")
	require.Equal(t, "yes", u.one(t, "NoNewPrivileges"))
	// strace writes its log in a writable directory of its own (not part of the unit).
	traceDir := filepath.Join(base, "trace")
	require.NoError(t, os.Mkdir(traceDir, 0o700))
	require.NoError(t, os.Chown(traceDir, 65534, 65534))
	trace := filepath.Join(traceDir, "strace.out")
	script := fmt.Sprintf(`set -e
mount --bind %[1]s %[1]s
mount --bind %[7]s %[7]s
mount -o remount,bind,ro /
exec %[2]s --reuid=65534 --regid=65534 --groups=6 --inh-caps=%[3]s --ambient-caps=%[3]s --bounding-set=%[3]s --no-new-privs -- %[4]s -f -qq -o %[5]s %[6]s "$@"`,
		inside, tools["setpriv"], capList, tools["strace"], trace, bin, traceDir)
	cmd := exec.Command(tools["unshare"], append([]string{"--mount", "--propagation", "private", "--", "/bin/sh", "-c", script, "sh"}, args...)...)
	logs, err := os.Create(filepath.Join(base, "daemon.log"))
	require.NoError(t, err)
	cmd.Stdout, cmd.Stderr = logs, logs
	// Its own process group: strace detaches its tracee when it is killed,
	// so killing the first process alone would leave the daemon running.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	require.NoError(t, cmd.Start())
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	logText := func() string { b, _ := os.ReadFile(logs.Name()); return string(b) }
	defer func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-exited
		if t.Failed() {
			t.Logf("daemon output:\n%s", logText())
		}
	}()

	metrics := func() string {
		resp, err := http.Get("http://" + addr + "/metrics")
		if err != nil {
			return ""
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return string(b)
	}
	insideOK := regexp.MustCompile(`(?m)^diskcanary_probe_success\{probe="inside"\} 1$`)
	outsideRO := regexp.MustCompile(`(?m)^diskcanary_probe_failures_total\{probe="outside",reason="read_only"\} [1-9]`)
	var body string
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		select {
		case <-exited:
			t.Fatalf("daemon exited:\n%s", logText())
		default:
		}
		if body = metrics(); insideOK.MatchString(body) && outsideRO.MatchString(body) {
			break
		}
	}
	require.Regexp(t, insideOK, body, "a probe in ReadWritePaths works")
	require.Regexp(t, outsideRO, body, "a probe outside ReadWritePaths gets EROFS")
	require.Contains(t, body, "diskcanary_build_info{")
	require.Contains(t, body, "diskcanary_blocklatency_available 1\n", "the unit's grant is enough for the eBPF collector")
	require.Contains(t, body, "diskcanary_kernel_log_available 1\n", "the unit's grant is enough for the kernel log")

	// The daemon's credentials: strace's child, named diskcanary.
	pid := childNamed(t, cmd.Process.Pid, "diskcanary")
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	require.NoError(t, err)
	field := func(name string) string {
		m := regexp.MustCompile(`(?m)^` + name + `:\s*(.*)$`).FindSubmatch(status)
		require.NotNil(t, m, name)
		return strings.TrimSpace(string(m[1]))
	}
	const want = "000000c400220000" // bits 17 (CAP_SYS_RAWIO), 21 (CAP_SYS_ADMIN), 34 (CAP_SYSLOG), 38 (CAP_PERFMON), 39 (CAP_BPF)
	for _, f := range []string{"CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"} {
		require.Equal(t, want, field(f), f)
	}
	require.Equal(t, "1", field("NoNewPrivs"))
	require.Equal(t, []string{"65534", "65534", "65534", "65534"}, strings.Fields(field("Uid")))
	require.Equal(t, "6", field("Groups"))
	t.Logf("daemon pid %d: Uid %s, Groups %s, CapEff %s, CapBnd %s, CapAmb %s, NoNewPrivs %s",
		pid, strings.Fields(field("Uid"))[0], field("Groups"), field("CapEff"), field("CapBnd"), field("CapAmb"), field("NoNewPrivs"))

	// Let SMART's scan run (smartctl --scan-open, under the same credentials),
	// then stop as systemd would and check the WAL files were removed.
	time.Sleep(2 * time.Second)
	require.NoError(t, syscall.Kill(pid, syscall.SIGTERM))
	select {
	case <-exited:
	case <-time.After(15 * time.Second):
		t.Fatal("no exit within 15 s of SIGTERM (TimeoutStopSec is 30 s)")
	}
	entries, err := os.ReadDir(inside)
	require.NoError(t, err)
	for _, e := range entries {
		require.False(t, strings.HasSuffix(e.Name(), "-wal"), "WAL file %s left behind", e.Name())
	}

	// Every system call made (by the daemon and smartctl) passes the unit's
	// SystemCallFilter=.
	allowed := syscallFilter(t, tools["systemd-analyze"], u["Service"]["SystemCallFilter"])
	require.Contains(t, allowed, "fdatasync")
	require.NotContains(t, allowed, "setrlimit", "~@resources is applied")
	tr, err := os.ReadFile(trace)
	require.NoError(t, err)
	used := map[string]int{}
	call := regexp.MustCompile(`^\d+\s+(?:<\.\.\. )?([a-z0-9_]+)[( ]`)
	for _, line := range strings.Split(string(tr), "\n") {
		if m := call.FindStringSubmatch(line); m != nil && m[1] != "exit" {
			used[m[1]]++
		}
	}
	require.Contains(t, used, "fdatasync", "the trace saw the probes")
	require.Regexp(t, `execve\("[^"]*/smartctl", \[[^]]*"--scan-open"`, string(tr), "the trace saw smartctl run with the unit's credentials")
	var denied []string
	for s := range used {
		if !allowed[s] {
			denied = append(denied, s)
		}
	}
	slices.Sort(denied)
	names := make([]string, 0, len(used))
	for s := range used {
		names = append(names, s)
	}
	slices.Sort(names)
	t.Logf("%d distinct system calls traced: %s", len(names), strings.Join(names, " "))
	require.Empty(t, denied, "system calls SystemCallFilter= would refuse with EPERM")
}

// childNamed finds the child of parent whose comm is name.
func childNamed(t *testing.T, parent int, name string) int {
	t.Helper()
	dirs, err := filepath.Glob("/proc/[0-9]*/stat")
	require.NoError(t, err)
	for _, d := range dirs {
		b, err := os.ReadFile(d)
		if err != nil {
			continue
		}
		s := string(b)
		open, close := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
		if open < 0 || close < 0 || s[open+1:close] != name {
			continue
		}
		var pid, ppid int
		var state string
		if _, err := fmt.Sscanf(s[:open], "%d", &pid); err != nil {
			continue
		}
		if _, err := fmt.Sscanf(s[close+2:], "%s %d", &state, &ppid); err == nil && ppid == parent {
			return pid
		}
	}
	t.Fatalf("no child %q of %d", name, parent)
	return 0
}
