//! Differential and robustness tests on random programs, filters, packets and bytes:
//!
//! * CSPF: the lifted IR agrees with the reference interpreter; programs that pass the static
//!   checks never fail a dynamic check other than packet bounds; the printed form parses back;
//! * DPF: the lifted IR agrees with the syntax-tree evaluator; atoms print and parse back;
//! * both parsers return errors (with positions inside the text) on random bytes, never panic.

use sift_ir::{verify, Cache, Interpreter};
use sift_seeds::cspf::{self, interp, interp::Exit, program::*, Limits, Program};
use sift_seeds::dpf;
use sift_testgen::{generate_packets, Packet, Rng};

/// Packets for the random tests: generated Ethernet traffic (truncated and mutated ones
/// included) and very short random packets.
fn packets(seed: u64) -> Vec<Packet> {
    let mut rng = Rng::new(seed);
    let mut out = generate_packets(1, seed, 400);
    for _ in 0..40 {
        let n = rng.index(12);
        out.push(Packet::new(rng.bytes(n)));
    }
    out
}

/// A random CSPF program that mostly passes the static checks: literals are drawn from the
/// packets' own words so that comparisons are sometimes true.
fn random_program(rng: &mut Rng, template: &[u8]) -> Vec<u16> {
    let len = rng.index(ENMAXFILTERS + 1);
    let mut words = Vec::new();
    let mut depth = 0usize;
    while words.len() < len {
        let action = match rng.below(10) {
            0 => Action::NoPush,
            1..=3 => Action::PushWord(rng.below(36) as u16),
            4..=6 => {
                let lit = match rng.below(4) {
                    0 => *rng.pick(&[0, 1, 2, 0x0800, 0x0806, 0x4500, 0xffff, 0x00ff]),
                    1 => rng.u16(),
                    _ => {
                        let n = rng.index(template.len() / 2 + 1);
                        interp::packet_word(template, n as u16).unwrap_or(0)
                    }
                };
                Action::PushLit(lit)
            }
            _ => *rng.pick(&[
                Action::PushZero,
                Action::PushOne,
                Action::PushFfff,
                Action::PushFf00,
                Action::Push00ff,
            ]),
        };
        let after_push = depth + usize::from(action.pushes());
        let op = if after_push >= 2 && rng.chance(2, 3) {
            *rng.pick(&Operator::ALL[1..])
        } else {
            Operator::Nop
        };
        words.push(action.code() | op.code());
        if let Action::PushLit(k) = action {
            words.push(k);
        }
        depth = after_push - usize::from(op != Operator::Nop);
        if depth >= 30 {
            break;
        }
    }
    // Sometimes break it.
    if rng.chance(1, 8) && !words.is_empty() {
        let i = rng.index(words.len());
        words[i] = rng.u16();
    }
    words
}

#[test]
fn cspf_lifting_agrees_with_the_interpreter() {
    let mut rng = Rng::new(7);
    let packets = packets(1987);
    let (mut programs, mut rejected_statically, mut accepts, mut runs) = (0, 0, 0, 0);
    let mut exits = [0usize; 3];
    for _ in 0..3000 {
        let template = &rng.pick(&packets).data.clone();
        let words = random_program(&mut rng, template);
        let Ok(program) = Program::new(rng.byte(), words.clone()) else {
            rejected_statically += 1;
            continue;
        };
        programs += 1;
        let f = cspf::lift(&program);
        verify(&f).unwrap_or_else(|e| panic!("{e}\n{program}"));
        let ir = Interpreter::new(f).unwrap();
        let mut cache = Cache::new();
        for p in &packets {
            let outcome = interp::run(&program, &p.data);
            // Static checks passed: only packet bounds can fail at run time.
            let dynamic = interp::run_words(&words, &p.data, &Limits::default());
            assert_eq!(outcome, dynamic);
            match outcome.exit {
                Exit::End => exits[0] += 1,
                Exit::ShortCircuit { .. } => exits[1] += 1,
                Exit::OutOfPacket { .. } => exits[2] += 1,
                e => panic!("verified program failed a dynamic check: {e:?}\n{program}"),
            }
            let lifted = ir.run(&mut cache, &p.data, p.wire_len);
            assert!(lifted == 0 || lifted == cspf::ACCEPT_ALL);
            assert_eq!(
                outcome.accept,
                lifted != 0,
                "{program}\npacket {:02x?}\n{}",
                p.data,
                ir.function()
            );
            accepts += usize::from(outcome.accept);
            runs += 1;
        }
    }
    println!(
        "{programs} programs ({rejected_statically} rejected statically), {runs} runs, \
         {accepts} accepted; exits: end {}, short-circuit {}, out of packet {}",
        exits[0], exits[1], exits[2]
    );
    assert!(programs > 2000 && accepts > runs / 10 && accepts < runs * 9 / 10);
    assert!(exits.iter().all(|&n| n > 1000));
}

#[test]
fn cspf_printed_programs_parse_back() {
    let mut rng = Rng::new(11);
    let packets = packets(3);
    for _ in 0..2000 {
        let template = packets[rng.index(packets.len())].data.clone();
        let words = random_program(&mut rng, &template);
        if let Ok(p) = Program::new(rng.byte(), words) {
            let text = p.to_string();
            assert_eq!(cspf::parse(&text).unwrap(), p, "{text}");
        }
    }
}

/// A random DPF filter in the text syntax: masked atoms, constant and indirect shifts, indirect
/// loads, atoms with the constant on the left.
fn random_dpf(rng: &mut Rng, template: &[u8]) -> String {
    let mut parts = Vec::new();
    for _ in 0..1 + rng.index(6) {
        let r = rng.below(10);
        if r < 2 {
            parts.push(format!("SHIFT({})", rng.below(20)));
            continue;
        }
        if r < 4 {
            let e = match rng.below(4) {
                0 => format!("({}:8 & 0xf) << 2", rng.below(20)),
                1 => format!("{}:8", rng.below(40)),
                2 => format!("{}:16 % {}", rng.below(40), rng.below(3)),
                _ => format!("({}:8 & 7) + {}", rng.below(30), rng.below(8)),
            };
            parts.push(format!("(SHIFT({e}))"));
            continue;
        }
        let (bits, bytes) = *rng.pick(&[(8u32, 1usize), (16, 2), (32, 4)]);
        let offset = rng.index(40);
        let addr = if rng.chance(1, 6) {
            format!("(({}:8 & 3) + {offset})", rng.below(20))
        } else {
            offset.to_string()
        };
        let full = if bits == 32 {
            u32::MAX
        } else {
            (1 << bits) - 1
        };
        let mask = if rng.chance(1, 3) {
            rng.next_u32() & full
        } else {
            full
        };
        // Values from the template at the same offset (ignoring shifts), so that atoms hold
        // sometimes.
        let mut value = template
            .get(offset..offset + bytes)
            .map_or(0, |b| b.iter().fold(0u32, |a, &x| (a << 8) | u32::from(x)));
        if rng.chance(1, 3) {
            value = rng.next_u32();
        }
        value &= mask;
        let rel = *rng.pick(&["==", "==", "==", "!=", "<", "<=", ">", ">="]);
        let field = if mask == full {
            format!("{addr}:{bits}")
        } else {
            format!("{addr}:{bits} & {mask:#x}")
        };
        parts.push(if rng.chance(1, 5) {
            format!("({value:#x} {rel} {field})")
        } else {
            format!("({field} {rel} {value:#x})")
        });
    }
    let sep = if rng.chance(1, 2) { " & " } else { " && " };
    parts.join(sep)
}

#[test]
fn dpf_lifting_agrees_with_the_evaluator() {
    let mut rng = Rng::new(1996);
    let packets = packets(1996);
    let (mut filters, mut runs, mut accepts) = (0, 0, 0);
    for _ in 0..3000 {
        let template = &packets[rng.index(packets.len())].data.clone();
        let text = random_dpf(&mut rng, template);
        let f = match dpf::parse(&text) {
            Ok(f) => f,
            Err(e) if e.kind == dpf::ParseErrorKind::Empty => continue,
            Err(e) => panic!("{}", e.render(&text)),
        };
        filters += 1;
        let func = dpf::lift(&f);
        verify(&func).unwrap_or_else(|e| panic!("{e}\n{text}"));
        let ir = Interpreter::new(func).unwrap();
        let mut cache = Cache::new();
        for p in &packets {
            let expected = dpf::eval::matches(&f, &p.data);
            let lifted = ir.run(&mut cache, &p.data, p.wire_len);
            assert_eq!(expected, lifted != 0, "{text}\n{:02x?}", p.data);
            runs += 1;
            accepts += usize::from(expected);
        }
        // The canonical atoms print as a filter with the same atoms.
        for a in f.atoms() {
            let printed = a.to_string();
            let back = dpf::parse(&printed).unwrap_or_else(|e| panic!("{}", e.render(&printed)));
            assert_eq!(back.atoms(), std::slice::from_ref(a), "{printed}");
        }
    }
    println!("{filters} filters, {runs} runs, {accepts} accepted");
    assert!(filters > 2500 && accepts > runs / 50);
}

fn random_text(rng: &mut Rng, alphabet: &[&str]) -> String {
    (0..rng.index(60)).map(|_| *rng.pick(alphabet)).collect()
}

#[test]
fn parsers_survive_random_input() {
    let mut rng = Rng::new(99);
    let cspf_words = [
        "PUSHWORD",
        "+",
        "1",
        ",",
        "PUSHLIT",
        "|",
        "EQ",
        "CAND",
        "0x",
        "0x800",
        "{",
        "}",
        ";",
        "struct",
        "enfilter",
        "f",
        "=",
        "/*",
        "*/",
        "//",
        "\n",
        " ",
        "(",
        ")",
        "-",
        "~",
        "<<",
        "htons",
        "07",
        "99999999999",
        "é",
        "\0",
        "ENF_",
        "NOP",
        "PUSHONE",
    ];
    let dpf_words = [
        "(",
        ")",
        "12",
        ":",
        "16",
        "8",
        "32",
        "==",
        "!=",
        "<",
        ">=",
        "&",
        "&&",
        "|",
        "SHIFT",
        "shift",
        "0x800",
        "#",
        "\n",
        " ",
        "<<",
        "+",
        "-",
        "~",
        "/",
        "0",
        "%",
        "4294967295",
        "é",
        "\0",
        "^",
        "*",
        ">>",
    ];
    for i in 0..20000 {
        let text = match i % 3 {
            0 => {
                let n = rng.index(40);
                String::from_utf8_lossy(&rng.bytes(n)).into_owned()
            }
            1 => random_text(&mut rng, &cspf_words),
            _ => random_text(&mut rng, &dpf_words),
        };
        if let Err(e) = sift_seeds::mpf::parse(&text) {
            assert!(
                e.span.start <= e.span.end && e.span.end <= text.len() + 1,
                "{text:?}"
            );
            let _ = e.render(&text);
        }
        if let Err(e) = cspf::parse(&text) {
            assert!(
                e.span.start <= e.span.end && e.span.end <= text.len(),
                "{text:?}"
            );
            let _ = e.render(&text);
        }
        match dpf::parse(&text) {
            Err(e) => {
                assert!(
                    e.span.start <= e.span.end && e.span.end <= text.len(),
                    "{text:?}"
                );
                let _ = e.render(&text);
            }
            Ok(f) => {
                verify(&dpf::lift(&f)).unwrap();
            }
        }
        let n = rng.index(90);
        let bytes = rng.bytes(n);
        for order in [cspf::ByteOrder::Big, cspf::ByteOrder::Little] {
            if let Ok(p) = cspf::parse_binary(&bytes, order, 0, &Limits::default()) {
                verify(&cspf::lift(&p)).unwrap();
            }
            let _ = cspf::parse_enfilter_image(&bytes, order, &Limits::default());
        }
    }
}

/// Random MPF texts built from plausible lines: parse errors stay inside the text; programs that
/// parse run the same on the reference interpreter and on their lifted IR.
#[test]
fn mpf_random_programs_lift_exactly() {
    use sift_seeds::mpf;
    let mut rng = Rng::new(1994);
    let lines = [
        "ldb [0]",
        "ldh [1]",
        "ld [2]",
        "ldb [7]",
        "st M[0]",
        "st M[1]",
        "st M[2]",
        "stx M[1]",
        "ldx #3",
        "ldxb 4*([0]&0xf)",
        "ldb [x + 1]",
        "add #1",
        "and #0xf",
        "tax",
        "txa",
        "jeq #1, a, b",
        "jgt #3, b, c",
        "jset #2, c, d",
        "ja d",
        "ret #ALL",
        "ret a",
        "ret #0",
        "ret_match_imm #1, #ALL\nkey #1",
        "ret_match_imm #2, #9\nkey #1\nkey #2",
        "jmp_match_imm #1, c, d\nkey #0",
        "jmp_match_imm #2, b, d\nkey #1\nkey #0",
        "key #4",
        "register_data #1, #10",
        "ret_match_data #1, #ALL",
        "postpone #5",
        "a:",
        "b:",
        "c:",
        "d:",
        "ret_match_imm #ALL, 1\nkey #",
        "jmp_match_imm #17, a, b",
        "unimp 0x1e",
    ];
    let packets = generate_packets(1, 5, 40);
    let (mut parsed, mut lifted) = (0, 0);
    for _ in 0..20000 {
        let n = 1 + rng.index(14);
        let mut text: String = (0..n).map(|_| format!("{}\n", rng.pick(&lines))).collect();
        text.push_str("d: ret #5\n");
        match mpf::parse(&text) {
            Err(e) => {
                assert!(
                    e.span.start <= e.span.end && e.span.end <= text.len(),
                    "{text}"
                );
                let _ = e.render(&text);
            }
            Ok(p) => {
                parsed += 1;
                let Ok(f) = mpf::lift(&p) else { continue };
                lifted += 1;
                let ir = Interpreter::new(f).unwrap();
                let mut cache = Cache::new();
                for pkt in &packets {
                    for cut in [pkt.data.len(), 3, 1] {
                        let data = &pkt.data[..cut.min(pkt.data.len())];
                        assert_eq!(
                            ir.run(&mut cache, data, pkt.wire_len),
                            mpf::interp::run(&p, data, pkt.wire_len),
                            "{text}"
                        );
                    }
                }
            }
        }
    }
    println!("20000 random MPF texts: {parsed} parsed, {lifted} lifted and checked on 120 packets");
    assert!(lifted > 500, "{lifted}");
}
