//! Code generation on IR shapes the pcap-filter front end rarely produces: block parameters
//! whose edge moves form cycles, more live values than registers (spilling), switches with
//! arguments, constants in every operand position, dead instructions that may still reject.
//! Each function is compared with the IR interpreter on random packets.

use sift_bytecode::{compile, Cache, Insn, VerifiedProgram};
use sift_ir::{parse_function, Function, Interpreter};
use sift_testgen::Rng;

fn compile_text(text: &str) -> (Function, VerifiedProgram) {
    let f = parse_function(text).unwrap_or_else(|e| panic!("{e:?}\n{text}"));
    let p = compile(&f).unwrap_or_else(|e| panic!("{e}\n{text}"));
    (f, p)
}

/// Compares both engines on `n` random packets (lengths 0..48, bytes biased to small values so
/// that switch keys and comparisons hit).
fn agree(text: &str, n: usize) -> VerifiedProgram {
    let (f, p) = compile_text(text);
    let reference = Interpreter::new(f).unwrap();
    let mut rng = Rng::new(0xc0de);
    let (mut c1, mut c2) = (sift_ir::Cache::new(), Cache::new());
    for _ in 0..n {
        let len = rng.index(48);
        let data: Vec<u8> = (0..len)
            .map(|_| {
                if rng.chance(1, 2) {
                    rng.below(5) as u8
                } else {
                    rng.byte()
                }
            })
            .collect();
        let wire = rng.range(0, 100) as u32;
        let want = reference.run(&mut c1, &data, wire);
        let got = p.run(&mut c2, &data, wire);
        assert_eq!(got, want, "packet {data:02x?} wire {wire}\n{text}\n{p}");
    }
    p
}

#[test]
fn parameter_moves_with_cycles() {
    let p = agree(
        "block0:
    v0 = load.b [0]
    v1 = load.b [1]
    v2 = load.b [2]
    jump block1(v0, v1, v2)
block1(v3, v4, v5):
    v6 = load.b [3]
    v7 = const 1
    br set v6, v7, block2(v4, v5, v3), block2(v5, v3, v4)
block2(v8, v9, v10):
    v11 = const 256
    v12 = mul v8, v11
    v13 = add v12, v9
    v14 = mul v13, v11
    v15 = add v14, v10
    v16 = const 3
    br gt v16, v15, block3(v16, v15), block3(v15, v15)
block3(v17, v18):
    v19 = sub v17, v18
    ret v19
",
        2000,
    );
    // The rotations go through stubs that end in jumps or fall through.
    assert!(p
        .program()
        .code
        .iter()
        .any(|i| matches!(i, Insn::Mov { .. })));
}

/// `n` loads all live until the end, summed in reverse order: more than the registers hold.
fn many_live(n: usize, through_params: bool) -> String {
    let mut t = String::from("block0:\n");
    for i in 0..n {
        t += &format!("    v{i} = load.b [{i}]\n");
    }
    let base = if through_params {
        let args: Vec<String> = (0..n).map(|i| format!("v{i}")).collect();
        // Rotate the arguments so that slot-to-slot cycles appear too.
        let mut rotated = args.clone();
        rotated.rotate_left(1);
        t += &format!("    jump block1({})\n", rotated.join(", "));
        let params: Vec<String> = (n..2 * n).map(|i| format!("v{i}")).collect();
        t += &format!("block1({}):\n", params.join(", "));
        n
    } else {
        0
    };
    let mut acc = base + n - 1;
    let mut next = 2 * n + 1;
    for i in (0..n - 1).rev() {
        t += &format!("    v{next} = mul v{acc}, v{}\n", base + i);
        t += &format!("    v{} = add v{next}, v{}\n", next + 1, base + (i + 3) % n);
        acc = next + 1;
        next += 2;
    }
    t += &format!("    ret v{acc}\n");
    t
}

#[test]
fn spills_to_scratch_when_registers_run_out() {
    let p = agree(&many_live(24, false), 300);
    assert!(p.program().scratch_words > 0, "{p}");
    let p = agree(&many_live(24, true), 300);
    assert!(p.program().scratch_words > 0, "{p}");
}

#[test]
fn switch_with_arguments_and_constant_key() {
    agree(
        "block0:
    v0 = load.b [0]
    v1 = const 7
    switch v0, default block3(v1), 1: block1, 2: block2(v0), 3: block3(v0), 0: block2(v1)
block1:
    v4 = const 2
    switch v4, default block2(v4), 2: block3(v0)
block2(v2):
    ret v2
block3(v3):
    ret v3
",
        500,
    );
}

#[test]
fn constants_in_every_position() {
    agree(
        "block0:
    v0 = const 100
    v1 = load.b [0]
    v2 = sub v0, v1
    v3 = const 4294967295
    v4 = shl v0, v1
    v5 = div v0, v1
    v6 = neg v0
    v7 = add v0, v6
    br lt v0, v1, block1, block2
block1:
    v8 = load.b [v3+2]
    ret 1
block2:
    v9 = const 3
    v10 = load.h [v9+4]
    v11 = len
    v12 = xor v11, v10
    br eq v0, v0, block3, block4
block3:
    v13 = or v2, v4
    v14 = add v13, v5
    v15 = add v14, v7
    v16 = add v15, v12
    ret v16
block4:
    ret v0
",
        2000,
    );
}

#[test]
fn dead_instructions_that_may_reject_still_run() {
    let text = "block0:
    v0 = load.w [20]
    v1 = load.b [0]
    v2 = load.b [1]
    v3 = div v1, v2
    v4 = mod v2, v1
    v5 = add v1, v2
    ret 5
";
    let p = agree(text, 2000);
    let mut c = Cache::new();
    assert_eq!(p.run(&mut c, &[1; 24], 24), 5);
    assert_eq!(p.run(&mut c, &[1; 23], 24), 0, "short packet");
    let mut zero = [1u8; 24];
    zero[1] = 0;
    assert_eq!(p.run(&mut c, &zero, 24), 0, "division by zero");
    // The dead addition needs no code.
    let adds = p
        .program()
        .code
        .iter()
        .filter(|i| matches!(i, Insn::Alu { .. }))
        .count();
    assert_eq!(adds, 2, "{p}");
}

#[test]
fn invalid_ir_is_an_error_not_a_panic() {
    let mut f = Function::new();
    f.create_block();
    assert!(matches!(
        compile(&f),
        Err(sift_bytecode::CodegenError::InvalidIr(_))
    ));
}

#[test]
fn jumps_to_the_next_block_fall_through() {
    let p = agree(
        "block0:
    v0 = load.b [0]
    jump block1
block1:
    v1 = const 9
    br eq v0, v1, block2, block3
block2:
    ret 1
block3:
    ret 0
",
        200,
    );
    assert!(!p
        .program()
        .code
        .iter()
        .any(|i| matches!(i, Insn::Jump { .. })));
}
