//! The optimizer configurations every validation test runs: each pass alone (with the verifier
//! after every pass), no pass at all (renumbering only), and the whole pipeline.

use sift_opt::Options;

/// Every pass alone, nothing (renumbering only), tables from two keys, and the whole pipeline.
pub fn configurations() -> Vec<(&'static str, Options)> {
    let only = |set: fn(&mut Options)| {
        let mut o = Options {
            verify: true,
            ..Options::none()
        };
        set(&mut o);
        o
    };
    vec![
        ("none", only(|_| {})),
        ("simplify", only(|o| o.simplify = true)),
        ("gvn", only(|o| o.gvn = true)),
        ("predicates", only(|o| o.predicates = true)),
        ("threading", only(|o| o.threading = true)),
        ("dce", only(|o| o.dce = true)),
        ("merge", only(|o| o.merge = true)),
        ("tables", only(|o| o.tables = true)),
        (
            "tables-2",
            only(|o| {
                o.tables = true;
                o.min_table_keys = 2;
            }),
        ),
        ("sink", only(|o| o.sink_constants = true)),
        (
            "all",
            Options {
                verify: true,
                ..Options::default()
            },
        ),
    ]
}
