package main

import (
	"bufio"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/crypto/bcrypt"
)

// TestServeHelper is the daemon when this test binary is re-run by
// startDaemon: the real serve command in its own process, so it can be
// stopped with SIGTERM like under systemd or the kubelet.
func TestServeHelper(t *testing.T) {
	args := os.Getenv("DISKCANARY_SERVE_ARGS")
	if args == "" {
		t.Skip("helper for the end-to-end serve tests")
	}
	root := newRootCmd()
	var argv []string
	if err := json.Unmarshal([]byte(args), &argv); err != nil {
		t.Fatal(err)
	}
	root.SetArgs(argv)
	if err := root.Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "serve:", err)
		os.Exit(1)
	}
}

// startDaemon runs `diskcanary serve args...` on a free localhost port and
// returns its address once it accepts connections.
func startDaemon(t *testing.T, args ...string) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close())
	args = append([]string{"serve", "--web.listen-address", addr}, args...)
	cmd := exec.Command(os.Args[0], "-test.run=^TestServeHelper$", "-test.count=1")
	argv, err := json.Marshal(args)
	require.NoError(t, err)
	cmd.Env = append(os.Environ(), "DISKCANARY_SERVE_ARGS="+string(argv))
	logs, err := os.Create(filepath.Join(t.TempDir(), "daemon.log"))
	require.NoError(t, err)
	defer logs.Close()
	cmd.Stdout, cmd.Stderr = logs, logs
	logText := func() string { b, _ := os.ReadFile(logs.Name()); return string(b) }
	require.NoError(t, cmd.Start())
	exited := make(chan struct{})
	var waitErr error
	go func() { waitErr = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
		if t.Failed() {
			t.Logf("daemon output:\n%s", logText())
		}
	})
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case <-exited:
			t.Fatalf("daemon exited: %v\n%s", waitErr, logText())
		default:
		}
		if c, err := net.DialTimeout("tcp", addr, 100*time.Millisecond); err == nil {
			c.Close()
			return addr
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("daemon did not listen on %s\n%s", addr, logText())
	return ""
}

// selfSignedCert writes a P-256 certificate for 127.0.0.1 and its key.
func selfSignedCert(t *testing.T, dir string) (certFile, keyFile string, pool *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()),
		Subject:      pkix.Name{CommonName: "diskcanary test"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses:  []net.IP{net.ParseIP("127.0.0.1")},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	require.NoError(t, err)
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	require.NoError(t, err)
	certFile, keyFile = filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	require.NoError(t, os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600))
	require.NoError(t, os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}), 0o600))
	cert, err := x509.ParseCertificate(der)
	require.NoError(t, err)
	pool = x509.NewCertPool()
	pool.AddCert(cert)
	return certFile, keyFile, pool
}

// TestWebConfigTLSAndBasicAuth proves --web.config.file end to end: the
// daemon serves /metrics only over TLS and only to the right user and password.
func TestWebConfigTLSAndBasicAuth(t *testing.T) {
	dir := t.TempDir()
	certFile, keyFile, pool := selfSignedCert(t, dir)
	hash, err := bcrypt.GenerateFromPassword([]byte("s3cret-scrape"), bcrypt.DefaultCost)
	require.NoError(t, err)
	webConfig := filepath.Join(dir, "web.yml")
	require.NoError(t, os.WriteFile(webConfig, []byte(fmt.Sprintf(
		"tls_server_config:\n  cert_file: %s\n  key_file: %s\nbasic_auth_users:\n  prometheus: %s\n",
		certFile, keyFile, hash)), 0o600))

	out, _, err := runCLI(t, "serve", "--config.check", "--web.config.file", webConfig, "--no-collector.probes")
	require.NoError(t, err, out)

	addr := startDaemon(t, "--web.config.file", webConfig, "--no-collector.probes", "--no-collector.smart")
	url := "https://" + addr + "/metrics"
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}}
	scrape := func(user, pass string, auth bool) (*http.Response, string) {
		t.Helper()
		req, err := http.NewRequest(http.MethodGet, url, nil)
		require.NoError(t, err)
		if auth {
			req.SetBasicAuth(user, pass)
		}
		resp, err := client.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		return resp, string(body)
	}

	resp, body := scrape("prometheus", "s3cret-scrape", true)
	require.Equal(t, http.StatusOK, resp.StatusCode, body)
	require.Contains(t, body, "diskcanary_build_info{")
	require.Contains(t, body, `diskcanary_collector_success{collector="diskstats"}`)
	require.Equal(t, uint16(tls.VersionTLS13), resp.TLS.Version)

	for _, c := range []struct {
		name, user, pass string
		auth             bool
	}{
		{"no credentials", "", "", false},
		{"wrong password", "prometheus", "s3cret-scrapE", true},
		{"unknown user", "grafana", "s3cret-scrape", true},
		{"empty password", "prometheus", "", true},
	} {
		resp, body := scrape(c.user, c.pass, c.auth)
		require.Equal(t, http.StatusUnauthorized, resp.StatusCode, c.name)
		require.NotContains(t, body, "diskcanary_", c.name)
		require.Contains(t, resp.Header.Get("WWW-Authenticate"), "Basic", c.name)
	}

	// Plain HTTP to the TLS port: Go's TLS server answers 400 and serves nothing.
	plain := &http.Client{Timeout: 5 * time.Second}
	req, err := http.NewRequest(http.MethodGet, "http://"+addr+"/metrics", nil)
	require.NoError(t, err)
	req.SetBasicAuth("prometheus", "s3cret-scrape")
	if resp, err := plain.Do(req); err == nil {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		require.Equal(t, http.StatusBadRequest, resp.StatusCode)
		require.NotContains(t, string(b), "diskcanary_")
	}

	// A raw plaintext request, to see exactly what comes back on the wire.
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	require.NoError(t, err)
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
	_, err = fmt.Fprintf(conn, "GET /metrics HTTP/1.1\r\nHost: %s\r\n\r\n", addr)
	require.NoError(t, err)
	status, _ := bufio.NewReader(conn).ReadString('\n')
	require.True(t, strings.HasPrefix(status, "HTTP/1.0 400"), "plain HTTP got %q", status)

	// A client that does not trust the certificate cannot scrape.
	untrusting := &http.Client{Timeout: 5 * time.Second}
	_, err = untrusting.Get(url)
	require.ErrorContains(t, err, "certificate")

	// TLS below 1.2 is refused (exporter-toolkit's default min_version).
	old := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{
		RootCAs: pool, MinVersion: tls.VersionTLS10, MaxVersion: tls.VersionTLS11}}}
	_, err = old.Get(url)
	require.Error(t, err)
}

// A web config that cannot work is refused by --config.check, not at the
// first scrape.
func TestConfigCheckValidatesWebConfig(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "web.yml")
	require.NoError(t, os.WriteFile(bad, []byte("tls_server_config:\n  cert_file: "+dir+"/missing.crt\n  key_file: "+dir+"/missing.key\n"), 0o600))
	_, code, err := runCLI(t, "serve", "--config.check", "--web.config.file", bad, "--no-collector.probes")
	require.Equal(t, 1, code)
	require.ErrorContains(t, err, "--web.config.file")

	unknown := filepath.Join(dir, "typo.yml")
	require.NoError(t, os.WriteFile(unknown, []byte("basic_auth_user:\n  prometheus: x\n"), 0o600))
	_, _, err = runCLI(t, "serve", "--config.check", "--web.config.file", unknown, "--no-collector.probes")
	require.ErrorContains(t, err, "basic_auth_user")
}
