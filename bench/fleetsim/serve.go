package main

import (
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// sdGroup is one file_sd target group.
type sdGroup struct {
	Targets []string          `json:"targets"`
	Labels  map[string]string `json:"labels"`
}

func serveMain(args []string) error {
	fs := flag.NewFlagSet("serve", flag.ExitOnError)
	daemonTpl := fs.String("template", "", "a real `diskcanary serve` /metrics capture (required)")
	etcdTpl := fs.String("etcd-template", "", "a real etcd /metrics capture: three etcd members per cluster on its first three nodes (optional)")
	rules := fs.String("rules", "", "the rule file: with -etcd-template, only the etcd families it reads are served")
	nodes := fs.Int("nodes", 100, "simulated nodes")
	perCluster := fs.Int("nodes-per-cluster", 100, "nodes per cluster (the cluster label)")
	slow := fs.Float64("slow", 0.02, "share of nodes whose probes are slow (8x): the drift rules' work")
	path := fs.String("path", "/var/lib/diskcanary", "the probes' path label on every node")
	port := fs.Int("port", 19742, "port of every target (each target has its own loopback address: 127.77.x.y, etcd 127.78.x.y)")
	self := fs.String("self", "127.0.0.1:19741", "address of the simulator's own /metrics")
	sd := fs.String("sd", "", "directory for the file_sd target files diskcanary.json and etcd.json (required)")
	seed := fs.Uint64("seed", 1, "random seed")
	probeInterval := fs.Duration("probe-interval", 0, "every probe's cycle (default: the daemon's), for a short run that needs the samples of a long one")
	busy := fs.String("busy-nodes", "", "comma-separated node indices whose disks are busy (util near 1) and whose probes are slow from that load: healthy, not drifting")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *daemonTpl == "" || *sd == "" {
		return errors.New("serve: -template and -sd are required")
	}
	if *nodes < 1 || *nodes > 250*250 || *perCluster < 1 {
		return fmt.Errorf("serve: -nodes must be 1..62500 and -nodes-per-cluster positive")
	}
	dtpl, err := loadTemplate(*daemonTpl, templateOptions{path: *path, probeInterval: probeInterval.Seconds()})
	if err != nil {
		return err
	}
	var etpl *template
	if *etcdTpl != "" {
		if *rules == "" {
			return errors.New("serve: -etcd-template needs -rules")
		}
		rb, err := os.ReadFile(*rules)
		if err != nil {
			return err
		}
		if etpl, err = loadTemplate(*etcdTpl, templateOptions{keepNames: familiesReadBy(rb)}); err != nil {
			return err
		}
		if len(etpl.families) == 0 {
			return fmt.Errorf("serve: the rules read none of the families in %s", *etcdTpl)
		}
	}

	fleet := newNodes(fleetOptions{nodes: *nodes, perCluster: *perCluster, slowShare: *slow, seed: *seed, models: defaultModels})
	if *busy != "" {
		for _, f := range strings.Split(*busy, ",") {
			i, err := strconv.Atoi(f)
			if err != nil || i < 0 || i >= len(fleet) {
				return fmt.Errorf("serve: -busy-nodes: %q is not a node index (0..%d)", f, len(fleet)-1)
			}
			fleet[i].makeBusy()
		}
	}
	now := float64(time.Now().UnixNano()) / 1e9
	targets := map[string]*target{} // local address → target
	var dsd, esd []sdGroup
	r := rand.New(rand.NewPCG(*seed, 7))
	for i, n := range fleet {
		addr := fmt.Sprintf("127.77.%d.%d:%d", i/250, i%250+1, *port)
		targets[addr] = newTarget(dtpl, n, *seed, now)
		dsd = append(dsd, sdGroup{Targets: []string{addr}, Labels: map[string]string{
			// what the shipped PodMonitor gives a series, plus the
			// cluster label a multi-cluster Prometheus or a global view adds
			"cluster": fmt.Sprintf("cluster-%03d", n.cluster), "node": n.name,
			"namespace": "diskcanary", "pod": "diskcanary-" + podSuffix(r), "container": "diskcanary", "endpoint": "metrics",
		}})
		if etpl != nil && n.member < etcdMembers {
			eaddr := fmt.Sprintf("127.78.%d.%d:%d", i/250, i%250+1, *port)
			targets[eaddr] = newTarget(etpl, n, *seed+1, now)
			esd = append(esd, sdGroup{Targets: []string{eaddr}, Labels: map[string]string{
				"cluster": fmt.Sprintf("cluster-%03d", n.cluster), "node": n.name,
				"namespace": "kube-system", "pod": "etcd-" + n.name, "container": "etcd", "endpoint": "http-metrics",
			}})
		}
	}

	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	scrapes := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "fleetsim_scrapes_total", Help: "Target scrapes served, by template."}, []string{"template"})
	renderSecs := prometheus.NewCounter(prometheus.CounterOpts{Name: "fleetsim_render_seconds_total", Help: "Time spent advancing and rendering targets."})
	reg.MustRegister(scrapes, renderSecs, prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "fleetsim_targets", Help: "Targets served."}, func() float64 { return float64(len(targets)) }))

	bufs := sync.Pool{New: func() any { return new([]byte) }}
	gzs := sync.Pool{New: func() any { w, _ := gzip.NewWriterLevel(nil, gzip.BestSpeed); return w }}
	handler := http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		addr, _ := req.Context().Value(http.LocalAddrContextKey).(net.Addr)
		t := targets[fmt.Sprint(addr)]
		if t == nil || req.URL.Path != "/metrics" {
			http.NotFound(w, req)
			return
		}
		start := time.Now()
		bp := bufs.Get().(*[]byte)
		*bp = t.render((*bp)[:0], float64(start.UnixNano())/1e9)
		renderSecs.Add(time.Since(start).Seconds())
		name := "diskcanary"
		if t.tpl == etpl {
			name = "etcd"
		}
		scrapes.WithLabelValues(name).Inc()
		w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
		if strings.Contains(req.Header.Get("Accept-Encoding"), "gzip") {
			w.Header().Set("Content-Encoding", "gzip")
			gz := gzs.Get().(*gzip.Writer)
			gz.Reset(w)
			// A write fails only when Prometheus gave up on the scrape, which
			// its own scrape metrics report.
			_, _ = gz.Write(*bp)
			gz.Close()
			gzs.Put(gz)
		} else {
			_, _ = w.Write(*bp)
		}
		bufs.Put(bp)
	})
	srv := &http.Server{Handler: handler, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 5 * time.Minute}
	var lns []net.Listener
	for addr := range targets {
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			for _, l := range lns {
				l.Close()
			}
			return fmt.Errorf("serve: %w (raise the open-file limit: ulimit -n)", err)
		}
		lns = append(lns, ln)
	}
	for _, ln := range lns {
		go serveHTTP(srv, ln)
	}
	selfSrv := &http.Server{Addr: *self, Handler: promhttp.HandlerFor(reg, promhttp.HandlerOpts{})}
	selfLn, err := net.Listen("tcp", *self)
	if err != nil {
		return fmt.Errorf("serve: %w", err)
	}
	go serveHTTP(selfSrv, selfLn)

	// The target lists last: Prometheus starts scraping when they appear.
	if err := writeJSON(filepath.Join(*sd, "etcd.json"), esd); err != nil {
		return err
	}
	if err := writeJSON(filepath.Join(*sd, "diskcanary.json"), dsd); err != nil {
		return err
	}
	fmt.Printf("fleetsim: %d nodes, %d series each; clusters: %d of up to %d nodes; slow nodes: %d; etcd members: %d, %d series each; serving\n",
		*nodes, seriesPerTarget(dtpl), (*nodes+*perCluster-1) / *perCluster, *perCluster, countSlow(fleet), len(esd), seriesPerTarget(etpl))

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	<-ctx.Done()
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	// Past the 5 s, a scrape still running is cut: the run is over.
	_ = srv.Shutdown(sctx)
	_ = selfSrv.Shutdown(sctx)
	return nil
}

// serveHTTP serves until Shutdown, and says so if a listener fails before:
// its targets then read down in Prometheus, and the run is not the fleet's.
func serveHTTP(srv *http.Server, ln net.Listener) {
	if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		fmt.Fprintf(os.Stderr, "fleetsim: serving %s: %v\n", ln.Addr(), err)
	}
}

func podSuffix(r *rand.Rand) string {
	const chars = "bcdfghjklmnpqrstvwxz2456789" // Kubernetes' safe alphabet
	b := make([]byte, 5)
	for i := range b {
		b[i] = chars[r.IntN(len(chars))]
	}
	return string(b)
}

func countSlow(nodes []*node) int {
	c := 0
	for _, n := range nodes {
		if n.slow > 1 && !n.busy {
			c++
		}
	}
	return c
}

// seriesPerTarget: the samples one scrape of the template returns.
func seriesPerTarget(t *template) int {
	if t == nil {
		return 0
	}
	c := 0
	for _, f := range t.families {
		for _, s := range f.series {
			switch {
			case len(s.static) > 0:
				c += len(s.static)
			case s.upper != nil:
				c += len(s.upper) + 3
			default:
				c++
			}
		}
	}
	return c
}

func writeJSON(file string, v any) error {
	data, err := json.MarshalIndent(v, "", " ")
	if err != nil {
		return err
	}
	tmp := file + ".tmp"
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, file)
}
