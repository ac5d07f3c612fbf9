//! Shared pieces of the kernel tests: the privilege check, compiling an expression for every
//! program type, and comparing the kernel's verdicts with libpcap's.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use sift_ebpf::kernel::{self, KernelError, LoadedProgram};
use sift_ebpf::{Options, Program, ProgramType};
use sift_ebpf::{TC_ACT_OK, TC_ACT_SHOT, XDP_DROP, XDP_PASS};

pub const SNAPLEN: u32 = 262_144;
pub const ETHERNET: u32 = 1;
/// The largest packet every program type's test run takes (about a page minus headroom).
pub const MAX_TEST_PACKET: usize = 3500;

/// Whether the kernel lets us load programs. When it refuses for lack of privilege, the test
/// fails loudly, unless `SIFT_SKIP_KERNEL_TESTS=1` asks to skip (still loudly).
pub fn kernel_available() -> bool {
    static AVAILABLE: OnceLock<bool> = OnceLock::new();
    *AVAILABLE.get_or_init(|| {
        let trivial = Program {
            program_type: ProgramType::SocketFilter,
            insns: vec![
                sift_ebpf::insn::Insn::Alu {
                    wide: false,
                    op: sift_ebpf::insn::AluOp::Mov,
                    dst: sift_ebpf::insn::Reg::R0,
                    src: sift_ebpf::insn::Src::Imm(0),
                },
                sift_ebpf::insn::Insn::Exit,
            ],
        };
        match kernel::load(&trivial, "sift_probe") {
            Ok(_) => {
                if kernel::jit_enabled() != Some(true) {
                    eprintln!("NOTE: the kernel's BPF JIT is off; programs run interpreted");
                }
                true
            }
            Err(e) if e.is_permission_denied() => {
                let msg = format!(
                    "THE KERNEL REFUSED BPF_PROG_LOAD ({e}): these tests need root \
                     (CAP_BPF, CAP_NET_ADMIN, CAP_PERFMON)"
                );
                if std::env::var("SIFT_SKIP_KERNEL_TESTS").as_deref() == Ok("1") {
                    eprintln!("\n*** SKIPPED: {msg}; SIFT_SKIP_KERNEL_TESTS=1 ***\n");
                    false
                } else {
                    panic!("{msg}. Set SIFT_SKIP_KERNEL_TESTS=1 to skip them explicitly.");
                }
            }
            Err(e) => panic!("the kernel refused even a trivial program: {e}"),
        }
    })
}

/// An expression's IR, lowered for Ethernet and optionally optimized.
pub fn ir(expr: &str, optimize: bool) -> Result<sift_ir::Function, sift::Error> {
    let mut f = sift::compile_ir(expr, &sift::Options::new(ETHERNET, SNAPLEN))?;
    if optimize {
        sift_opt::optimize(&mut f);
    }
    Ok(f)
}

/// Compiles and loads `f` as every program type; panics with the verifier log on refusal.
pub fn load_all(f: &sift_ir::Function, what: &str) -> Vec<(ProgramType, LoadedProgram)> {
    ProgramType::ALL
        .into_iter()
        .map(|t| {
            let p = sift_ebpf::compile(f, &Options::new(t))
                .unwrap_or_else(|e| panic!("{what} as {t}: code generation failed: {e}"));
            let loaded = kernel::load(&p, "sift_test").unwrap_or_else(|e| {
                panic!(
                    "{what} as {t} ({} instructions): the kernel refused it: {}",
                    p.len(),
                    truncate_log(&e)
                )
            });
            (t, loaded)
        })
        .collect()
}

/// The verifier's log can be megabytes; its end says why.
pub fn truncate_log(e: &KernelError) -> String {
    let s = e.to_string();
    if s.len() > 4000 {
        format!("...{}", &s[s.len() - 4000..])
    } else {
        s
    }
}

/// What the program type returns for libpcap's result.
pub fn expected(t: ProgramType, libpcap: u32) -> u32 {
    match (t, libpcap != 0) {
        (ProgramType::SocketFilter, _) => libpcap,
        (ProgramType::Xdp, true) => XDP_PASS,
        (ProgramType::Xdp, false) => XDP_DROP,
        (ProgramType::SchedCls, true) => TC_ACT_OK,
        (ProgramType::SchedCls, false) => TC_ACT_SHOT,
    }
}

/// Counters of a differential run.
#[derive(Debug, Default)]
pub struct Tally {
    pub expressions: usize,
    pub sift_rejects: usize,
    pub libpcap_rejects: usize,
    pub programs_loaded: usize,
    pub runs: usize,
    /// (program, packet) pairs the kernel's test run refuses (see `test_run_accepts`).
    pub untestable: usize,
    pub matches: usize,
    pub mismatches: Vec<String>,
    /// Packets on which the IR (the back end's specification) and libpcap disagree.
    pub ir_divergences: Vec<String>,
    pub max_insns: usize,
}

impl std::fmt::Display for Tally {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} expressions ({} refused by sift, {} more by libpcap), {} programs loaded \
             (largest {} instructions), {} kernel runs ({} matched, {} refused by the test \
             run), {} mismatches with the IR, {} IR/libpcap divergences",
            self.expressions,
            self.sift_rejects,
            self.libpcap_rejects,
            self.programs_loaded,
            self.max_insns,
            self.runs,
            self.matches,
            self.untestable,
            self.mismatches.len(),
            self.ir_divergences.len()
        )
    }
}

/// Runs `expr` on `packets` in the kernel as every program type and compares each verdict with
/// libpcap's (which judges the packet as captured: wire length = captured length, since the
/// kernel sees exactly the bytes it is given).
pub fn compare(
    oracle: &sift_oracle::Oracle,
    expr: &str,
    optimize: bool,
    packets: &[Vec<u8>],
    tally: &mut Tally,
) {
    compare_with(oracle, expr, optimize, true, packets, tally)
}

/// As [`compare`], choosing whether libpcap optimizes (its optimizer takes a minute on a
/// 1000-host set; without it the meaning differs only on truncated packets).
pub fn compare_with(
    oracle: &sift_oracle::Oracle,
    expr: &str,
    optimize: bool,
    libpcap_optimize: bool,
    packets: &[Vec<u8>],
    tally: &mut Tally,
) {
    tally.expressions += 1;
    let Ok(f) = ir(expr, optimize) else {
        tally.sift_rejects += 1;
        return;
    };
    let libpcap = match oracle.compile(expr, libpcap_optimize, 0) {
        Ok(p) => Some(p),
        Err(sift_oracle::OracleError::RejectsAll) => None,
        Err(_) => {
            tally.libpcap_rejects += 1;
            return;
        }
    };
    for t in ProgramType::ALL {
        let p = sift_ebpf::compile(&f, &Options::new(t)).unwrap();
        tally.max_insns = tally.max_insns.max(p.len());
    }
    let programs = load_all(&f, expr);
    tally.programs_loaded += programs.len();
    // eBPF walks `protochain` chains up to 32 headers (`without_loops`): that is its
    // specification.
    let unrolled = sift_ir::protochain::without_loops(&f).into_owned();
    let reference = sift_ir::Interpreter::new(unrolled).unwrap();
    let mut cache = sift_ir::Cache::new();
    for pkt in packets {
        let len = pkt.len() as u32;
        let libpcap_says = match &libpcap {
            Some(p) => match p.run_bounded(pkt, len, 1 << 20) {
                Some(r) => r,
                None => continue,
            },
            None => 0,
        };
        // The back end's specification is the IR (walks unrolled); where that differs from
        // libpcap (protochain past 32 headers) it is counted apart.
        let want = reference.run(&mut cache, pkt, len);
        if want != libpcap_says {
            tally.ir_divergences.push(format!(
                "{expr:?}: IR {want}, libpcap {libpcap_says}, packet {pkt:02x?}"
            ));
        }
        for (t, prog) in &programs {
            if !kernel::test_run_accepts(*t, pkt) {
                tally.untestable += 1;
                continue;
            }
            let got = prog
                .run(pkt)
                .unwrap_or_else(|e| panic!("{expr} as {t} on {} bytes: {e}", pkt.len()));
            tally.runs += 1;
            if got == expected(*t, want) {
                tally.matches += 1;
            } else if tally.mismatches.len() < 20 {
                tally.mismatches.push(format!(
                    "{expr:?} as {t}{}: kernel {got}, IR {want}, packet {pkt:02x?}",
                    if optimize { "" } else { " (unoptimized)" }
                ));
            } else {
                tally.mismatches.push(String::new());
            }
        }
    }
}

/// `../shared` next to the repository, if present.
pub fn shared_dir() -> Option<PathBuf> {
    let p = Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../../../shared"));
    p.is_dir().then(|| p.to_path_buf())
}

/// The packets of a capture file that the test run accepts for every program type.
pub fn capture_packets(path: &Path) -> Vec<Vec<u8>> {
    let mut r = sift_capture::CaptureReader::open(path).unwrap();
    let mut out = Vec::new();
    while let Ok(Some(rec)) = r.next_record() {
        out.push(rec.data);
    }
    usable(out)
}

/// Keeps packets of 14 to [`MAX_TEST_PACKET`] bytes (XDP and tc test runs need an Ethernet
/// header; every type refuses more than about a page).
pub fn usable(packets: Vec<Vec<u8>>) -> Vec<Vec<u8>> {
    let before = packets.len();
    let out: Vec<Vec<u8>> = packets
        .into_iter()
        .filter(|p| (kernel::MIN_PACKET..=MAX_TEST_PACKET).contains(&p.len()))
        .collect();
    eprintln!(
        "{} of {before} packets usable for BPF_PROG_TEST_RUN (14..={MAX_TEST_PACKET} bytes)",
        out.len()
    );
    out
}
