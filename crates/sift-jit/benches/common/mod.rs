//! Timing shared by the JIT's benchmarks.

use std::hint::black_box;
use std::time::Instant;

use sift_jit::{JitFilter, PacketRef};

/// Median ns per item over 7 passes of `run` (after a warm-up pass), each handling `items`
/// items.
pub fn median_ns(items: usize, mut run: impl FnMut()) -> f64 {
    let mut pass = || {
        let start = Instant::now();
        run();
        start.elapsed().as_nanos() as f64 / items as f64
    };
    pass();
    let mut samples: Vec<f64> = (0..7).map(|_| pass()).collect();
    samples.sort_by(f64::total_cmp);
    samples[3]
}

/// Median ns per packet of the batch entry over `refs` in rounds of `out.len()` packets (the
/// rounds of a benchmark's visiting order, one call per round).
pub fn time_batch(jit: &JitFilter, refs: &[PacketRef<'_>], out: &mut [u32]) -> f64 {
    median_ns(refs.len(), || {
        for round in refs.chunks(out.len()) {
            jit.run_refs(black_box(round), out);
            black_box(&out);
        }
    })
}
