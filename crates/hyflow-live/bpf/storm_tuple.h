// SPDX-License-Identifier: (Apache-2.0 OR GPL-2.0-only)
// A FlexStorm tuple as the XDP programs read it (`hyflow storm`'s, and the switch's for
// `--steer storm.worker`): a DCCP-Data (or DataAck) packet with 48-bit sequence numbers whose
// payload starts with the destination worker and the data's length, as hyflow's
// `storm::dccp::parse` reads it.
#ifndef HYFLOW_STORM_TUPLE_H
#define HYFLOW_STORM_TUPLE_H

#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

#define IP_DCCP 33
#define DCCP_DATA 2
#define DCCP_ACK 3
#define DCCP_DATA_ACK 4
/* A DCCP-Data header with extended (48-bit) sequence numbers. */
#define DATA_HEADER 16
#define ACK_HEADER 24
/* The tuple's header: worker and data length, 16 bits each. */
#define TUPLE_HEADER 4

/* The worker of the tuple whose DCCP segment starts `l4` bytes into the frame (`l4_len` bytes
 * to the IP packet's end), if it is one sent to DCCP port `port`; 0, or -1 for anything else.
 * Read with `bpf_xdp_load_bytes`, so the segment may start at any offset the parser found. */
static __always_inline int storm_worker(struct xdp_md *ctx, __u32 l4, __u32 l4_len, __u32 port, __u32 *worker)
{
	__u8 d[DATA_HEADER];
	if (l4_len < DATA_HEADER + TUPLE_HEADER || bpf_xdp_load_bytes(ctx, l4, d, sizeof(d)))
		return -1;
	__u8 type = (d[8] >> 1) & 0x0f;
	__u32 offset = d[4] * 4;
	if ((((__u32)d[2] << 8) | d[3]) != port || !(d[8] & 1) || (type != DCCP_DATA && type != DCCP_DATA_ACK) ||
	    offset < DATA_HEADER || offset + TUPLE_HEADER > l4_len)
		return -1;
	__u8 w[2];
	if (bpf_xdp_load_bytes(ctx, l4 + offset, w, sizeof(w)))
		return -1;
	*worker = (__u32)w[0] << 8 | w[1];
	return 0;
}

#endif
