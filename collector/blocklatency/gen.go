//go:build bpf2go

// Rebuilding the BPF object needs clang and the libbpf-dev headers (Debian:
// apt-get install clang llvm libbpf-dev), and another clang version may
// emit another object, so the tag keeps it out of go generate ./... (which
// writes the rules and dashboards):
//
//	go generate -tags bpf2go ./collector/blocklatency
//
// The outputs are committed, so building diskcanary needs no compiler.

package blocklatency

//go:generate go run github.com/cilium/ebpf/cmd/bpf2go -cc clang -cflags "-O2 -g -Wall -Werror" -target bpfel,bpfeb -type hist_key -type hist blocklatency bpf/blocklatency.c
