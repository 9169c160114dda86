// Command rulegen writes every generated file of diskcanary: the rule file,
// its promtool unit tests, the Grafana dashboards, the PrometheusRule in
// deploy/kubernetes, and the copies in the Helm chart
// (deploy/helm/diskcanary/files) and the jsonnet mixin (mixin/generated).
// Every threshold is a flag; with no flags it writes the committed files,
// which is what go generate ./... runs (a test in tools/rulegen checks
// they are up to date).
//
//	go generate ./...                            # rewrite the committed files
//	go run -C tools/rulegen ./cmd/rulegen -out /tmp/x -drift.factor 4
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/diskcanary/diskcanary/tools/rulegen"
)

func main() {
	p := rulegen.Defaults()
	p.RegisterFlags(flag.CommandLine)
	out := flag.String("out", defaultOut(), "repository root to write alerts/, dashboards/, the PrometheusRule, the chart's files/ and mixin/generated/ under")
	flag.Parse()
	names, err := rulegen.Write(*out, p)
	if err != nil {
		fmt.Fprintln(os.Stderr, "rulegen:", err)
		os.Exit(1)
	}
	for _, n := range names {
		fmt.Println(n)
	}
}

// defaultOut is the repository root when the command runs in its module's
// directory (go run -C tools/rulegen ./cmd/rulegen), else the working
// directory.
func defaultOut() string {
	if _, err := os.Stat("../../tools/rulegen/go.mod"); err == nil {
		return "../.."
	}
	return "."
}
