// Command fleetsim is the fleet half of go run ./bench fleet-scale: it serves N
// simulated diskcanary targets (and the etcd members of their clusters) to a
// real Prometheus, and turns what that Prometheus measured about itself into
// the benchmark's tables.
//
//	fleetsim serve  -template daemon.prom [-etcd-template etcd.prom -rules FILE] -nodes N -sd DIR
//	fleetsim report -prometheus URL -nodes N -start UNIX -steady 10m -out result.json
//	fleetsim table  result.json...
//
// serve replicates one real `diskcanary serve` /metrics (the template: the
// daemon's own families, label sets and bucket edges) N times, each on its own
// loopback address like a node's own exporter, with values that move between
// scrapes: counters grow, the probe histograms take bursts of observations on
// the daemon's default schedule, latencies follow the node's disk model, and a
// few nodes are slow so the drift rules have something to find. report and
// table read Prometheus' self-metrics (rule group durations, missed
// iterations, head series, RSS, scrape durations) over the run.
package main

import (
	"fmt"
	"os"
)

func main() {
	if len(os.Args) < 2 {
		usage()
	}
	var err error
	switch os.Args[1] {
	case "serve":
		err = serveMain(os.Args[2:])
	case "report":
		err = reportMain(os.Args[2:])
	case "table":
		err = tableMain(os.Args[2:], os.Stdout)
	default:
		usage()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "fleetsim:", err)
		os.Exit(1)
	}
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: fleetsim serve|report|table [flags] (fleetsim CMD -h for flags)")
	os.Exit(2)
}
