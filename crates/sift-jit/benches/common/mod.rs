//! Timing shared by the JIT's benchmarks.

use std::hint::black_box;
use std::time::Instant;

use sift_jit::{JitFilter, PacketRef};

/// Best (lowest) ns per item over 7 passes of `run` (after a warm-up pass), each handling
/// `items` items. The lowest rather than the median: on a machine shared with other work, a
/// pass is slowed only by interruptions (each pass takes about a millisecond, less than a
/// scheduler time slice), never sped up.
pub fn best_ns(items: usize, mut run: impl FnMut()) -> f64 {
    let mut pass = || {
        let start = Instant::now();
        run();
        start.elapsed().as_nanos() as f64 / items as f64
    };
    pass();
    (0..7).map(|_| pass()).fold(f64::INFINITY, f64::min)
}

/// Best ns per packet of the batch entry over `refs` in rounds of `out.len()` packets (the
/// rounds of a benchmark's visiting order, one call per round).
pub fn time_batch(jit: &JitFilter, refs: &[PacketRef<'_>], out: &mut [u32]) -> f64 {
    best_ns(refs.len(), || {
        for round in refs.chunks(out.len()) {
            jit.run_refs(black_box(round), out);
            black_box(&out);
        }
    })
}
