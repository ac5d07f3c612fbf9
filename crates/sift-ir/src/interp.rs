//! The reference interpreter of the IR.
//!
//! It is deliberately simple: it walks the graph from the entry, evaluating each instruction in
//! order. It defines what every other engine must compute.

use crate::coproc::ValueSet;
use crate::function::{Function, Inst, LoadSize, Terminator};
use crate::protochain;
use crate::verify::{verify, VerifyError};

/// Per-thread scratch space for [`Interpreter::run`] (one slot per SSA value), kept out of the
/// interpreter so that one interpreter can be shared between threads.
#[derive(Clone, Debug, Default)]
pub struct Cache {
    slots: Vec<u32>,
}

impl Cache {
    pub fn new() -> Cache {
        Cache::default()
    }
}

/// An interpreter over a verified function.
#[derive(Clone, Debug)]
pub struct Interpreter {
    func: Function,
}

/// Reads `size` bytes big-endian at `index + offset`, or `None` if any byte is outside `pkt`.
#[inline]
pub fn load(pkt: &[u8], index: u32, offset: u32, size: LoadSize) -> Option<u32> {
    let start = u64::from(index) + u64::from(offset);
    let end = start + u64::from(size.bytes());
    if end > pkt.len() as u64 {
        return None;
    }
    let bytes = &pkt[start as usize..end as usize];
    Some(bytes.iter().fold(0u32, |acc, &b| (acc << 8) | u32::from(b)))
}

impl Interpreter {
    /// Verifies `func` and builds an interpreter for it.
    pub fn new(func: Function) -> Result<Interpreter, VerifyError> {
        verify(&func)?;
        Ok(Interpreter { func })
    }

    pub fn function(&self) -> &Function {
        &self.func
    }

    /// Runs the filter on a packet (`pkt` holds the captured bytes, `wire_len` its length on the
    /// wire). Returns the number of bytes to keep, 0 to reject.
    pub fn run(&self, cache: &mut Cache, pkt: &[u8], wire_len: u32) -> u32 {
        let f = &self.func;
        let slots = &mut cache.slots;
        if slots.len() < f.values.len() {
            slots.resize(f.values.len(), 0);
        }
        let mut block = Function::ENTRY;
        loop {
            let data = f.block(block);
            for &v in &data.insts {
                let x = match &f.values[v.index()] {
                    &Inst::Const(k) => k,
                    Inst::WireLen => wire_len,
                    &Inst::Load {
                        index,
                        offset,
                        size,
                    } => {
                        let base = index.map_or(0, |x| slots[x.index()]);
                        match load(pkt, base, offset, size) {
                            Some(x) => x,
                            None => return 0,
                        }
                    }
                    &Inst::Binary(op, a, b) => match op.apply(slots[a.index()], slots[b.index()]) {
                        Some(x) => x,
                        None => return 0,
                    },
                    Inst::Neg(a) => slots[a.index()].wrapping_neg(),
                    Inst::Contains {
                        set,
                        pattern,
                        start,
                    } => u32::from(f.patterns[*set as usize].occurs(
                        *pattern,
                        pkt,
                        slots[start.index()],
                    )),
                    Inst::Member { set, key } => {
                        let words: Vec<u32> = key.iter().map(|k| slots[k.index()]).collect();
                        u32::from(f.sets[*set as usize].contains(ValueSet::key(&words)))
                    }
                    &Inst::Protochain {
                        chain,
                        base,
                        proto,
                        offset,
                        target,
                    } => match protochain::walk(
                        pkt,
                        chain,
                        base,
                        slots[proto.index()],
                        slots[offset.index()],
                        target,
                    ) {
                        Some(x) => x,
                        None => return 0,
                    },
                    Inst::Param(_) => unreachable!("the verifier keeps parameters out of insts"),
                };
                slots[v.index()] = x;
            }
            let target = match &data.term {
                Terminator::Return(k) => return *k,
                Terminator::ReturnValue(v) => return slots[v.index()],
                Terminator::Jump(t) => t,
                Terminator::Switch {
                    value,
                    cases,
                    default,
                } => {
                    let key = slots[value.index()];
                    cases
                        .iter()
                        .find(|(k, _)| *k == key)
                        .map_or(default, |(_, t)| t)
                }
                Terminator::Branch {
                    op,
                    lhs,
                    rhs,
                    then_,
                    else_,
                } => {
                    if op.eval(slots[lhs.index()], slots[rhs.index()]) {
                        then_
                    } else {
                        else_
                    }
                }
                Terminator::Unset => unreachable!("the verifier rejects unset terminators"),
            };
            let params = &f.block(target.block).params;
            for (p, a) in params.iter().zip(&target.args) {
                slots[p.index()] = slots[a.index()];
            }
            block = target.block;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::parse_function;
    use crate::Value;

    fn run(text: &str, pkt: &[u8]) -> u32 {
        let i = Interpreter::new(parse_function(text).unwrap()).unwrap();
        i.run(&mut Cache::new(), pkt, pkt.len() as u32)
    }

    const TCP_PORT: &str = "\
block0:
    v0 = load.b [0]
    v1 = const 15
    v2 = and v0, v1
    v3 = const 2
    v4 = shl v2, v3
    v5 = load.h [v4+2]
    v6 = const 80
    br eq v5, v6, block1, block2
block1:
    ret 100
block2:
    ret 0
";

    #[test]
    fn loads_and_branches() {
        let mut pkt = vec![0x45u8; 24];
        pkt[22] = 0;
        pkt[23] = 80;
        assert_eq!(run(TCP_PORT, &pkt), 100);
        pkt[23] = 81;
        assert_eq!(run(TCP_PORT, &pkt), 0);
    }

    #[test]
    fn out_of_bounds_rejects() {
        assert_eq!(run(TCP_PORT, &[0x45u8; 23]), 0);
        assert_eq!(load(&[1, 2, 3, 4], u32::MAX, 2, LoadSize::Half), None);
        assert_eq!(load(&[1, 2, 3, 4], 2, 0, LoadSize::Half), Some(0x0304));
    }

    #[test]
    fn division_by_zero_rejects() {
        let text = "block0:\n v0 = load.b [0]\n v1 = div v0, v0\n ret 1\n";
        assert_eq!(run(text, &[0]), 0);
        assert_eq!(run(text, &[3]), 1);
    }

    #[test]
    fn parameters_carry_values() {
        let text = "block0:\n v0 = load.b [0]\n jump block1(v0)\nblock1(v1):\n v2 = const 7\n br eq v1, v2, block2, block3\nblock2:\n ret 9\nblock3:\n ret 0\n";
        assert_eq!(run(text, &[7]), 9);
        assert_eq!(run(text, &[8]), 0);
    }

    #[test]
    fn coprocessor_calls() {
        let text = "\
pattern p0 = \"GET\"
pattern p0 = nocase \"admin\\x3b\"
set s0 w32 = 0x50, 0x1f40-0x1fa4
block0:
    v0 = const 1
    v1 = contains p0.1, v0
    v2 = load.h [0]
    v3 = member s0, v2
    v4 = add v1, v3
    v5 = const 2
    br eq v4, v5, block1, block2
block1:
    ret 1
block2:
    ret 0
";
        let f = parse_function(text).unwrap();
        assert_eq!(parse_function(&f.to_string()).unwrap(), f);
        assert_eq!(f.first_call(), Some(Value(1)));
        assert_eq!(run(text, b"\x00\x50ADMIN;"), 1);
        assert_eq!(run(text, b"\x1f\x90ADMIN;"), 1);
        assert_eq!(run(text, b"\x00\x51ADMIN;"), 0);
        assert_eq!(run(text, b"\x00\x50ADMIN"), 0);
        assert_eq!(run(text, b"\x00"), 0);
        let mut bad = f.clone();
        bad.values[3] = Inst::Member {
            set: 0,
            key: crate::thin_vec![Value(2), Value(2)],
        };
        assert!(crate::verify(&bad).is_err());
    }
}
