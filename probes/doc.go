// Package probes owns diskcanary's canary probes: the etcd-WAL write probe
// (sequential small writes, fdatasync after each, the fdatasync timed on its
// own) and the 4 KiB O_DIRECT random-read probe over a pre-written working
// set or a read-only block device. It runs them on their own schedule, one
// op in flight per target, under a write budget, and keeps the results in
// Prometheus metrics that a scrape only reads.
//
// The same timed loops back `diskcanary check`, so the daemon and the CLI
// measure exactly the same way.
package probes
