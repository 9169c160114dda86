package rulegen

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/diskcanary/diskcanary/internal/testkit"
)

// TestEtcdVerdictEndToEnd: a real three-member etcd cluster, each member in
// its own network namespace on its own loop device, a `diskcanary serve`
// beside each, and a real Prometheus with the generated rules (windows
// shortened), puts at 40/s. No fault: every verdict healthy, a canary of
// member 0 on another disk fires DiskcanaryEtcdCanaryMisplaced and is not
// the verdict's canary. Slow disk (blkio throttle on one follower): that
// member "disk", no other; recovered, every etcd dashboard query has data.
// Network (80 ms each way through a delaying TCP
// proxy; no sch_netem here): every member "network", the delayed one by
// its peers' round trips to it, none "disk". "cpu" and "contention" are
// covered by the promtool cases only: on 2 vCPUs a CPU hog slows every
// process, and contention needs a saturated disk under a still-answering
// etcd.
func TestEtcdVerdictEndToEnd(t *testing.T) {
	testkit.E2E(t)
	testkit.RequireRoot(t)
	testkit.SkipUnderRace(t)
	testkit.PrometheusBin(t)
	etcdBin := requireEtcd(t)
	if _, err := exec.LookPath("ip"); err != nil {
		t.Skip("skipping: needs ip (apt-get install iproute2)")
	}
	start := time.Now()
	bin := testkit.Binary(t)
	const members = 3
	tag := strconv.Itoa(os.Getpid() % 10000)
	enableForwarding(t)

	type member struct {
		name, ns, ip, host, mnt, dev string
		peerURL, clientURL           string
		etcd                         *testkit.Process
		dc                           *daemon
	}
	ms := make([]*member, members)
	for i := range ms {
		m := &member{name: fmt.Sprintf("m%d", i), ns: fmt.Sprintf("dcetcd%s-%d", tag, i),
			ip: fmt.Sprintf("10.213.%d.2", i), host: fmt.Sprintf("10.213.%d.1", i)}
		m.mnt, m.dev = testkit.LoopFSIn(t, "/dev/shm", 256<<20, "ext4")
		addNamespace(t, m.ns, fmt.Sprintf("dce%s%dh", tag, i), fmt.Sprintf("dce%s%dn", tag, i), m.host, m.ip)
		m.peerURL = "http://" + m.ip + ":2380"
		m.clientURL = "http://" + m.ip + ":2379"
		ms[i] = m
	}
	// The delayed member's peers reach it through the proxy: its
	// advertised peer URL is the proxy's, on the host side of its veth.
	const delayed = 2
	proxy := startDelayProxy(t, ms[delayed].host+":2381", ms[delayed].ip+":2380")
	ms[delayed].peerURL = "http://" + ms[delayed].host + ":2381"

	var cluster []string
	for _, m := range ms {
		cluster = append(cluster, m.name+"="+m.peerURL)
	}
	for _, m := range ms {
		cmd := exec.Command("ip", "netns", "exec", m.ns, etcdBin, "--name", m.name,
			"--data-dir", filepath.Join(m.mnt, "etcd"),
			"--listen-peer-urls", "http://"+m.ip+":2380", "--initial-advertise-peer-urls", m.peerURL,
			"--listen-client-urls", m.clientURL, "--advertise-client-urls", m.clientURL,
			"--initial-cluster", strings.Join(cluster, ","), "--initial-cluster-state", "new",
			"--initial-cluster-token", "diskcanary-"+tag, "--logger", "zap", "--log-level", "warn")
		m.etcd = testkit.StartCmd(t, cmd)
	}
	for _, m := range ms {
		waitHTTP(t, m.clientURL+"/health", 60*time.Second)
	}
	// Each member's diskcanary: a WAL probe on the member's filesystem,
	// beside etcd's data directory; member 0 also has one on another disk.
	otherMnt, _ := testkit.LoopFSIn(t, "/dev/shm", 64<<20, "ext4")
	for i, m := range ms {
		probe := func(name, dir string) string {
			if err := os.MkdirAll(dir, 0o700); err != nil {
				t.Fatal(err)
			}
			return fmt.Sprintf("    - {name: %s, kind: wal, dir: %s, interval: 500ms, jitter: 0, ops: 20, gap: 10ms, min_free: 1MiB, daily_write_budget: 1000GB, stall_threshold: 30s, etcd_data_dir: %s}\n",
				name, dir, filepath.Join(m.mnt, "etcd"))
		}
		cfg := "probes:\n  targets:\n" + probe("wal", filepath.Join(m.mnt, "canary"))
		if i == 0 {
			cfg += probe("elsewhere", filepath.Join(otherMnt, "canary"))
		}
		cfg += "smart:\n  enabled: false\n"
		path := filepath.Join(t.TempDir(), "diskcanary.yml")
		writeFile(t, path, cfg)
		m.dc = startServe(t, bin, "--config.file", path)
	}

	// Windows shortened, the sample gates with them: etcd observes each
	// peer's round trip every 30 s per round tripper while it is healthy,
	// 2 samples in 30 s (20 in the default 5 m, over the default gate of 5).
	p := Defaults()
	everyGroupAtGlobal(&p)
	p.EtcdWindow = 30 * time.Second
	p.EtcdDegradedFor = 5 * time.Second
	p.MinIncidentSamples = 5
	p.EtcdSlowSamples = 1
	// Three etcd members, three daemons and a Prometheus on 2 vCPUs keep
	// the host's CPU pressure near the default 0.2 themselves (0.22 with a
	// member throttled, and "cpu" beside "disk"): "cpu" is the promtool
	// cases' to judge, so here it needs most of the time waiting.
	p.EtcdCPUPressure = 0.5
	rulesFile := writeRules(t, p)
	var scrape strings.Builder
	for _, job := range []string{"etcd", "diskcanary"} {
		fmt.Fprintf(&scrape, "  - job_name: %s\n    static_configs:\n", job)
		for _, m := range ms {
			addr := m.ip + ":2379"
			if job == "diskcanary" {
				addr = m.dc.addr
			}
			fmt.Fprintf(&scrape, "      - {targets: [%q], labels: {node: %s}}\n", addr, m.name)
		}
	}
	prom := testkit.StartPrometheus(t, fmt.Sprintf(`global:
  scrape_interval: 1s
  scrape_timeout: 900ms
  evaluation_interval: 1s
rule_files: [%q]
scrape_configs:
%s`, rulesFile, scrape.String()), "--log.level=warn")

	stopLoad := putLoad(t, ms[0].clientURL, 40)
	defer stopLoad()

	// verdicts: each member's causes, sorted and joined with "+" (one
	// series per cause that holds).
	verdicts := func() map[string]string {
		causes := map[string][]string{}
		for _, s := range prom.Query(t, ruleEtcdVerdict) {
			causes[s.Metric["node"]] = append(causes[s.Metric["node"]], s.Metric["cause"])
		}
		out := map[string]string{}
		for node, cs := range causes {
			sort.Strings(cs)
			out[node] = strings.Join(cs, "+")
		}
		return out
	}
	firing := func(alert string) []string {
		var out []string
		for _, a := range prom.Alerts(t) {
			if a.Labels["alertname"] == alert && a.State == "firing" {
				out = append(out, a.Labels["node"]+a.Labels["probe"]+"/"+a.Labels["cause"])
			}
		}
		sort.Strings(out)
		return out
	}
	// waitFor polls until ok(verdicts) holds, failing with the evidence.
	waitFor := func(what string, timeout time.Duration, ok func(map[string]string) bool) {
		t.Helper()
		deadline := time.Now().Add(timeout)
		for {
			v := verdicts()
			if ok(v) {
				t.Logf("%s after %v: verdicts %v", what, time.Since(start).Round(time.Second), v)
				return
			}
			if time.Now().After(deadline) {
				logEtcdState(t, prom)
				t.Fatalf("%s: not within %v; verdicts %v, DiskcanaryEtcdDegraded firing %v", what, timeout, v, firing("DiskcanaryEtcdDegraded"))
			}
			time.Sleep(time.Second)
		}
	}
	allHealthy := func(v map[string]string) bool {
		return v["m0"] == causeHealthy && v["m1"] == causeHealthy && v["m2"] == causeHealthy
	}

	// 1. No fault.
	waitFor("healthy cluster", 90*time.Second, allHealthy)
	// Past the alerts' for:, nothing fires. A start on a loaded machine can
	// bring real trouble for a while (slow applies, rightly "etcd"), so the
	// cluster gets 90 s to settle; a rule that fires on a healthy cluster
	// never does.
	for settle := time.Now().Add(90 * time.Second); ; {
		time.Sleep(8 * time.Second)
		v, f := verdicts(), firing("DiskcanaryEtcdDegraded")
		if allHealthy(v) && len(f) == 0 {
			t.Logf("settled after %v", time.Since(start).Round(time.Second))
			break
		}
		if time.Now().After(settle) {
			logEtcdState(t, prom)
			t.Errorf("DiskcanaryEtcdDegraded fires on a healthy cluster: %v (verdicts %v)", f, v)
			break
		}
		t.Logf("not settled: verdicts %v, DiskcanaryEtcdDegraded firing %v", v, f)
	}
	if f := firing("DiskcanaryEtcdWithoutCanary"); len(f) > 0 {
		t.Errorf("DiskcanaryEtcdWithoutCanary fires though every member has a canary: %v", f)
	}
	if f := firing("DiskcanaryEtcdCanaryMisplaced"); len(f) != 1 || f[0] != "m0elsewhere/" {
		t.Errorf("DiskcanaryEtcdCanaryMisplaced fires for %v; want only member 0's canary on the other disk [m0elsewhere/]", f)
	}
	// The verdict's canary is the probe on etcd's device, never the one
	// on member 0's other disk.
	var canaries []string
	for _, s := range prom.Query(t, ruleEtcdCanaryTarget) {
		canaries = append(canaries, s.Metric["node"]+"/"+s.Metric["probe"])
	}
	sort.Strings(canaries)
	if fmt.Sprint(canaries) != "[m0/wal m1/wal m2/wal]" {
		t.Errorf("the etcd verdict's canaries are %v; want [m0/wal m1/wal m2/wal]", canaries)
	}

	// 2. A slow disk under one follower: etcd and its canary throttled.
	// A follower other than the delayed member (a throttled leader
	// would slow every member's commits).
	var urls []string
	for _, m := range ms {
		urls = append(urls, m.clientURL)
	}
	lead := leaderURL(t, urls...)
	var sm *member
	for _, m := range ms {
		if sm == nil && m != ms[delayed] && m.clientURL != lead {
			sm = m
		}
	}
	cg := testkit.NewThrottle(t, sm.dev, 15)
	cg.Add(t, sm.etcd.Cmd.Process.Pid)
	cg.Add(t, sm.dc.cmd.Process.Pid)
	t.Logf("throttled %s (%s) to 15 write IOPS", sm.name, sm.dev)
	waitFor(sm.name+" slow disk", 90*time.Second, func(v map[string]string) bool { return v[sm.name] == causeDisk })
	deadline := time.Now().Add(30 * time.Second)
	for !contains(firing("DiskcanaryEtcdDegraded"), sm.name+"/"+causeDisk) {
		if time.Now().After(deadline) {
			t.Fatalf("DiskcanaryEtcdDegraded firing %v; want %s/disk", firing("DiskcanaryEtcdDegraded"), sm.name)
		}
		time.Sleep(time.Second)
	}
	for node, cause := range verdicts() {
		if node != sm.name && strings.Contains(cause, causeDisk) {
			t.Errorf("member %s reads disk, but only %s's disk is throttled", node, sm.name)
		}
	}
	cg.Release(t, sm.etcd.Cmd.Process.Pid)
	cg.Release(t, sm.dc.cmd.Process.Pid)
	waitFor("recovered from the slow disk", 120*time.Second, allHealthy)
	// The etcd dashboard on the healthy cluster, a minute or more in (etcd
	// observes a peer's round trip every 30 s): every query has data.
	checkEtcdDashboardLive(t, prom, p, nil)

	// 3. The network: 80 ms each way on the delayed member's peer traffic.
	proxy.delay.Store(int64(80 * time.Millisecond))
	t.Logf("delaying %s's peer traffic by 80 ms each way", ms[delayed].name)
	// Every member reads network: the other two see their round trip to
	// the delayed member slow, and the delayed member, whose own probes of
	// its peers go direct and stay fast, reads its peers' round trips to it.
	waitFor("slow peer link", 90*time.Second, func(v map[string]string) bool {
		n := 0
		for _, m := range ms {
			if v[m.name] == causeNetwork {
				n++
			}
		}
		return n == members
	})
	if v := verdicts(); v[ms[delayed].name] != causeNetwork {
		t.Errorf("the delayed member %s reads %q; want %q", ms[delayed].name, v[ms[delayed].name], causeNetwork)
	}
	for node, cause := range verdicts() {
		if strings.Contains(cause, causeDisk) {
			t.Errorf("member %s reads %s while only the network is slow", node, cause)
		}
	}
	proxy.delay.Store(0)
	t.Logf("etcd verdict end to end: %v", time.Since(start).Round(time.Second))
}

// checkEtcdDashboardLive runs every query of the etcd dashboard against
// prom with its variables at their defaults (every member): each returns
// data unless mayBeEmpty names its panel or "panel/refId".
func checkEtcdDashboardLive(t *testing.T, prom *testkit.Prometheus, p Params, mayBeEmpty map[string]string) {
	t.Helper()
	d := generatedDashboards(t, p)["diskcanary-etcd.json"]
	vals, _ := grafanaVars(t, prom, d, nil)
	var empty []string
	for _, panel := range d.Panels {
		results := panelResults(t, prom, d, vals, panel)
		for _, tg := range panel.Targets {
			if len(results[tg.RefID]) > 0 {
				continue
			}
			if mayBeEmpty[panel.Title] == "" && mayBeEmpty[panel.Title+"/"+tg.RefID] == "" {
				t.Errorf("etcd dashboard panel %q query %s returns no data:\n%s", panel.Title, tg.RefID, interpolate(t, d, tg.Expr, vals))
			}
			empty = append(empty, panel.Title+"/"+tg.RefID)
		}
	}
	t.Logf("etcd dashboard: variables %v; empty: %s", vals, strings.Join(empty, "; "))
}

// logEtcdState prints the verdict's inputs per node.
func logEtcdState(t *testing.T, prom *testkit.Prometheus) {
	for _, q := range []string{ruleEtcdWALFsyncP99, ruleEtcdCanaryP99, ruleEtcdCanaryStalled, ruleEtcdCommitP99, ruleEtcdPeerRTTP99, ruleEtcdPeerRTTBaseline, ruleEtcdPeerFailures, ruleEtcdSlowApplies, ruleEtcdLeaderChanges, ruleEtcdHeartbeatFailures, ruleEtcdCanaryBusy, ruleEtcdCPUPressure} {
		var lines []string
		for _, s := range prom.Query(t, q) {
			lines = append(lines, fmt.Sprintf("%s=%v", s.Metric["node"], s.Value[1]))
		}
		sort.Strings(lines)
		t.Logf("%s: %s", q, strings.Join(lines, " "))
	}
	for _, a := range prom.Alerts(t) {
		t.Logf("alert %s %s node=%s cause=%s probe=%s", a.Labels["alertname"], a.State, a.Labels["node"], a.Labels["cause"], a.Labels["probe"])
	}
}

// enableForwarding turns on IPv4 forwarding (the namespaces reach each
// other through the host) and restores it at cleanup.
func enableForwarding(t *testing.T) {
	const f = "/proc/sys/net/ipv4/ip_forward"
	old, err := os.ReadFile(f)
	if err != nil {
		t.Skipf("skipping: %v", err)
	}
	if err := os.WriteFile(f, []byte("1"), 0o644); err != nil {
		t.Skipf("skipping: cannot enable IP forwarding: %v", err)
	}
	t.Cleanup(func() { _ = os.WriteFile(f, old, 0o644) })
}

// addNamespace makes network namespace ns joined to the host by a veth
// pair (host side hostIP/24, namespace side nsIP/24, its default route via
// the host), and deletes it at cleanup (the veth pair goes with it).
func addNamespace(t *testing.T, ns, hostIf, nsIf, hostIP, nsIP string) {
	t.Helper()
	run := func(args ...string) {
		t.Helper()
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			t.Fatalf("ip %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	run("netns", "add", ns)
	t.Cleanup(func() { _ = exec.Command("ip", "netns", "del", ns).Run() })
	run("link", "add", hostIf, "type", "veth", "peer", "name", nsIf)
	t.Cleanup(func() { _ = exec.Command("ip", "link", "del", hostIf).Run() })
	run("link", "set", nsIf, "netns", ns)
	run("addr", "add", hostIP+"/24", "dev", hostIf)
	run("link", "set", hostIf, "up")
	run("-n", ns, "addr", "add", nsIP+"/24", "dev", nsIf)
	run("-n", ns, "link", "set", nsIf, "up")
	run("-n", ns, "link", "set", "lo", "up")
	run("-n", ns, "route", "add", "default", "via", hostIP)
}

// delayProxy forwards TCP connections to one address, delivering every
// chunk it reads `delay` later in each direction (a delay line: chunks do
// not wait for each other, so throughput is not capped).
type delayProxy struct {
	ln    net.Listener
	to    string
	delay atomic.Int64 // nanoseconds
}

func startDelayProxy(t *testing.T, listen, to string) *delayProxy {
	t.Helper()
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		t.Fatal(err)
	}
	p := &delayProxy{ln: ln, to: to}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var conns []net.Conn
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			u, err := net.Dial("tcp", to)
			if err != nil {
				c.Close()
				continue
			}
			mu.Lock()
			conns = append(conns, c, u)
			mu.Unlock()
			wg.Add(2)
			go func() { defer wg.Done(); p.pipe(u, c) }()
			go func() { defer wg.Done(); p.pipe(c, u) }()
		}
	}()
	return p
}

func (p *delayProxy) pipe(dst, src net.Conn) {
	type chunk struct {
		at time.Time
		b  []byte
	}
	ch := make(chan chunk, 4096)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for c := range ch {
			time.Sleep(time.Until(c.at))
			if _, err := dst.Write(c.b); err != nil {
				src.Close()
				for range ch {
				}
				return
			}
		}
		dst.Close()
	}()
	for {
		buf := make([]byte, 32<<10)
		n, err := src.Read(buf)
		if n > 0 {
			ch <- chunk{time.Now().Add(time.Duration(p.delay.Load())), buf[:n]}
		}
		if err != nil {
			close(ch)
			<-done
			return
		}
	}
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
			t.Fatalf("%s not healthy within %v: %v", url, timeout, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// putLoad sends `rate` puts a second (a 2 KiB value, about fio's 2300-byte
// WAL record) through etcd's v3 JSON gateway until the returned stop.
func putLoad(t *testing.T, clientURL string, rate int) (stop func()) {
	value := base64.StdEncoding.EncodeToString(bytes.Repeat([]byte("diskcanary"), 205))
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		tick := time.NewTicker(time.Second / time.Duration(rate))
		defer tick.Stop()
		client := &http.Client{Timeout: 5 * time.Second}
		for i := 0; ; i++ {
			select {
			case <-done:
				return
			case <-tick.C:
			}
			body := fmt.Sprintf(`{"key": %q, "value": %q}`, base64.StdEncoding.EncodeToString([]byte(fmt.Sprintf("k%d", i%100))), value)
			if resp, err := client.Post(clientURL+"/v3/kv/put", "application/json", strings.NewReader(body)); err == nil {
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
		}
	}()
	var once sync.Once
	stop = func() { once.Do(func() { close(done); wg.Wait() }) }
	t.Cleanup(stop)
	return stop
}

// memberStatus is the member's id and its view of the leader, from the v3
// gateway's maintenance status.
func memberStatus(t *testing.T, clientURL string) (id, leader string) {
	t.Helper()
	resp, err := http.Post(clientURL+"/v3/maintenance/status", "application/json", strings.NewReader("{}"))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var st struct {
		Header struct {
			MemberID string `json:"member_id"`
		} `json:"header"`
		Leader string `json:"leader"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		t.Fatal(err)
	}
	return st.Header.MemberID, st.Leader
}

// leaderURL is the client URL, among urls, of the member that leads.
func leaderURL(t *testing.T, urls ...string) string {
	t.Helper()
	for _, u := range urls {
		if id, leader := memberStatus(t, u); id == leader {
			return u
		}
	}
	t.Fatalf("no leader among %v", urls)
	return ""
}
