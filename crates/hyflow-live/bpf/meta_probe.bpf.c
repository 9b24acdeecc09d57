// SPDX-License-Identifier: (Apache-2.0 OR GPL-2.0-only)
/* Whether this kernel lets an XDP program call bpf_xdp_adjust_meta: loaded once (never
 * attached) before the real programs, which otherwise write their metadata (a timestamp, a
 * key hash) in front of frames for software with it. */
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

SEC("xdp")
int hyflow_meta_probe(struct xdp_md *ctx)
{
	bpf_xdp_adjust_meta(ctx, -8);
	return XDP_PASS;
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
