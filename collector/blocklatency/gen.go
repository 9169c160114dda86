package blocklatency

// Regenerating needs clang and the libbpf-dev headers (Debian: apt-get
// install clang llvm libbpf-dev); the outputs are committed, so building
// diskcanary does not.
//go:generate go run github.com/cilium/ebpf/cmd/bpf2go -cc clang -cflags "-O2 -g -Wall -Werror" -target bpfel,bpfeb -type hist_key -type hist blocklatency bpf/blocklatency.c
