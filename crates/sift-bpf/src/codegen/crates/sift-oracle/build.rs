//! Links libpcap (`-lpcap`), failing with a clear message when it is not installed.
//!
//! The library directory can be forced with `SIFT_PCAP_LIB_DIR`; otherwise `pkg-config`, `LIBRARY_PATH`
//! and the usual system directories are searched for `libpcap.so` / `libpcap.a` (the `-dev` symlink,
//! which is what the linker needs).

use std::env;
use std::path::{Path, PathBuf};
use std::process::Command;

fn has_libpcap(dir: &Path) -> bool {
    ["libpcap.so", "libpcap.a", "libpcap.dylib", "libpcap.tbd"]
        .iter()
        .any(|f| dir.join(f).exists())
}

fn pkg_config_dirs() -> Vec<PathBuf> {
    let Ok(out) = Command::new("pkg-config")
        .args(["--libs-only-L", "--variable=libdir", "libpcap"])
        .output()
    else {
        return Vec::new();
    };
    if !out.status.success() {
        return Vec::new();
    }
    String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .map(|s| PathBuf::from(s.trim_start_matches("-L")))
        .collect()
}

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-env-changed=SIFT_PCAP_LIB_DIR");
    println!("cargo:rerun-if-env-changed=LIBRARY_PATH");

    if let Ok(dir) = env::var("SIFT_PCAP_LIB_DIR") {
        println!("cargo:rustc-link-search=native={dir}");
        println!("cargo:rustc-link-lib=pcap");
        return;
    }

    let mut candidates: Vec<PathBuf> = pkg_config_dirs();
    if let Ok(lp) = env::var("LIBRARY_PATH") {
        candidates.extend(env::split_paths(&lp));
    }
    let arch = env::var("CARGO_CFG_TARGET_ARCH").unwrap_or_default();
    let os = env::var("CARGO_CFG_TARGET_OS").unwrap_or_default();
    let env_abi = env::var("CARGO_CFG_TARGET_ENV").unwrap_or_else(|_| "gnu".into());
    let triple_dir = format!("/usr/lib/{arch}-{os}-{env_abi}");
    for d in [
        triple_dir.as_str(),
        "/usr/lib",
        "/usr/lib64",
        "/usr/local/lib",
        "/usr/local/lib64",
        "/lib",
        "/lib64",
        "/opt/homebrew/opt/libpcap/lib",
        "/usr/local/opt/libpcap/lib",
    ] {
        candidates.push(PathBuf::from(d));
    }

    match candidates.iter().find(|d| has_libpcap(d)) {
        Some(dir) => {
            println!("cargo:rustc-link-search=native={}", dir.display());
            println!("cargo:rustc-link-lib=pcap");
        }
        None if os == "macos" => {
            // macOS ships libpcap in the SDK (`libpcap.tbd`), found by the linker itself.
            println!("cargo:rustc-link-lib=pcap");
        }
        None => panic!(
            "\n\nsift-oracle: libpcap (libpcap.so / libpcap.a) was not found.\n\
             Install it with `apt-get install libpcap-dev` (Debian/Ubuntu), \
             `dnf install libpcap-devel` (Fedora), or set SIFT_PCAP_LIB_DIR to the \
             directory holding libpcap.so.\nSearched: {candidates:?}\n\n"
        ),
    }
}
