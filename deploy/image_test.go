package deploy

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/diskcanary/diskcanary/internal/testkit"
)

// imageVersion is the tag the end-to-end test builds, so it never replaces
// an image someone built for use.
const imageVersion = "0.0.0-e2e"

// smartFixtures are ../shared/fixtures/smartctl, real smartctl --json output.
var smartFixtures = filepath.Join(repoRoot, "../shared/fixtures/smartctl")

// podman runs podman with args. Under a hybrid cgroup layout (cgroup v1
// controllers, and a cgroup2 "unified" mount with controllers of its own)
// crun refuses every container ("cgroups in hybrid mode not supported"):
// there podman runs in a private mount namespace without the unified
// mount, which changes nothing outside it. A container's whole life (run
// --rm in the foreground) is then one such podman process.
func podman(args ...string) *exec.Cmd {
	if !hybridCgroups() {
		return exec.Command("podman", args...)
	}
	return exec.Command("unshare", append([]string{"--mount", "--propagation", "private", "sh", "-c",
		`umount /sys/fs/cgroup/unified && exec podman "$@"`, "podman"}, args...)...)
}

func hybridCgroups() bool {
	var fs unix.Statfs_t
	if unix.Statfs("/sys/fs/cgroup", &fs) != nil || fs.Type != unix.TMPFS_MAGIC {
		return false
	}
	b, err := os.ReadFile("/sys/fs/cgroup/unified/cgroup.controllers")
	return err == nil && len(bytes.TrimSpace(b)) > 0
}

// runArgs start every test container: rootful podman raises a container's
// open-files and processes limits to its own maxima, which a runner
// without CAP_SYS_RESOURCE refuses (crun: setrlimit: operation not
// permitted); these fixed limits are under any runner's.
var runArgs = []string{"run", "--rm", "--ulimit", "nofile=1024:1024", "--ulimit", "nproc=1024:1024"}

// TestImageEndToEnd builds the image people pull with deploy/image/build.sh
// (Debian's packages, no registry), runs it with podman as docs/deploy.md
// shows, scrapes its /metrics through a port published on 127.0.0.1, and
// runs `smart` in it: on a saved smartctl report, and live, where the
// container sees no disk.
func TestImageEndToEnd(t *testing.T) {
	testkit.E2E(t)
	if os.Geteuid() != 0 {
		t.Skip("skipping: needs root (rootful podman: published ports, the host's container storage); CI runs as root")
	}
	for _, tool := range []string{"podman", "buildah", "smartctl"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("skipping: needs %s on PATH (apt-get install podman buildah smartmontools)", tool)
		}
	}
	start := time.Now()
	build := exec.Command("./deploy/image/build.sh", imageVersion)
	build.Dir = repoRoot
	out, err := build.CombinedOutput()
	require.NoError(t, err, "%s", out)
	image := "localhost/diskcanary:" + imageVersion
	t.Cleanup(func() { _ = podman("rmi", "--force", image).Run() })
	t.Logf("built %s in %s", image, time.Since(start).Round(time.Second))

	// The image's contract: what the DaemonSet and the Dockerfile promise.
	out, err = podman("image", "inspect", image).Output()
	require.NoError(t, err)
	var inspect []struct {
		Size   int64
		Config struct {
			User         string
			Entrypoint   []string
			Cmd          []string
			ExposedPorts map[string]struct{}
			Labels       map[string]string
		}
	}
	require.NoError(t, json.Unmarshal(out, &inspect))
	require.Len(t, inspect, 1)
	cfg := inspect[0].Config
	require.Equal(t, "65532:65532", cfg.User)
	require.Equal(t, []string{imageBinary}, cfg.Entrypoint)
	require.Equal(t, []string{"serve"}, cfg.Cmd)
	require.Equal(t, map[string]struct{}{metricsPort + "/tcp": {}}, cfg.ExposedPorts)
	require.Equal(t, imageVersion, cfg.Labels["org.opencontainers.image.version"])
	require.Contains(t, cfg.Labels["io.diskcanary.debian-packages"], "smartmontools=")
	// FROM scratch: the binary, smartctl and its libraries, not a distribution.
	require.Less(t, inspect[0].Size, int64(40<<20), "image size %d bytes", inspect[0].Size)
	t.Logf("image size: %.1f MB", float64(inspect[0].Size)/1e6)

	t.Run("serve", func(t *testing.T) {
		addr := testkit.FreeAddr(t)
		p := testkit.StartCmd(t, podman(append(runArgs, "--publish", addr+":"+metricsPort, image)...))
		// The first WAL cycle done: the default probe directory, under the
		// image's /var/tmp, is there and writable by the image's user.
		body := scrapeUntil(t, p, "http://"+addr+"/metrics", `diskcanary_probe_last_run_timestamp_seconds{probe="wal"}`, 90*time.Second)
		lines := map[string]bool{}
		for _, l := range strings.Split(body, "\n") {
			lines[l] = true
		}
		for _, want := range []string{
			`diskcanary_collector_success{collector="diskstats"} 1`,
			`diskcanary_collector_success{collector="probes"} 1`,
			`diskcanary_collector_success{collector="smart"} 1`,
			`diskcanary_smartctl_available 1`,
			`diskcanary_probe_failures_total{probe="wal",reason="missing"} 0`,
			`diskcanary_probe_failures_total{probe="wal",reason="permission"} 0`,
		} {
			require.True(t, lines[want], "no %q in /metrics:\n%s", want, body)
		}
		info := ""
		for l := range lines {
			if strings.HasPrefix(l, "diskcanary_build_info{") {
				info = l
			}
		}
		require.Contains(t, info, `version="`+imageVersion+`"`)
		require.True(t, strings.HasSuffix(info, "} 1"), info)
	})

	t.Run("smart from a saved report", func(t *testing.T) {
		for file, want := range map[string]struct {
			exit   int
			stdout string
			stderr string
		}{
			"nvme-critical-warning-smart-failed-rc8-smartctl-exporter.json": {1,
				"FAILED", "diskcanary: smart: 1 failing, 0 unknown, 0 degraded or warned, of 1 disk\n"},
			"nvme-healthy-intel660p-v7.1-scrutiny.json": {0, "INTEL SSDPEKNW010T8  PASSED", ""},
		} {
			fixture, err := filepath.Abs(filepath.Join(smartFixtures, file))
			require.NoError(t, err)
			require.FileExists(t, fixture)
			stdout, stderr, code := runImage(t, append(runArgs, "--volume", fixture+":/fixture.json:ro", image,
				"smart", "--from-json", "/fixture.json"))
			require.Equal(t, want.exit, code, "%s: stdout %s\nstderr %s", file, stdout, stderr)
			require.Contains(t, stdout, want.stdout, file)
			require.Contains(t, stdout, "/fixture.json", file)
			require.Equal(t, want.stderr, stderr, file)
		}
	})

	t.Run("smart without disks", func(t *testing.T) {
		// Unprivileged, the container has no block device: smartctl runs
		// and finds none, exit 2 (could not measure), as on a host without
		// root.
		stdout, stderr, code := runImage(t, append(runArgs, image, "smart"))
		require.Equal(t, 2, code, "stdout %s\nstderr %s", stdout, stderr)
		require.Equal(t, "", stdout)
		require.Equal(t, "diskcanary: smart: smartctl --scan-open found no device (diskcanary lacks CAP_SYS_RAWIO or CAP_SYS_ADMIN, without which smartctl cannot open a disk: run it as root); name a disk to read it (diskcanary smart /dev/sda)\n", stderr)
	})
	t.Run("plot", func(t *testing.T) {
		// diskcanary-plot ships beside the daemon: a real sweep drawn to
		// a directory the image's user may write.
		out := t.TempDir()
		require.NoError(t, os.Chmod(out, 0o777))
		sweep := filepath.Join(repoRoot, "cmd/diskcanary-plot/testdata/sweep-read500.json")
		stdout, stderr, code := runImage(t, append(runArgs, "--volume", sweep+":/sweep.json:ro", "--volume", out+":/out",
			"--entrypoint", "/usr/bin/diskcanary-plot", image, "-o", "/out/curve.svg", "/sweep.json"))
		require.Equal(t, 0, code, "stdout %s\nstderr %s", stdout, stderr)
		svg, err := os.ReadFile(filepath.Join(out, "curve.svg"))
		require.NoError(t, err)
		require.Contains(t, string(svg), ">  knee: 500 IOPS<")
	})
	t.Logf("image end to end: %s", time.Since(start).Round(time.Second))
}

// runImage runs one container to its end: its stdout, stderr and exit status.
func runImage(t *testing.T, args []string) (stdout, stderr string, code int) {
	t.Helper()
	var o, e bytes.Buffer
	cmd := podman(args...)
	cmd.Stdout, cmd.Stderr = &o, &e
	err := cmd.Run()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatalf("podman %v: %v", args, err)
	}
	return o.String(), e.String(), cmd.ProcessState.ExitCode()
}

// scrapeUntil GETs url until the body holds want: podman's port is open
// before diskcanary listens behind it.
func scrapeUntil(t *testing.T, p *testkit.Process, url, want string, timeout time.Duration) string {
	t.Helper()
	client := &http.Client{Timeout: 5 * time.Second}
	body := ""
	for deadline := time.Now().Add(timeout); time.Now().Before(deadline); time.Sleep(500 * time.Millisecond) {
		select {
		case <-p.Done:
			log, _ := os.ReadFile(p.Log)
			t.Fatalf("the container exited before %s served %s:\n%s", url, want, log)
		default:
		}
		resp, err := client.Get(url)
		if err != nil {
			continue
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		body = string(b)
		if resp.StatusCode == http.StatusOK && strings.Contains(body, want) {
			return body
		}
	}
	t.Fatalf("%s: no %s within %s; last body:\n%s", url, want, timeout, body)
	return ""
}
