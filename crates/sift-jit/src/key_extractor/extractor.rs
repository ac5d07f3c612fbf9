//! [`NativeExtractor`]: a key program compiled on its own to one machine-code function that
//! writes the key to memory (the matchers in `crate::demux_matcher` emit the same steps and go
//! on to probe a table instead). The `unsafe` of the key extractor is here: the transmute of
//! the compiled code to a function pointer and the call through it.

#![allow(unsafe_code)]

use std::fmt;

use cranelift_codegen::ir::{types, InstBuilder, MemFlagsData};
use cranelift_frontend::FunctionBuilder;

use super::emit::emit_key;
use super::layout::KeyOrder;
use super::{KeyProgram, KEY_WORDS};
use crate::native::{CodeMemory, Functions};
use crate::JitError;

/// `(packet, caplen, wire_len, key) -> 1 accepted / 0 rejected`.
type ExtractFn = unsafe extern "C" fn(*const u8, u64, u32, *mut u64) -> u32;

/// A [`KeyProgram`] compiled to machine code. Immutable and `Send + Sync`; frees its code when
/// dropped.
pub struct NativeExtractor {
    function: ExtractFn,
    /// Frees the code when dropped.
    _memory: CodeMemory,
}

impl fmt::Debug for NativeExtractor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("NativeExtractor")
            .field("address", &format_args!("{:#x}", self.function as usize))
            .finish_non_exhaustive()
    }
}

impl NativeExtractor {
    /// Compiles `program`; [`JitError::Unsupported`] where the host cannot run generated code,
    /// [`JitError::KeyProgram`] for a malformed program (see [`KeyProgram::validate`]).
    pub fn compile(program: &KeyProgram) -> Result<NativeExtractor, JitError> {
        program.validate()?;
        let mut functions = Functions::new()?;
        functions.add(
            "extract_key",
            &[types::I64, types::I64, types::I32, types::I64],
            &[types::I32],
            |b| emit(b, program),
            None,
        )?;
        let (addresses, memory) = functions.finish()?;
        let address = addresses[0];
        // SAFETY: Cranelift just compiled and mapped this function with exactly this signature
        // in the host's default (C) calling convention; it stays mapped until `Drop` frees the
        // module.
        let function = unsafe { std::mem::transmute::<*const u8, ExtractFn>(address) };
        Ok(NativeExtractor {
            function,
            _memory: memory,
        })
    }

    /// Runs the checks on a packet (`packet`: the captured bytes) and, if they hold, writes its
    /// key and returns `true`.
    #[inline]
    pub fn extract(&self, packet: &[u8], wire_len: u32, key: &mut [u64; KEY_WORDS]) -> bool {
        // SAFETY: the code reads only `packet[..packet.len()]` (every load is bounds-checked
        // against the length passed here, see the `key_extractor` module docs) and writes only
        // the `KEY_WORDS` words of `key`; `self` keeps the code mapped for the call.
        unsafe {
            (self.function)(
                packet.as_ptr(),
                packet.len() as u64,
                wire_len,
                key.as_mut_ptr(),
            ) != 0
        }
    }
}

/// Emits the function body: entry check, steps, key stores.
fn emit(b: &mut FunctionBuilder<'_>, program: &KeyProgram) {
    let entry = b.create_block();
    b.append_block_params_for_function_params(entry);
    b.switch_to_block(entry);
    let params = b.block_params(entry).to_vec();
    let (data, caplen, wire_len, key_out) = (params[0], params[1], params[2], params[3]);
    let reject = b.create_block();
    let words = emit_key(
        b,
        program,
        [data, caplen, wire_len],
        reject,
        KeyOrder::BigEndian,
    );
    let key_flags = MemFlagsData::trusted();
    for (i, w) in words.iter().enumerate() {
        b.ins().store(key_flags, *w, key_out, (i * 8) as i32);
    }
    let one = b.ins().iconst(types::I32, 1);
    b.ins().return_(&[one]);
    b.switch_to_block(reject);
    let zero = b.ins().iconst(types::I32, 0);
    b.ins().return_(&[zero]);
    b.seal_all_blocks();
}
