//! The time-stamp counter, which the application servers time requests with (FlexNIC's tables
//! give cycles), and its rate, which turns those cycles into time.

use std::time::{Duration, Instant};

/// The time-stamp counter (x86-64), or nanoseconds of a monotonic clock elsewhere.
#[inline]
pub fn ticks() -> u64 {
    #[cfg(target_arch = "x86_64")]
    {
        // SAFETY: RDTSC reads a counter; it has no preconditions.
        #[allow(unused_unsafe)]
        unsafe {
            std::arch::x86_64::_rdtsc()
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        use std::sync::OnceLock;
        static START: OnceLock<Instant> = OnceLock::new();
        START.get_or_init(Instant::now).elapsed().as_nanos() as u64
    }
}

/// Counter ticks per nanosecond, measured against the monotonic clock over 50 ms (1.0 where
/// the counter is the clock itself).
pub fn tsc_ghz() -> f64 {
    let (t0, c0) = (Instant::now(), ticks());
    std::thread::sleep(Duration::from_millis(50));
    let (dt, dc) = (t0.elapsed().as_nanos() as f64, ticks().wrapping_sub(c0) as f64);
    if dt > 0.0 {
        dc / dt
    } else {
        1.0
    }
}
