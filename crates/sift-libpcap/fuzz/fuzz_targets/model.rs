#![no_main]

//! Bytes become a classic BPF program (`tests/common/model_input.rs`: raw `sock_filter`s, or
//! mostly the opcodes libpcap's code generator emits) for the model of libpcap's optimizer.
//! Nothing may panic or run forever, whatever the program; and when the program passes
//! `sift_bpf::validate` (libpcap dialect) and `sift_libpcap::optimize` returns a program, that
//! program must pass it too.

#[path = "../../tests/common/model_input.rs"]
mod model_input;

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| model_input::check(&model_input::program(data)));
