//! Links Hyperscan (`libhs`) only when the `hyperscan` feature is on: that feature exists for
//! the search benchmark's comparison, and machines without libhs must still build the crate.

fn main() {
    println!("cargo:rerun-if-env-changed=CARGO_FEATURE_HYPERSCAN");
    if std::env::var_os("CARGO_FEATURE_HYPERSCAN").is_some() {
        println!("cargo:rustc-link-lib=hs");
    }
}
