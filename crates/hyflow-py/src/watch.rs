//! A run watched from Python's main thread: Ctrl-C stops it, and a progress callback hears
//! how far it got.
//!
//! Python handles SIGINT only when its main thread runs Python code, which it does not while
//! a run holds it (with the GIL released or not). So the run goes to a thread of its own, and
//! the calling thread — Python's main thread when a notebook cell runs — wakes every
//! [`POLL`] to check for signals (`PyErr_CheckSignals`) and to call the progress callback.
//! On a signal the run sees `stop` at its next progress callback (every packet) and ends;
//! the signal's exception (`KeyboardInterrupt`) is raised. Called from another thread
//! (a sweep's workers), signals are never seen there, as in Python itself.

use std::ops::ControlFlow;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use pyo3::prelude::*;

/// How often the watching thread checks for signals.
const POLL: Duration = Duration::from_millis(50);

/// How often the progress callback is called.
const PROGRESS_EVERY: Duration = Duration::from_millis(500);

/// What the run and its watcher share.
#[derive(Default)]
pub(crate) struct Watch {
    stop: AtomicBool,
    packets: AtomicU64,
    read: AtomicU64,
    total: AtomicU64,
}

impl Watch {
    /// The engine's progress callback: records how far the run got, and stops it once asked.
    pub(crate) fn progress(&self, packets: u64, at: hyflow::input::Progress) -> ControlFlow<()> {
        self.packets.store(packets, Ordering::Relaxed);
        self.read.store(at.done, Ordering::Relaxed);
        self.total.store(at.total, Ordering::Relaxed);
        self.keep_going_or_break()
    }

    /// Whether the run should go on.
    pub(crate) fn keep_going(&self) -> bool {
        !self.stop.load(Ordering::Relaxed)
    }

    fn keep_going_or_break(&self) -> ControlFlow<()> {
        if self.keep_going() {
            ControlFlow::Continue(())
        } else {
            ControlFlow::Break(())
        }
    }

    /// [`Watch::progress`] as a per-packet callback answers (replay's): an error once the run
    /// should stop.
    pub(crate) fn progress_io(&self, packets: u64, at: hyflow::input::Progress) -> std::io::Result<()> {
        match self.progress(packets, at) {
            ControlFlow::Continue(()) => Ok(()),
            ControlFlow::Break(()) => Err(std::io::Error::other("interrupted")),
        }
    }
}

/// Runs `work` on its own thread, watched from this one (see the module's doc): returns its
/// result, or raises the exception of a signal (Ctrl-C: `KeyboardInterrupt`) or of the
/// progress callback, which gets `(packets, read, total)`: packets run so far, and how far
/// the input was read of its total (bytes of a capture, packets of generated traffic). The
/// callback is called every half second, and once more when the run ends (then with `read`
/// equal to `total`).
pub(crate) fn watched<R: Send>(
    py: Python<'_>,
    progress: Option<&Bound<'_, PyAny>>,
    work: impl FnOnce(&Watch) -> anyhow::Result<R> + Send,
) -> PyResult<Result<R, anyhow::Error>> {
    let watch = Watch::default();
    let progress: Option<Py<PyAny>> = progress.map(|p| p.clone().unbind());
    let mut raised: Option<PyErr> = None;
    let result = py.detach(|| {
        std::thread::scope(|s| {
            let worker = s.spawn(|| work(&watch));
            let mut next_progress = Instant::now() + PROGRESS_EVERY;
            while !worker.is_finished() {
                std::thread::park_timeout(POLL);
                if raised.is_some() {
                    continue;
                }
                let now = Instant::now();
                let report = progress.as_ref().filter(|_| now >= next_progress);
                if report.is_some() {
                    next_progress = now + PROGRESS_EVERY;
                }
                let outcome = Python::attach(|py| -> PyResult<()> {
                    py.check_signals()?;
                    if let Some(p) = report {
                        let at = |a: &AtomicU64| a.load(Ordering::Relaxed);
                        p.call1(py, (at(&watch.packets), at(&watch.read), at(&watch.total)))?;
                    }
                    Ok(())
                });
                if let Err(e) = outcome {
                    watch.stop.store(true, Ordering::Relaxed);
                    raised = Some(e);
                }
            }
            worker.join()
        })
    });
    if let Some(e) = raised {
        return Err(e);
    }
    if let Some(p) = &progress {
        // The run is over: its input is done, whatever the estimate of its total said (a
        // generated stream's is its rate times its duration).
        let at = |a: &AtomicU64| a.load(Ordering::Relaxed);
        let total = at(&watch.total).max(at(&watch.read));
        p.call1(py, (at(&watch.packets), total, total))?;
    }
    match result {
        Ok(r) => Ok(r),
        Err(panic) => std::panic::resume_unwind(panic),
    }
}
