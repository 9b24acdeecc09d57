//! The control socket: `hyflow ctl` on one side, the forwarding loop on the other.
//!
//! A thread of its own accepts connections, reads one request each (a JSON line), checks it
//! completely — a flow that does not parse never reaches the switch — and hands it to the
//! forwarding loop, which owns the engine and applies it between two batches, then answers.
//! A client that goes away before its request is complete changes nothing; the socket is
//! created mode 0600 and a peer of another user is refused, as `ovs-vswitchd`'s unixctl
//! socket is its owner's alone.

use std::io::{self, BufRead, BufReader, Read, Write};
use std::os::fd::AsRawFd;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};

use hyflow::openflow::parser::{strip_comment, FlowSpec};
use hyflow::openflow::update::{parse_command_spec, Command};
use hyflow::openflow::Names;

use crate::args::CtlCommand;

/// How long a client may take to send its request.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);

/// A request as it travels: the command, and the text of a flow file for `add-flows` (read
/// by the client, which may see files the switch cannot).
#[derive(Serialize, Deserialize)]
struct WireRequest {
    command: CtlCommand,
    text: Option<String>,
}

/// An answer as it travels: the text to print, or the error.
#[derive(Serialize, Deserialize)]
struct WireReply {
    ok: Option<String>,
    error: Option<String>,
}

/// A request the forwarding loop carries out: checked, flows parsed.
#[derive(Debug)]
pub enum Request {
    /// Counters, as text or JSON.
    Show { json: bool },
    /// Rules with their counters.
    DumpFlows,
    /// The megaflow cache's entries.
    DumpMegaflows,
    /// The NIC tier's entries.
    DumpNic,
    /// Port counters.
    DumpPorts,
    /// The per-frame costs fitted from the rounds forwarded so far.
    Costs,
    /// Rule updates, applied in order.
    Update(Vec<(Command, FlowSpec)>),
    /// Stop forwarding.
    Stop,
}

/// A request and where its answer goes.
pub struct Pending {
    /// What to do.
    pub request: Request,
    /// The answer: text to print, or an error.
    pub reply: mpsc::Sender<Result<String, String>>,
}

/// Parses a command into a request with the pipeline's `names` (`text`: the flow file of
/// `add-flows`).
fn request_of(command: &CtlCommand, text: Option<&str>, names: &Names) -> Result<Request, String> {
    let spec = |command: Command, flow: &str| {
        parse_command_spec(command, flow, names).map_err(|e| match e.token.is_empty() {
            true => format!("{}: {}", flow.trim(), e.message),
            false => format!("{} (at '{}', column {})", e.message, e.token, e.column),
        })
    };
    Ok(match command {
        CtlCommand::Show { json } => Request::Show { json: *json },
        CtlCommand::DumpFlows => Request::DumpFlows,
        CtlCommand::DumpMegaflows => Request::DumpMegaflows,
        CtlCommand::DumpNic => Request::DumpNic,
        CtlCommand::DumpPorts => Request::DumpPorts,
        CtlCommand::Costs => Request::Costs,
        CtlCommand::Stop => Request::Stop,
        CtlCommand::AddFlow { flow } => Request::Update(vec![(Command::Add, spec(Command::Add, flow)?)]),
        CtlCommand::AddFlows { file } => {
            let text = text.ok_or("add-flows: the client sent no flow file")?;
            let mut updates = Vec::new();
            for (i, line) in text.lines().enumerate() {
                // Comments and blank lines as a flow file has them.
                let Some(body) = strip_comment(line) else { continue };
                let parsed =
                    spec(Command::Add, body).map_err(|e| format!("{}:{}: {e}", file.display(), i + 1))?;
                updates.push((Command::Add, parsed));
            }
            Request::Update(updates)
        }
        CtlCommand::ModFlows { strict, flow } => {
            let c = if *strict { Command::ModifyStrict } else { Command::Modify };
            Request::Update(vec![(c, spec(c, flow)?)])
        }
        CtlCommand::DelFlows { strict, matches } => {
            let c = if *strict { Command::DeleteStrict } else { Command::Delete };
            Request::Update(vec![(c, spec(c, matches.as_deref().unwrap_or(""))?)])
        }
    })
}

/// The control socket, served by a thread of its own; removed when dropped.
pub struct ControlServer {
    path: PathBuf,
}

impl Drop for ControlServer {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

/// Serves `path`: each request checked against `names`, sent on `requests`, the forwarding
/// loop woken through `wake`.
pub fn serve(
    path: &Path,
    names: Names,
    requests: mpsc::Sender<Pending>,
    wake: UnixStream,
) -> Result<ControlServer> {
    if path.exists() {
        // A socket nobody answers on is a leftover of a switch that was killed; one that
        // answers belongs to a running switch.
        if UnixStream::connect(path).is_ok() {
            bail!("{}: a switch is already listening there", path.display());
        }
        std::fs::remove_file(path).with_context(|| format!("{}: cannot replace it", path.display()))?;
    }
    // Created 0600: no moment when another user could connect.
    // SAFETY: umask only changes the process's file-creation mask, restored just after.
    let old = unsafe { libc::umask(0o177) };
    let bound = UnixListener::bind(path);
    // SAFETY: as above.
    unsafe { libc::umask(old) };
    let listener = bound.with_context(|| format!("control socket {}", path.display()))?;
    std::thread::Builder::new().name("hyflow-ctl".into()).spawn(move || {
        for stream in listener.incoming() {
            let Ok(stream) = stream else { continue };
            // A client that misbehaves ends its own connection, never the server.
            let _ = answer(stream, &names, &requests, &wake);
        }
    })?;
    Ok(ControlServer { path: path.to_path_buf() })
}

/// The uid of the process at the other end of `stream`.
fn peer_uid(stream: &UnixStream) -> io::Result<u32> {
    // SAFETY: a zeroed ucred is valid; getsockopt fills it.
    let mut cred: libc::ucred = unsafe { std::mem::zeroed() };
    let mut len = size_of::<libc::ucred>() as libc::socklen_t;
    // SAFETY: `cred` is a ucred of `len` bytes.
    let r = unsafe {
        libc::getsockopt(
            stream.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_PEERCRED,
            &mut cred as *mut libc::ucred as *mut libc::c_void,
            &mut len,
        )
    };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(cred.uid)
}

/// Reads one request from `stream`, has the forwarding loop carry it out, writes the answer.
fn answer(
    mut stream: UnixStream,
    names: &Names,
    requests: &mpsc::Sender<Pending>,
    mut wake: &UnixStream,
) -> io::Result<()> {
    // SAFETY: plain syscall.
    let me = unsafe { libc::geteuid() };
    let reply = |stream: &mut UnixStream, r: Result<String, String>| {
        let wire = match r {
            Ok(text) => WireReply { ok: Some(text), error: None },
            Err(e) => WireReply { ok: None, error: Some(e) },
        };
        writeln!(stream, "{}", serde_json::to_string(&wire).expect("a reply serializes"))
    };
    if peer_uid(&stream)? != me {
        return reply(&mut stream, Err("the control socket belongs to another user".into()));
    }
    stream.set_read_timeout(Some(REQUEST_TIMEOUT))?;
    let mut line = String::new();
    // At most 64 MiB of request (a large flow file), then the line must have ended.
    BufReader::new(&stream).take(64 << 20).read_line(&mut line)?;
    if !line.ends_with('\n') {
        // The client went away (or sent too much) before its request was complete.
        return Ok(());
    }
    let request = match serde_json::from_str::<WireRequest>(&line) {
        Ok(w) => request_of(&w.command, w.text.as_deref(), names),
        Err(e) => Err(format!("not a hyflow ctl request: {e}")),
    };
    let result = match request {
        Err(e) => Err(e),
        Ok(request) => {
            let (tx, rx) = mpsc::channel();
            if requests.send(Pending { request, reply: tx }).is_err() {
                Err("the switch is stopping".to_string())
            } else {
                let _ = wake.write(&[1]);
                rx.recv().unwrap_or_else(|_| Err("the switch is stopping".to_string()))
            }
        }
    };
    reply(&mut stream, result)
}

/// Sends `command` to the switch at `socket` and returns its answer's text.
pub fn request(socket: &Path, command: CtlCommand) -> Result<String> {
    let text = match &command {
        CtlCommand::AddFlows { file } if file.as_os_str() == "-" => {
            let mut s = String::new();
            io::stdin().read_to_string(&mut s).context("reading flows from standard input")?;
            Some(s)
        }
        CtlCommand::AddFlows { file } => {
            Some(std::fs::read_to_string(file).with_context(|| format!("{}", file.display()))?)
        }
        _ => None,
    };
    let mut stream = UnixStream::connect(socket).with_context(|| {
        format!("{}: cannot connect (is `hyflow switch --ctl {0}` running?)", socket.display())
    })?;
    let line = serde_json::to_string(&WireRequest { command, text })?;
    writeln!(stream, "{line}")?;
    let mut answer = String::new();
    BufReader::new(&stream).read_line(&mut answer).context("reading the switch's answer")?;
    if answer.is_empty() {
        bail!("the switch closed the connection without answering");
    }
    let reply: WireReply = serde_json::from_str(&answer).context("the switch's answer")?;
    match (reply.ok, reply.error) {
        (_, Some(e)) => bail!("{e}"),
        (Some(text), None) => Ok(text),
        (None, None) => bail!("the switch answered nothing"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_are_checked_before_they_reach_the_switch() {
        let names = Names::new();
        let add = CtlCommand::AddFlow { flow: "priority=5,ip,actions=output:2".into() };
        assert!(matches!(request_of(&add, None, &names), Ok(Request::Update(u)) if u.len() == 1));
        let bad = CtlCommand::AddFlow { flow: "priority=5,ip,nw_dst=1.2.3,actions=output:2".into() };
        let e = request_of(&bad, None, &names).unwrap_err();
        assert!(e.contains("1.2.3"), "{e}");
        let all = CtlCommand::DelFlows { strict: false, matches: None };
        assert!(
            matches!(request_of(&all, None, &names), Ok(Request::Update(u)) if u[0].0 == Command::Delete)
        );
        let file = CtlCommand::AddFlows { file: "f".into() };
        let text = "# rules\npriority=1,actions=drop\n\npriority=2,ip,actions=output:1 # web\n";
        assert!(matches!(request_of(&file, Some(text), &names), Ok(Request::Update(u)) if u.len() == 2));
        let e =
            request_of(&file, Some("priority=1,actions=drop\nbogus=1,actions=drop\n"), &names).unwrap_err();
        assert!(e.starts_with("f:2: "), "{e}");
    }
}
