"""What the live scripts (live_bench.py, live_soak.py, kvs_bench.py, storm_bench.py) share:
commands that say why they failed, a switch namespace and a hosts namespace joined by veth
pairs (p<i> facing h<i>, IPv6 off so that the kernel sends nothing of its own), an application
server's namespace with one veth end (the other here), and a pcap of given frames."""
import struct
import subprocess


def sh(*cmd, check=True, env=None):
    """Runs `cmd`; its standard output, or an error naming the command and what it said."""
    r = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if check and r.returncode != 0:
        raise RuntimeError("%s: %s" % (" ".join(cmd), r.stderr.strip()))
    return r.stdout


def make(sw, host, ports):
    """Namespaces `sw` (ports p1..pN) and `host` (their peers h1..hN), made afresh."""
    remove(sw, host)
    for ns in (sw, host):
        sh("ip", "netns", "add", ns)
        sh("ip", "-n", ns, "link", "set", "lo", "up")
    for i in range(1, ports + 1):
        sh("ip", "-n", sw, "link", "add", "p%d" % i, "type", "veth", "peer", "name", "h%d" % i, "netns", host)
        for ns, dev in ((sw, "p%d" % i), (host, "h%d" % i)):
            sh("ip", "netns", "exec", ns, "sysctl", "-qw", "net.ipv6.conf.%s.disable_ipv6=1" % dev)
            sh("ip", "-n", ns, "link", "set", dev, "up")


def make_app(ns, host_if, inner, server_cidr, host_cidr=None):
    """Namespace `ns` holding veth end `inner` (address `server_cidr`), its peer `host_if` in
    this namespace (address `host_cidr`, if given), both up; made afresh."""
    remove_app(ns, host_if)
    sh("ip", "netns", "add", ns)
    sh("ip", "link", "add", host_if, "type", "veth", "peer", "name", inner, "netns", ns)
    if host_cidr:
        sh("ip", "addr", "add", host_cidr, "dev", host_if)
    sh("ip", "link", "set", host_if, "up")
    sh("ip", "-n", ns, "addr", "add", server_cidr, "dev", inner)
    sh("ip", "-n", ns, "link", "set", inner, "up")


def remove_app(ns, host_if):
    """Deletes an application server's namespace and veth, if they exist."""
    subprocess.run(["ip", "link", "del", host_if], capture_output=True)
    subprocess.run(["ip", "netns", "del", ns], capture_output=True)


def remove(sw, host):
    """Deletes both namespaces (and with them the veths), if they exist."""
    for ns in (sw, host):
        subprocess.run(["ip", "netns", "del", ns], capture_output=True)


def write_pcap(path, frames):
    """A pcap (Ethernet, microsecond stamps 1 µs apart) holding `frames`."""
    with open(path, "wb") as f:
        f.write(struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, 1))
        for i, fr in enumerate(frames):
            f.write(struct.pack("<IIII", i // 1000000, i % 1000000, len(fr), len(fr)) + fr)
