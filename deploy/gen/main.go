// Command gen writes the Kubernetes PrometheusRule from the Prometheus rule
// file, so the two never differ (deploy's tests fail when they do). Run it
// from the repository root after changing alerts/:
//
//	go run ./deploy/gen
package main

import (
	"fmt"
	"os"

	"github.com/diskcanary/diskcanary/deploy"
)

func main() {
	rules, err := os.ReadFile(deploy.RuleFile)
	if err != nil {
		fail(fmt.Errorf("%w (run from the repository root)", err))
	}
	out, err := deploy.PrometheusRule(rules)
	if err != nil {
		fail(err)
	}
	if err := os.WriteFile(deploy.PrometheusRuleFile, out, 0o644); err != nil {
		fail(err)
	}
	fmt.Printf("wrote %s from %s\n", deploy.PrometheusRuleFile, deploy.RuleFile)
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "gen:", err)
	os.Exit(1)
}
