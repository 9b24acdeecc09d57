//! The Linux interfaces a ports file names: index, MTU, receive queues.

use std::net::Ipv4Addr;

use anyhow::{anyhow, Context, Result};

/// An interface the switch attaches to, as the ports file names it.
#[derive(Clone, Debug)]
pub struct Interface {
    /// The interface's name.
    pub name: String,
    /// The OpenFlow port number it is.
    pub port: u32,
    /// The kernel's index of it.
    pub ifindex: u32,
    /// Its MTU (bytes of IP packet).
    pub mtu: u32,
    /// Its receive queues (each gets a socket of its own).
    pub rx_queues: u32,
    /// Whether it is a veth.
    pub veth: bool,
}

/// Reads `/sys/class/net/NAME/FILE` (the namespace's own view under `ip netns exec`).
fn sys(name: &str, file: &str) -> Result<String> {
    let path = format!("/sys/class/net/{name}/{file}");
    Ok(std::fs::read_to_string(&path).with_context(|| path.clone())?.trim().to_string())
}

/// The name of the driver of interface `name` (`ethtool -i`), if the kernel says.
fn driver(name: &str) -> Option<String> {
    /// `struct ethtool_drvinfo` (linux/ethtool.h).
    #[repr(C)]
    struct DrvInfo {
        cmd: u32,
        driver: [u8; 32],
        rest: [u8; 32 * 4 + 12 + 5 * 4],
    }
    const ETHTOOL_GDRVINFO: u32 = 0x0000_0003;
    let mut info = DrvInfo { cmd: ETHTOOL_GDRVINFO, driver: [0; 32], rest: [0; 32 * 4 + 12 + 5 * 4] };
    // SAFETY: a zeroed ifreq is valid; the name is copied in bounded by its size.
    let mut req: libc::ifreq = unsafe { std::mem::zeroed() };
    for (d, s) in req.ifr_name.iter_mut().zip(name.bytes().take(libc::IFNAMSIZ - 1)) {
        *d = s as libc::c_char;
    }
    req.ifr_ifru.ifru_data = &mut info as *mut DrvInfo as *mut libc::c_char;
    // SAFETY: a datagram socket only to ask the kernel about the interface; closed below.
    let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
    if fd < 0 {
        return None;
    }
    // SAFETY: SIOCETHTOOL reads `req` and writes `info`, which outlive the call.
    let r = unsafe { libc::ioctl(fd, libc::SIOCETHTOOL, &mut req) };
    // SAFETY: `fd` is ours.
    unsafe { libc::close(fd) };
    if r < 0 {
        return None;
    }
    let end = info.driver.iter().position(|&b| b == 0).unwrap_or(info.driver.len());
    Some(String::from_utf8_lossy(&info.driver[..end]).into_owned())
}

impl Interface {
    /// The interface `name`, which the pipeline calls port `port`.
    pub fn lookup(name: &str, port: u32) -> Result<Interface> {
        let ifindex = crate::afpacket::ifindex(name)?;
        let mtu = sys(name, "mtu")?.parse().with_context(|| format!("{name}: MTU"))?;
        let rx_queues = std::fs::read_dir(format!("/sys/class/net/{name}/queues"))
            .map(|d| {
                d.filter_map(|e| e.ok())
                    .filter(|e| e.file_name().to_string_lossy().starts_with("rx-"))
                    .count()
            })
            .unwrap_or(1)
            .max(1) as u32;
        let veth = driver(name).as_deref() == Some("veth");
        Ok(Interface { name: name.to_string(), port, ifindex, mtu, rx_queues, veth })
    }

    /// The longest frame it carries: the MTU, the Ethernet header and two VLAN tags.
    pub fn max_frame(&self) -> usize {
        self.mtu as usize + 14 + 8
    }
}

/// A port held by this switch: a second switch on the same interface is refused, since two
/// would split its frames between them. Held by an abstract Unix socket named after the
/// interface's index, which the kernel releases when the process ends however it ends, and
/// which lives in the network namespace's own abstract namespace (as interface indexes do).
pub struct PortClaim {
    _socket: std::os::unix::net::UnixListener,
}

impl Interface {
    /// Claims the interface for this switch, or says who holds it.
    pub fn claim(&self) -> Result<PortClaim> {
        use std::os::linux::net::SocketAddrExt;
        let name = format!("hyflow/port/{}", self.ifindex);
        let addr = std::os::unix::net::SocketAddr::from_abstract_name(name.as_bytes())?;
        match std::os::unix::net::UnixListener::bind_addr(&addr) {
            Ok(socket) => Ok(PortClaim { _socket: socket }),
            Err(e) if e.kind() == std::io::ErrorKind::AddrInUse => {
                anyhow::bail!("{}: another hyflow switch already forwards on this interface", self.name)
            }
            Err(e) => Err(e).with_context(|| format!("{}: claiming the interface", self.name)),
        }
    }
}

/// Capabilities the switch needs, by the bit Linux numbers them with.
const CAP_NET_ADMIN: u32 = 12;
const CAP_NET_RAW: u32 = 13;
const CAP_SYS_ADMIN: u32 = 21;
const CAP_BPF: u32 = 39;

/// The process's effective capabilities (`CapEff` of /proc/self/status).
fn effective_capabilities() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            let line = s.lines().find(|l| l.starts_with("CapEff:"))?;
            u64::from_str_radix(line.trim_start_matches("CapEff:").trim(), 16).ok()
        })
        .unwrap_or(0)
}

/// Refuses, in one line naming what is missing, a process that cannot open packet sockets
/// and attach programs; says whether it may load XDP programs (`CAP_BPF`, or
/// `CAP_SYS_ADMIN` as before Linux 5.8).
pub fn check_privileges() -> Result<bool> {
    let caps = effective_capabilities();
    let has = |bit: u32| caps & (1 << bit) != 0;
    let missing: Vec<&str> = [(CAP_NET_ADMIN, "CAP_NET_ADMIN"), (CAP_NET_RAW, "CAP_NET_RAW")]
        .into_iter()
        .filter(|&(bit, _)| !has(bit))
        .map(|(_, name)| name)
        .collect();
    if !missing.is_empty() {
        anyhow::bail!(
            "hyflow switch needs root, or the capabilities CAP_NET_ADMIN, CAP_NET_RAW and CAP_BPF (missing: {})",
            missing.join(", ")
        );
    }
    Ok(has(CAP_BPF) || has(CAP_SYS_ADMIN))
}

/// What became of an interface since the switch attached to it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LinkState {
    /// Present and up (or its state unknown, as for some virtual devices).
    Up,
    /// Present, administratively or operationally down.
    Down,
    /// Deleted (or replaced by another interface of the same name).
    Gone,
}

/// The state of interface `name`, which had index `ifindex` when the switch attached.
pub fn link_state(name: &str, ifindex: u32) -> LinkState {
    match sys(name, "ifindex").ok().and_then(|i| i.parse::<u32>().ok()) {
        Some(i) if i == ifindex => match sys(name, "operstate").as_deref() {
            Ok("down" | "lowerlayerdown" | "notpresent") => LinkState::Down,
            _ => LinkState::Up,
        },
        _ => LinkState::Gone,
    }
}

/// The interface's first IPv4 address.
pub fn ipv4_of(name: &str) -> Result<Ipv4Addr> {
    let mut addrs: *mut libc::ifaddrs = std::ptr::null_mut();
    // SAFETY: getifaddrs fills `addrs` with a list freed below.
    if unsafe { libc::getifaddrs(&mut addrs) } != 0 {
        return Err(std::io::Error::last_os_error()).context("listing addresses");
    }
    let mut found = None;
    let mut at = addrs;
    while !at.is_null() {
        // SAFETY: `at` is a node of the list getifaddrs made.
        let a = unsafe { &*at };
        // SAFETY: ifa_name is a C string; ifa_addr, when set, a sockaddr of its family.
        let matches = unsafe { std::ffi::CStr::from_ptr(a.ifa_name) }.to_bytes() == name.as_bytes();
        if matches && !a.ifa_addr.is_null() && unsafe { (*a.ifa_addr).sa_family } as i32 == libc::AF_INET {
            // SAFETY: an AF_INET address is a sockaddr_in.
            let sin = unsafe { &*(a.ifa_addr as *const libc::sockaddr_in) };
            found = Some(Ipv4Addr::from(u32::from_be(sin.sin_addr.s_addr)));
            break;
        }
        at = a.ifa_next;
    }
    // SAFETY: the list from getifaddrs, freed once.
    unsafe { libc::freeifaddrs(addrs) };
    found.ok_or_else(|| anyhow!("{name} has no IPv4 address: the server answers on the interface's address"))
}

/// The interface's MAC address.
pub fn mac_of(name: &str) -> Result<[u8; 6]> {
    let path = format!("/sys/class/net/{name}/address");
    let text = std::fs::read_to_string(&path).with_context(|| path.clone())?;
    let bytes: Vec<u8> =
        text.trim().split(':').map(|b| u8::from_str_radix(b, 16)).collect::<Result<_, _>>().context("MAC")?;
    bytes.try_into().map_err(|_| anyhow!("{path}: not a MAC address"))
}
