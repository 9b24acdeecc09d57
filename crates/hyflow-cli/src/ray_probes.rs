//! `sim --find ... --backend ray`: a search's probes as Ray tasks. Ray's client is Python, so
//! the CLI starts `python3` on the helper beside this file and speaks JSON lines with it (see
//! the helper); each task runs this binary on one probe (`--probe-cores`), so the probe is
//! the very run the local search makes, and the answer is the same.

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::sync::Mutex;

use anyhow::{anyhow, bail, Context, Result};
use serde::Deserialize;
use serde_json::json;

use hyflow::experiment::sim::{Probe, ProbeRunner};
use hyflow::experiment::ExperimentError;
use hyflow::timing::search::CoreLoss;

/// The helper, run with `python3 -c`.
const HELPER: &str = include_str!("ray_probes.py");

/// A running helper with a Ray cluster behind it.
pub struct RayProbes {
    width: usize,
    /// The helper's stdin and stdout (`None` once closed, which ends it).
    pipes: Mutex<Option<(ChildStdin, BufReader<ChildStdout>)>>,
    child: Child,
}

/// One probe's answer from the helper.
#[derive(Deserialize)]
#[serde(untagged)]
enum Answer {
    Ran { cores: usize, lost: u64, offered: u64, steady: bool },
    Failed { error: String },
}

impl RayProbes {
    /// Starts the helper: a local cluster of `workers` CPUs (default: the machine's), or the
    /// cluster at `address`, whose tasks run `sim` with `argv` (the search's own options),
    /// `workers` at a time (default: the cluster's CPUs).
    pub fn start(argv: Vec<String>, address: Option<&str>, workers: Option<usize>) -> Result<RayProbes> {
        let exe = std::env::current_exe().context("the path of this hyflow binary")?;
        let cwd = std::env::current_dir().context("the working directory")?;
        let mut child = Command::new("python3")
            .args(["-c", HELPER])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .context("--backend ray runs python3 (with the ray package), which could not be started")?;
        let mut stdin = child.stdin.take().expect("piped");
        let mut stdout = BufReader::new(child.stdout.take().expect("piped"));
        let setup = json!({ "exe": exe, "cwd": cwd, "argv": argv, "address": address, "workers": workers });
        writeln!(stdin, "{setup}").context("the Ray helper")?;
        let reply: serde_json::Value = read_line(&mut stdout)?;
        if let Some(e) = reply.get("error").and_then(|e| e.as_str()) {
            let _ = child.wait();
            bail!("{e}");
        }
        let width = reply["width"].as_u64().ok_or_else(|| anyhow!("the Ray helper said {reply}"))? as usize;
        Ok(RayProbes { width, pipes: Mutex::new(Some((stdin, stdout))), child })
    }

    fn batch(&self, probes: &[Probe]) -> Result<Vec<Answer>> {
        let mut pipes = self.pipes.lock().expect("no batch panics holding it");
        let (stdin, stdout) = pipes.as_mut().expect("open until dropped");
        let list: Vec<_> = probes.iter().map(|p| json!([p.cores, p.rate_pps])).collect();
        writeln!(stdin, "{}", json!({ "probes": list })).context("the Ray helper")?;
        let reply: serde_json::Value = read_line(stdout)?;
        let answers: Vec<Answer> = serde_json::from_value(reply["results"].clone())
            .with_context(|| format!("the Ray helper said {reply}"))?;
        if answers.len() != probes.len() {
            bail!("the Ray helper answered {} of {} probes", answers.len(), probes.len());
        }
        Ok(answers)
    }
}

/// One JSON line from the helper; its end is an error (it died: Ray's own message is on stderr).
fn read_line(from: &mut impl BufRead) -> Result<serde_json::Value> {
    let mut line = String::new();
    if from.read_line(&mut line).context("the Ray helper")? == 0 {
        bail!("the Ray helper ended without answering (its error is above)");
    }
    serde_json::from_str(&line).with_context(|| format!("the Ray helper said {line:?}"))
}

impl ProbeRunner for RayProbes {
    fn width(&self) -> usize {
        self.width
    }

    fn run(&self, probes: &[Probe]) -> Vec<Result<CoreLoss, ExperimentError>> {
        match self.batch(probes) {
            Err(e) => probes.iter().map(|_| Err(ExperimentError::Remote(format!("{e:#}")))).collect(),
            Ok(answers) => answers
                .into_iter()
                .map(|a| match a {
                    Answer::Ran { cores, lost, offered, steady } => {
                        Ok(CoreLoss::new(cores, lost, offered, steady))
                    }
                    Answer::Failed { error } => Err(ExperimentError::Remote(format!("a Ray probe: {error}"))),
                })
                .collect(),
        }
    }
}

impl Drop for RayProbes {
    /// Ends the helper's input, which shuts a local cluster down, and waits for it.
    fn drop(&mut self) {
        if let Ok(pipes) = self.pipes.get_mut() {
            pipes.take();
        }
        let _ = self.child.wait();
    }
}
