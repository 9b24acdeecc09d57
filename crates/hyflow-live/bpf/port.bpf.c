// SPDX-License-Identifier: (Apache-2.0 OR GPL-2.0-only)
// The XDP program `hyflow switch --io afxdp` attaches to every port: the switch's NIC tier.
//
// With the NIC tier off (`--nic none`) it only steers: every frame of port P's receive queue
// Q goes to the AF_XDP socket the switch registered for (P, Q) in `xsks` (with `--steer`, to
// one of the queue's sockets, below). With it on
// (`--nic xdp`) it is a match-action stage in front of that, as FlexNIC's RMT model and
// Open vSwitch's hardware offload put one in front of the host: the frame is parsed into the
// key words of hyflow's flow key that the stage can match (`struct nic_key`, word for word
// the engine's `FlowKey` words, so an entry installed from the engine matches exactly the
// frames the engine's entry matches), looked up in a tuple space (a list of masks, and one
// hash table keyed by mask and masked key), and on a hit the entry's actions run here: the
// header rewrites with Open vSwitch's incremental checksum updates, VLAN pops and pushes,
// and a redirect to the output port (or a drop). A miss, and every frame the parse below does
// not take in whole (IPv6, a third tag, anything malformed), goes to userspace, where
// the engine decides it as before. The stage only serves what it can do exactly as the
// engine would; what it cannot, userspace never installs.
//
// With steering on (`--steer FIELDS`, FlexNIC §2's steering), each receive queue has a
// socket per core, all on one UMEM, and a frame for userspace goes to the core its fields
// hash to (`steering`), so that every frame of a flow lands on the same core.
//
// One copy of the program and its maps serves every port: `ports` says which port an
// interface is, `out_ports` where an output goes. Entry counters (packets, bytes, last hit)
// are updated here and read by the switch, as a NIC's counters are.
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

#include "memcached_key.h"
#include "storm_tuple.h"

#define MAX_PORTS 64
#define MAX_QUEUES 64
#define MAX_MASKS 64
#define MAX_PUSHES 2
#define KEY_WORDS 9

#define ETH_VLAN 0x8100
#define ETH_QINQ 0x88a8
#define ETH_IPV4 0x0800
#define ETH_ARP 0x0806
#define ETH_RARP 0x8035
#define ETH_NONE 0x05ff
#define VLAN_CFI 0x1000
#define FRAG_ANY 1
#define FRAG_LATER 2
#define IP_ICMP 1
#define IP_IGMP 2
#define IP_TCP 6
#define IP_UDP 17
#define IP_SCTP 132
#define IP_ICMPV6 58

// The key words, in this order (hyflow's `packet::field::word` layout):
// in_port | dl_dst·dl_type | dl_src·vlan_tci | vlan_tpid·vlan_tci2·vlan_tpid2 |
// nw_src·nw_dst | nw_frag·nw_tos·nw_ttl·nw_proto | arp_sha·tcp_flags | arp_tha | tp_src·tp_dst
struct nic_key {
	__u64 w[KEY_WORDS];
};

struct flow_key {
	__u32 mask;
	__u32 pad;
	struct nic_key key;
};

// What a hit does (`flags`), and the values it writes.
#define SET_DL_DST (1 << 0)
#define SET_DL_SRC (1 << 1)
#define SET_NW_SRC (1 << 2)
#define SET_NW_DST (1 << 3)
#define SET_NW_TOS (1 << 4)
#define SET_NW_TTL (1 << 5)
#define SET_TP_SRC (1 << 6)
#define SET_TP_DST (1 << 7)
#define OUT_DROP (1 << 8)

struct flow_value {
	__u32 flags;
	/* Index of the output port in `out_ports`. */
	__u32 out_port;
	/* Tags popped from the outside, then tags pushed, in push order. */
	__u8 pops;
	__u8 pushes;
	__u16 push_tpid[MAX_PUSHES];
	__u16 push_tci[MAX_PUSHES];
	__u8 dl_dst[6];
	__u8 dl_src[6];
	__u16 pad;
	__u32 nw_src;
	__u32 nw_dst;
	__u8 nw_tos;
	__u8 nw_ttl;
	__u16 tp_src;
	__u16 tp_dst;
	__u16 pad2;
	/* The entry's slot in `counters`. */
	__u32 counter;
	__u32 pad4;
	/* Whether the entry's match has bits beyond the lookup's mask, compared once the entry
	 * is found (`check_mask`, `check_value`; zero in the words with none): an exact-match
	 * table finds an entry by the flow's fields, then checks the rest, as hyflow's
	 * ExactMatch does. */
	__u32 verify;
	__u32 pad3;
	struct nic_key check_mask;
	struct nic_key check_value;
};

struct port_info {
	/* Index of the port: its sockets are `xsks[index * MAX_QUEUES + queue * cores + core]`
	 * (cores: `steering`'s, 1 without it). */
	__u32 index;
	/* Its OpenFlow port number (the key's in_port). */
	__u32 number;
};

struct config {
	/* Whether the NIC tier looks frames up at all. */
	__u32 nic;
	/* Masks in use: `masks[0..n_masks]`. */
	__u32 n_masks;
	/* Hits whose headers go to `samples`: a hit is sampled when a random u32 is below this
	 * (0: none; 0xffffffff: all). */
	__u32 sample;
	__u32 pad;
};

/* Which core's socket gets a frame for userspace: with `cores` above 1, the hash of the key
 * words under `mask` picks one of the receive queue's `cores` sockets — or, for a memcached
 * request (a UDP datagram to port `memcached_port`, when not 0), the hash of its key
 * (`--steer memcached.key`: FlexNIC's key-based steering, so that every request for a key
 * reaches the same core whichever client sent it) — or, for a FlexStorm tuple (a DCCP-Data
 * packet to port `storm_port`, when not 0), its worker number modulo `cores`
 * (`--steer storm.worker`: FlexStorm's demultiplexing, each worker's tuples on one core). */
struct steering {
	__u32 cores;
	__u32 memcached_port;
	struct nic_key mask;
	__u32 storm_port;
	__u32 pad;
};

/* A sampled hit's headers (never the frame): its key words as received, and its length. */
struct sample {
	struct nic_key key;
	__u32 bytes;
	__u32 pad;
};

struct {
	__uint(type, BPF_MAP_TYPE_XSKMAP);
	__uint(max_entries, MAX_PORTS * MAX_QUEUES);
	__type(key, __u32);
	__type(value, __u32);
} xsks SEC(".maps");

/* Ports by interface index: an array for the usual indexes (a lookup the verifier inlines),
 * a hash for the rare large ones. */
#define PORT_ARRAY 65536
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, PORT_ARRAY);
	__type(key, __u32);
	__type(value, struct port_info);
} ports SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, MAX_PORTS);
	__type(key, __u32);
	__type(value, struct port_info);
} ports_by_large_index SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_DEVMAP);
	__uint(max_entries, MAX_PORTS);
	__type(key, __u32);
	__type(value, __u32);
} out_ports SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct config);
} config SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct steering);
} steering SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, MAX_MASKS);
	__type(key, __u32);
	__type(value, struct nic_key);
} masks SEC(".maps");

/* An entry's counters: frames and bytes that hit, and the first and last hits
 * (CLOCK_MONOTONIC ns; the first one is the install's first hit, which the switch measures).
 * Memory-mapped by the switch, which reads them as a NIC's counters are read, without a
 * system call per entry; a slot per entry of `flows`, sized with it. */
struct counters {
	__u64 packets;
	__u64 bytes;
	__u64 used_ns;
	__u64 first_ns;
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 65536);
	__uint(map_flags, BPF_F_MMAPABLE);
	__type(key, __u32);
	__type(value, struct counters);
} counters SEC(".maps");

/* Sized by the switch before it loads the program (the NIC table's entries). */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 65536);
	__type(key, struct flow_key);
	__type(value, struct flow_value);
} flows SEC(".maps");

/* Sampled headers of hits, for the offload policy's large-flow identification (Elixir §3.2):
 * 4 MiB, about 47,000 samples, 0.3 s of 150,000 samples/s between two drains. */
struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 1 << 22);
} samples SEC(".maps");

/* Scratch for the key being looked up (too big for the stack with the frame's state). */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 2);
	__type(key, __u32);
	__type(value, struct flow_key);
} scratch SEC(".maps");

static __always_inline __u16 get16(const void *p)
{
	__u16 v;
	__builtin_memcpy(&v, p, 2);
	return bpf_ntohs(v);
}

static __always_inline __u32 get32(const void *p)
{
	__u32 v;
	__builtin_memcpy(&v, p, 4);
	return bpf_ntohl(v);
}

static __always_inline void put16(void *p, __u16 v)
{
	v = bpf_htons(v);
	__builtin_memcpy(p, &v, 2);
}

static __always_inline void put32(void *p, __u32 v)
{
	v = bpf_htonl(v);
	__builtin_memcpy(p, &v, 4);
}

static __always_inline __u64 mac48(const __u8 *b)
{
	return ((__u64)b[0] << 40) | ((__u64)b[1] << 32) | ((__u64)b[2] << 24) | ((__u64)b[3] << 16) |
	       ((__u64)b[4] << 8) | (__u64)b[5];
}

/* RFC 1624 eqn. 3 as Open vSwitch's recalc_csum16 (hyflow's frame_rewrite::recalc_csum16). */
static __always_inline __u16 recalc16(__u16 csum, __u16 old, __u16 new)
{
	__u32 sum = (__u32)(__u16)~csum + (__u32)(__u16)~old + (__u32)new;
	sum = (sum & 0xffff) + (sum >> 16);
	sum = (sum & 0xffff) + (sum >> 16);
	return (__u16)~sum;
}

static __always_inline __u16 recalc32(__u16 csum, __u32 old, __u32 new)
{
	csum = recalc16(csum, old >> 16, new >> 16);
	return recalc16(csum, old & 0xffff, new & 0xffff);
}

/* Where the parse found the headers (offsets from the frame's start). */
struct layout {
	__u32 l3;
	__u32 l4;
	/* Bytes of the transport header and payload within the IP packet (0: none). */
	__u32 l4_len;
	__u32 tags;
	__u8 nw_proto;
	__u8 later_fragment;
	__u8 ipv4;
};

/* Parses the frame into `k` as hyflow's parse_frame_with_layout does, for the frames it takes
 * in whole; returns 0, or -1 for a frame userspace must parse (it then never looks up). */
static __always_inline int parse(void *data, void *end, __u32 in_port, struct nic_key *k, struct layout *l)
{
	__u8 *p = data;
	if ((void *)(p + 14) > end)
		return -1;
	__u64 dst = mac48(p), src = mac48(p + 6);
	__u16 type = get16(p + 12);
	__u32 off = 14;
	__u16 tci1 = 0, tpid1 = 0, tci2 = 0, tpid2 = 0;
	l->tags = 0;
#pragma unroll
	for (int t = 0; t < 2; t++) {
		if (type != ETH_VLAN && type != ETH_QINQ)
			break;
		if ((void *)(p + off + 4) > end)
			return -1;
		__u16 tci = get16(p + off) | VLAN_CFI;
		if (t == 0) {
			tpid1 = type;
			tci1 = tci;
		} else {
			tpid2 = type;
			tci2 = tci;
		}
		l->tags++;
		type = get16(p + off + 2);
		off += 4;
	}
	/* A third tag: userspace (the engine reads its TPID as the EtherType). */
	if (type == ETH_VLAN || type == ETH_QINQ)
		return -1;
	/* An 802.3 length: LLC/SNAP with a zero OUI carries an EtherType (if it is one);
	 * anything else is Open vSwitch's FLOW_DL_TYPE_NONE, with nothing after it. */
	if (type < 0x0600) {
		__u8 *llc = p + off;
		if ((void *)(llc + 8) <= end && llc[0] == 0xaa && llc[1] == 0xaa && llc[2] == 0x03 && llc[3] == 0 &&
		    llc[4] == 0 && llc[5] == 0) {
			__u16 snap = get16(llc + 6);
			if (snap >= 0x0600) {
				type = snap;
				off += 8;
			} else {
				type = ETH_NONE;
			}
		} else {
			type = ETH_NONE;
		}
	}
	k->w[0] = (__u64)in_port << 32;
	k->w[1] = (dst << 16) | type;
	k->w[2] = (src << 16) | tci1;
	k->w[3] = ((__u64)tpid1 << 48) | ((__u64)tci2 << 32) | ((__u64)tpid2 << 16);
	k->w[4] = 0;
	k->w[5] = 0;
	k->w[6] = 0;
	k->w[7] = 0;
	k->w[8] = 0;
	l->l3 = off;
	l->l4 = 0;
	l->l4_len = 0;
	l->ipv4 = 0;
	l->later_fragment = 0;
	l->nw_proto = 0;
	if (type == ETH_IPV4) {
		__u8 *ip = p + off;
		if ((void *)(ip + 20) > end)
			return -1;
		__u32 ihl = (ip[0] & 0x0f) * 4;
		__u32 total = get16(ip + 2);
		__u32 wire = (__u32)((__u8 *)end - ip);
		if (ihl < 20 || total > wire || ihl > total)
			return -1;
		__u8 proto = ip[9];
		__u16 frag_off = get16(ip + 6);
		__u8 frag = 0;
		if (frag_off & 0x3fff) {
			frag = FRAG_ANY;
			if (frag_off & 0x1fff)
				frag |= FRAG_LATER;
		}
		k->w[4] = ((__u64)get32(ip + 12) << 32) | get32(ip + 16);
		k->w[5] = ((__u64)frag << 24) | ((__u64)ip[1] << 16) | ((__u64)ip[8] << 8) | proto;
		l->ipv4 = 1;
		l->nw_proto = proto;
		l->l4 = off + ihl;
		l->l4_len = total - ihl;
		if (frag & FRAG_LATER) {
			l->later_fragment = 1;
			return 0;
		}
		if (ihl > 60)
			return -1;
		__u8 *tp = ip + ihl;
		__u32 len = total - ihl;
		__u32 need;
		switch (proto) {
		case IP_TCP:
			need = 20;
			break;
		case IP_SCTP:
			need = 12;
			break;
		case IP_UDP:
		case IP_ICMP:
		case IP_IGMP:
		case IP_ICMPV6:
			need = 8;
			break;
		default:
			return 0;
		}
		if (len < need)
			return -1;
		if (proto == IP_TCP) {
			if ((void *)(tp + 20) > end)
				return -1;
			__u32 doff = (tp[12] >> 4) * 4;
			if (doff < 20 || doff > len)
				return -1;
			k->w[6] = get16(tp + 12) & 0x0fff;
			k->w[8] = ((__u64)get16(tp) << 48) | ((__u64)get16(tp + 2) << 32);
		} else if (proto == IP_UDP || proto == IP_SCTP) {
			if ((void *)(tp + 8) > end)
				return -1;
			k->w[8] = ((__u64)get16(tp) << 48) | ((__u64)get16(tp + 2) << 32);
		} else {
			if ((void *)(tp + 8) > end)
				return -1;
			k->w[8] = ((__u64)tp[0] << 48) | ((__u64)tp[1] << 32);
		}
		return 0;
	}
	if (type == ETH_ARP || type == ETH_RARP) {
		__u8 *a = p + off;
		if ((void *)(a + 28) > end)
			return -1;
		int eth_ipv4 = a[0] == 0 && a[1] == 1 && a[2] == 8 && a[3] == 0 && a[4] == 6 && a[5] == 4;
		if (!eth_ipv4)
			return 0;
		__u16 op = get16(a + 6);
		if (op <= 0xff)
			k->w[5] = op;
		k->w[6] = mac48(a + 8) << 16;
		k->w[4] = ((__u64)get32(a + 14) << 32) | get32(a + 24);
		k->w[7] = mac48(a + 18) << 16;
		return 0;
	}
	/* IPv6 (its extension headers): userspace. Other EtherTypes, and none: L2 only. */
	if (type == 0x86dd)
		return -1;
	return 0;
}

/* The entry matching `key`, if any (the key's scratch slot is `k`). */
static __always_inline struct flow_value *lookup(struct flow_key *fk, const struct nic_key *key, __u32 n_masks)
{
	for (__u32 i = 0; i < MAX_MASKS; i++) {
		if (i >= n_masks)
			break;
		__u32 idx = i;
		struct nic_key *m = bpf_map_lookup_elem(&masks, &idx);
		if (!m)
			break;
		fk->mask = i;
		fk->pad = 0;
#pragma unroll
		for (int w = 0; w < KEY_WORDS; w++)
			fk->key.w[w] = key->w[w] & m->w[w];
		struct flow_value *v = bpf_map_lookup_elem(&flows, fk);
		if (!v)
			continue;
		if (!v->verify)
			return v;
		int same = 1;
#pragma unroll
		for (int w = 0; w < KEY_WORDS; w++)
			if ((key->w[w] & v->check_mask.w[w]) != v->check_value.w[w])
				same = 0;
		if (same)
			return v;
	}
	return 0;
}

/* The IPv4 and transport rewrites of a hit, as frame_rewrite::rewrite_ipv4 and
 * rewrite_transport do them (the same checksum arithmetic in the same order). */
static __always_inline int rewrite_l3_l4(void *data, void *end, const struct layout *l, const struct flow_value *v)
{
	if (!l->ipv4)
		return 0;
	__u8 *ip = (__u8 *)data + (l->l3 & 0xff);
	if ((void *)(ip + 20) > end)
		return -1;
	__u8 *tp = (__u8 *)data + (l->l4 & 0x1ff);
	int has_tp = l->l4 != 0;
	__u32 tlen = l->l4_len;
	if (v->flags & (SET_NW_SRC | SET_NW_DST)) {
#pragma unroll
		for (int a = 0; a < 2; a++) {
			__u32 flag = a == 0 ? SET_NW_SRC : SET_NW_DST;
			if (!(v->flags & flag))
				continue;
			__u8 *at = ip + (a == 0 ? 12 : 16);
			__u32 old = get32(at), new = a == 0 ? v->nw_src : v->nw_dst;
			if (old == new)
				continue;
			if (has_tp && l->nw_proto == IP_TCP && tlen >= 20) {
				if ((void *)(tp + 20) > end)
					return -1;
				put16(tp + 16, recalc32(get16(tp + 16), old, new));
			} else if (has_tp && l->nw_proto == IP_UDP && tlen >= 8) {
				if ((void *)(tp + 8) > end)
					return -1;
				__u16 c = get16(tp + 6);
				if (c) {
					c = recalc32(c, old, new);
					put16(tp + 6, c ? c : 0xffff);
				}
			}
			put16(ip + 10, recalc32(get16(ip + 10), old, new));
			put32(at, new);
		}
	}
	if ((v->flags & SET_NW_TOS) && ip[1] != v->nw_tos) {
		put16(ip + 10, recalc16(get16(ip + 10), ip[1], v->nw_tos));
		ip[1] = v->nw_tos;
	}
	if ((v->flags & SET_NW_TTL) && ip[8] != v->nw_ttl) {
		put16(ip + 10, recalc16(get16(ip + 10), (__u16)ip[8] << 8, (__u16)v->nw_ttl << 8));
		ip[8] = v->nw_ttl;
	}
	if (!(v->flags & (SET_TP_SRC | SET_TP_DST)) || !has_tp || l->later_fragment)
		return 0;
	/* TCP: only within its header and options, as dp_packet_get_tcp_payload. UDP: both ports
	 * first, then the zero rule once, as packet_set_udp_port. The checksum is updated per
	 * port that changes, in order, which is what writing it after each one gives. */
	__u32 csum_at;
	if (l->nw_proto == IP_TCP) {
		if ((void *)(tp + 20) > end)
			return -1;
		__u32 hl = (tp[12] >> 4) * 4;
		if (tlen < 20 || hl < 20 || hl > tlen)
			return 0;
		csum_at = 16;
	} else if (l->nw_proto == IP_UDP && tlen >= 8) {
		if ((void *)(tp + 8) > end)
			return -1;
		csum_at = 6;
	} else {
		return 0;
	}
	__u16 csum = get16(tp + csum_at), sum = csum;
#pragma unroll
	for (int a = 0; a < 2; a++) {
		__u32 flag = a == 0 ? SET_TP_SRC : SET_TP_DST;
		if (!(v->flags & flag))
			continue;
		__u16 old = get16(tp + 2 * a), new = a == 0 ? v->tp_src : v->tp_dst;
		if (old != new) {
			sum = recalc16(sum, old, new);
			put16(tp + 2 * a, new);
		}
	}
	if (l->nw_proto == IP_TCP)
		put16(tp + csum_at, sum);
	else if (csum)
		put16(tp + csum_at, sum ? sum : 0xffff);
	return 0;
}

/* Stamped in front of every frame handed to software (XDP metadata, which AF_XDP copies into
 * the UMEM just before the frame): when the program let it go, CLOCK_MONOTONIC, so that the
 * switch measures each frame's time in its ring and its core, as `sim` gives a software
 * packet's latency. */
struct stamp {
	__u64 magic;
	__u64 handed_ns;
};
#define STAMP_MAGIC 0x6879666c6f777473ULL /* "hyflowts" */

/* 0 when this kernel refuses bpf_xdp_adjust_meta in XDP programs (the loader probes it and
 * sets this before loading): a branch on a read-only constant is pruned, so the verifier never
 * sees the call, and frames reach software without metadata. */
const volatile __u32 hyflow_meta = 1;

static __always_inline int to_software(struct xdp_md *ctx, __u32 slot)
{
	if (hyflow_meta && bpf_xdp_adjust_meta(ctx, -(int)sizeof(struct stamp)) == 0) {
		struct stamp *s = (void *)(long)ctx->data_meta;
		if ((void *)(s + 1) <= (void *)(long)ctx->data) {
			s->magic = STAMP_MAGIC;
			s->handed_ns = bpf_ktime_get_ns();
		}
	}
	return bpf_redirect_map(&xsks, slot, XDP_PASS);
}

/* Which of `st`'s cores a frame of key `k` goes to: a multiply-xorshift hash of the steered
 * words, mixed once more at the end (any hash that spreads flows evenly serves; the switch
 * never recomputes it). */
static __always_inline __u32 steer(const struct nic_key *k, const struct steering *st, __u32 cores)
{
	__u64 h = 0x9e3779b97f4a7c15ULL;
#pragma unroll
	for (int w = 0; w < KEY_WORDS; w++) {
		h = (h ^ (k->w[w] & st->mask.w[w])) * 0xff51afd7ed558ccdULL;
		h ^= h >> 33;
	}
	/* A last mix (splitmix64's): a product's low bits depend only on its operands' low bits,
	 * so without it the high half of the last word (tp_src, tp_dst) never reached the bits
	 * the core is taken from, and flows differing only in their ports shared a core. */
	h ^= h >> 31;
	h *= 0x94d049bb133111ebULL;
	h ^= h >> 29;
	return (__u32)(h >> 32) % cores;
}

SEC("xdp")
int hyflow_port(struct xdp_md *ctx)
{
	__u32 ifindex = ctx->ingress_ifindex;
	struct port_info *port = ifindex < PORT_ARRAY ? bpf_map_lookup_elem(&ports, &ifindex)
						      : bpf_map_lookup_elem(&ports_by_large_index, &ifindex);
	/* An array slot of no port reads as index 0 and number 0: number 0 is no OpenFlow port. */
	if (!port || port->number == 0)
		return XDP_PASS;
	__u32 zero = 0;
	struct steering *st = bpf_map_lookup_elem(&steering, &zero);
	__u32 cores = st && st->cores > 1 ? st->cores : 1;
	__u32 slot = port->index * MAX_QUEUES + ctx->rx_queue_index * cores;
	struct config *cfg = bpf_map_lookup_elem(&config, &zero);
	int nic = cfg && cfg->nic && cfg->n_masks;
	if (!nic && cores == 1)
		return to_software(ctx, slot);
	struct flow_key *fk = bpf_map_lookup_elem(&scratch, &zero);
	__u32 one = 1;
	struct flow_key *keyslot = bpf_map_lookup_elem(&scratch, &one);
	if (!fk || !keyslot)
		return to_software(ctx, slot);
	void *data = (void *)(long)ctx->data, *end = (void *)(long)ctx->data_end;
	struct layout l;
	int parsed;
	/* A frame parsed in part (IPv6, a third tag) is steered by the words it got. */
	if (cores > 1)
		__builtin_memset(&keyslot->key, 0, sizeof(keyslot->key));
	parsed = parse(data, end, port->number, &keyslot->key, &l);
	if (cores > 1 && st) {
		__u32 hash;
		__u32 worker;
		if (st->memcached_port && parsed == 0 && l.ipv4 && l.nw_proto == IP_UDP && !l.later_fragment &&
		    l.l4 && ((keyslot->key.w[8] >> 32) & 0xffff) == st->memcached_port && l.l4_len >= 8 &&
		    mc_request_hash(ctx, l.l4 + 8, l.l4_len - 8, &hash) == 0)
			slot += hash % cores;
		else if (st->storm_port && parsed == 0 && l.ipv4 && l.nw_proto == IP_DCCP && !l.later_fragment &&
			 l.l4 && storm_worker(ctx, l.l4, l.l4_len, st->storm_port, &worker) == 0)
			slot += worker % cores;
		else
			slot += steer(&keyslot->key, st, cores);
	}
	if (parsed < 0 || !nic || !cfg)
		return to_software(ctx, slot);
	struct flow_value *v = lookup(fk, &keyslot->key, cfg->n_masks);
	if (!v)
		return to_software(ctx, slot);
	__u64 bytes = (__u64)((__u8 *)end - (__u8 *)data);
	struct counters *c = bpf_map_lookup_elem(&counters, &v->counter);
	if (c) {
		__sync_fetch_and_add(&c->packets, 1);
		__sync_fetch_and_add(&c->bytes, bytes);
		__u64 now = bpf_ktime_get_ns();
		c->used_ns = now;
		if (!c->first_ns)
			c->first_ns = now;
	}
	if (cfg->sample && (cfg->sample == 0xffffffff || bpf_get_prandom_u32() < cfg->sample)) {
		struct sample *s = bpf_ringbuf_reserve(&samples, sizeof(*s), 0);
		if (s) {
			__builtin_memcpy(&s->key, &keyslot->key, sizeof(s->key));
			s->bytes = bytes;
			s->pad = 0;
			/* No wake-up: the switch drains the ring on its own schedule (a wake-up per
			 * sample would cost the host more than the sample). */
			bpf_ringbuf_submit(s, BPF_RB_NO_WAKEUP);
		}
	}
	if (v->flags & OUT_DROP)
		return XDP_DROP;
	if (rewrite_l3_l4(data, end, &l, v) < 0)
		return XDP_DROP;
	__u8 *p = data;
	if ((void *)(p + 14) > end)
		return XDP_DROP;
	if (v->flags & SET_DL_DST)
		__builtin_memcpy(p, v->dl_dst, 6);
	if (v->flags & SET_DL_SRC)
		__builtin_memcpy(p + 6, v->dl_src, 6);
	/* VLAN: pops from the outside, then pushes (frame_rewrite::rewrite_vlans). */
	__u8 macs[12];
#pragma unroll
	for (int i = 0; i < MAX_PUSHES; i++) {
		if (i >= v->pops)
			break;
		data = (void *)(long)ctx->data;
		end = (void *)(long)ctx->data_end;
		p = data;
		if ((void *)(p + 18) > end)
			return XDP_DROP;
		__builtin_memcpy(macs, p, 12);
		__builtin_memcpy(p + 4, macs, 12);
		if (bpf_xdp_adjust_head(ctx, 4))
			return XDP_DROP;
	}
#pragma unroll
	for (int i = 0; i < MAX_PUSHES; i++) {
		if (i >= v->pushes)
			break;
		if (bpf_xdp_adjust_head(ctx, -4))
			return XDP_DROP;
		data = (void *)(long)ctx->data;
		end = (void *)(long)ctx->data_end;
		p = data;
		if ((void *)(p + 18) > end)
			return XDP_DROP;
		__builtin_memcpy(macs, p + 4, 12);
		__builtin_memcpy(p, macs, 12);
		put16(p + 12, v->push_tpid[i]);
		put16(p + 14, v->push_tci[i] & ~VLAN_CFI);
	}
	return bpf_redirect_map(&out_ports, v->out_port, 0);
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
