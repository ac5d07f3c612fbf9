//! Shared by the integration tests: compiling expressions the way the facade will, and
//! comparing the JIT with the interpreter on a packet.

#![allow(dead_code)]

use sift_bytecode::{Cache, VerifiedProgram};
use sift_jit::{JitFilter, Options};

pub const SNAPLEN: u32 = 262_144;

/// Expression -> IR (-> optimized IR) -> verified bytecode; `None` if the front end refuses it.
pub fn bytecode(expr: &str, linktype: u32, optimize: bool) -> Option<VerifiedProgram> {
    let mut ir = sift::compile_ir(expr, &sift::Options::new(linktype, SNAPLEN)).ok()?;
    if optimize {
        sift_opt::optimize(&mut ir);
    }
    Some(sift_bytecode::compile(&ir).expect("codegen of a valid IR function"))
}

/// Every option combination worth testing separately.
pub fn option_sets() -> Vec<Options> {
    vec![
        Options::default(),
        Options::baseline(),
        Options {
            hash_min_keys: 4,
            ..Options::default()
        },
    ]
}

/// Runs `packet` (and, with `truncations`, every prefix of it) through the interpreter, the
/// JIT's single and batch entries; returns a description of the first disagreement.
pub fn compare(
    program: &VerifiedProgram,
    jit: &JitFilter,
    packet: &[u8],
    wire_len: u32,
    truncations: bool,
    cache: &mut Cache,
) -> Result<usize, String> {
    let lengths: Vec<usize> = if truncations {
        (0..=packet.len()).collect()
    } else {
        vec![packet.len()]
    };
    let slices: Vec<&[u8]> = lengths.iter().map(|&n| &packet[..n]).collect();
    let wires = vec![wire_len; slices.len()];
    let mut batch = vec![u32::MAX; slices.len()];
    jit.run_batch(&slices, &wires, &mut batch);
    for (k, s) in slices.iter().enumerate() {
        let want = program.run(cache, s, wire_len);
        let got = jit.run(s, wire_len);
        if got != want || batch[k] != want {
            return Err(format!(
                "caplen {} wire {wire_len}: interpreter {want}, jit {got}, batch {}\n{program}\npacket {:02x?}",
                s.len(),
                batch[k],
                &packet[..packet.len().min(80)]
            ));
        }
    }
    Ok(slices.len())
}
