package testkit

import (
	"os"
)

// E2EEnv is the environment variable that turns on the end-to-end tests.
const E2EEnv = "DISKCANARY_E2E"

// E2E skips the test unless DISKCANARY_E2E=1. End-to-end tests are those
// that run a real diskcanary binary, need root (loop devices, mounts,
// cgroups, the FUSE test filesystem, eBPF) or run Prometheus, etcd or
// QEMU, and any test that takes more than a few seconds: together they
// take many minutes, and what they measure depends on the machine.
// Without the variable `go test ./...` is the fast, deterministic set;
// CI sets it and runs both. Binary, Build, RequireRoot and PrometheusBin
// call it, so a test that uses them needs no call of its own.
func E2E(tb TB) {
	tb.Helper()
	if os.Getenv(E2EEnv) != "1" {
		tb.Skip("skipping: an end-to-end or slow test; " + E2EEnv + "=1 runs it, as CI does")
	}
}
