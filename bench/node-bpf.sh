# Sourced by bench/daemon-vs-fio and bench/etcd-vs-daemon.
#
# node_bpf_start / node_bpf_stop: run the daemon's block-latency eBPF program
# (a second diskcanary, $BIN, with only that collector on, metrics on
# 127.0.0.1:$NODE_BPF_PORT) around a reference's round (fio, check, etcd),
# so the reference's I/O passes the same program as the daemon's: on a node
# running the daemon, every process's block requests do. Nothing when
# NODE_BPF is not 1, or when the program cannot load here (then the daemon
# runs without it too: diskcanary_blocklatency_available 0).
#
# Why: on a device where an fdatasync is CPU work the program costs more than
# its own ~1 µs a request (ext4 on a tmpfs-backed loop device, 2026-11-25:
# paced fdatasync p50 ×1.15 for check with it attached, ×1.11 for the daemon
# with the collector on against off). Without it the daemon, which always
# has it, was compared with references that did not (check read ×0.87 of it).
NODE_BPF=${NODE_BPF:-1}
NODE_BPF_PORT=${NODE_BPF_PORT:-19749}
NODE_BPF_PID=
node_bpf_start() {
  [ "$NODE_BPF" = 1 ] || return 0
  "$BIN" serve --no-collector.probes --no-collector.smart --no-collector.diskstats --no-collector.errors \
    --no-collector.pressure --web.listen-address "127.0.0.1:$NODE_BPF_PORT" --log.level error >/dev/null 2>&1 &
  NODE_BPF_PID=$!
  local m
  for _ in $(seq 100); do
    m=$(curl -sf "http://127.0.0.1:$NODE_BPF_PORT/metrics" || true)
    case $m in
      *"diskcanary_blocklatency_available 1"*) return 0 ;;
      *"diskcanary_blocklatency_available 0"*) break ;;
    esac
    sleep 0.1
  done
  node_bpf_stop
}
# node_bpf_said: for a bench's heading line.
node_bpf_said() { echo "references under the node's eBPF program: $([ "$NODE_BPF" = 1 ] && echo yes || echo no)"; }
node_bpf_stop() {
  if [ -n "$NODE_BPF_PID" ]; then kill "$NODE_BPF_PID"; wait "$NODE_BPF_PID" 2>/dev/null || true; NODE_BPF_PID=; fi
}
