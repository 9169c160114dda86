package rulegen

import (
	"context"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/diskcanary/diskcanary/internal/testenv"
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

// daemon is a diskcanary serve started by a test.
type daemon struct {
	cmd  *exec.Cmd
	addr string
	url  string
}

// startServe runs `diskcanary serve` on a free port and waits for /metrics.
func startServe(t *testing.T, bin string, args ...string) *daemon {
	t.Helper()
	addr := testenv.FreeAddr(t)
	p := testenv.StartProcess(t, bin, append([]string{"serve", "--web.listen-address", addr, "--log.level", "warn"}, args...)...)
	d := &daemon{cmd: p.Cmd, addr: addr, url: "http://" + addr + "/metrics"}
	p.WaitListening(t, addr, 30*time.Second)
	return d
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
