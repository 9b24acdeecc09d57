//! A progress bar for long runs, on standard error.

/// A progress bar on standard error, drawn only on a terminal (indicatif hides it otherwise)
/// and updated every [`Progress::EVERY`] packets, off the per-packet path.
pub struct Progress {
    bar: indicatif::ProgressBar,
}

impl Progress {
    const EVERY: u64 = 1 << 16;

    /// A bar labelled `label`, sized on the first update.
    pub fn new(label: &str) -> Progress {
        let bar = indicatif::ProgressBar::new(0);
        let template = format!("{{spinner}} {label} {{msg}} [{{bar:30}}] {{eta}}");
        if let Ok(style) = indicatif::ProgressStyle::with_template(&template) {
            bar.set_style(style.progress_chars("=> "));
        }
        Progress { bar }
    }

    pub fn finish(&self) {
        self.bar.finish_and_clear();
    }

    /// After `packets` packets, with the input read as far as `at`.
    #[inline]
    pub fn tick(&self, packets: u64, at: hyflow::input::Progress) {
        if packets.is_multiple_of(Self::EVERY) {
            let unit = if at.bytes { "bytes" } else { "packets" };
            self.bar.set_message(format!("{packets} packets, {} of {} {unit}", at.done, at.total));
            self.bar.set_length(at.total);
            self.bar.set_position(at.done);
        }
    }
}
