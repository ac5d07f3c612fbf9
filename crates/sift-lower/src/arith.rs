//! Arithmetic over packet bytes and relations between such expressions (`ip[0] & 0xf > 5`,
//! `tcp[tcpflags] & tcp-syn != 0`, `len >= 100`), with libpcap's rules: the protocol check of a
//! load guards the comparison, but only the left operand's checks survive an arithmetic operator;
//! a literal zero divisor and literal shifts over 31 bits are errors; at most 16 intermediate
//! values may be live (libpcap's scratch registers). Each value gets the register libpcap gives
//! it, and the stores libpcap makes are logged (see the `scratch` module).

use sift_ir::{BinOp, Block, CmpOp, Inst, LoadSize, Value};
use sift_syntax::ast::{Arith, ArithOp, Proto, RelOp};

use crate::cond::Cond;
use crate::gen::{Gen, GenResult, OffRel, RuntimeOffset};
use crate::proto::IPPROTO_ICMPV6;
use crate::scratch::{Register, RegisterWrite, Stored};

/// Arithmetic whose instructions are emitted later, into the block of the comparison that uses
/// it; its protocol checks are already built.
pub(crate) struct ArithCode {
    tree: Tree,
    check: Option<Cond>,
}

/// A value, and the scratch register libpcap stores it in.
struct Tree {
    node: Node,
    register: Register,
}

enum Node {
    Const(u32),
    Len,
    /// A load at `index + offset`; `ipv4_hdr` adds the IPv4 header length to the index (with
    /// the run-time part of the header's offset, if any), `runtime` adds the run-time part of the
    /// header's offset (after `geneve`).
    Load {
        index: Box<Tree>,
        ipv4_hdr: bool,
        runtime: Option<RuntimeOffset>,
        offset: u32,
        size: LoadSize,
    },
    Binary(BinOp, Box<Tree>, Box<Tree>),
    Neg(Box<Tree>),
}

impl Tree {
    /// The first instruction libpcap emits for this value is `ld #k`: the literal `k`.
    fn leading_literal(&self) -> Option<u32> {
        match &self.node {
            Node::Const(k) => Some(*k),
            Node::Len => None,
            Node::Load { index, .. } => index.leading_literal(),
            Node::Binary(_, l, _) => l.leading_literal(),
            Node::Neg(a) => a.leading_literal(),
        }
    }
}

fn binop(op: ArithOp) -> BinOp {
    match op {
        ArithOp::Add => BinOp::Add,
        ArithOp::Sub => BinOp::Sub,
        ArithOp::Mul => BinOp::Mul,
        ArithOp::Div => BinOp::Div,
        ArithOp::Mod => BinOp::Mod,
        ArithOp::And => BinOp::And,
        ArithOp::Or => BinOp::Or,
        ArithOp::Xor => BinOp::Xor,
        ArithOp::Lsh => BinOp::Shl,
        ArithOp::Rsh => BinOp::Shr,
    }
}

impl Gen {
    /// Takes one of libpcap's scratch registers (`alloc_reg`); callers give it back with
    /// `registers.free`, or keep it for the whole filter (`geneve`'s offsets).
    pub(crate) fn alloc_register(&mut self) -> GenResult<Register> {
        self.registers
            .alloc()
            .map(|slot| slot as Register)
            .ok_or_else(|| "too many registers needed to evaluate expression".into())
    }

    /// Lowers an arithmetic expression: builds its protocol checks now (they depend on the
    /// offsets in force) and defers its instructions.
    pub fn arith(&mut self, a: &Arith) -> GenResult<ArithCode> {
        match a {
            Arith::Num(k, _) => Ok(ArithCode {
                tree: Tree {
                    node: Node::Const(*k),
                    register: self.alloc_register()?,
                },
                check: None,
            }),
            Arith::Len(_) => Ok(ArithCode {
                tree: Tree {
                    node: Node::Len,
                    register: self.alloc_register()?,
                },
                check: None,
            }),
            Arith::Neg(inner, _) => {
                let c = self.arith(inner)?;
                // The negation overwrites its operand's register.
                let register = c.tree.register;
                Ok(ArithCode {
                    tree: Tree {
                        node: Node::Neg(Box::new(c.tree)),
                        register,
                    },
                    check: c.check,
                })
            }
            Arith::Binary { op, lhs, rhs, .. } => {
                let a0 = self.arith(lhs)?;
                let a1 = self.arith(rhs)?;
                match (op, a1.tree.leading_literal()) {
                    (ArithOp::Div, Some(0)) => return Err("division by zero".into()),
                    (ArithOp::Mod, Some(0)) => return Err("modulus by zero".into()),
                    (ArithOp::Lsh | ArithOp::Rsh, Some(k)) if k > 31 => {
                        return Err("shift by more than 31 bits".into())
                    }
                    _ => {}
                }
                // Both operands' registers are freed and one is allocated for the result.
                self.registers.free(a0.tree.register.into());
                self.registers.free(a1.tree.register.into());
                let register = self.alloc_register()?;
                Ok(ArithCode {
                    tree: Tree {
                        node: Node::Binary(binop(*op), Box::new(a0.tree), Box::new(a1.tree)),
                        register,
                    },
                    check: a0.check,
                })
            }
            Arith::Load {
                proto, index, size, ..
            } => {
                let size = LoadSize::from_bytes(*size)
                    .ok_or_else(|| "data size must be 1, 2, or 4".to_string())?;
                let inst = self.arith(index)?;
                // The loaded value gets a new register before the index's is freed.
                let register = self.alloc_register()?;
                self.registers.free(inst.tree.register.into());
                self.load_from(*proto, inst, size, register)
            }
        }
    }

    fn load_from(
        &mut self,
        proto: Proto,
        inst: ArithCode,
        size: LoadSize,
        register: Register,
    ) -> GenResult<ArithCode> {
        let linkpl = self.link.off_linkpl;
        let nl = linkpl.plus(self.link.off_nl);
        let and_checks = |g: &mut Gen, first: Option<Cond>, second: Cond| match first {
            Some(f) => g.and(f, second),
            None => second,
        };
        let (base, ipv4_hdr, check) = match proto {
            Proto::Link => (self.link.off_linkhdr, false, inst.check),
            Proto::Ip
            | Proto::Arp
            | Proto::Rarp
            | Proto::Atalk
            | Proto::Decnet
            | Proto::Sca
            | Proto::Lat
            | Proto::Moprc
            | Proto::Mopdl
            | Proto::Ipv6 => {
                let b = self.proto_abbrev(proto)?;
                (nl, false, Some(and_checks(self, inst.check, b)))
            }
            Proto::Sctp
            | Proto::Tcp
            | Proto::Udp
            | Proto::Icmp
            | Proto::Igmp
            | Proto::Igrp
            | Proto::Pim
            | Proto::Vrrp
            | Proto::Carp => {
                let p = self.proto_abbrev(proto)?;
                let frag = self.ipfrag();
                let b = self.and(p, frag);
                let b = and_checks(self, inst.check, b);
                let ip = self.proto_abbrev(Proto::Ip)?;
                (nl, true, Some(self.and(ip, b)))
            }
            Proto::Icmpv6 => {
                let b = self.proto_abbrev(Proto::Ipv6)?;
                let b = and_checks(self, inst.check, b);
                let nh = self.cmp(OffRel::LinkPl, 6, LoadSize::Byte, IPPROTO_ICMPV6);
                (nl.plus(40), false, Some(self.and(b, nh)))
            }
            Proto::Radio => return Err("radio information not present in capture".into()),
            other => {
                return Err(format!(
                    "unsupported index operation on '{}'",
                    other.keyword()
                ))
            }
        };
        Ok(ArithCode {
            tree: Tree {
                node: Node::Load {
                    index: Box::new(inst.tree),
                    ipv4_hdr,
                    // The IPv4 header length already includes the run-time part.
                    runtime: if ipv4_hdr { None } else { base.runtime },
                    offset: base.constant,
                    size,
                },
                register,
            },
            check,
        })
    }

    /// Emits the instructions computing `t` into `block`, and logs the stores of its values
    /// (innermost first, as libpcap's code makes them).
    fn emit(&mut self, block: Block, t: &Tree) -> Value {
        let value = self.emit_node(block, &t.node);
        self.register_writes.push(RegisterWrite {
            block,
            register: t.register,
            value: Stored::Value(value),
        });
        value
    }

    fn emit_node(&mut self, block: Block, node: &Node) -> Value {
        match node {
            Node::Const(k) => self.f.iconst(block, *k),
            Node::Len => self.f.push(block, Inst::WireLen),
            Node::Load {
                index,
                ipv4_hdr,
                runtime,
                offset,
                size,
            } => {
                // The index is libpcap's A and the header's start its X (`add x`): operand
                // order matters to its value numbering and to the peephole that folds a
                // constant A into the load's offset (`libpcap_opt::numbering`).
                let mut x = self.emit(block, index);
                if *ipv4_hdr {
                    let hl = self.ipv4_header_len(block);
                    x = self.f.push(block, Inst::Binary(BinOp::Add, x, hl));
                } else if let Some(r) = runtime {
                    let r = self.runtime_use(block, *r);
                    x = self.f.push(block, Inst::Binary(BinOp::Add, x, r));
                }
                self.f.push(
                    block,
                    Inst::Load {
                        index: Some(x),
                        offset: *offset,
                        size: *size,
                    },
                )
            }
            Node::Binary(op, l, r) => {
                let a = self.emit(block, l);
                let b = self.emit(block, r);
                self.f.push(block, Inst::Binary(*op, a, b))
            }
            Node::Neg(a) => {
                let v = self.emit(block, a);
                self.f.push(block, Inst::Neg(v))
            }
        }
    }

    /// `lhs op rhs` (negated for `<=`, `<`, `!=`), guarded by the operands' protocol checks.
    pub fn relation(
        &mut self,
        op: RelOp,
        negated: bool,
        lhs: &Arith,
        rhs: &Arith,
    ) -> GenResult<Cond> {
        let a0 = self.arith(lhs)?;
        let a1 = self.arith(rhs)?;
        self.registers.free(a0.tree.register.into());
        self.registers.free(a1.tree.register.into());
        let block = self.f.create_block();
        let x = self.emit(block, &a0.tree);
        let y = self.emit(block, &a1.tree);
        let mut b = match op {
            RelOp::Gt => self.branch(block, CmpOp::Gt, x, y),
            RelOp::Ge => self.branch(block, CmpOp::Ge, x, y),
            // libpcap's `sub x; jeq #0`, which its optimizer's first round turns into a
            // comparison of the operands (`libpcap_opt::branches::relation_peephole`).
            RelOp::Eq => {
                let difference = self.f.push(block, Inst::Binary(BinOp::Sub, x, y));
                self.branch_const(block, CmpOp::Eq, difference, 0)
            }
        };
        if negated {
            b = b.not();
        }
        let checks = match (a0.check, a1.check) {
            (Some(c0), Some(c1)) => Some(self.and(c0, c1)),
            (c0, c1) => c0.or(c1),
        };
        Ok(match checks {
            Some(c) => self.and(c, b),
            None => b,
        })
    }
}
