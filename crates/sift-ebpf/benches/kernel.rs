//! The kernel as benchmark: ns/packet of sift's eBPF under the kernel's JIT against libpcap's
//! classic BPF as the kernel would run it, with `BPF_PROG_TEST_RUN` and a repeat count.
//!
//! `cargo bench -p sift-ebpf --bench kernel` (root; prints a Markdown table)
//!
//! Method. Each program is loaded with `bpf(BPF_PROG_LOAD)` and run on every packet of a fixed
//! set with `BPF_PROG_TEST_RUN`, `REPEAT` times per call; the time per run is the `duration`
//! the kernel reports (its timer around the run loop, divided by the repeat count and rounded
//! down to whole nanoseconds), best of `PASSES` per packet, averaged over the packets. (Wall
//! time would include the call's setup, which for XDP with a repeat count is tens of
//! milliseconds per call on this kernel.) An empty program (`r0 = 0; exit`) of each type gives
//! the test-run loop's own cost per run, which is subtracted from every time in the table.
//! The kernel's whole-nanosecond rounding makes differences under about 1 ns noise.
//!
//! The kernel cannot load classic BPF with `BPF_PROG_LOAD` (it converts socket filters
//! internally, unverified), so libpcap's program (optimized, as tcpdump compiles it) is
//! translated by `sift_ebpf::cbpf` the way `bpf_convert_filter` converts it: as a tc program
//! ("cbpf tc": absolute loads inline from the linear packet, as the kernel's converter does,
//! indexed loads through the load helper) and as a socket filter ("cbpf sock": every load is
//! `LD_ABS`/`LD_IND`, i.e. a helper call, the only packet access a verified socket filter has).
//! Compare "cbpf tc" with "sift tc"/"sift xdp" (same direct access) and "cbpf sock" with
//! "sift sock" (same helper-call loads).

use sift_ebpf::cbpf::{translate, ClassicInsn};
use sift_ebpf::kernel::{self, LoadedProgram};
use sift_ebpf::{Options, Program, ProgramType};

const REPEAT: u32 = 10_000;
const PASSES: usize = 2;
const SNAPLEN: u32 = 262_144;

fn tcp_packet(src: [u8; 4], dst: [u8; 4], sport: u16, dport: u16) -> Vec<u8> {
    let mut p = vec![0u8; 66];
    p[12] = 0x08;
    p[14] = 0x45;
    p[16..18].copy_from_slice(&52u16.to_be_bytes());
    p[22] = 64;
    p[23] = 6;
    p[26..30].copy_from_slice(&src);
    p[30..34].copy_from_slice(&dst);
    p[34..36].copy_from_slice(&sport.to_be_bytes());
    p[36..38].copy_from_slice(&dport.to_be_bytes());
    p[46] = 0x80;
    p
}

/// Generated traffic plus packets that reach the filters' deepest tests.
fn packets() -> Vec<Vec<u8>> {
    let mut out: Vec<Vec<u8>> = sift_testgen::generate_packets(1, 0xbe9c, 50)
        .into_iter()
        .map(|p| p.data)
        .filter(|p| kernel::test_run_accepts(ProgramType::SchedCls, p) && p.len() <= 3500)
        .collect();
    for i in 0..8u8 {
        out.push(tcp_packet([10, 1, 1, 1], [10, 2, 2, 2], 20, 30));
        out.push(tcp_packet(
            [10, 0, 0, i],
            [10, 2, 2, 2],
            20,
            30 + u16::from(i),
        ));
    }
    out
}

fn host_set(n: usize) -> String {
    (0..n)
        .map(|i| format!("host 10.0.{}.{}", i / 256, i % 256))
        .collect::<Vec<_>>()
        .join(" or ")
}

fn filters() -> Vec<(String, String)> {
    let mut v: Vec<(String, String)> = [
        "ip",
        "ip src 10.1.1.1",
        "ip and tcp",
        "ip src 10.1.1.1 and ip dst 10.2.2.2 and tcp src port 20 and tcp dst port 30",
        "ip src 10.4.4.4 or ip src 10.3.3.3 or ip src 10.2.2.2 or ip src 10.1.1.1",
    ]
    .iter()
    .map(|e| (e.to_string(), e.to_string()))
    .collect();
    let and = [
        "ip src 10.1.1.1",
        "ip dst 10.2.2.2",
        "tcp",
        "tcp src port 20",
        "tcp dst port 30",
    ];
    for k in 1..=5 {
        v.push((format!("and-{k}"), and[..k].join(" and ")));
    }
    for k in 1..=5 {
        let e = (1..=k)
            .map(|i| format!("ip src 10.0.0.{i}"))
            .collect::<Vec<_>>()
            .join(" or ");
        v.push((format!("or-{k}"), e));
    }
    for n in [10, 100, 1000] {
        v.push((format!("{n} hosts"), host_set(n)));
    }
    v
}

/// Mean over packets of the best-of-passes time per run, in ns.
fn time(p: &LoadedProgram, packets: &[Vec<u8>]) -> f64 {
    let mut total = 0.0;
    for pkt in packets {
        let mut best = f64::INFINITY;
        for _ in 0..PASSES {
            let run = p.run_repeated(pkt, REPEAT).expect("test run");
            best = best.min(f64::from(run.duration_ns));
        }
        total += best;
    }
    total / packets.len() as f64
}

fn load(p: &Program, what: &str) -> LoadedProgram {
    kernel::load(p, "sift_bench").unwrap_or_else(|e| panic!("{what}: {e}"))
}

fn empty(t: ProgramType) -> Program {
    Program {
        program_type: t,
        insns: vec![
            sift_ebpf::insn::Insn::Alu {
                wide: false,
                op: sift_ebpf::insn::AluOp::Mov,
                dst: sift_ebpf::insn::Reg::R0,
                src: sift_ebpf::insn::Src::Imm(0),
            },
            sift_ebpf::insn::Insn::Exit,
        ],
    }
}

fn main() {
    if std::env::args().any(|a| a == "--test") {
        return; // `cargo test --benches` runs this as a test: nothing to check quickly.
    }
    match kernel::jit_enabled() {
        Some(true) => eprintln!("bpf_jit_enable: on"),
        Some(false) => eprintln!("WARNING: bpf_jit_enable is 0: programs run in the interpreter"),
        None => eprintln!("WARNING: cannot read /proc/sys/net/core/bpf_jit_enable"),
    }
    let packets = packets();
    let oracle = sift_oracle::Oracle::new(1, SNAPLEN).expect("libpcap");
    let base_sock = time(&load(&empty(ProgramType::SocketFilter), "empty"), &packets);
    let base_tc = time(&load(&empty(ProgramType::SchedCls), "empty"), &packets);
    let base_xdp = time(&load(&empty(ProgramType::Xdp), "empty"), &packets);
    println!(
        "{} packets, {REPEAT} runs per call, kernel-reported ns per run, best of {PASSES}; empty program: socket {base_sock:.1} ns, \
         tc {base_tc:.1} ns, xdp {base_xdp:.1} ns (subtracted from every column)\n",
        packets.len()
    );
    println!(
        "| filter | cBPF insns | cbpf→eBPF insns | sift eBPF insns (tc) | cbpf sock | sift sock | \
         cbpf tc | sift tc | sift xdp |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|---:|---:|");
    let mut disagreements = 0usize;
    for (name, expr) in filters() {
        let classic = oracle.compile(&expr, true, 0).expect("libpcap compiles");
        let classic: Vec<ClassicInsn> = classic
            .instructions()
            .iter()
            .map(|i| ClassicInsn {
                code: i.code,
                jt: i.jt,
                jf: i.jf,
                k: i.k,
            })
            .collect();
        let mut f = sift::compile_ir(&expr, &sift::Options::new(1, SNAPLEN)).expect("sift");
        sift_opt::optimize(&mut f);
        let sift_of = |t| sift_ebpf::compile(&f, &Options::new(t)).expect("codegen");
        let cbpf_sock = translate(&classic, ProgramType::SocketFilter).expect("translate");
        let cbpf_tc = translate(&classic, ProgramType::SchedCls).expect("translate");
        let (sift_sock, sift_tc, sift_xdp) = (
            sift_of(ProgramType::SocketFilter),
            sift_of(ProgramType::SchedCls),
            sift_of(ProgramType::Xdp),
        );
        let loaded: Vec<LoadedProgram> = [&cbpf_sock, &sift_sock, &cbpf_tc, &sift_tc, &sift_xdp]
            .iter()
            .map(|p| load(p, &name))
            .collect();
        // Sanity: every engine agrees on every packet (match / no match).
        for pkt in &packets {
            // The translations return libpcap's value; sift's tc and XDP return actions.
            let verdicts: Vec<bool> = loaded
                .iter()
                .enumerate()
                .map(|(i, p)| {
                    let r = p.run(pkt).expect("run");
                    match i {
                        3 => r == sift_ebpf::TC_ACT_OK,
                        4 => r == sift_ebpf::XDP_PASS,
                        _ => r != 0,
                    }
                })
                .collect();
            if verdicts.iter().any(|&v| v != verdicts[0]) {
                disagreements += 1;
            }
        }
        let ns: Vec<f64> = loaded.iter().map(|p| time(p, &packets)).collect();
        println!(
            "| {name} | {} | {} | {} | {:.1} | {:.1} | {:.1} | {:.1} | {:.1} |",
            classic.len(),
            cbpf_tc.len(),
            sift_tc.len(),
            ns[0] - base_sock,
            ns[1] - base_sock,
            ns[2] - base_tc,
            ns[3] - base_tc,
            ns[4] - base_xdp,
        );
    }
    println!("\nverdict disagreements between engines: {disagreements}");
}
