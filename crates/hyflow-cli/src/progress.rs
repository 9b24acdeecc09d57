//! Progress of long runs, on standard error: a bar on a terminal; without one (a log, CI, a
//! pipe), a plain line every few seconds once a run has lasted long enough for someone to
//! wonder whether it is stuck.

use std::cell::Cell;
use std::io::IsTerminal;
use std::time::{Duration, Instant};

/// Progress on standard error, updated every [`Progress::EVERY`] packets, off the per-packet
/// path.
pub struct Progress {
    label: String,
    bar: indicatif::ProgressBar,
    /// Without a terminal: when the run started and when the next line is due.
    plain: Option<(Instant, Cell<Duration>)>,
}

/// Seconds before the first plain line (`HYFLOW_PROGRESS_AFTER` overrides it).
const FIRST_LINE_AFTER: Duration = Duration::from_secs(10);

/// Seconds between plain lines.
const LINE_EVERY: Duration = Duration::from_secs(5);

impl Progress {
    const EVERY: u64 = 1 << 16;

    /// A bar labelled `label`, sized on the first update.
    pub fn new(label: &str) -> Progress {
        let bar = indicatif::ProgressBar::new(0);
        let template = format!("{{spinner}} {label} {{msg}} [{{bar:30}}] {{eta}}");
        if let Ok(style) = indicatif::ProgressStyle::with_template(&template) {
            bar.set_style(style.progress_chars("=> "));
        }
        let plain = (!std::io::stderr().is_terminal()).then(|| {
            let after = std::env::var("HYFLOW_PROGRESS_AFTER")
                .ok()
                .and_then(|s| s.parse::<f64>().ok())
                .filter(|s| s.is_finite() && *s >= 0.0)
                .map_or(FIRST_LINE_AFTER, Duration::from_secs_f64);
            (Instant::now(), Cell::new(after))
        });
        Progress { label: label.to_string(), bar, plain }
    }

    pub fn finish(&self) {
        self.bar.finish_and_clear();
    }

    /// [`Progress::tick`] as an engine's progress callback: the CLI never stops a run (Ctrl-C
    /// ends the process).
    #[inline]
    pub fn watch(&self, packets: u64, at: hyflow::input::Progress) -> std::ops::ControlFlow<()> {
        self.tick(packets, at);
        std::ops::ControlFlow::Continue(())
    }

    /// After `packets` packets, with the input read as far as `at`.
    #[inline]
    pub fn tick(&self, packets: u64, at: hyflow::input::Progress) {
        if !packets.is_multiple_of(Self::EVERY) {
            return;
        }
        let unit = if at.bytes { "bytes" } else { "packets" };
        match &self.plain {
            None => {
                self.bar.set_message(format!("{packets} packets, {} of {} {unit}", at.done, at.total));
                self.bar.set_length(at.total);
                self.bar.set_position(at.done);
            }
            Some((start, next)) => {
                let elapsed = start.elapsed();
                if elapsed < next.get() {
                    return;
                }
                next.set(elapsed + LINE_EVERY);
                let read = if at.total > 0 {
                    format!(
                        "{} of {} {unit} read ({:.0}%)",
                        at.done,
                        at.total,
                        at.done as f64 * 100.0 / at.total as f64
                    )
                } else {
                    format!("{} {unit} read", at.done)
                };
                eprintln!("hyflow {}: {packets} packets, {read}, {:.0} s", self.label, elapsed.as_secs_f64());
            }
        }
    }
}
