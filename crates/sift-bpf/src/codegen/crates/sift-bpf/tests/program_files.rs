//! File-based tests: `tests/programs/*.txt` hold a program (tcpdump -d or bpf_asm text) and
//! `packet HEX WIRE_LEN => EXPECTED` lines. Every engine must give the expected value: the cBPF
//! interpreter, the lifted IR, and cBPF regenerated from the lifted IR.

use sift_bpf::{asm::assemble, compile, interp, lift, validate, Dialect};
use sift_ir::{Cache, Interpreter};

fn hex(s: &str) -> Vec<u8> {
    if s == "-" {
        return Vec::new();
    }
    (0..s.len() / 2)
        .map(|i| u8::from_str_radix(&s[2 * i..2 * i + 2], 16).expect("hex"))
        .collect()
}

#[test]
fn program_files() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/programs");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    let mut cases = 0;
    for path in files {
        let text = std::fs::read_to_string(&path).unwrap();
        let (mut program, mut packets) = (String::new(), Vec::new());
        for line in text.lines() {
            match line.strip_prefix("packet ") {
                Some(rest) => {
                    let (input, want) = rest.split_once("=>").expect("`=>`");
                    let mut it = input.split_whitespace();
                    let pkt = hex(it.next().unwrap());
                    let wire: u32 = it.next().unwrap().parse().unwrap();
                    packets.push((pkt, wire, want.trim().parse::<u32>().unwrap()));
                }
                None => {
                    program.push_str(line);
                    program.push('\n');
                }
            }
        }
        let name = path.display();
        let prog = assemble(&program).unwrap_or_else(|e| panic!("{name}: {e}"));
        let valid = validate(&prog, Dialect::Libpcap).unwrap_or_else(|e| panic!("{name}: {e}"));
        let ir = Interpreter::new(lift(&valid)).unwrap();
        let again = compile(ir.function()).unwrap();
        for (pkt, wire, want) in packets {
            assert_eq!(
                interp::run(&valid, &pkt, wire),
                want,
                "{name} interp {pkt:02x?}"
            );
            assert_eq!(
                ir.run(&mut Cache::new(), &pkt, wire),
                want,
                "{name} IR {pkt:02x?}"
            );
            assert_eq!(
                interp::run(&again, &pkt, wire),
                want,
                "{name} regenerated {pkt:02x?}"
            );
            cases += 1;
        }
    }
    assert!(cases >= 10, "{cases}");
}
