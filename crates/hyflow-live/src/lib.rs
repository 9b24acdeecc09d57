//! hyflow on real interfaces: `hyflow switch` runs the engine `replay` runs on the frames of
//! Linux interfaces (AF_XDP, or AF_PACKET where XDP cannot attach), `hyflow ctl` talks to it.
//!
//! Layers, front to back: [`args`] (the options), [`port_io`] (what the loop asks of packet
//! I/O) with its backends [`afpacket`] and `afxdp` (feature `afxdp`), [`pmd`] (a poll-mode
//! core: frames → engine → frames), [`forwarder`] (the state the cores share, and the main
//! thread), [`control`] (the control socket). The engine itself
//! never sees a socket or a clock: the loop passes time and parsed frames in.

pub mod afpacket;
#[cfg(feature = "afxdp")]
pub mod afxdp;
#[cfg(feature = "afxdp")]
pub mod app_program;
#[cfg(feature = "afxdp")]
pub mod app_sockets;
pub mod args;
pub mod control;
pub mod cost_fit;
pub mod forwarder;
pub mod holds;
pub mod interfaces;
pub mod kvs_args;
pub mod kvs_load;
#[cfg(feature = "afxdp")]
pub mod kvs_server;
pub mod live_policy;
pub mod nic_tier;
pub mod pmd;
pub mod port_io;
pub mod send;
pub mod steering;
pub mod storm_args;
pub mod storm_load;
#[cfg(feature = "afxdp")]
pub mod storm_server;
pub mod tsc;
pub mod tuple_queue;
pub mod udp_reply;
#[cfg(feature = "afxdp")]
pub mod xdp_meta;
#[cfg(feature = "afxdp")]
pub mod xdp_tier;

use std::os::unix::net::UnixStream;
use std::sync::atomic::AtomicBool;
use std::sync::{mpsc, Arc};
use std::time::Instant;

use anyhow::{anyhow, bail, Context, Result};

use hyflow::cost_model::CostModel;
use hyflow::nic::{MegaflowOffloadConfig, NicCapability, NicConfig};
use hyflow::offload::{registration, NicUpdates, OffloadPolicy, PolicyMachine, PolicyParams};
use hyflow::openflow::names::LOCAL_PORT;
use hyflow::openflow::Pipeline;
use hyflow::switch::Switch;
use hyflow_commands::switch::{host_config, mac_table};

use crate::args::{CtlArgs, IoArg, NicArg, SwitchArgs, XdpModeArg};
use crate::forwarder::{allowed_cpus, CorePlan, Forwarder, LivePort};
use crate::interfaces::Interface;
use crate::live_policy::LivePolicy;
use crate::pmd::RxQueue;
use crate::steering::Steering;

/// Runs `hyflow kvs` until SIGINT or SIGTERM, then prints its report.
pub fn run_kvs(a: kvs_args::KvsArgs) -> Result<()> {
    #[cfg(feature = "afxdp")]
    return kvs_server::run(a);
    #[cfg(not(feature = "afxdp"))]
    {
        let _ = a;
        bail!("hyflow kvs serves from AF_XDP queues: this hyflow was built without feature afxdp (build with --features hyflow-cli/afxdp; it needs clang and libbpf-dev)")
    }
}

/// Runs `hyflow storm` until SIGINT or SIGTERM, then prints its report.
pub fn run_storm(a: storm_args::StormArgs) -> Result<()> {
    #[cfg(feature = "afxdp")]
    return storm_server::run(a);
    #[cfg(not(feature = "afxdp"))]
    {
        let _ = a;
        bail!("hyflow storm runs an XDP program: this hyflow was built without feature afxdp (build with --features hyflow-cli/afxdp; it needs clang and libbpf-dev)")
    }
}

/// Runs `hyflow switch` until SIGINT, SIGTERM or `ctl stop`, then prints its report.
pub fn run_switch(a: SwitchArgs) -> Result<()> {
    let may_load_bpf = interfaces::check_privileges()?;
    if a.names.ports.is_none() {
        bail!("--ports is required: `name=number` lines, each name a Linux interface the switch attaches to");
    }
    let flows = a.names.read_flows(&a.flows)?;
    let mut pipeline = Pipeline::of_switch(
        flows.rules.iter().cloned(),
        flows.groups.clone(),
        flows.ports.clone(),
        mac_table(&a.host)?,
    );
    pipeline.set_prefix_tries(a.prefixes.prefixes);
    let mut config = host_config(&a.host, false)?;
    let policy = match a.nic {
        NicArg::None => {
            if a.policy != "offload-all" || !a.policy_options.values.is_empty() || a.sample_rate.is_some() {
                bail!("--policy and its parameters choose what the NIC tier holds: they need --nic xdp");
            }
            None
        }
        NicArg::Xdp => {
            if a.io == Some(IoArg::Afpacket) {
                bail!("--nic xdp runs in the XDP program: it needs --io afxdp");
            }
            // The XDP tier holds what the policy's NIC scheme holds, as far as its parser and
            // actions reach.
            let (nic, policy) = live_policy(&a)?;
            config.nic = Some(nic);
            config.nic_capability = NicCapability::Xdp;
            Some(policy)
        }
    };
    let mut switch = Switch::new(pipeline, config)?;
    if a.nic == NicArg::Xdp && !switch.keep_nic_journal() {
        bail!("--policy {}: its NIC scheme cannot be mirrored into the XDP tier", a.policy);
    }
    // The kernel's flow table holds as many entries as the engine's NIC scheme.
    let flow_entries = switch.nic().map_or(a.nic_entries as usize, |n| {
        (0..n.entries().tables()).map(|t| n.area_capacity(t as u8)).sum::<usize>()
    });
    let flow_entries = u32::try_from(flow_entries).ok().filter(|&n| n <= 1 << 24).ok_or_else(|| {
        anyhow!(
            "the NIC tier's table of {flow_entries} entries is more than the kernel's map can hold (2^24)"
        )
    })?;
    let interfaces: Vec<Interface> = flows
        .names
        .port_numbers()
        .into_iter()
        .filter(|&n| n != LOCAL_PORT)
        .map(|n| {
            let name = flows.names.port_name(n).ok_or_else(|| anyhow!("port {n} has no name"))?;
            Interface::lookup(name, n)
        })
        .collect::<Result<_>>()?;
    if interfaces.is_empty() {
        bail!("the ports file lists no port to attach to");
    }
    let _claims = interfaces.iter().map(Interface::claim).collect::<Result<Vec<_>>>()?;
    let max_frame = interfaces.iter().map(Interface::max_frame).max().unwrap_or(1518);
    let steering = a.steer.as_deref().map(|f| Steering::new(f, a.cores as u32)).transpose()?;
    let io = match a.io {
        Some(IoArg::Afpacket) if steering.is_some() => {
            bail!("--steer hashes frames in the XDP program: it needs --io afxdp")
        }
        None if !may_load_bpf && steering.is_some() => bail!("--steer needs CAP_BPF (or root)"),
        Some(IoArg::Afxdp) if !may_load_bpf => {
            bail!("--io afxdp needs CAP_BPF (or root) to load the XDP program")
        }
        None if !may_load_bpf && a.nic == NicArg::Xdp => bail!("--nic xdp needs CAP_BPF (or root)"),
        None if !may_load_bpf => {
            eprintln!("hyflow switch: no CAP_BPF to load an XDP program; using AF_PACKET");
            Some(IoArg::Afpacket)
        }
        // The NIC tier and steering are the XDP program: no falling back to AF_PACKET.
        None if a.nic == NicArg::Xdp || steering.is_some() => Some(IoArg::Afxdp),
        io => io,
    };
    let xdp = XdpSetup { mode: a.xdp_mode, nic_tier: a.nic == NicArg::Xdp, steering: steering.as_ref() };
    let (ports, io, mut program) = open_ports(&interfaces, io, max_frame, flow_entries, xdp)?;
    let start = Instant::now();
    let tables = (flow_entries as usize, a.nic_masks as usize, a.nic_counter_reads);
    let mut nic = nic_tier(a.nic, &mut program, &interfaces, tables)?;
    let plans = plan_cores(&ports, a.cores as usize, steering.as_ref());
    let policy = policy.map(|p| LivePolicy::new(p, limits(&a), CostModel::default(), plans.len()));
    if let (Some(nic), Some(p)) = (&mut nic, &policy) {
        nic.sample(p.sample_rate());
    }
    eprintln!(
        "hyflow switch: io {io} on {}; {} core(s){}{}",
        interfaces.iter().map(|i| format!("{}={}", i.name, i.port)).collect::<Vec<_>>().join(", "),
        plans.len(),
        steering.as_ref().map_or(String::new(), |s| format!(" steered by {}", s.fields.join(","))),
        match plans[0].cpu {
            Some(_) => format!(
                " on CPU {}",
                plans.iter().filter_map(|p| p.cpu).map(|c| c.to_string()).collect::<Vec<_>>().join(", ")
            ),
            None => ", unpinned".to_string(),
        }
    );

    let (wake_rx, wake_tx) = UnixStream::pair().context("wake-up socket pair")?;
    wake_rx.set_nonblocking(true)?;
    wake_tx.set_nonblocking(true)?;
    let stop = Arc::new(AtomicBool::new(false));
    for signal in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(signal, Arc::clone(&stop))?;
        signal_hook::low_level::pipe::register(signal, wake_tx.try_clone()?)?;
    }
    let (requests_tx, requests) = mpsc::channel();
    let _control = match &a.ctl {
        Some(path) => Some(control::serve(path, flows.names.clone(), requests_tx, wake_tx)?),
        None => None,
    };
    let forwarder = Forwarder::new(switch, (nic, policy), ports, (plans, steering), max_frame, io, start);
    let why = match forwarder.run(&stop, &requests, &wake_rx) {
        forwarder::Ended::Signal => "a signal",
        forwarder::Ended::Stopped => "`hyflow ctl stop`",
    };
    eprintln!("hyflow switch: stopped by {why}; detaching");
    let report = forwarder.final_report();
    // Detach from every interface before saying anything more: the sockets, then the program.
    drop(forwarder);
    // Without `afxdp` there is no program: the value is an `Option` of nothing.
    #[cfg_attr(not(feature = "afxdp"), allow(dropping_copy_types))]
    drop(program);
    print!("{report}");
    Ok(())
}

/// The NIC's update and counter-read limits the options give a policy. Installs take
/// effect when the kernel has them: no latency is modelled (it is measured, per install).
fn limits(a: &SwitchArgs) -> NicUpdates {
    NicUpdates { per_second: a.nic_updates, latency_ns: 0, counter_reads_per_second: a.nic_counter_reads }
}

/// The NIC scheme `--policy` fills and the policy, as `sim` configures them, for the live
/// switch's machine: its AF_XDP receive rings and the NIC limits of the options.
fn live_policy(a: &SwitchArgs) -> Result<(NicConfig, Box<dyn OffloadPolicy>)> {
    if [a.nic_updates, a.nic_counter_reads].iter().any(|r| !(r.is_finite() && *r >= 0.0)) {
        bail!("--nic-updates and --nic-counter-reads are rates per second: 0 (no limit) or more");
    }
    let registration = registration(&a.policy).ok_or_else(|| anyhow!("no policy {}", a.policy))?;
    if let Some((name, _)) =
        a.policy_options.values.iter().find(|(n, _)| !registration.params.iter().any(|p| p.name == *n))
    {
        bail!("--{name} does not apply to --policy {}", a.policy);
    }
    let nic = match registration.upcall_nic {
        None => None,
        Some("megaflow") => Some(NicConfig::new(MegaflowOffloadConfig {
            entries: a.nic_entries as usize,
            max_masks: a.nic_masks as usize,
        })),
        Some(scheme) => bail!(
            "--policy {}: the {scheme} NIC scheme does not run in the XDP tier (its tables run in `hyflow sim`)",
            a.policy
        ),
    };
    let params = PolicyParams { values: a.policy_options.values.clone(), nic, sample_rate: a.sample_rate };
    let factory = (registration.configure)(&params).map_err(|e| anyhow!("--policy {}: {e}", a.policy))?;
    if factory.trainer().is_some() {
        bail!(
            "--policy {}: it learns from the input before the run, and a live switch has no input before it              starts (it runs in `hyflow sim`)",
            a.policy
        );
    }
    // The host's work is real here: the built-in costs stand for it where a policy needs an
    // estimate (Elixir's identification time, in K).
    let machine = PolicyMachine {
        ring: port_io::RX_RING as usize,
        limits: limits(a),
        costs: CostModel::default(),
        spreads_flows: false,
    };
    let built = factory.check(&machine).and_then(|()| factory.build(&machine));
    let policy = built.map_err(|e| anyhow!("--policy {}: {e}", a.policy))?;
    let nic = policy.nic().ok_or_else(|| {
        anyhow!("--policy {}: the policy puts nothing in the NIC; run with --nic none", a.policy)
    })?;
    Ok((nic, policy))
}

/// Deals the ports' receive queues out to `cores` cores (no more cores than queues: a core
/// with no queue would have nothing to do), or with `steering` gives each core its socket of
/// every queue; each core pinned to its own CPU of the process's affinity mask when the mask
/// has one for each.
fn plan_cores(ports: &[LivePort], cores: usize, steering: Option<&Steering>) -> Vec<CorePlan> {
    let per_core: Vec<Vec<RxQueue>> = match steering {
        // Each queue has a socket per core, core c's the c-th: core c polls its own of each.
        Some(s) => (0..s.cores as usize)
            .map(|c| {
                let mine = ports.iter().enumerate().flat_map(|(port, p)| {
                    let sockets = p.io.lock().expect("port lock").rx_fds().len();
                    (c..sockets).step_by(s.cores as usize).map(move |queue| RxQueue { port, queue })
                });
                mine.collect()
            })
            .collect(),
        None => {
            let queues: Vec<RxQueue> = ports
                .iter()
                .enumerate()
                .flat_map(|(port, p)| {
                    let n = p.io.lock().expect("port lock").rx_fds().len();
                    (0..n).map(move |queue| RxQueue { port, queue })
                })
                .collect();
            if cores > queues.len() {
                eprintln!(
                    "hyflow switch: --cores {cores} but the ports have {} receive queue(s) in all: using {} \
                     (--steer spreads each queue over the cores)",
                    queues.len(),
                    queues.len()
                );
            }
            pmd::assign(&queues, cores.min(queues.len()))
        }
    };
    let cpus = allowed_cpus();
    let pinned = cpus.len() >= per_core.len();
    if !pinned {
        eprintln!(
            "hyflow switch: {} CPU(s) allowed for {} cores: cores are not pinned",
            cpus.len(),
            per_core.len()
        );
    }
    per_core
        .into_iter()
        .enumerate()
        .map(|(i, queues)| CorePlan { queues, cpu: pinned.then(|| cpus[i]) })
        .collect()
}

/// Opens every interface's I/O as `--io` asks (`None`: AF_XDP where it attaches, AF_PACKET
/// otherwise); returns the ports, how frames move, and the XDP program (AF_XDP), whose flow
/// table has `flow_entries` entries, attached as `xdp` says (mode, and whether the NIC tier
/// is on).
fn open_ports(
    interfaces: &[Interface],
    io: Option<IoArg>,
    max_frame: usize,
    flow_entries: u32,
    xdp: XdpSetup<'_>,
) -> Result<(Vec<LivePort>, String, Option<Program>)> {
    if io != Some(IoArg::Afpacket) {
        match open_afxdp(interfaces, max_frame, flow_entries, xdp) {
            Ok((ports, io, program)) => return Ok((ports, io, Some(program))),
            Err(e) if io == Some(IoArg::Afxdp) => return Err(e),
            Err(e) => eprintln!("hyflow switch: AF_XDP unavailable ({e:#}); using AF_PACKET"),
        }
    }
    let ports = interfaces
        .iter()
        .map(|i| {
            let io = afpacket::AfPacket::open(&i.name, i.ifindex, max_frame)?;
            Ok(LivePort::new(i, Box::new(io)))
        })
        .collect::<Result<Vec<_>>>()?;
    let io = ports[0].io.lock().expect("port lock").describe();
    Ok((ports, io, None))
}

/// How the XDP program is set up: its attach mode, whether it is the NIC tier, and how it
/// steers frames to cores.
#[derive(Clone, Copy)]
pub struct XdpSetup<'a> {
    /// Native, generic, or native where the driver has it.
    pub mode: XdpModeArg,
    /// Whether the program holds the NIC tier's tables.
    pub nic_tier: bool,
    /// `--steer`: a socket per core on every queue, picked by the program's hash.
    pub steering: Option<&'a Steering>,
}

/// The XDP program on the ports (feature `afxdp`).
#[cfg(feature = "afxdp")]
type Program = afxdp::XdpProgram;
/// Without AF_XDP there is no program.
#[cfg(not(feature = "afxdp"))]
type Program = std::convert::Infallible;

#[cfg(feature = "afxdp")]
fn open_afxdp(
    interfaces: &[Interface],
    max_frame: usize,
    flow_entries: u32,
    xdp: XdpSetup<'_>,
) -> Result<(Vec<LivePort>, String, Program)> {
    afxdp::open(interfaces, max_frame, flow_entries, xdp)
}

#[cfg(not(feature = "afxdp"))]
fn open_afxdp(
    _: &[Interface],
    _: usize,
    _: u32,
    _: XdpSetup<'_>,
) -> Result<(Vec<LivePort>, String, Program)> {
    bail!("this hyflow was built without AF_XDP (build with `--features afxdp`: needs clang and libbpf-dev)")
}

/// The NIC tier `--nic` asks for, over the program's tables (`--nic xdp`): `limits` are its
/// flow table's entries, its masks and its counter reads per second.
#[cfg(feature = "afxdp")]
fn nic_tier(
    nic: NicArg,
    program: &mut Option<Program>,
    interfaces: &[Interface],
    limits: (usize, usize, f64),
) -> Result<Option<Box<dyn nic_tier::NicTier>>> {
    if nic == NicArg::None {
        return Ok(None);
    }
    let program = program.as_mut().ok_or_else(|| anyhow!("--nic xdp needs the XDP program (AF_XDP)"))?;
    let ports = interfaces.iter().map(|i| i.port).collect();
    let tier = xdp_tier::XdpTier::new(&mut program.ebpf, ports, limits, xdp_tier::monotonic_ns())?;
    Ok(Some(Box::new(tier)))
}

#[cfg(not(feature = "afxdp"))]
fn nic_tier(
    nic: NicArg,
    _: &mut Option<Program>,
    _: &[Interface],
    _: (usize, usize, f64),
) -> Result<Option<Box<dyn nic_tier::NicTier>>> {
    match nic {
        NicArg::None => Ok(None),
        NicArg::Xdp => bail!("--nic xdp needs a hyflow built with `--features afxdp` (clang and libbpf-dev)"),
    }
}

/// A transmit-only AF_XDP socket on `iface` (`hyflow send`).
#[cfg(feature = "afxdp")]
fn open_tx_afxdp(iface: &Interface, max_frame: usize) -> Result<Box<dyn port_io::PortIo>> {
    Ok(Box::new(afxdp::AfXdp::open_tx(iface, max_frame).with_context(|| iface.name.clone())?))
}

#[cfg(not(feature = "afxdp"))]
fn open_tx_afxdp(_: &Interface, _: usize) -> Result<Box<dyn port_io::PortIo>> {
    bail!("this hyflow was built without AF_XDP (build with `--features afxdp`: needs clang and libbpf-dev)")
}

/// Runs `hyflow ctl`: prints the switch's answer.
pub fn run_ctl(a: CtlArgs) -> Result<()> {
    let text = control::request(&a.socket, a.command)?;
    print!("{text}");
    if !text.is_empty() && !text.ends_with('\n') {
        println!();
    }
    Ok(())
}
