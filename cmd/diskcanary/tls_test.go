package main

import (
	"bufio"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/diskcanary/diskcanary/internal/testkit"
)

// startDaemon runs `diskcanary serve args...` in its own process (so it
// stops with SIGTERM like under systemd or the kubelet) on a free localhost
// port and returns its address once it accepts connections.
func startDaemon(t *testing.T, args ...string) string {
	t.Helper()
	addr := testkit.FreeAddr(t)
	p := testkit.StartCmd(t, diskcanaryCmd(t, nil, append([]string{"serve", "--web.listen-address", addr}, args...)...))
	p.WaitListening(t, addr, 20*time.Second)
	return addr
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
	webConfig, pool := tlsAuthWebConfig(t)

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
