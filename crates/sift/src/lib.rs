//! sift: packet filters in the tcpdump/libpcap language, with libpcap 1.10's exact semantics.
//!
//! This is the facade over the pipeline crates: [`sift_syntax`] parses an expression,
//! [`sift_lower`] lowers it to the predicate IR of [`sift_ir`] for a link type (with libpcap's
//! optimizer semantics), [`sift_opt`] optimizes the IR, [`sift_bytecode`] compiles it to
//! verified bytecode, and [`sift_jit`] compiles that to native code where the host allows
//! (x86-64, aarch64; elsewhere the bytecode interpreter runs it). The lowered IR is kept as the
//! semantic reference ([`Filter::run_reference`]). Other front ends (the seed papers'
//! languages, classic BPF) enter with [`Filter::from_ir`].
//!
//! ```
//! let filter = sift::Filter::compile("tcp port 80", sift::LINKTYPE_ETHERNET, 262144).unwrap();
//! assert!(!filter.matches(&[0u8; 60], 60));
//! ```

// Only the C library's boundary (`capi`) may use `unsafe`.
#![deny(unsafe_code)]

#[allow(unsafe_code)]
pub mod capi;
pub mod demux;

pub use demux::{Batch, Delivery, Demux, FilterId, Matches};

use std::borrow::Cow;
use std::cell::RefCell;
use std::fmt;

use sift_bytecode::VerifiedProgram;
use sift_ir::{Function, Interpreter};
pub use sift_lower::Options;
use sift_syntax::ast::{Expr, Span};

pub use sift_bytecode;
pub use sift_ir;
pub use sift_jit;
pub use sift_lower;
pub use sift_opt;
pub use sift_syntax;

/// `LINKTYPE_ETHERNET`.
pub const LINKTYPE_ETHERNET: u32 = 1;

/// Why an expression was rejected.
#[derive(Clone, Debug)]
pub enum Error {
    /// Not in the language (libpcap: "syntax error" and lexical errors).
    Syntax(sift_syntax::ParseError),
    /// In the language but meaningless for this link type or with these names.
    Semantic(sift_lower::LowerError),
    /// IR handed to [`Filter::from_ir`] breaks the IR's invariants.
    InvalidIr(sift_ir::VerifyError),
    /// The filter does not fit the bytecode (too large, or too many values live at once).
    Codegen(sift_bytecode::CodegenError),
    /// An optimizer pass broke the IR's invariants (a bug in sift, caught by the IR verifier,
    /// which runs after every pass in debug builds).
    Optimizer(Box<sift_opt::PassError>),
}

impl Error {
    /// The part of the expression the error is about, if any.
    pub fn span(&self) -> Option<Span> {
        match self {
            Error::Syntax(e) => Some(e.span),
            Error::Semantic(e) => e.span,
            Error::InvalidIr(_) | Error::Codegen(_) | Error::Optimizer(_) => None,
        }
    }

    /// The message followed by the expression with a caret line under the offending part.
    pub fn render(&self, expr: &str) -> String {
        match self {
            Error::Syntax(e) => e.render(expr),
            Error::Semantic(e) => match e.span {
                Some(span) => sift_syntax::ParseError::new(
                    sift_syntax::ParseErrorKind::Semantic(e.to_string()),
                    span,
                )
                .render(expr),
                None => e.to_string(),
            },
            Error::InvalidIr(_) | Error::Codegen(_) | Error::Optimizer(_) => self.to_string(),
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Syntax(e) => write!(f, "{e}"),
            Error::Semantic(e) => write!(f, "{e}"),
            Error::InvalidIr(e) => write!(f, "invalid IR: {e}"),
            Error::Codegen(e) => write!(f, "{e}"),
            Error::Optimizer(e) => write!(f, "internal error: {e}"),
        }
    }
}

impl std::error::Error for Error {}

/// Parses an expression (`None` for the empty expression).
pub fn parse(expr: &str) -> Result<Option<Expr>, Error> {
    sift_syntax::parse(expr).map_err(Error::Syntax)
}

/// Parses and lowers an expression to IR (with sift's extensions when `opts.extensions`).
pub fn compile_ir(expr: &str, opts: &Options) -> Result<Function, Error> {
    let ast = sift_syntax::parse_with(expr, opts.extensions).map_err(Error::Syntax)?;
    sift_lower::lower(ast.as_ref(), opts).map_err(Error::Semantic)
}

/// Parses, lowers and optimizes an expression (what the back ends and the demultiplexer take).
pub fn compile_optimized_ir(expr: &str, opts: &Options) -> Result<Function, Error> {
    let mut ir = compile_ir(expr, opts)?;
    optimize(&mut ir)?;
    Ok(ir)
}

/// Verifies and optimizes IR from any front end, as [`Filter::from_ir`] does, without building
/// the runnable filter: for back ends that only need code (`sift compile`).
pub fn optimized_ir(ir: &Function) -> Result<Function, Error> {
    sift_ir::verify(ir).map_err(Error::InvalidIr)?;
    let mut optimized = ir.clone();
    optimize(&mut optimized)?;
    Ok(optimized)
}

/// Optimized IR for back ends that cannot loop or call the coprocessor (eBPF): `protochain`
/// walks unrolled to [`sift_ir::protochain::UNROLLED_HEADERS`] headers and set lookups written
/// as comparisons ([`without_set_lookups`]), the result optimized again, since the unrolled
/// rounds share most of their tests. `optimized` itself when it has neither.
pub fn loop_free(optimized: &Function) -> Result<Cow<'_, Function>, Error> {
    let unrolled = sift_ir::protochain::without_loops(optimized);
    let expanded = match sift_ir::set_lookups::without_set_lookups(&unrolled) {
        Cow::Owned(f) => Some(f),
        Cow::Borrowed(_) => None,
    };
    match (expanded, unrolled) {
        (Some(mut f), _) | (None, Cow::Owned(mut f)) => {
            optimize(&mut f)?;
            Ok(Cow::Owned(f))
        }
        (None, Cow::Borrowed(f)) => Ok(Cow::Borrowed(f)),
    }
}

/// Optimized IR for back ends without the coprocessor (classic BPF): every set lookup (`host in
/// {...}`) written as comparisons ([`sift_ir::set_lookups`]: a `switch` of the single values, a
/// binary search over the ranges) and the result optimized again. `optimized` itself when it looks nothing up. Payload tests stay,
/// and such back ends refuse them.
pub fn without_set_lookups(optimized: &Function) -> Result<Cow<'_, Function>, Error> {
    match sift_ir::set_lookups::without_set_lookups(optimized) {
        Cow::Borrowed(f) => Ok(Cow::Borrowed(f)),
        Cow::Owned(mut f) => {
            optimize(&mut f)?;
            Ok(Cow::Owned(f))
        }
    }
}

fn optimize(ir: &mut Function) -> Result<(), Error> {
    sift_opt::try_optimize_with(ir, &sift_opt::Options::default())
        .map(drop)
        .map_err(|e| Error::Optimizer(Box::new(e)))
}

thread_local! {
    static CACHE: RefCell<sift_bytecode::Cache> = RefCell::new(sift_bytecode::Cache::new());
    static REFERENCE_CACHE: RefCell<sift_ir::Cache> = RefCell::new(sift_ir::Cache::new());
}

/// A compiled filter. Cheap to share between threads (`Send + Sync`).
#[derive(Clone, Debug)]
pub struct Filter {
    reference: Interpreter,
    optimized: Function,
    program: VerifiedProgram,
    /// Native code for `program`, when the host can run it.
    native: Option<std::sync::Arc<sift_jit::JitFilter>>,
}

impl Filter {
    /// Compiles `expr` for captures of `linktype` (a `LINKTYPE_*` number) as `tcpdump -r` does.
    pub fn compile(expr: &str, linktype: u32, snaplen: u32) -> Result<Filter, Error> {
        Filter::compile_with(expr, &Options::new(linktype, snaplen))
    }

    pub fn compile_with(expr: &str, opts: &Options) -> Result<Filter, Error> {
        Filter::from_ir(compile_ir(expr, opts)?)
    }

    /// A filter from IR built by another front end; the IR is verified first, then optimized.
    pub fn from_ir(ir: Function) -> Result<Filter, Error> {
        let mut optimized = ir.clone();
        let reference = Interpreter::new(ir).map_err(Error::InvalidIr)?;
        optimize(&mut optimized)?;
        let program = sift_bytecode::compile(&optimized).map_err(Error::Codegen)?;
        // A program the JIT cannot compile (none is known) still runs, interpreted.
        let native = sift_jit::supported()
            .then(|| sift_jit::JitFilter::compile(&program).ok())
            .flatten()
            .map(std::sync::Arc::new);
        Ok(Filter {
            reference,
            optimized,
            program,
            native,
        })
    }

    /// The same filter without native code: every run goes through the bytecode interpreter.
    pub fn interpreted(mut self) -> Filter {
        self.native = None;
        self
    }

    /// Which engine [`Filter::run`] uses: `"jit"` or `"interpreter"`.
    pub fn engine(&self) -> &'static str {
        if self.native.is_some() {
            "jit"
        } else {
            "interpreter"
        }
    }

    /// The filter's IR as lowered, before optimization (the semantic reference).
    pub fn ir(&self) -> &Function {
        self.reference.function()
    }

    /// The optimized IR, from which the bytecode (and the other back ends' code) is generated.
    pub fn optimized_ir(&self) -> &Function {
        &self.optimized
    }

    /// The optimized IR for back ends that cannot loop or call the coprocessor ([`loop_free`]).
    /// Computed on each call.
    pub fn loop_free_ir(&self) -> Result<Cow<'_, Function>, Error> {
        loop_free(&self.optimized)
    }

    /// The verified bytecode the filter runs.
    pub fn bytecode(&self) -> &VerifiedProgram {
        &self.program
    }

    /// Runs the filter: 0 rejects, anything else is the number of bytes to keep (as
    /// `bpf_filter`). `packet` holds the captured bytes, `wire_len` the original length.
    pub fn run(&self, packet: &[u8], wire_len: u32) -> u32 {
        match &self.native {
            Some(native) => native.run(packet, wire_len),
            None => self.run_interpreted(packet, wire_len),
        }
    }

    /// Runs the filter on many packets at once: `out[i]` is `run(packets[i], wire_lens[i])`.
    /// With native code the loop runs inside the generated code.
    ///
    /// # Panics
    ///
    /// If the three slices differ in length.
    pub fn run_batch(&self, packets: &[&[u8]], wire_lens: &[u32], out: &mut [u32]) {
        assert!(packets.len() == wire_lens.len() && packets.len() == out.len());
        match &self.native {
            Some(native) => native.run_batch(packets, wire_lens, out),
            None => {
                for ((p, &w), o) in packets.iter().zip(wire_lens).zip(out) {
                    *o = self.run_interpreted(p, w);
                }
            }
        }
    }

    /// Runs the bytecode interpreter (the engine where there is no JIT).
    pub fn run_interpreted(&self, packet: &[u8], wire_len: u32) -> u32 {
        CACHE.with(|c| self.program.run(&mut c.borrow_mut(), packet, wire_len))
    }

    pub fn matches(&self, packet: &[u8], wire_len: u32) -> bool {
        self.run(packet, wire_len) != 0
    }

    /// Runs the IR's reference interpreter on the IR as lowered (for checking engines against
    /// each other; [`Filter::run`] gives the same answer, faster).
    pub fn run_reference(&self, packet: &[u8], wire_len: u32) -> u32 {
        REFERENCE_CACHE.with(|c| self.reference.run(&mut c.borrow_mut(), packet, wire_len))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn eth_ipv4_tcp(dport: u16) -> Vec<u8> {
        let mut p = vec![0u8; 54];
        p[12] = 0x08;
        p[14] = 0x45;
        p[23] = 6;
        p[36..38].copy_from_slice(&dport.to_be_bytes());
        p
    }

    #[test]
    fn tcp_port() {
        let f = Filter::compile("tcp dst port 80", 1, 262144).unwrap();
        assert_eq!(f.run(&eth_ipv4_tcp(80), 54), 262144);
        assert_eq!(f.run(&eth_ipv4_tcp(81), 54), 0);
        // Truncated before the port: the load is out of bounds and rejects.
        assert_eq!(f.run(&eth_ipv4_tcp(80)[..36], 54), 0);
    }

    #[test]
    fn native_code_where_the_host_allows_and_batches_agree() {
        let f = Filter::compile("tcp dst port 80", 1, 262144).unwrap();
        let expected = if cfg!(any(target_arch = "x86_64", target_arch = "aarch64")) {
            "jit"
        } else {
            "interpreter"
        };
        assert_eq!(f.engine(), expected);
        let (hit, miss) = (eth_ipv4_tcp(80), eth_ipv4_tcp(81));
        let packets: Vec<&[u8]> = vec![&hit, &miss, &hit[..36], &[]];
        let mut out = vec![7; 4];
        for engine in [f.clone(), f.interpreted()] {
            engine.run_batch(&packets, &[54, 54, 54, 0], &mut out);
            assert_eq!(out, [262144, 0, 0, 0], "{}", engine.engine());
        }
    }

    #[test]
    fn errors_point_at_the_problem() {
        let e = Filter::compile("tcp port 99999", 1, 65535).unwrap_err();
        assert!(matches!(e, Error::Semantic(_)));
        assert!(e.render("tcp port 99999").contains('^'));
        let e = Filter::compile("tcp and", 1, 65535).unwrap_err();
        assert!(matches!(e, Error::Syntax(_)));
    }

    #[test]
    fn unsupported_linktype() {
        let e = Filter::compile("ip", 105, 65535).unwrap_err();
        assert!(e.to_string().contains("not supported"));
    }
}
