//! Prefetch hints: a loop over items in memory it cannot predict (hash buckets, flow keys by
//! index) starts loading the lines of an item a few steps ahead while it works on the current.

/// Asks the CPU to start loading the cache lines of `bytes` bytes at `r` (a hint: never
/// faults, no effect on results).
#[inline(always)]
pub(crate) fn prefetch<T>(r: &T, bytes: usize) {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        let p = r as *const T as *const i8;
        // Every line the bytes touch, from the start's line to the last byte's:
        // ⌈(offset in its line + bytes) / 64⌉, one more than ⌈bytes / 64⌉ when the item's
        // end crosses into a further line.
        let lines = ((p as usize & 63) + bytes).div_ceil(64);
        let p = p.wrapping_sub(p as usize & 63);
        for off in (0..lines * 64).step_by(64) {
            // SAFETY: SSE is part of the x86_64 baseline, and a prefetch never dereferences:
            // any address is allowed.
            #[allow(unsafe_code)]
            unsafe {
                _mm_prefetch::<_MM_HINT_T0>(p.wrapping_add(off))
            };
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (r, bytes);
}
