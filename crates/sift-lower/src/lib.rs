//! Lowering: pcap-filter AST → predicate IR, with libpcap 1.10's semantics.
//!
//! This crate holds sift's protocol knowledge for the pcap-filter language: link-layer headers and
//! the offsets they imply, what `host`, `port`, `proto`, `vlan` and the other primitives test, and
//! the order in which tests run (which decides whether an out-of-bounds load rejects a packet).
//! It mirrors the structure of libpcap's code generator so that the two can be compared function
//! by function, but produces sift's IR ([`sift_ir::Function`]) instead of classic BPF.
//!
//! Primitives are lowered left to right, as libpcap's parser reduces them, because `vlan`, `mpls`,
//! `pppoes` and `geneve` change the offsets of everything after them. After `geneve` some offsets
//! are computed at run time and kept, as in libpcap, in scratch registers; where `geneve` did not
//! match, a read of them sees what libpcap's code would have left there (see `offset_reads`).

#![forbid(unsafe_code)]

mod arith;
mod chain_sets;
mod cond;
mod encap;
mod gen;
mod geneve;
mod host;
mod libpcap_opt;
mod linktype;
mod misc;
mod names;
mod netdb;
mod offset_reads;
mod payload;
mod port;
mod proto;
mod reachable;
mod scratch;
mod sets;
mod statement_model;

use std::fmt;

use sift_ir::{CmpOp, Function, Terminator};
use sift_syntax::ast::{Expr, Primitive, PrimitiveKind, Span};

use crate::cond::{patch, Cond};
use crate::gen::{Env, Gen, LinkState};
pub use crate::libpcap_opt::OptimizerError;
use crate::linktype::Dlt;
pub use crate::linktype::{linktype_by_name, linktype_names, supported_linktypes};
use crate::reachable::{generated_reachable_from, reachable_from};
use crate::scratch::Registers;

/// What the filter is compiled for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Options {
    /// The capture's link type (`LINKTYPE_*` value as in pcap files).
    pub linktype: u32,
    /// Bytes an accepting filter returns (the capture's snapshot length).
    pub snaplen: u32,
    /// The network mask `ip broadcast` uses; `tcpdump -r` uses 0.
    pub netmask: u32,
    /// The capture file's byte order is the opposite of this machine's (BSD loopback headers
    /// store the address family in the writer's byte order).
    pub swapped: bool,
    /// Give the filter the meaning libpcap's optimizer gives it, as tcpdump does by default
    /// (`false` is `tcpdump -O`: libpcap's optimizer changes which truncated packets match).
    pub optimize: bool,
    /// Accept sift's extensions to the language (payload matching, sets; see
    /// `docs/extensions.md`). Off, the language is exactly libpcap's.
    pub extensions: bool,
}

impl Options {
    pub fn new(linktype: u32, snaplen: u32) -> Options {
        Options {
            linktype,
            snaplen,
            netmask: 0,
            swapped: false,
            optimize: true,
            extensions: false,
        }
    }
}

/// Why an expression could not be compiled, with the part of the expression responsible.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LowerError {
    /// The primitive that failed, or `None` for errors about the whole filter.
    pub span: Option<Span>,
    pub kind: LowerErrorKind,
}

/// The kinds of [`LowerError`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LowerErrorKind {
    /// The link type has no lowering (see [`supported_linktypes`]).
    UnsupportedLinkType(u32),
    /// A primitive libpcap rejects too (`ip proto 300`, `vlan 5000`, a direction on `proto`,
    /// a protocol the link type cannot carry, ...). The text is libpcap's message for it, word
    /// for word, since users compare the two tools' errors.
    Rejected(String),
    /// An `and`/`or` without operands (only a tree built by hand has one).
    EmptyChain,
    /// libpcap's optimizer refuses the filter (a folded division by zero, a shift too far).
    Optimizer(OptimizerError),
}

impl LowerError {
    fn whole(kind: LowerErrorKind) -> LowerError {
        LowerError { span: None, kind }
    }
}

impl fmt::Display for LowerError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.kind {
            LowerErrorKind::UnsupportedLinkType(linktype) => write!(
                f,
                "link type {linktype} is not supported (sift supports {})",
                supported_linktypes()
            ),
            LowerErrorKind::Rejected(message) => f.write_str(message),
            LowerErrorKind::EmptyChain => f.write_str("an `and`/`or` without operands"),
            LowerErrorKind::Optimizer(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for LowerError {}

/// Lowers a parsed expression (`None`: the empty expression, which accepts everything).
pub fn lower(expr: Option<&Expr>, opts: &Options) -> Result<Function, LowerError> {
    let dlt = Dlt::from_linktype(opts.linktype).ok_or(LowerError::whole(
        LowerErrorKind::UnsupportedLinkType(opts.linktype),
    ))?;
    let Some(expr) = expr else {
        let mut f = Function::new();
        let b = f.create_block();
        f.set_term(b, Terminator::Return(opts.snaplen));
        return Ok(f);
    };
    // A long chain of one primitive over many values is, with libpcap's optimizer, one set
    // lookup (`chain_sets.rs`). Where the set cannot be lowered (`arp` on a link type without
    // it, say), the chain is lowered term by term, which reports the error at its term.
    if opts.optimize {
        if let Some(chain) = chain_sets::chain_set(expr) {
            let mut g = Gen::new(dlt, opts);
            if let Ok(body) = g.v4_set_lookup(chain.q, chain.mask, chain.ranges()) {
                let body = if chain.negated { body.not() } else { body };
                let mut f = g.finish(body, opts.snaplen)?;
                if chain_sets::lookups_as_switches(&mut f) {
                    return Ok(f);
                }
            }
        }
    }
    lower_term_by_term(expr, dlt, opts)
}

/// [`lower`], each primitive by its own code.
fn lower_term_by_term(expr: &Expr, dlt: Dlt, opts: &Options) -> Result<Function, LowerError> {
    let mut g = Gen::new(dlt, opts);
    // Room for what the primitives will generate, so that the function does not grow by
    // copies: `port N` on Ethernet, the largest common primitive, makes 23 blocks and 100
    // values (a long chain makes 10^5 blocks and 10^6 values). What is not used is never
    // touched, and lowering's cut copies the blocks it keeps into a new function.
    let primitives = primitive_count(expr);
    g.f.blocks.reserve(24 * primitives);
    g.f.values.reserve(100 * primitives);
    let body = g.expr(expr)?;
    g.finish(body, opts.snaplen)
}

/// The primitives of `e` (an `and`/`or` run is one node, so the recursion stays shallow).
fn primitive_count(e: &Expr) -> usize {
    match e {
        Expr::And(terms) | Expr::Or(terms) => terms.iter().map(primitive_count).sum(),
        Expr::Not(e) => primitive_count(e),
        Expr::Primitive(_) => 1,
    }
}

impl Gen {
    fn new(dlt: Dlt, opts: &Options) -> Gen {
        Gen {
            f: Function::new(),
            link: LinkState::new(dlt),
            env: Env {
                swapped: opts.swapped,
            },
            netmask: opts.netmask,
            registers: Registers::default(),
            register_writes: Vec::new(),
            no_optimize: !opts.optimize,
            statements_known: true,
            relations: false,
            offset_uses: Vec::new(),
            member_set: None,
            error_span: None,
        }
    }

    fn expr(&mut self, e: &Expr) -> Result<Cond, LowerError> {
        Ok(match e {
            Expr::And(operands) => self.chain(operands, Gen::and)?,
            Expr::Or(operands) => self.chain(operands, Gen::or)?,
            Expr::Not(a) => self.expr(a)?.not(),
            Expr::Primitive(p) => {
                let first_use = self.offset_uses.len();
                let c = self.primitive(p).map_err(|message| LowerError {
                    span: Some(self.error_span.take().unwrap_or(p.span)),
                    kind: LowerErrorKind::Rejected(message),
                })?;
                for u in &mut self.offset_uses[first_use..] {
                    u.span = Some(p.span);
                }
                c
            }
        })
    }

    /// `a op b op c ...`, left to right, as the binary tree `(a op b) op c` it stands for.
    fn chain(
        &mut self,
        operands: &[Expr],
        op: fn(&mut Gen, Cond, Cond) -> Cond,
    ) -> Result<Cond, LowerError> {
        let Some((first, rest)) = operands.split_first() else {
            return Err(LowerError::whole(LowerErrorKind::EmptyChain));
        };
        let mut acc = self.expr(first)?;
        for e in rest {
            let next = self.expr(e)?;
            acc = op(self, acc, next);
        }
        Ok(acc)
    }

    fn primitive(&mut self, p: &Primitive) -> gen::GenResult<Cond> {
        use PrimitiveKind as K;
        match &p.kind {
            K::Name { q, name } => self.scode(name, *q),
            K::Number { q, value } => self.ncode(None, *value, *q),
            K::Ipv4 { q, text } => self.ncode(Some(text), 0, *q),
            K::Ipv4Cidr {
                q,
                text,
                prefix_len,
            } => self.mcode(text, None, *prefix_len, *q),
            K::Ipv4Masked { q, text, mask } => self.mcode(text, Some(mask), 0, *q),
            K::Ipv6 {
                q,
                text,
                prefix_len,
            } => self.mcode6(text, *prefix_len, *q),
            K::Ether { q, text } => self.ecode(text, *q),
            K::Arcnet { .. } => Err("aid supported only on ARCnet".into()),
            K::ProtoAbbrev(proto) => self.proto_abbrev(*proto),
            K::Relation {
                op,
                negated,
                lhs,
                rhs,
            } => {
                self.relations = true;
                self.relation(*op, *negated, lhs, rhs)
            }
            K::Broadcast(proto) => self.broadcast(*proto),
            K::Multicast(proto) => self.multicast(*proto),
            K::Less(n) => Ok(self.length(CmpOp::Le, *n)),
            K::Greater(n) => Ok(self.length(CmpOp::Ge, *n)),
            K::Byte { index, op, value } => self.byte_op(*index, *op, *value),
            K::Inbound => self.inbound(false),
            K::Outbound => self.inbound(true),
            K::Ifindex(i) => self.ifindex(*i),
            K::Vlan(id) => self.vlan(*id),
            K::Mpls(label) => self.mpls(*label),
            K::Pppoed => self.pppoed(),
            K::Pppoes(s) => self.pppoes(*s),
            K::Geneve(vni) => self.geneve(*vni),
            K::Llc(kind) => self.llc(kind.as_deref()),
            K::Payload(test) => self.payload(test),
            K::InSet { q, set } => self.in_set(*q, set),
            K::VlanIn(set) => self.vlan_in(set),
            K::Unsupported(what) => Err(format!(
                "'{what}' is not supported for {}",
                self.link.linktype.description()
            )),
        }
    }

    /// Points the filter's exits at "accept" and "reject", resolves reads of `geneve`'s offsets
    /// where that `geneve` may not have matched, applies what libpcap's optimizer does to the filter's
    /// meaning (unless libpcap would not optimize it), and drops blocks no path reaches.
    fn finish(mut self, body: Cond, snaplen: u32) -> Result<Function, LowerError> {
        let accept = self.f.create_block();
        self.f.set_term(accept, Terminator::Return(snaplen));
        let reject = self.f.create_block();
        self.f.set_term(reject, Terminator::Return(0));
        patch(&mut self.f, body.when_true, accept);
        patch(&mut self.f, body.when_false, reject);
        let (mut f, renumber) = generated_reachable_from(std::mem::take(&mut self.f), body.entry);
        offset_reads::resolve(&mut f, &renumber, &self.register_writes, &self.offset_uses);
        if self.no_optimize {
            return Ok(f);
        }
        let optimizer_error = |e| LowerError::whole(LowerErrorKind::Optimizer(e));
        if self.statements_known {
            if let Some(result) = statement_model::optimized(&f, self.relations) {
                return Ok(reachable_from(result.map_err(optimizer_error)?, Function::ENTRY).0);
            }
        }
        // The cut left the blocks in reverse postorder, and the offsets resolved since moved
        // no edge.
        libpcap_opt::apply(&mut f, true).map_err(optimizer_error)?;
        Ok(reachable_from(f, Function::ENTRY).0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lower_text(text: &str, linktype: u32) -> Result<Function, LowerError> {
        let expr = sift_syntax::parse(text).expect("parses");
        lower(expr.as_ref(), &Options::new(linktype, 262_144))
    }

    /// Each kind of error, with the span of the primitive at fault when there is one.
    #[test]
    fn errors_say_what_failed_and_where() {
        let e = lower_text("tcp", 12_345).unwrap_err();
        assert_eq!(e.kind, LowerErrorKind::UnsupportedLinkType(12_345));
        assert!(e
            .to_string()
            .starts_with("link type 12345 is not supported"));

        let e = lower_text("tcp or vlan 5000", 1).unwrap_err();
        assert_eq!(
            e.kind,
            LowerErrorKind::Rejected("VLAN tag 5000 greater than maximum 4095".into())
        );
        assert_eq!(e.span, Some(Span::new(7, 16)));

        let e = lower_text("ip[0] / (1 - 1) = 1", 1).unwrap_err();
        assert_eq!(
            e.kind,
            LowerErrorKind::Optimizer(OptimizerError::DivisionByZero)
        );
        assert_eq!((e.span, e.to_string().as_str()), (None, "division by zero"));
    }
}
