//! Shared by the integration tests: compiling expressions the way the facade will, and
//! comparing the JIT with the interpreter on a packet placed against a guard page
//! (`guarded_page`).

#![allow(dead_code)]

mod guarded_page;

pub use guarded_page::GuardedPage;
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
        // Branching code for the programs the default evaluates without branches.
        Options {
            branchless: false,
            ..Options::default()
        },
        // Without branches at all (no early exits).
        Options {
            early_exits: false,
            ..Options::default()
        },
        // Without the long-packet copy: every bound tested in the one branch-free path.
        Options {
            long_packet_path: false,
            ..Options::default()
        },
        // Without branches, with a check at every load (path predicates and masked loads).
        Options {
            branchless: true,
            ..Options::baseline()
        },
    ]
}

/// Runs `packet` (and, with `truncations`, every prefix of it), placed against the guard page,
/// through the interpreter and the JIT's single and batch entries; returns the number of runs or
/// a description of the first disagreement.
pub fn compare(
    guard: &mut GuardedPage,
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
    for &n in &lengths {
        let s = guard.place(&packet[..n]);
        let want = program.run(cache, s, wire_len);
        let got = jit.run(s, wire_len);
        let mut batch = [u32::MAX];
        jit.run_batch(&[s], &[wire_len], &mut batch);
        if got != want || batch[0] != want {
            return Err(format!(
                "caplen {n} wire {wire_len}: interpreter {want}, jit {got}, batch {}\n{program}\npacket {:02x?}",
                batch[0],
                &packet[..packet.len().min(80)]
            ));
        }
    }
    Ok(lengths.len())
}
