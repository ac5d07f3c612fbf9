//! The one module that touches machine code: it asks Cranelift to compile and map the two
//! entry points (the batch one on first use), turns their addresses into function pointers,
//! calls them, and frees the code.
//!
//! Why calling is sound rests on the translation ([`crate::translate`]): the generated code reads
//! only the packet below `caplen` (every load is checked or covered by an earlier check that holds
//! on every path to it), the batch's descriptors and output (below `count`), and the hash tables
//! this struct owns; it writes only `out[0..count]`; it has no loops but the batch loop (the
//! bytecode's edges all go forward); it calls only the coprocessor helpers of [`crate::calls`],
//! with the context pointer it was given, which is null exactly when the program has no calls.

#![allow(unsafe_code)]

use std::ffi::c_void;
use std::sync::{Arc, Mutex, OnceLock};

use sift_coproc::Coprocessors;

use cranelift_codegen::control::ControlPlane;
use cranelift_codegen::ir::types::{I32, I64};
use cranelift_codegen::ir::{AbiParam, Type, UserFuncName};
use cranelift_codegen::isa::OwnedTargetIsa;
use cranelift_codegen::settings::{self, Configurable};
use cranelift_codegen::Context;
use cranelift_frontend::{FunctionBuilder, FunctionBuilderContext};
use cranelift_jit::{JITBuilder, JITModule};
use cranelift_module::{default_libcall_names, FuncId, Linkage, Module, ModuleReloc};

use crate::calls::{self, CallContext};
use crate::frame;
use crate::translate::{translate, Plan, Shape};
use crate::{CodegenStage, HostUnsupported, JitError, Options, PacketRef};
use sift_bytecode::VerifiedProgram;

/// `(packet, caplen, wire_len, call context) -> result`.
type SingleFn = unsafe extern "C" fn(*const u8, u64, u32, *mut c_void) -> u32;
/// `(packets, count, out, call context)`.
type BatchFn = unsafe extern "C" fn(*const PacketRef<'static>, u64, *mut u32, *mut c_void);

fn context_pointer(ctx: &mut CallContext<'_>) -> *mut c_void {
    (ctx as *mut CallContext<'_>).cast()
}

/// The host's instruction set, configured once per process.
pub(crate) fn host_isa() -> Result<OwnedTargetIsa, JitError> {
    static ISA: OnceLock<Result<OwnedTargetIsa, JitError>> = OnceLock::new();
    ISA.get_or_init(|| {
        if !cfg!(any(target_arch = "x86_64", target_arch = "aarch64")) {
            return Err(JitError::Unsupported(HostUnsupported::Architecture {
                arch: std::env::consts::ARCH,
            }));
        }
        let unsupported = |reason: String| JitError::Unsupported(HostUnsupported::Cpu { reason });
        let mut flags = settings::builder();
        let set = |flags: &mut settings::Builder, k: &str, v: &str| {
            flags
                .set(k, v)
                .map_err(|e| unsupported(format!("setting {k}={v}: {e}")))
        };
        set(&mut flags, "opt_level", "speed")?;
        set(&mut flags, "is_pic", "false")?;
        set(&mut flags, "use_colocated_libcalls", "false")?;
        let verify = if cfg!(debug_assertions) {
            "true"
        } else {
            "false"
        };
        set(&mut flags, "enable_verifier", verify)?;
        let isa = cranelift_native::builder().map_err(|e| unsupported(e.to_string()))?;
        isa.finish(settings::Flags::new(flags))
            .map_err(|e| unsupported(e.to_string()))
    })
    .clone()
}

/// Compiled code for one filter: the single-packet entry, the memory it lives in and the
/// tables it reads; the batch entry is compiled on first use (half the compile time of a filter
/// that only ever runs one packet at a time, as most do).
pub(crate) struct Code {
    single: SingleFn,
    _mapped: Mapped,
    /// The tables the program's calls use, and whether it searches (needs the memo); `None`
    /// when it makes no calls.
    calls: Option<(Arc<Coprocessors>, bool)>,
    /// What the batch entry is compiled from.
    source: (VerifiedProgram, Options),
    /// The batch entry once compiled; `None` if Cranelift failed on it, when batches run
    /// through the single entry.
    batch: OnceLock<Option<Batch>>,
}

/// The batch entry: its own module of code, and its tables.
struct Batch {
    run: BatchFn,
    _mapped: Mapped,
}

/// A module of compiled code and the tables it reads.
struct Mapped {
    /// Frees the code when dropped.
    _memory: CodeMemory,
    /// Read by the code through addresses embedded in it: must outlive the code, which
    /// `_memory`, declared (so dropped) first, frees.
    _tables: Vec<Box<[u32]>>,
}

/// One entry point compiled into a module of its own.
struct Entry {
    address: *const u8,
    mapped: Mapped,
}

/// Compiles the entry point `shape` of `plan`; with `listing`, appends its Cranelift IR and
/// machine code there.
fn compile_entry(
    plan: &Plan<'_>,
    shape: Shape,
    listing: Option<&mut String>,
) -> Result<Entry, JitError> {
    let mut functions = Functions::new()?;
    let mut tables = Vec::new();
    let (name, params, returns): (_, &[Type], &[Type]) = match shape {
        Shape::Single => ("filter", &[I64, I64, I32, I64], &[I32]),
        Shape::Batch => ("batch", &[I64; 4], &[]),
    };
    functions.add(
        name,
        params,
        returns,
        |b| translate(b, plan, shape, &mut tables),
        listing,
    )?;
    let (addresses, memory) = functions.finish()?;
    Ok(Entry {
        address: addresses[0],
        mapped: Mapped {
            _memory: memory,
            _tables: tables,
        },
    })
}

impl Code {
    /// Compiles the single-packet entry of `program`.
    pub(crate) fn compile(
        program: &VerifiedProgram,
        options: &Options,
        calls: Option<(Arc<Coprocessors>, bool)>,
    ) -> Result<Code, JitError> {
        let entry = compile_entry(&crate::plan(program, options), Shape::Single, None)?;
        // SAFETY: a function Cranelift just compiled and mapped executable, with exactly this
        // signature in the host's default calling convention (the C one on every supported
        // target); it stays mapped until `Drop` frees the module.
        let single = unsafe { std::mem::transmute::<*const u8, SingleFn>(entry.address) };
        Ok(Code {
            single,
            _mapped: entry.mapped,
            calls,
            source: (program.clone(), options.clone()),
            batch: OnceLock::new(),
        })
    }

    /// The Cranelift IR and the machine code of both entry points of `plan`.
    pub(crate) fn listing(plan: &Plan<'_>) -> Result<String, JitError> {
        let mut text = String::new();
        for shape in [Shape::Single, Shape::Batch] {
            compile_entry(plan, shape, Some(&mut text))?;
        }
        Ok(text)
    }

    /// The batch entry, compiled now if it was not yet.
    fn batch(&self) -> Option<&Batch> {
        self.batch
            .get_or_init(|| {
                let (program, options) = &self.source;
                let plan = crate::plan(program, options);
                let entry = compile_entry(&plan, Shape::Batch, None).ok()?;
                // SAFETY: as for the single entry in `compile`, with the batch signature.
                let run = unsafe { std::mem::transmute::<*const u8, BatchFn>(entry.address) };
                Some(Batch {
                    run,
                    _mapped: entry.mapped,
                })
            })
            .as_ref()
    }

    /// Where the single-packet entry lies (for diagnosing placement effects).
    pub(crate) fn address(&self) -> usize {
        self.single as usize
    }

    /// Small enough to be inlined into callers (as before calls existed): programs without
    /// calls pay one test of `calls`.
    #[inline]
    pub(crate) fn run(&self, packet: &[u8], wire_len: u32) -> u32 {
        match &self.calls {
            // SAFETY: the code reads only `packet[..packet.len()]` and the tables `self` owns
            // (see the module docs), and `self` keeps the code mapped for the duration of the
            // call. A program without calls never uses the null context.
            None => unsafe {
                (self.single)(
                    packet.as_ptr(),
                    packet.len() as u64,
                    wire_len,
                    std::ptr::null_mut(),
                )
            },
            Some((coprocessors, searches)) => {
                self.run_with_calls(coprocessors, *searches, packet, wire_len)
            }
        }
    }

    #[inline(never)]
    fn run_with_calls(
        &self,
        coprocessors: &Coprocessors,
        searches: bool,
        packet: &[u8],
        wire_len: u32,
    ) -> u32 {
        let (data, len) = (packet.as_ptr(), packet.len() as u64);
        calls::with_context(coprocessors, searches, |ctx| {
            if searches {
                ctx.next_packet();
            }
            // SAFETY: as in `run`; the context lives on this stack frame for the whole call
            // and is used by nothing else meanwhile (the helpers get it from the code).
            unsafe { (self.single)(data, len, wire_len, context_pointer(ctx)) }
        })
    }

    /// Runs the filter on `packets[i]` and stores the result in `out[i]`, for every `i` below
    /// the shorter length.
    pub(crate) fn run_refs(&self, packets: &[PacketRef<'_>], out: &mut [u32]) {
        let Some(batch) = self.batch() else {
            return self.run_each(packets, out);
        };
        let n = packets.len().min(out.len());
        let (refs, count, results) = (packets.as_ptr().cast(), n as u64, out.as_mut_ptr());
        let Some((coprocessors, searches)) = &self.calls else {
            // SAFETY: the code reads `packets[..n]` (each a valid `PacketRef`: pointer and
            // length of a live borrowed slice) and, through each, only that packet's captured
            // bytes; it writes `out[..n]`. The lifetime is erased only for the call's duration.
            // A program without calls never uses the null context.
            return unsafe { (batch.run)(refs, count, results, std::ptr::null_mut()) };
        };
        // The generated loop starts a new packet in the memo before each packet.
        calls::with_context(coprocessors, *searches, |ctx| {
            // SAFETY: as above, with a context that outlives the call (see `run`).
            unsafe { (batch.run)(refs, count, results, context_pointer(ctx)) }
        })
    }

    /// [`Code::run_refs`] through the single entry, one call per packet.
    fn run_each(&self, packets: &[PacketRef<'_>], out: &mut [u32]) {
        for (p, o) in packets.iter().zip(out.iter_mut()) {
            *o = self.run(p.bytes(), p.wire_len);
        }
    }
}

impl<'a> PacketRef<'a> {
    /// The captured bytes it was made of.
    fn bytes(&self) -> &'a [u8] {
        // SAFETY: `PacketRef::new` took pointer and length from a `&'a [u8]`, which the
        // lifetime keeps borrowed and unchanged.
        unsafe { std::slice::from_raw_parts(self.data, self.caplen) }
    }
}

/// The functions of one JIT module being compiled: each is declared, built and defined in turn,
/// then all are mapped together.
pub(crate) struct Functions {
    module: JITModule,
    ctx: Context,
    fctx: FunctionBuilderContext,
    ids: Vec<FuncId>,
    /// Per function: where calls enter its code (past the prologue when the frame was elided).
    entries: Vec<usize>,
}

impl Functions {
    /// An empty module for the host.
    pub(crate) fn new() -> Result<Functions, JitError> {
        let module = JITModule::new(JITBuilder::with_isa(host_isa()?, default_libcall_names()));
        Ok(Functions {
            ctx: module.make_context(),
            module,
            fctx: FunctionBuilderContext::new(),
            ids: Vec::new(),
            entries: Vec::new(),
        })
    }

    /// Compiles the function `name(params) -> returns` (host calling convention) whose body
    /// `body` builds; with `listing`, appends its Cranelift IR and its machine code.
    pub(crate) fn add(
        &mut self,
        name: &str,
        params: &[Type],
        returns: &[Type],
        body: impl FnOnce(&mut FunctionBuilder<'_>),
        listing: Option<&mut String>,
    ) -> Result<(), JitError> {
        let mut sig = self.module.make_signature();
        sig.params.extend(params.iter().map(|&t| AbiParam::new(t)));
        sig.returns
            .extend(returns.iter().map(|&t| AbiParam::new(t)));
        let failed = |stage, message| JitError::Cranelift {
            function: name.to_string(),
            stage,
            message,
        };
        let id = self
            .module
            .declare_function(name, Linkage::Local, &sig)
            .map_err(|e| failed(CodegenStage::Declare, e.to_string()))?;
        self.ctx.func.signature = sig;
        self.ctx.func.name = UserFuncName::user(0, id.as_u32());
        let mut b = FunctionBuilder::new(&mut self.ctx.func, &mut self.fctx);
        body(&mut b);
        b.finalize(self.module.target_config());
        let mut listing = listing;
        if let Some(l) = listing.as_deref_mut() {
            l.push_str(&format!("; {name}\n{}", self.ctx.func.display()));
            self.ctx.set_disasm(true);
        }
        remove_unreachable_blocks(&mut self.ctx.func);
        frame::mark_returns(&mut self.ctx.func);
        let makes_calls = frame::makes_calls(&self.ctx.func);
        self.ctx
            .compile(self.module.isa(), &mut ControlPlane::default())
            .map_err(|e| failed(CodegenStage::Compile, format!("{:?}", e.inner)))?;
        let Some(code) = self.ctx.compiled_code() else {
            return Err(failed(CodegenStage::Compile, "no code".to_string()));
        };
        let relocs: Vec<ModuleReloc> = code
            .buffer
            .relocs()
            .iter()
            .map(|r| ModuleReloc::from_mach_reloc(r, &self.ctx.func, id))
            .collect();
        let compiled = frame::Compiled {
            below_frame_pointer: code.buffer.frame_layout().map(|f| f.frame_to_fp_offset),
            calls_or_relocations: makes_calls
                || !relocs.is_empty()
                || code.buffer.call_sites().next().is_some(),
            return_ranges: frame::return_ranges(
                code.buffer
                    .get_srclocs_sorted()
                    .iter()
                    .map(|r| (r.start, r.end, r.loc)),
            ),
        };
        let mut bytes = code.code_buffer().to_vec();
        let entry = frame::elide(&mut bytes, &compiled);
        if let Some(l) = listing {
            if let Some(vcode) = &code.vcode {
                l.push_str(&format!("; {name}: machine code\n{vcode}\n"));
            }
            if entry > 0 {
                l.push_str(&format!(
                    "; {name}: frame elided (entry at +{entry}, each `movq %rbp, %rsp; popq %rbp; retq` is `retq`)\n\n"
                ));
            }
        }
        let alignment = u64::from(code.buffer.alignment);
        self.module
            .define_function_bytes(id, alignment, &bytes, &relocs)
            .map_err(|e| failed(CodegenStage::Compile, format!("{e:?}")))?;
        self.module.clear_context(&mut self.ctx);
        self.ids.push(id);
        self.entries.push(entry);
        Ok(())
    }

    /// Maps every function added: their entry addresses (past the prologue when the frame was
    /// elided, see [`crate::frame`]), in the order they were added, and the memory that holds
    /// them.
    pub(crate) fn finish(mut self) -> Result<(Vec<*const u8>, CodeMemory), JitError> {
        self.module
            .finalize_definitions()
            .map_err(|e| JitError::Cranelift {
                function: "(all)".to_string(),
                stage: CodegenStage::Map,
                message: e.to_string(),
            })?;
        let addresses = self
            .ids
            .iter()
            .zip(&self.entries)
            .map(|(&id, &entry)| self.module.get_finalized_function(id).wrapping_add(entry))
            .collect();
        Ok((addresses, CodeMemory::new(self.module)))
    }
}

/// The memory of one JIT module's code, freed on drop. Whoever holds function pointers into it
/// must drop them with it (they live in the same struct).
pub(crate) struct CodeMemory(Mutex<Option<JITModule>>);

impl CodeMemory {
    /// The mutex makes the module (which is `Send`) shareable; it is only taken out in `Drop`.
    pub(crate) fn new(module: JITModule) -> CodeMemory {
        CodeMemory(Mutex::new(Some(module)))
    }
}

impl Drop for CodeMemory {
    fn drop(&mut self) {
        let module = match self.0.get_mut() {
            Ok(m) => m.take(),
            Err(poisoned) => poisoned.into_inner().take(),
        };
        if let Some(module) = module {
            // SAFETY: `drop` has `&mut self`, and the owner of the function pointers drops this
            // field with them, so no call into the code is running or can start.
            unsafe { module.free_memory() };
        }
    }
}

/// Deletes the blocks the entry cannot reach. The translation leaves some: in a chain of IPv6
/// hosts, one per address, whose comparison was coalesced into the block before it. Cranelift
/// deletes them too, but it updates its flow graph block by block, scanning the predecessors
/// of each successor: with thousands of unreachable blocks all branching to one shared block,
/// that was quadratic (3,000 IPv6 hosts: 2.1 s to compile, now 0.8 s; same machine code).
fn remove_unreachable_blocks(func: &mut cranelift_codegen::ir::Function) {
    let Some(entry) = func.layout.entry_block() else {
        return;
    };
    let mut reached = cranelift_codegen::entity::EntitySet::with_capacity(func.dfg.num_blocks());
    let mut stack = vec![entry];
    reached.insert(entry);
    while let Some(b) = stack.pop() {
        for s in func.block_successors(b) {
            if reached.insert(s) {
                stack.push(s);
            }
        }
    }
    let unreachable: Vec<_> = func
        .layout
        .blocks()
        .filter(|&b| !reached.contains(b))
        .collect();
    for b in unreachable {
        while let Some(inst) = func.layout.first_inst(b) {
            func.layout.remove_inst(inst);
        }
        func.layout.remove_block(b);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The batch entry is compiled on the first batch, and what batches run through when it
    /// cannot be compiled gives the same results.
    #[test]
    fn the_batch_entry_is_compiled_on_first_use() {
        if !crate::supported() {
            return;
        }
        let program = sift_bytecode::verify(
            sift_bytecode::assemble(
                "ld.h r0, [12]\n jeq r0, 2048, L2, L4\nL2:\n ld.b r0, [23]\n jeq r0, 6, L5, L4\nL4:\n ret 0\nL5:\n ret 96\n",
            )
            .unwrap(),
        )
        .unwrap();
        let options = Options::default();
        let code = Code::compile(&program, &options, None).unwrap();
        assert!(code.batch.get().is_none());
        let mut packets = Vec::new();
        for (ethertype, proto) in [(0x08, 6), (0x08, 17), (0x86, 6)] {
            let mut p = vec![0u8; 40];
            p[12] = ethertype;
            p[23] = proto;
            packets.push(p);
        }
        packets.push(vec![0u8; 20]);
        let refs: Vec<PacketRef<'_>> = packets.iter().map(|p| PacketRef::new(p, 60)).collect();
        let (mut batch, mut each) = (vec![7; refs.len()], vec![7; refs.len()]);
        code.run_refs(&refs, &mut batch);
        assert!(code.batch.get().is_some_and(Option::is_some));
        code.run_each(&refs, &mut each);
        assert_eq!(batch, [96, 0, 0, 0]);
        assert_eq!(each, batch);
    }
}
