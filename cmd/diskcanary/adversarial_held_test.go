package main

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/diskcanary/diskcanary/internal/testkit"
	"github.com/diskcanary/diskcanary/internal/testkit/testfs"
)

// Attacks that held before the adversarial review, kept as tests so they
// keep holding (docs/adversarial.md).

// serveYAML runs `diskcanary serve` with cfg and waits for it to listen.
func serveYAML(t *testing.T, cfg string, extra ...string) (*testkit.Process, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "diskcanary.yml")
	require.NoError(t, os.WriteFile(path, []byte(cfg), 0o600))
	addr := testkit.FreeAddr(t)
	args := append([]string{"serve", "--config.file", path, "--web.listen-address", addr}, extra...)
	p := testkit.StartCmd(t, diskcanaryCmd(t, nil, args...))
	p.WaitListening(t, addr, 20*time.Second)
	return p, addr
}

// A client that sends its request headers one byte a second is cut off at
// the header timeout instead of holding a connection for good.
func TestAdversarialSlowlorisDropped(t *testing.T) {
	_, addr := serveYAML(t, "probes: {enabled: false}\nsmart: {enabled: false}\n")
	c, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	defer c.Close()
	start := time.Now()
	_, err = c.Write([]byte("GET /metrics HTTP/1.1\r\nHost: x\r\n"))
	require.NoError(t, err)
	closed := false
	for time.Since(start) < 20*time.Second {
		time.Sleep(time.Second)
		if _, err := c.Write([]byte("X")); err != nil {
			closed = true
			break
		}
		_ = c.SetReadDeadline(time.Now().Add(10 * time.Millisecond))
		if _, err := c.Read(make([]byte, 1)); err != nil && !os.IsTimeout(err) {
			closed = true
			break
		}
	}
	took := time.Since(start)
	t.Logf("closed after %v", took.Round(100*time.Millisecond))
	require.True(t, closed, "a slow header still open after 20s")
	require.Less(t, took, 16*time.Second, "cut off at the 10 s header timeout")
}

// No debug handlers (pprof, expvar) are exposed.
func TestAdversarialNoDebugEndpoints(t *testing.T) {
	_, addr := serveYAML(t, "probes: {enabled: false}\nsmart: {enabled: false}\n")
	for _, path := range []string{"/debug/pprof/", "/debug/pprof/heap", "/debug/vars"} {
		resp, err := http.Get("http://" + addr + path)
		require.NoError(t, err)
		resp.Body.Close()
		require.Equal(t, http.StatusNotFound, resp.StatusCode, path)
	}
}

// A "billion laughs" config (nine levels of nine aliases) is refused fast
// with bounded memory, by --config.check and serve alike.
func TestAdversarialYAMLBomb(t *testing.T) {
	var b strings.Builder
	b.WriteString(`a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]` + "\n")
	prev := "a"
	for _, name := range []string{"b", "c", "d", "e", "f", "g", "h", "i"} {
		fmt.Fprintf(&b, "%s: &%s [*%s,*%s,*%s,*%s,*%s,*%s,*%s,*%s,*%s]\n", name, name, prev, prev, prev, prev, prev, prev, prev, prev, prev)
		prev = name
	}
	b.WriteString("probes:\n  targets: *i\n")
	path := filepath.Join(t.TempDir(), "bomb.yml")
	require.NoError(t, os.WriteFile(path, []byte(b.String()), 0o600))
	for _, args := range [][]string{{"serve", "--config.check", "--config.file", path}, {"serve", "--config.file", path, "--web.listen-address", testkit.FreeAddr(t)}} {
		cmd := diskcanaryCmd(t, nil, args...)
		start := time.Now()
		out, err := cmd.CombinedOutput()
		took := time.Since(start)
		require.Error(t, err, "%v accepted a YAML bomb: %s", args, out)
		require.Less(t, took, 5*time.Second, "%v", args)
		maxRSS := cmd.ProcessState.SysUsage().(*syscall.Rusage).Maxrss // KiB
		t.Logf("%v: %v, max RSS %d KiB: %s", args[:2], took.Round(time.Millisecond), maxRSS, strings.TrimSpace(string(out)))
		require.Less(t, maxRSS, int64(200<<10), "max RSS")
	}
}

// Device names are label values: a hostile one (quotes, backslashes,
// braces) is escaped, so /metrics stays valid exposition text and the
// name comes back unchanged.
func TestAdversarialHostileDeviceNameEscaped(t *testing.T) {
	procfs, sysfs := t.TempDir(), t.TempDir()
	evil := `evil"dev\x{a="b"}`
	stats := fmt.Sprintf("   8       0 %s 1 0 8 1 2 0 16 2 0 3 3 0 0 0 0 0 0\n", evil)
	require.NoError(t, os.WriteFile(filepath.Join(procfs, "diskstats"), []byte(stats), 0o644))
	_, addr := serveYAML(t, "probes: {enabled: false}\nsmart: {enabled: false}\n",
		"--path.procfs", procfs, "--path.sysfs", sysfs)
	resp, err := http.Get("http://" + addr + "/metrics")
	require.NoError(t, err)
	defer resp.Body.Close()
	parser := expfmt.NewTextParser(model.LegacyValidation)
	mfs, err := parser.TextToMetricFamilies(resp.Body)
	require.NoError(t, err, "the exposition text parses")
	mf, ok := mfs["diskcanary_disk_reads_completed_total"]
	require.True(t, ok, "the device is exported")
	require.Len(t, mf.GetMetric(), 1)
	var got string
	for _, l := range mf.GetMetric()[0].GetLabel() {
		if l.GetName() == "device" {
			got = l.GetValue()
		}
	}
	require.Equal(t, evil, got)
}

// Ten SIGKILLs at arbitrary moments: each restart reuses the read working
// set (never rewritten: same inode), replaces a WAL segment a kill left
// behind, and probes successfully.
func TestAdversarialSIGKILLLoopKeepsWorkingSet(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "canary")
	cfg := fmt.Sprintf(`probes:
  targets:
    - {name: wal, kind: wal, dir: %[1]s, interval: 30ms, ops: 10, gap: 1ms, min_free: 1B, segment_size: 1MiB}
    - {name: rr, kind: randread, dir: %[1]s, interval: 30ms, ops: 20, working_set: 4MiB, min_free: 1B}
smart: {enabled: false}
`, dir)
	readset := filepath.Join(dir, ".diskcanary-rr-readset")
	var inode uint64
	for i := 0; i < 10; i++ {
		p, addr := serveYAML(t, cfg)
		require.Eventually(t, func() bool {
			_, body, err := get("http://" + addr + "/metrics")
			return err == nil && strings.Contains(body, `diskcanary_probe_success{probe="rr"} 1`) &&
				strings.Contains(body, `diskcanary_probe_success{probe="wal"} 1`)
		}, 20*time.Second, 20*time.Millisecond, "round %d: both probes succeed", i)
		var st unix.Stat_t
		require.NoError(t, unix.Stat(readset, &st))
		if i == 0 {
			inode = st.Ino
		}
		require.Equal(t, inode, st.Ino, "round %d: the working set was rewritten", i)
		time.Sleep(time.Duration(i*7%30) * time.Millisecond) // kill at varying points of a cycle
		require.NoError(t, p.Cmd.Process.Kill())
		<-p.Done
	}
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	require.Subset(t, []string{".diskcanary-rr-readset", ".diskcanary-wal-wal"}, names, "nothing but the probes' own files")
}

// SIGTERM while a probe's fdatasync hangs: the daemon says the process and
// its probe directory's lock outlive the hung I/O, and they do; once the
// disk answers it exits 0 and the lock is free.
func TestAdversarialShutdownWhileHung(t *testing.T) {
	testkit.RequireRoot(t)
	m := testfs.Start(t, "")
	dir := filepath.Join(m.Dir, "canary")
	p, addr := serveYAML(t, fmt.Sprintf(`probes:
  targets:
    - {name: wal, kind: wal, dir: %s, interval: 30ms, ops: 5, gap: 1ms, min_free: 1B, segment_size: 1MiB, stall_threshold: 200ms}
smart: {enabled: false}
`, dir))
	require.Eventually(t, func() bool {
		_, body, err := get("http://" + addr + "/metrics")
		return err == nil && strings.Contains(body, `diskcanary_probe_success{probe="wal"} 1`)
	}, 20*time.Second, 20*time.Millisecond)
	m.Do(t, "hang")
	require.Eventually(t, func() bool {
		_, body, err := get("http://" + addr + "/metrics")
		return err == nil && strings.Contains(body, `diskcanary_probe_stalled{probe="wal"} 1`)
	}, 5*time.Second, 20*time.Millisecond)
	// SIGTERM goes to the main thread, which must not be the one waiting
	// in the hung fdatasync (it would hold the signal until the disk
	// answers): see init in main.go.
	pid := p.Cmd.Process.Pid
	call, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/syscall", pid, pid))
	require.NoError(t, err)
	require.NotEqual(t, strconv.Itoa(unix.SYS_FDATASYNC), strings.Fields(string(call))[0], "the main thread is in the hung fdatasync")
	require.NoError(t, p.Cmd.Process.Signal(syscall.SIGTERM))
	require.Eventually(t, func() bool {
		b, _ := os.ReadFile(p.Log)
		return strings.Contains(string(b), "releases the probe directory's lock, only when the kernel returns it")
	}, 30*time.Second, 50*time.Millisecond, "the hung I/O is reported at shutdown (after the HTTP server's and the probes' 5 s graces; slower under -race on a loaded machine)")
	time.Sleep(500 * time.Millisecond)
	select {
	case <-p.Done:
		t.Fatal("exited while its I/O was still in the kernel")
	default:
	}
	locked := func() bool {
		fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY, 0)
		require.NoError(t, err)
		defer unix.Close(fd)
		err = unix.Flock(fd, unix.LOCK_EX|unix.LOCK_NB)
		return err == unix.EWOULDBLOCK
	}
	require.True(t, locked(), "the probe directory stays locked while the process lingers")
	m.Do(t, "release")
	select {
	case <-p.Done:
	case <-time.After(10 * time.Second):
		t.Fatal("still running 10 s after the disk answered")
	}
	require.Equal(t, 0, p.Cmd.ProcessState.ExitCode())
	require.False(t, locked(), "the lock is free once the process is gone")
	b, _ := os.ReadFile(p.Log)
	sc := bufio.NewScanner(strings.NewReader(string(b)))
	for sc.Scan() {
		if strings.Contains(sc.Text(), "level=ERROR") {
			t.Log(sc.Text())
		}
	}
}
