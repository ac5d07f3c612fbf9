//! Shared helpers of the integration tests and the `opt_stats` example: building large `or`
//! chains directly as ASTs (the parser refuses chains deeper than 2000 terms) and running
//! functions on packets.

#![allow(dead_code)]

pub mod passes;
pub mod random_ir;

use sift_ir::{Cache, Function, Interpreter};
use sift_syntax::ast::Expr;

/// The `i`th of `n` distinct IPv4 addresses.
pub fn address(i: usize) -> String {
    let i = i as u32 + 1;
    format!("10.{}.{}.{}", (i >> 16) & 0xff, (i >> 8) & 0xff, i & 0xff)
}

/// `term(0) or term(1) or ... or term(n-1)`, as the parser builds it.
pub fn or_chain(n: usize, term: impl Fn(usize) -> String) -> Expr {
    let one = |i: usize| {
        sift_syntax::parse(&term(i))
            .expect("term parses")
            .expect("term is not empty")
    };
    Expr::Or((0..n).map(one).collect())
}

/// Lowers a (possibly very deep) chain term by term on a thread with a large stack, returning
/// the IR.
pub fn lower_chain(n: usize, linktype: u32, term: fn(usize) -> String) -> Function {
    std::thread::Builder::new()
        .stack_size(1 << 30)
        .spawn(move || {
            let e = or_chain(n, term);
            // Without libpcap's optimizer (`tcpdump -O`), which would have the lowering
            // make the chain one set lookup already: these tests are about the tables
            // sift-opt forms from the equality tests of each term.
            let opts = sift_lower::Options {
                optimize: false,
                ..sift_lower::Options::new(linktype, 262144)
            };
            let f = sift_lower::lower(Some(&e), &opts).expect("chain lowers");
            // Dropping a 10^4-deep Box chain recurses too; do it here, on the big stack.
            drop(e);
            f
        })
        .expect("thread starts")
        .join()
        .expect("lowering does not panic")
}

pub fn host_term(i: usize) -> String {
    format!("host {}", address(i))
}

pub fn net_term(i: usize) -> String {
    format!("net 10.{}.{}.0/24", (i >> 8) & 0xff, i & 0xff)
}

pub fn port_term(i: usize) -> String {
    format!("port {}", 1 + i % 65535)
}

/// Runs both functions on a packet and its truncated copies; returns the first disagreement.
pub fn compare(
    a: &Interpreter,
    b: &Interpreter,
    cache: &mut (Cache, Cache),
    data: &[u8],
    wire: u32,
) -> Option<(Vec<u8>, u32, u32)> {
    let n = data.len();
    let mut cuts = vec![n];
    for c in [
        0,
        1,
        13,
        14,
        15,
        20,
        22,
        23,
        33,
        34,
        35,
        40,
        54,
        n / 2,
        n.saturating_sub(1),
    ] {
        if c < n {
            cuts.push(c);
        }
    }
    cuts.sort_unstable();
    cuts.dedup();
    for c in cuts {
        let p = &data[..c];
        let x = a.run(&mut cache.0, p, wire);
        let y = b.run(&mut cache.1, p, wire);
        if x != y {
            return Some((p.to_vec(), x, y));
        }
    }
    None
}

/// The IR libpcap's code generator (before any optimization) produces for
/// `host H0 or host H1 or ...` on Ethernet, built directly: for each host, IPv4 source and
/// destination, ARP and RARP sender and target, each behind its own ethertype test. Lowering
/// is not involved, so chains of any length can be built quickly.
pub fn raw_host_chain(n: usize) -> Function {
    use sift_ir::{CmpOp, Inst, LoadSize, Terminator};
    let mut f = Function::new();
    let entry = f.create_block();
    let reject = f.create_block();
    let accept = f.create_block();
    f.set_term(reject, Terminator::Return(0));
    f.set_term(accept, Terminator::Return(262144));
    let mut current = entry;
    let tests: [(u32, u32); 6] = [
        (0x800, 26),
        (0x800, 30),
        (0x806, 28),
        (0x806, 38),
        (0x8035, 28),
        (0x8035, 38),
    ];
    for i in 0..n {
        let host = 0x0a00_0000 + i as u32 + 1;
        for (j, &(ethertype, offset)) in tests.iter().enumerate() {
            let last = i + 1 == n && j + 1 == tests.len();
            let next = if last { reject } else { f.create_block() };
            let addr_block = f.create_block();
            let et = f.push(
                current,
                Inst::Load {
                    index: None,
                    offset: 12,
                    size: LoadSize::Half,
                },
            );
            let k = f.iconst(current, ethertype);
            f.set_term(
                current,
                Terminator::Branch {
                    op: CmpOp::Eq,
                    lhs: et,
                    rhs: k,
                    then_: addr_block.into(),
                    else_: next.into(),
                },
            );
            let a = f.push(
                addr_block,
                Inst::Load {
                    index: None,
                    offset,
                    size: LoadSize::Word,
                },
            );
            let h = f.iconst(addr_block, host);
            f.set_term(
                addr_block,
                Terminator::Branch {
                    op: CmpOp::Eq,
                    lhs: a,
                    rhs: h,
                    then_: accept.into(),
                    else_: next.into(),
                },
            );
            current = next;
        }
    }
    f
}
