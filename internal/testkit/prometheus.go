package testkit

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"time"
)

// Prometheus is a real Prometheus server started by a test.
type Prometheus struct {
	// Addr is its 127.0.0.1:port; URL is http://Addr.
	Addr, URL string
	Process   *Process
}

// Sample is one series of an instant-vector query result. Value is the
// API's [timestamp, "value"] pair.
type Sample struct {
	Metric map[string]string `json:"metric"`
	Value  [2]any            `json:"value"`
}

// Alert is one alert of /api/v1/alerts.
type Alert struct {
	Labels      map[string]string `json:"labels"`
	Annotations map[string]string `json:"annotations"`
	State       string            `json:"state"`
	Value       string            `json:"value"`
}

// PrometheusBin returns the prometheus binary's path, or skips the test
// when there is none or the end-to-end tests are off (E2E). Call it before
// expensive setup to skip early.
func PrometheusBin(tb TB) string {
	tb.Helper()
	E2E(tb)
	if bin, err := exec.LookPath("prometheus"); err == nil {
		return bin
	}
	if _, err := os.Stat("/usr/bin/prometheus"); err == nil {
		return "/usr/bin/prometheus"
	}
	tb.Skip("skipping: needs the prometheus binary (/usr/bin/prometheus; apt-get install prometheus)")
	return ""
}

// StartPrometheus runs Prometheus with configYAML as its configuration
// file, a temporary TSDB and a free 127.0.0.1 port, waits until it is
// ready, and stops it at cleanup. extraArgs are appended to its flags.
// Paths in the configuration (rule_files) should be absolute.
func StartPrometheus(tb TB, configYAML string, extraArgs ...string) *Prometheus {
	tb.Helper()
	bin := PrometheusBin(tb)
	dir := tb.TempDir()
	cfg := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(cfg, []byte(configYAML), 0o644); err != nil {
		tb.Fatal(err)
	}
	addr := FreeAddr(tb)
	args := append([]string{"--config.file=" + cfg, "--storage.tsdb.path=" + filepath.Join(dir, "data"),
		"--web.listen-address=" + addr}, extraArgs...)
	p := &Prometheus{Addr: addr, URL: "http://" + addr, Process: StartProcess(tb, bin, args...)}
	p.waitReady(tb, 30*time.Second)
	return p
}

func (p *Prometheus) waitReady(tb TB, timeout time.Duration) {
	tb.Helper()
	deadline := time.Now().Add(timeout)
	for {
		resp, err := http.Get(p.URL + "/-/ready")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
			err = fmt.Errorf("status %s", resp.Status)
		}
		if time.Now().After(deadline) {
			tb.Fatalf("prometheus at %s not ready after %v: %v", p.Addr, timeout, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// Query runs an instant query that returns a vector, and fails the test on
// any error.
func (p *Prometheus) Query(tb TB, q string) []Sample {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := p.query(ctx, q)
	if err != nil {
		tb.Fatalf("query %s: %v", q, err)
	}
	return res
}

// WaitQuery polls an instant query every 500 ms until ok accepts its
// result, and fails the test if none does within timeout.
func (p *Prometheus) WaitQuery(tb TB, q string, timeout time.Duration, ok func([]Sample) bool) []Sample {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var last []Sample
	var lastErr error
	for {
		last, lastErr = p.query(ctx, q)
		if lastErr == nil && ok(last) {
			return last
		}
		select {
		case <-ctx.Done():
			tb.Fatalf("query did not return the expected series within %v:\n%s\nlast result: %v, error: %v", timeout, q, last, lastErr)
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// Alerts is the server's alerts, pending and firing.
func (p *Prometheus) Alerts(tb TB) []Alert {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var data struct {
		Alerts []Alert `json:"alerts"`
	}
	if err := p.get(ctx, "/api/v1/alerts", &data); err != nil {
		tb.Fatal(err)
	}
	return data.Alerts
}

func (p *Prometheus) query(ctx context.Context, q string) ([]Sample, error) {
	var data struct {
		ResultType string          `json:"resultType"`
		Result     json.RawMessage `json:"result"`
	}
	if err := p.get(ctx, "/api/v1/query?query="+url.QueryEscape(q), &data); err != nil {
		return nil, err
	}
	if data.ResultType != "vector" {
		return nil, fmt.Errorf("result type %s, want vector", data.ResultType)
	}
	var out []Sample
	if err := json.Unmarshal(data.Result, &out); err != nil {
		return nil, err
	}
	return out, nil
}

// get decodes the data of a successful API response into into.
func (p *Prometheus) get(ctx context.Context, path string, into any) error {
	u := p.URL + path
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("GET %s: %w", u, err)
	}
	defer resp.Body.Close()
	var env struct {
		Status string          `json:"status"`
		Data   json.RawMessage `json:"data"`
		Error  string          `json:"error"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&env); err != nil {
		return fmt.Errorf("GET %s: %w", u, err)
	}
	if env.Status != "success" {
		return fmt.Errorf("GET %s: prometheus: %s", u, env.Error)
	}
	return json.Unmarshal(env.Data, into)
}
