//! sift-jit: native code for verified sift bytecode, with Cranelift.
//!
//! The last stage of the pipeline, next to the bytecode interpreter:
//!
//! ```text
//! text ─ sift-syntax ─ sift-lower ─ IR ─ sift-opt ─ IR ─ sift-bytecode ─ VerifiedProgram ─┬─ interpreter
//!                                                                                         └─ sift-jit
//! ```
//!
//! [`JitFilter::compile`] turns a [`VerifiedProgram`] into two machine-code functions — one
//! packet per call ([`JitFilter::run`]) and a loop over many ([`JitFilter::run_batch`],
//! [`JitFilter::run_refs`]) — that return exactly what the interpreter returns, for every packet,
//! including truncated ones: 0 rejects, anything else is the number of bytes to keep (as
//! libpcap's `bpf_filter`). A compiled filter is immutable, `Send + Sync`, and frees its code
//! when dropped. [`supported`] says whether the host can run it (x86-64 and aarch64); elsewhere
//! use the interpreter.
//!
//! What the translation does beyond one-instruction-at-a-time code generation, after the DPF,
//! NetVM and BPF+ papers (each can be switched off in [`Options`] to measure it):
//!
//! * constants are immediates, registers and scratch words are SSA values (no memory);
//! * **bounds-check aggregation** (module `bounds`): one length check covers every load that every
//!   path from it would make, with the exact result on every truncated packet;
//! * **native byte order** (module `flow`): a field that is only compared for equality (or masked and
//!   compared) is loaded as it lies in memory and compared with a constant byte-swapped at
//!   compile time;
//! * **atom coalescing** (module `coalesce`): adjacent equality tests with a common exit become one
//!   wider compare;
//! * **lookup tables** (module `table`): compare chains, binary search and jump tables by size and
//!   density, and a collision-free hash for large sparse sets; a small set (up to 16 keys with
//!   one target, module `membership`) is one branch-free vector compare of the key against
//!   every key at once; keys that come in runs of consecutive values with one target (a port
//!   list written out, module `ranges`) are tested one range per run;
//! * **if-conversion** (module `branchless`): a small program without calls is evaluated on
//!   all its paths at once, with `select`s instead of conditional branches, so a mix of packets
//!   the branch predictor cannot foresee costs no mispredictions (loads on paths not taken read
//!   a block of zeros instead of bytes beyond the packet, and when the tests alone reject a
//!   packet of zeros the result needs no test of the packet's length); it leaves early only by
//!   branches that almost always go one way (after a rare test such as an address equality).
//!
//! * **coprocessor calls** (module `calls`): `contains` and `member` become calls into
//!   `sift_coproc::Coprocessors` through `extern "C"` helpers, with a per-thread memo that
//!   [`JitFilter::run`] and the batch loop move to the next packet (only in programs that
//!   search; a program that only looks keys up pays no thread-local access); a call never
//!   rejects and reads the packet through its slice, so the bounds checks around it are
//!   unchanged.
//!
//! Errors are [`JitError`]s naming what failed (the host, a key program's step, an
//! instruction, or a generated function and the Cranelift stage).
//!
//! On x86-64, Cranelift (0.135) gives every function a frame (`push rbp; mov rbp, rsp`), leaf
//! or not, whatever the calling convention or `preserve_frame_pointers`. When the code keeps
//! nothing on the stack and calls nothing, module `frame` removes it after compilation: calls
//! enter past the prologue and each epilogue is a bare `ret` (`ip` is 9 instructions instead
//! of 13). Each filter's code is mapped on pages of its own.
//!
//! Safety: the generated code never reads outside `packet[..caplen]` (every load is checked, or
//! covered by a check made on every path to it), never loops (the bytecode's edges go forward),
//! calls out only to the coprocessor helpers, and cannot trap (division by zero is tested
//! first). The crate denies `unsafe_code` except in the modules `native`, which compiles, calls
//! and frees the code, `calls`, the helpers the code calls, and [`key_extractor`] and
//! [`demux_matcher`], which call the demultiplexer's native functions.
//!
//! ```
//! # if !sift_jit::supported() { return; }
//! let program = sift_bytecode::verify(sift_bytecode::assemble(
//!     "ld.h r0, [12]\n jeq r0, 2048, L3, L2\nL2:\n ret 0\nL3:\n ret 262144\n",
//! ).unwrap()).unwrap();
//! let filter = sift_jit::JitFilter::compile(&program).unwrap();
//! let mut ipv4 = [0u8; 60];
//! ipv4[12] = 0x08;
//! assert_eq!(filter.run(&ipv4, 60), 262144);
//! assert_eq!(filter.run(&ipv4[..13], 60), 0); // truncated: rejected, as by the interpreter
//! ```

#![deny(unsafe_code)]

mod arith;
mod bounds;
mod branchless;
mod calls;
mod coalesce;
pub mod demux_matcher;
pub mod demux_table;
mod error;
mod flow;
mod frame;
pub mod key_extractor;
mod membership;
mod native;
mod outcome;
mod ranges;
mod table;
mod translate;

use std::fmt;
use std::marker::PhantomData;

use sift_bytecode::VerifiedProgram;

pub use error::{CodegenStage, HostUnsupported, JitError};

/// Whether this host can compile filters (x86-64 or aarch64, and Cranelift accepts the CPU).
pub fn supported() -> bool {
    native::host_isa().is_ok()
}

/// Which optimizations the translation applies (all on by default; for measurement).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Options {
    /// One bounds check per region instead of one per load.
    pub aggregate_bounds: bool,
    /// Compare fields in native byte order against constants swapped at compile time.
    pub native_byte_order: bool,
    /// Merge adjacent equality tests into one wider compare (needs `native_byte_order`).
    pub coalesce: bool,
    /// Smallest sparse `switch` table lowered to a hash lookup instead of a compare tree.
    pub hash_min_keys: usize,
    /// Evaluate small programs without conditional branches (if-conversion), so that
    /// unpredictable packets cost no mispredictions.
    pub branchless: bool,
    /// In branch-free code, leave early with a (predictable) branch once every path still
    /// going somewhere has passed a rare test, such as an address equality.
    pub early_exits: bool,
    /// In branch-free code, send packets long enough for every constant-offset load to a
    /// copy without bounds logic, by one length test.
    pub long_packet_path: bool,
}

impl Default for Options {
    fn default() -> Options {
        Options {
            aggregate_bounds: true,
            native_byte_order: true,
            coalesce: true,
            hash_min_keys: 64,
            branchless: true,
            early_exits: true,
            long_packet_path: true,
        }
    }
}

impl Options {
    /// Straightforward translation: every load checked and swapped, tables as compare trees.
    pub fn baseline() -> Options {
        Options {
            aggregate_bounds: false,
            native_byte_order: false,
            coalesce: false,
            hash_min_keys: usize::MAX,
            branchless: false,
            early_exits: false,
            long_packet_path: false,
        }
    }
}

/// One packet of a batch, in the layout the generated batch loop reads: the captured bytes and
/// the length on the wire.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct PacketRef<'a> {
    data: *const u8,
    caplen: usize,
    wire_len: u32,
    _borrow: PhantomData<&'a [u8]>,
}

impl<'a> PacketRef<'a> {
    pub fn new(data: &'a [u8], wire_len: u32) -> PacketRef<'a> {
        PacketRef {
            data: data.as_ptr(),
            caplen: data.len(),
            wire_len,
            _borrow: PhantomData,
        }
    }
}

/// What the translation of `program` decides before emitting code.
pub(crate) fn plan<'p>(program: &'p VerifiedProgram, options: &Options) -> translate::Plan<'p> {
    let mut plan = translate::Plan::new(program.program(), options);
    plan.short_packets_fail = plan.branchless && branchless::short_packets_fail(program, &plan);
    plan
}

/// A filter compiled to native code. Immutable and `Send + Sync`: compile once, share, run from
/// any number of threads.
pub struct JitFilter {
    code: native::Code,
}

impl fmt::Debug for JitFilter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("JitFilter")
            .field("address", &format_args!("{:#x}", self.code.address()))
            .finish_non_exhaustive()
    }
}

impl JitFilter {
    /// Compiles a verified program with every optimization. The batch entry
    /// ([`JitFilter::run_batch`]) is compiled when the first batch runs.
    pub fn compile(program: &VerifiedProgram) -> Result<JitFilter, JitError> {
        JitFilter::compile_with(program, &Options::default())
    }

    pub fn compile_with(
        program: &VerifiedProgram,
        options: &Options,
    ) -> Result<JitFilter, JitError> {
        let calls = match (program.has_calls(), program.coprocessors()) {
            (false, _) => None,
            (true, Some(c)) => Some((c.clone(), translate::searches(program.program()))),
            // The verifier makes calls name tables the program carries.
            (true, None) => {
                let insn = program
                    .program()
                    .code
                    .iter()
                    .position(|i| i.is_call())
                    .unwrap_or(0);
                return Err(JitError::CallsWithoutTables { insn });
            }
        };
        Ok(JitFilter {
            code: native::Code::compile(program, options, calls)?,
        })
    }

    /// Compiles `program` and returns the Cranelift IR and machine code of both entry points
    /// (for inspecting what the translation does).
    pub fn listing(program: &VerifiedProgram, options: &Options) -> Result<String, JitError> {
        native::Code::listing(&plan(program, options))
    }

    /// Runs the filter on one packet: `packet` holds the captured bytes, `wire_len` the length on
    /// the wire. Returns what [`VerifiedProgram::run`] returns: 0 rejects, anything else is the
    /// number of bytes to keep.
    #[inline]
    pub fn run(&self, packet: &[u8], wire_len: u32) -> u32 {
        self.code.run(packet, wire_len)
    }

    /// Runs the filter on `packets[i]` (with wire length `wire_lens[i]`) into `out[i]`, for every
    /// `i` below the shortest of the three lengths, in one call into generated code per 64
    /// packets.
    pub fn run_batch(&self, packets: &[&[u8]], wire_lens: &[u32], out: &mut [u32]) {
        const CHUNK: usize = 64;
        let n = packets.len().min(wire_lens.len()).min(out.len());
        let mut refs = [PacketRef::new(&[], 0); CHUNK];
        let mut start = 0;
        while start < n {
            let len = (n - start).min(CHUNK);
            for (r, (p, &w)) in refs
                .iter_mut()
                .zip(packets[start..start + len].iter().zip(&wire_lens[start..]))
            {
                *r = PacketRef::new(p, w);
            }
            self.code
                .run_refs(&refs[..len], &mut out[start..start + len]);
            start += len;
        }
    }

    /// Runs the filter on `packets[i]` into `out[i]` for every `i` below the shorter length, in
    /// one call into generated code (no per-packet call or copy).
    pub fn run_refs(&self, packets: &[PacketRef<'_>], out: &mut [u32]) {
        self.code.run_refs(packets, out);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn assert_send_sync<T: Send + Sync>() {}

    #[test]
    fn filters_are_shareable() {
        assert_send_sync::<JitFilter>();
    }

    #[test]
    fn packet_ref_layout_matches_the_generated_loop() {
        use translate::{PACKET_REF_LEN, PACKET_REF_SIZE, PACKET_REF_WIRE_LEN};
        assert_eq!(std::mem::size_of::<PacketRef>() as i64, PACKET_REF_SIZE);
        assert_eq!(
            std::mem::offset_of!(PacketRef, caplen) as i32,
            PACKET_REF_LEN
        );
        assert_eq!(
            std::mem::offset_of!(PacketRef, wire_len) as i32,
            PACKET_REF_WIRE_LEN
        );
        assert_eq!(std::mem::offset_of!(PacketRef, data), 0);
    }
}
