//! Compiles IR text from a file (or stdin) and prints the bytecode.
use std::io::Read;

fn main() {
    let mut text = String::new();
    match std::env::args().nth(1) {
        Some(path) => text = std::fs::read_to_string(path).expect("read"),
        None => {
            std::io::stdin().read_to_string(&mut text).expect("read");
        }
    }
    let f = sift_ir::parse_function(&text).expect("IR");
    match sift_bytecode::compile(&f) {
        Ok(p) => print!("{p}"),
        Err(e) => eprintln!("{e}"),
    }
}
