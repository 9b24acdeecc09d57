// SPDX-License-Identifier: (Apache-2.0 OR GPL-2.0-only)
// A memcached request's steering key and its hash, as `hyflow kvs`'s program and the switch's
// (`--steer memcached.key`) compute them: the first key of an ASCII command (the word after a
// command of up to 7 letters), or a binary request's key; FNV-1a over it, hyflow's
// `kvs::key_hash` bit for bit (and `kvs::memcached::steering_key` for which bytes).
#ifndef HYFLOW_MEMCACHED_KEY_H
#define HYFLOW_MEMCACHED_KEY_H

#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

#define MC_MAX_KEY 250
#define MC_FRAME_HEADER 8
#define MC_BINARY_HEADER 24
/* Payload bytes looked at: the frame header, a binary header with 255 bytes of extras, a key. */
#define MC_PEEK 544
/* Bytes of the scratch buffer the payload is copied into (a power of two above MC_PEEK). */
#define MC_SCRATCH 1024

/* The payload's first bytes, copied out of the frame (the key's offset varies too much for
 * direct packet reads the verifier can follow). */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u8[MC_SCRATCH]);
} mc_scratch SEC(".maps");

/* FNV-1a's state over a key being hashed, one byte per step of `bpf_loop` (which the
 * verifier checks once, not once per byte and per path into it). */
struct mc_hash_state {
	__u64 len;
	__u32 start;
	__u32 fixed;
	__u32 h;
	__u32 n;
	__u32 too_long;
	__u32 pad;
};

/* One byte of the key at `start` (up to `len` bytes of the scratch buffer hold the payload):
 * the key ends at a space, CR, LF or the payload's end (ASCII), or after `fixed` bytes
 * (binary, `fixed` nonzero); a key longer than memcached takes sets `too_long`. */
static long mc_hash_step(__u32 i, void *ctx)
{
	struct mc_hash_state *s = ctx;
	__u32 zero = 0;
	__u8 *buf = bpf_map_lookup_elem(&mc_scratch, &zero);
	__u32 j = s->start + i;
	if (!buf || (s->fixed && i == s->fixed) || j >= s->len)
		return 1;
	__u8 c = buf[j & (MC_SCRATCH - 1)];
	if (!s->fixed && (c == ' ' || c == '\r' || c == '\n'))
		return 1;
	if (i == MC_MAX_KEY) {
		s->too_long = 1;
		return 1;
	}
	s->h ^= c;
	s->h *= 0x01000193;
	s->n++;
	return 0;
}

/* FNV-1a over the key at `start`; 0 and the hash, or -1 for no key (empty, or longer than
 * memcached takes). */
static __always_inline int mc_hash_key(__u32 start, __u64 len, __u32 fixed, __u32 *hash)
{
	struct mc_hash_state s = { .len = len, .start = start, .fixed = fixed, .h = 0x811c9dc5 };
	bpf_loop(MC_MAX_KEY + 1, mc_hash_step, &s, 0);
	if (s.too_long || s.n == 0 || (fixed && s.n != fixed))
		return -1;
	*hash = s.h;
	return 0;
}

/* The hash of the steering key of the memcached datagram whose payload (frame header
 * included) is `payload` bytes at `payload_at` in the frame, copied into `mc_scratch`; 0 and
 * the hash, or -1 for a request without one. */
static __always_inline int mc_request_hash(struct xdp_md *ctx, __u32 payload_at, __u32 payload, __u32 *hash)
{
	__u32 zero = 0;
	__u8 *buf = bpf_map_lookup_elem(&mc_scratch, &zero);
	if (!buf || payload <= MC_FRAME_HEADER)
		return -1;
	__u64 n = payload < MC_PEEK ? payload : MC_PEEK;
	/* Bounded where the verifier sees it (the compiler would otherwise pass the unclamped
	 * register). */
	asm volatile("%0 &= 1023" : "+r"(n));
	if (n == 0 || bpf_xdp_load_bytes(ctx, payload_at, buf, n))
		return -1;
	if (buf[MC_FRAME_HEADER] == 0x80) {
		/* Binary: the key after the header and the extras. */
		if (n < MC_FRAME_HEADER + MC_BINARY_HEADER)
			return -1;
		__u32 key_len = (__u32)buf[MC_FRAME_HEADER + 2] << 8 | buf[MC_FRAME_HEADER + 3];
		__u32 extras = buf[MC_FRAME_HEADER + 4];
		if (key_len == 0 || key_len > MC_MAX_KEY)
			return -1;
		return mc_hash_key(MC_FRAME_HEADER + MC_BINARY_HEADER + extras, n, key_len, hash);
	}
	/* ASCII: the word after the command (a space within its first 8 bytes). */
	__u32 space = 0;
#pragma unroll
	for (__u32 i = 0; i < 8; i++) {
		if (!space && MC_FRAME_HEADER + i < n && buf[MC_FRAME_HEADER + i] == ' ')
			space = i + 1;
	}
	if (!space)
		return -1;
	return mc_hash_key(MC_FRAME_HEADER + space, n, 0, hash);
}

#endif
