package rulegen

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"syscall"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// buildDiskcanary compiles ./cmd/diskcanary into the test's temp dir.
func buildDiskcanary(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "diskcanary")
	goBin := filepath.Join(runtime.GOROOT(), "bin", "go")
	if _, err := os.Stat(goBin); err != nil {
		goBin = "go"
	}
	cmd := exec.Command(goBin, "build", "-o", bin, "./cmd/diskcanary")
	cmd.Dir = repoRoot(t)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/diskcanary: %v\n%s", err, out)
	}
	return bin
}

// freePort asks the kernel for a free TCP port on 127.0.0.1.
func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// daemon is a process started by a test.
type daemon struct {
	cmd  *exec.Cmd
	addr string
	url  string
	log  *bytes.Buffer
}

// startProcess starts a long-running command and stops it (SIGTERM, then
// SIGKILL) in Cleanup. It is killed by its own pid only.
func startProcess(t *testing.T, name string, args ...string) *daemon {
	t.Helper()
	d := &daemon{log: &bytes.Buffer{}}
	d.cmd = exec.Command(name, args...)
	d.cmd.Stdout, d.cmd.Stderr = d.log, d.log
	if err := d.cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	done := make(chan struct{})
	go func() { _ = d.cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		_ = d.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = d.cmd.Process.Kill()
			<-done
		}
		if t.Failed() {
			t.Logf("%s output:\n%s", filepath.Base(name), tail(d.log.String(), 3000))
		}
	})
	return d
}

func tail(s string, n int) string {
	if len(s) > n {
		return "..." + s[len(s)-n:]
	}
	return s
}

// startServe runs `diskcanary serve` on a free port and waits for /metrics.
func startServe(t *testing.T, bin string, args ...string) *daemon {
	t.Helper()
	addr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	d := startProcess(t, bin, append([]string{"serve", "--web.listen-address", addr, "--log.level", "warn"}, args...)...)
	d.addr, d.url = addr, "http://"+addr+"/metrics"
	waitHTTP(t, d.url, 30*time.Second)
	return d
}

func waitHTTP(t *testing.T, url string, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		resp, err := http.Get(url)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s not answering after %v: %v", url, timeout, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// scrape reads a /metrics page into metric families.
func scrape(t *testing.T, url string) map[string]*dto.MetricFamily {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	req.Header.Set("Accept", "text/plain; version=0.0.4")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("scrape %s: %v", url, err)
	}
	defer resp.Body.Close()
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("parse %s: %v", url, err)
	}
	return fams
}
