#!/usr/bin/env python3
"""The Open vSwitch vectors `livecheck.py` can observe on Linux: a copy of a cases file
without the packets whose expected outputs carry a VLAN tag.

livecheck reads what leaves the switch with plain AF_PACKET sockets, and the kernel's receive
path moves a frame's VLAN tag into metadata before packet sockets see it (skb_vlan_untag in
__netif_receive_skb_core; tcpdump gets it back through PACKET_AUXDATA, which livecheck does not
ask for), so a tagged output arrives looking untagged whatever the switch sent. Those packets
are checked by crates/hyflow-cli/tests/live_switch.rs, which reads the tag back.

Usage: livecheck_cases.py IN.json OUT.json   (prints how many packets it kept and left out)
"""
import json
import sys


def tagged(output):
    """Whether an expected output (a dict of fields, as the vectors give it) leaves tagged."""
    p = output["packet"]
    if "vlan_present" in p:
        return bool(p["vlan_present"])
    if "vlan_tci" in p:
        return int(str(p["vlan_tci"]), 0) & 0x1000 != 0
    return "dl_vlan" in p or "vlan_vid" in p


def main():
    src, dst = sys.argv[1:3]
    data = json.load(open(src))
    kept = left = 0
    for case in data["cases"]:
        packets = [p for p in case["packets"] if not any(tagged(o) for o in p["outputs"])]
        left += len(case["packets"]) - len(packets)
        kept += len(packets)
        case["packets"] = packets
    data["cases"] = [c for c in data["cases"] if c["packets"]]
    json.dump(data, open(dst, "w"))
    print("livecheck cases: %d packets kept, %d left out (tagged outputs, which a packet socket cannot see)" % (kept, left))


if __name__ == "__main__":
    main()
