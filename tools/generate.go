// Package tools holds the programs that are not the binary: the rule and
// dashboard generator (tools/rulegen, a module of its own because it needs
// the Prometheus and Grafana SDK modules, which the binary does not), the
// dashboard drawer (tools/dashshot, a module of its own: no part of what
// ships; it draws the README's picture of the on-call dashboard) and the CI test
// summary (tools/testsummary). This file holds the generator's
// directive, so that go generate ./... at the repository root rewrites every
// generated file.
package tools

//go:generate go run -C rulegen ./cmd/rulegen -out ../..
