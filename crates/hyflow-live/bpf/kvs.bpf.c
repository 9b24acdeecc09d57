// SPDX-License-Identifier: (Apache-2.0 OR GPL-2.0-only)
// The XDP program of `hyflow kvs`: FlexNIC's receive path for FlexKVS (FlexNIC §3.2, Figure 3).
//
// Every frame that is a UDP datagram to the server's address and memcached's port goes to the
// AF_XDP socket of one of the server's cores; everything else (ARP, other traffic) goes on to
// the kernel. Which core:
//   - key steering: the request's key is parsed out of the memcached payload (the ASCII
//     protocol's first key, the binary protocol's key) and hashed (FNV-1a, hyflow's
//     `kvs::key_hash`, bit for bit); the hash's low bits index the steering table (FlexNIC's
//     match table from hash ranges to queues), whose entry is the core owning those keys;
//   - flow steering (the paper's baseline, RSS): a hash of the addresses and ports.
// A request without a key the program can read (too long, no key, cut short) is steered by
// its flow. When keys are hashed, the hash goes in front of the frame as XDP metadata
// (FlexNIC's "special packet header"), which AF_XDP copies into the UMEM with the frame, so
// that the server can reuse it instead of hashing again (`--nic-hash`).
//
// A request too long for one frame comes as IP fragments, of which only the first has the
// UDP header: every fragment of a UDP datagram to the server's address goes to the core a
// hash of its source and IP identification picks (all of one datagram's to one core), which
// puts them together. A frame longer than the sockets' buffers hold (`max_frame`) is dropped
// here and counted, rather than lost in the kernel as a full ring.
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

#include "memcached_key.h"

#define MAX_SOCKETS 4096
#define STEER_SLOTS 128

struct kvs_config {
	/* The server's IPv4 address (network order) and UDP port (host order). */
	__u32 addr;
	__u32 port;
	/* Cores, each with a socket per receive queue: `xsks[queue * cores + core]`. */
	__u32 cores;
	/* 1: steer by key; 0: by flow. */
	__u32 steer_key;
	/* 1: hash keys (key steering, or the server reuses the hash). */
	__u32 hash_keys;
	/* The longest frame the sockets' buffers hold. */
	__u32 max_frame;
};

/* In front of the frame (XDP metadata): `KEY_MAGIC`, then the key's hash if one was taken. */
struct kvs_meta {
	__u64 magic;
	__u32 hash;
	__u32 has_hash;
};
#define KEY_MAGIC 0x6879666c6f776b68ULL /* "hyflowkh" */

/* What the program did, per CPU: requests steered by key, by flow, frames passed on,
 * fragments steered, frames too long for the sockets. */
#define STAT_BY_KEY 0
#define STAT_BY_FLOW 1
#define STAT_PASSED 2
#define STAT_FRAGMENTS 3
#define STAT_TOO_LONG 4
#define STATS 5

struct {
	__uint(type, BPF_MAP_TYPE_XSKMAP);
	__uint(max_entries, MAX_SOCKETS);
	__type(key, __u32);
	__type(value, __u32);
} xsks SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct kvs_config);
} config SEC(".maps");

/* Steering table: a key hash's low 7 bits → the core owning those keys. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, STEER_SLOTS);
	__type(key, __u32);
	__type(value, __u32);
} steer_table SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, STATS);
	__type(key, __u32);
	__type(value, __u64);
} stats SEC(".maps");


static __always_inline void count(__u32 what)
{
	__u64 *c = bpf_map_lookup_elem(&stats, &what);
	if (c)
		*c += 1;
}

/* 0 when this kernel refuses bpf_xdp_adjust_meta in XDP programs (the loader probes it and
 * sets this before loading): a branch on a read-only constant is pruned, so the verifier never
 * sees the call, and frames reach software without metadata. */
const volatile __u32 hyflow_meta = 1;

SEC("xdp")
int hyflow_kvs(struct xdp_md *ctx)
{
	__u32 zero = 0;
	struct kvs_config *cfg = bpf_map_lookup_elem(&config, &zero);
	void *data = (void *)(long)ctx->data, *end = (void *)(long)ctx->data_end;
	__u8 *p = data;
	if (!cfg || cfg->cores == 0 || (void *)(p + 14 + 20) > end)
		goto pass;
	if (p[12] != 0x08 || p[13] != 0x00)
		goto pass;
	__u8 *ip = p + 14;
	__u32 ihl = (ip[0] & 0x0f) * 4;
	if ((ip[0] >> 4) != 4 || ihl < 20 || ip[9] != 17)
		goto pass;
	__u32 daddr, saddr;
	__builtin_memcpy(&daddr, ip + 16, 4);
	__builtin_memcpy(&saddr, ip + 12, 4);
	if (daddr != cfg->addr)
		goto pass;
	if ((__u32)((__u8 *)end - (__u8 *)data) > cfg->max_frame) {
		count(STAT_TOO_LONG);
		return XDP_DROP;
	}
	if (((__u16)ip[6] << 8 | ip[7]) & 0x3fff) {
		/* A fragment: to the core of its datagram (source and identification). */
		__u64 f = ((__u64)saddr << 16 | (__u16)ip[4] << 8 | ip[5]) * 0x9e3779b97f4a7c15ULL;
		count(STAT_FRAGMENTS);
		return bpf_redirect_map(&xsks, ctx->rx_queue_index * cfg->cores + (__u32)(f >> 32) % cfg->cores,
					XDP_PASS);
	}
	__u8 *udp = ip + (ihl & 0x3c);
	if ((void *)(udp + 8) > end)
		goto pass;
	__u16 dport = (__u16)udp[2] << 8 | udp[3];
	if (dport != cfg->port)
		goto pass;
	__u32 payload_at = 14 + (ihl & 0x3c) + 8;
	__u32 payload = (__u32)((__u8 *)end - (__u8 *)data) - payload_at;
	__u32 hash = 0;
	int has_hash = 0;
	if (cfg->hash_keys)
		has_hash = mc_request_hash(ctx, payload_at, payload, &hash) == 0;
	__u32 core;
	if (cfg->steer_key && has_hash) {
		__u32 slot = hash & (STEER_SLOTS - 1);
		__u32 *c = bpf_map_lookup_elem(&steer_table, &slot);
		core = c ? *c : 0;
		count(STAT_BY_KEY);
	} else {
		/* RSS-like: the addresses and ports. */
		__u64 x = ((__u64)saddr << 32 | daddr) ^ ((__u64)udp[0] << 24 | (__u64)udp[1] << 16 | dport);
		x *= 0x9e3779b97f4a7c15ULL;
		x ^= x >> 29;
		x *= 0xbf58476d1ce4e5b9ULL;
		core = (__u32)(x >> 32);
		count(STAT_BY_FLOW);
	}
	core %= cfg->cores;
	if (hyflow_meta && bpf_xdp_adjust_meta(ctx, -(int)sizeof(struct kvs_meta)) == 0) {
		struct kvs_meta *m = (void *)(long)ctx->data_meta;
		if ((void *)(m + 1) <= (void *)(long)ctx->data) {
			m->magic = KEY_MAGIC;
			m->hash = hash;
			m->has_hash = has_hash;
		}
	}
	return bpf_redirect_map(&xsks, ctx->rx_queue_index * cfg->cores + core, XDP_PASS);
pass:
	count(STAT_PASSED);
	return XDP_PASS;
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
