// SPDX-License-Identifier: (Apache-2.0 OR GPL-2.0-only)
// The XDP program `hyflow switch --io afxdp` attaches to each port: every frame that arrives
// on receive queue Q goes to the AF_XDP socket the switch registered for Q in `xsks`; a queue
// with no socket (yet) leaves its frames to the kernel, as libxdp's default program does.
// One copy of the program (and of its map) is loaded per port, so queue numbers of
// different ports never meet in one map.
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

struct {
	__uint(type, BPF_MAP_TYPE_XSKMAP);
	__uint(max_entries, 64);
	__type(key, __u32);
	__type(value, __u32);
} xsks SEC(".maps");

SEC("xdp")
int hyflow_redirect(struct xdp_md *ctx)
{
	return bpf_redirect_map(&xsks, ctx->rx_queue_index, XDP_PASS);
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
