// SPDX-License-Identifier: (GPL-2.0-only OR MIT)
//
// Block request latency, issue to completion, per device and per operation,
// histogrammed in the kernel: no event per I/O reaches user space. User space
// reads the hists map on each scrape.
//
// Built by `go generate -tags bpf2go ./collector/blocklatency` (bpf2go,
// clang, libbpf-dev headers); the object is committed, so nothing is
// compiled on the target.
// CO-RE: the kernel structs below carry only the fields used, marked
// preserve_access_index, and libbpf/cilium-ebpf relocate them against the
// running kernel's BTF (/sys/kernel/btf/vmlinux). No vmlinux.h: the build does
// not depend on the developer's kernel.

typedef unsigned char __u8;
typedef unsigned short __u16;
typedef unsigned int __u32;
typedef unsigned long long __u64;
typedef int __s32;
typedef long long __s64;
typedef __u16 __be16;
typedef __u32 __be32;
typedef __u32 __wsum;

#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>

// From include/uapi/linux/bpf.h: the map types and the update flag used.
#define BPF_MAP_TYPE_HASH 1
#define BPF_MAP_TYPE_PERCPU_ARRAY 6
#define BPF_NOEXIST 1

struct gendisk {
	int major;
	int first_minor;
} __attribute__((preserve_access_index));

struct request_queue {
	struct gendisk *disk; // Linux 5.15+
} __attribute__((preserve_access_index));

struct request {
	struct request_queue *q;
	unsigned int cmd_flags; // blk_opf_t: REQ_OP_* in the low bits, REQ_* flags above
} __attribute__((preserve_access_index));

// Before Linux 5.16 the disk was rq->rq_disk (q->disk came in 5.15).
struct request___old {
	struct gendisk *rq_disk;
} __attribute__((preserve_access_index));

// enum req_flag_bits (include/linux/blk_types.h); its values moved between
// kernels, so the bit is read from the running kernel's BTF.
enum req_flag_bits {
	__REQ_PREFLUSH = 0,
};

// The operation groups, as the kernel's op_stat_group() files a request into
// /proc/diskstats (discard, then write for odd op codes, else read), with
// flush before them: REQ_OP_FLUSH, or a write carrying REQ_PREFLUSH that
// reached the driver without the flush machinery splitting it off. Keep in
// step with the op names in blocklatency.go.
#define OP_READ 0
#define OP_WRITE 1
#define OP_FLUSH 2
#define OP_DISCARD 3

// REQ_OP_* codes (include/linux/blk_types.h), stable since Linux 4.10.
#define REQ_OP_BITS 8
#define REQ_OP_MASK ((1u << REQ_OP_BITS) - 1)
#define REQ_OP_FLUSH 2
#define REQ_OP_DISCARD 3

// NR_EDGES is len(blocklatency.Edges) in Go; a Go test checks they agree.
#define NR_EDGES 231
#define NR_SLOTS (NR_EDGES + 1)

// Slot upper edges in nanoseconds, ascending, inclusive (a slot counts
// edges[i-1] < d <= edges[i], the last slot d > edges[NR_EDGES-1]). Go fills
// them in before loading: the union of the classic bucket edges and the
// schema-3 native bucket edges, so every slot falls inside exactly one bucket
// of each and both are exact.
const volatile __u64 edges[NR_EDGES];

struct hist_key {
	__u32 major;
	__u32 minor;
	__u32 op;
};

struct hist {
	__u64 slots[NR_SLOTS];
	__u64 sum_ns;
};

// Issue time of each request in flight, by request address. A request that
// never completes (a device torn down) leaves its entry until the request
// struct, which the block layer reuses, is issued again.
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16384);
	__type(key, __u64);
	__type(value, __u64);
} start SEC(".maps");

// 256 devices x 4 operations.
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1024);
	__type(key, struct hist_key);
	__type(value, struct hist);
} hists SEC(".maps");

// Requests the program could not time, so that no loss is silent:
// DROP_IN_FLIGHT when start was full at issue (more requests in flight than
// it holds), DROP_DEVICES when hists was full at completion (more than 256
// disks). Per CPU: no atomic on the I/O path. Keep in step with
// blocklatency.go.
#define DROP_IN_FLIGHT 0
#define DROP_DEVICES 1
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 2);
	__type(key, __u32);
	__type(value, __u64);
} dropped SEC(".maps");

static __always_inline void drop(__u32 why)
{
	__u64 *n = bpf_map_lookup_elem(&dropped, &why);
	if (n)
		*n += 1;
}

static const struct hist zero;

SEC("tp_btf/block_rq_issue")
int BPF_PROG(block_rq_issue, struct request *rq)
{
	__u64 key = (__u64)rq;
	__u64 now = bpf_ktime_get_ns();

	// A requeued request is issued again: the later issue wins.
	if (bpf_map_update_elem(&start, &key, &now, 0))
		drop(DROP_IN_FLIGHT);
	return 0;
}

static __always_inline __u32 slot_of(__u64 ns)
{
	__u32 lo = 0, hi = NR_EDGES;

	// Binary search for the first edge >= ns; 2^8 > NR_EDGES, so 8 halvings
	// always finish.
	for (int i = 0; i < 8 && lo < hi; i++) {
		__u32 mid = (lo + hi) / 2;
		if (mid >= NR_EDGES)
			break;
		if (ns <= edges[mid])
			hi = mid;
		else
			lo = mid + 1;
	}
	return lo;
}

static __always_inline __u32 op_of(struct request *rq)
{
	__u32 flags = BPF_CORE_READ(rq, cmd_flags);
	__u32 op = flags & REQ_OP_MASK;
	__u32 preflush = 0;

	if (bpf_core_enum_value_exists(enum req_flag_bits, __REQ_PREFLUSH))
		preflush = 1u << bpf_core_enum_value(enum req_flag_bits, __REQ_PREFLUSH);
	if (op == REQ_OP_FLUSH || ((op & 1) && (flags & preflush)))
		return OP_FLUSH;
	if (op == REQ_OP_DISCARD)
		return OP_DISCARD;
	if (op & 1)
		return OP_WRITE;
	return OP_READ;
}

SEC("tp_btf/block_rq_complete")
int BPF_PROG(block_rq_complete, struct request *rq, int error, unsigned int nr_bytes)
{
	__u64 key = (__u64)rq;
	__u64 *tsp = bpf_map_lookup_elem(&start, &key);
	if (!tsp)
		return 0; // issued before the collector attached
	__u64 delta = bpf_ktime_get_ns() - *tsp;
	// A partial completion (blk_update_request with bytes left) ends the
	// measurement: the rest of the request is rare and its later
	// completions find no start.
	bpf_map_delete_elem(&start, &key);

	struct gendisk *disk;
	if (bpf_core_field_exists(rq->q->disk))
		disk = BPF_CORE_READ(rq, q, disk);
	else
		disk = BPF_CORE_READ((struct request___old *)rq, rq_disk);
	if (!disk)
		return 0;

	struct hist_key hk = {
		.major = BPF_CORE_READ(disk, major),
		.minor = BPF_CORE_READ(disk, first_minor),
		.op = op_of(rq),
	};
	struct hist *h = bpf_map_lookup_elem(&hists, &hk);
	if (!h) {
		bpf_map_update_elem(&hists, &hk, &zero, BPF_NOEXIST);
		h = bpf_map_lookup_elem(&hists, &hk);
		if (!h) {
			drop(DROP_DEVICES);
			return 0;
		}
	}
	__u32 s = slot_of(delta);
	if (s < NR_SLOTS)
		__sync_fetch_and_add(&h->slots[s], 1);
	__sync_fetch_and_add(&h->sum_ns, delta);
	return 0;
}

// Dual licensed: the kernel lets only GPL-compatible programs call some
// helpers, and MIT keeps the rest of the repository free to choose.
char LICENSE[] SEC("license") = "Dual MIT/GPL";
