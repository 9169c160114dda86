package rulegen

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/diskcanary/diskcanary/internal/testkit"
)

// TestContentionRulesEndToEnd: two fio jobs in two cgroup-v1 blkio groups
// write 4 KiB O_DIRECT at 500 and 25 IOPS to a loop device's ext4, a
// daemon counts them per cgroup and a real Prometheus evaluates the
// generated rules (the etcd window set to 20 s so it fills within the
// test). Through the Prometheus API: the busy group's bytes rate is what
// fio reports for itself within 10 %, it ranks first in the device's top
// three and holds most of its bytes; the on-call dashboard's "who was
// doing I/O on this disk" query, interpolated as Grafana does, lists it
// first.
func TestContentionRulesEndToEnd(t *testing.T) {
	// Mostly waiting on Prometheus: run beside the other such tests
	// (the etcd verdict, which judges latency, runs alone before them).
	t.Parallel()
	testkit.E2E(t)
	testkit.RequireRoot(t)
	testkit.SkipUnderRace(t)
	testkit.PrometheusBin(t)
	if _, err := exec.LookPath("fio"); err != nil {
		t.Skip("skipping: needs fio on PATH")
	}
	bin := testkit.Binary(t)
	mnt, dev := testkit.LoopFSIn(t, "/dev/shm", 128<<20, "ext4")
	testkit.ActivateBlkioAccounting(t, dev)
	devName := filepath.Base(dev)
	busy, light := testkit.NewBlkioGroup(t, "busy"), testkit.NewBlkioGroup(t, "light")
	busyW, lightW := "/"+filepath.Base(busy.Path), "/"+filepath.Base(light.Path)

	d := startServe(t, bin, "--no-collector.probes", "--no-collector.smart", "--no-collector.blocklatency", "--collector.contention.interval", "1s")
	p := Defaults()
	p.Interval = 0 // the contention groups at the 1 s evaluation interval
	p.EtcdWindow = 20 * time.Second
	rulesFile := writeRules(t, p)
	prom := testkit.StartPrometheus(t, fmt.Sprintf(`global:
  scrape_interval: 1s
  scrape_timeout: 900ms
  evaluation_interval: 1s
rule_files: [%q]
scrape_configs:
  - job_name: diskcanary
    static_configs:
      - targets: [%q]
`, rulesFile, d.addr), "--log.level=warn")

	type fioOut struct {
		Jobs []struct {
			Write struct {
				BwBytes float64 `json:"bw_bytes"`
			} `json:"write"`
		} `json:"jobs"`
	}
	run := func(g *testkit.Throttle, name string, iops int) (done <-chan fioOut) {
		file := filepath.Join(mnt, name)
		f, err := os.Create(file)
		if err != nil {
			t.Fatal(err)
		}
		if err := unix.Fallocate(int(f.Fd()), 0, 0, 32<<20); err != nil {
			t.Fatal(err)
		}
		f.Close()
		cmd := g.Command("fio", "--name="+name, "--filename="+file, "--rw=randwrite", "--bs=4k", "--direct=1", "--ioengine=psync",
			"--size=32m", "--rate_iops="+strconv.Itoa(iops), "--time_based", "--runtime=45", "--output-format=json")
		out := make(chan fioOut, 1)
		go func() {
			var r fioOut
			b, err := cmd.Output()
			if err == nil {
				err = json.Unmarshal(b, &r)
			}
			if err != nil || len(r.Jobs) != 1 {
				t.Errorf("fio %s: %v: %s", name, err, b)
			}
			out <- r
		}()
		return out
	}
	busyDone, lightDone := run(busy, "busy", 500), run(light, "light", 25)

	// Once the 20 s window is full of fio (fio started ~0 s, the window
	// at 35 s covers 15-35 s), read the rules.
	time.Sleep(35 * time.Second)
	rate := map[string]float64{}
	for _, s := range prom.Query(t, ruleWorkloadBytes(p.EtcdWindow)+`{device="`+devName+`"}`) {
		v, _ := strconv.ParseFloat(s.Value[1].(string), 64)
		rate[s.Metric["workload"]] = v
	}
	var top []string
	for _, s := range prom.Query(t, "sort_desc("+ruleWorkloadTop(p.EtcdWindow)+`{device="`+devName+`"})`) {
		top = append(top, s.Metric["workload"])
	}
	share := map[string]float64{}
	for _, s := range prom.Query(t, ruleWorkloadShare(p.EtcdWindow)+`{device="`+devName+`"}`) {
		v, _ := strconv.ParseFloat(s.Value[1].(string), 64)
		share[s.Metric["workload"]] = v
	}
	node := generatedDashboards(t, p)["diskcanary-node.json"]
	who := panelByTitle(t, node, "Who was doing I/O on this disk (bytes/s by workload, 15m)")
	expr := interpolate(t, node, who.Targets[0].Expr, map[string]string{"cluster": "$__all", "job": "diskcanary", "instance": d.addr, "disk": devName})
	var panel []string
	for _, s := range prom.Query(t, expr) {
		panel = append(panel, s.Metric["workload"])
	}
	fb, fl := <-busyDone, <-lightDone
	if len(fb.Jobs) != 1 || len(fl.Jobs) != 1 {
		t.FailNow()
	}
	t.Logf("fio: busy %.0f B/s, light %.0f B/s; rules over %s: %v, top %v, shares %v; dashboard %v",
		fb.Jobs[0].Write.BwBytes, fl.Jobs[0].Write.BwBytes, promDuration(p.EtcdWindow), rate, top, share, panel)

	if want := fb.Jobs[0].Write.BwBytes; math.Abs(rate[busyW]-want) > 0.1*want {
		t.Errorf("busy group: %.0f B/s recorded, fio wrote %.0f B/s", rate[busyW], want)
	}
	if want := fl.Jobs[0].Write.BwBytes; math.Abs(rate[lightW]-want) > 0.1*want {
		t.Errorf("light group: %.0f B/s recorded, fio wrote %.0f B/s", rate[lightW], want)
	}
	if len(top) < 2 || top[0] != busyW || top[1] != lightW {
		t.Errorf("top 3 on %s: %v, want %s then %s first", devName, top, busyW, lightW)
	}
	if share[busyW] < 0.9 {
		t.Errorf("busy group's share of %s: %v, want over 0.9 (500 of 525 IOPS, and the journal)", devName, share[busyW])
	}
	if len(panel) == 0 || panel[0] != busyW {
		t.Errorf("the dashboard's who-did-I/O query lists %v, want %s first", panel, busyW)
	}
}
