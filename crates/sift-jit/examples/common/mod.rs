//! What the examples share: JIT options named on the command line.

/// The options that `words` name (`nocoalesce`, `nonative`, `noaggregate`, `branching`,
/// `noexits`, `nolong`, `baseline`, `hash=N`) applied in order to the defaults; other words are
/// left to the caller.
pub fn options_from(words: &[String]) -> sift_jit::Options {
    let mut options = sift_jit::Options::default();
    for w in words {
        match w.as_str() {
            "nocoalesce" => options.coalesce = false,
            "nonative" => options.native_byte_order = false,
            "noaggregate" => options.aggregate_bounds = false,
            "branching" => options.branchless = false,
            "noexits" => options.early_exits = false,
            "nolong" => options.long_packet_path = false,
            "baseline" => options = sift_jit::Options::baseline(),
            _ => {
                if let Some(n) = w.strip_prefix("hash=").and_then(|n| n.parse().ok()) {
                    options.hash_min_keys = n;
                }
            }
        }
    }
    options
}
