//! Interpreter benchmark (written below).

fn main() {}
