//! The JIT's other tests skip on hosts without native code generation; on the two targets the
//! crate generates code for, that must never happen silently (`scripts/test-aarch64` runs the
//! suite on aarch64 under qemu and relies on this test to prove the JIT, not the fallback, ran).

#[test]
#[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
fn native_code_is_supported_on_this_target() {
    assert!(
        sift_jit::supported(),
        "Cranelift refused this {} host, so every JIT test skipped",
        std::env::consts::ARCH
    );
}
