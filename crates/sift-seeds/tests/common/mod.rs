//! The engines every lifted program runs on: the IR interpreter, verified bytecode, and both again
//! after `sift_opt::optimize`. [`Engines::run`] checks that all four agree.

use sift_ir::{Function, Interpreter};

pub struct Engines {
    ir: Interpreter,
    bytecode: sift_bytecode::VerifiedProgram,
    optimized_ir: Interpreter,
    optimized_bytecode: sift_bytecode::VerifiedProgram,
    ir_cache: sift_ir::Cache,
    bytecode_cache: sift_bytecode::Cache,
}

impl Engines {
    pub fn new(f: &Function) -> Engines {
        let mut optimized = f.clone();
        sift_opt::optimize(&mut optimized);
        sift_ir::verify(&optimized).unwrap_or_else(|e| panic!("optimized IR: {e:?}\n{optimized}"));
        Engines {
            ir: Interpreter::new(f.clone()).expect("lifted IR verifies"),
            bytecode: sift_bytecode::compile(f).expect("bytecode of the lifted IR"),
            optimized_bytecode: sift_bytecode::compile(&optimized).expect("bytecode, optimized"),
            optimized_ir: Interpreter::new(optimized).expect("optimized IR verifies"),
            ir_cache: sift_ir::Cache::new(),
            bytecode_cache: sift_bytecode::Cache::new(),
        }
    }

    /// The return value on a packet, the same on every engine (or a panic naming the one that
    /// differs).
    pub fn run(&mut self, packet: &[u8], wire_len: u32) -> u32 {
        let ir = self.ir.run(&mut self.ir_cache, packet, wire_len);
        let bc = self
            .bytecode
            .run(&mut self.bytecode_cache, packet, wire_len);
        let oir = self.optimized_ir.run(&mut self.ir_cache, packet, wire_len);
        let obc = self
            .optimized_bytecode
            .run(&mut self.bytecode_cache, packet, wire_len);
        assert_eq!(
            [bc, oir, obc],
            [ir, ir, ir],
            "[bytecode, optimized IR, optimized bytecode] vs IR on {packet:02x?}"
        );
        ir
    }
}
