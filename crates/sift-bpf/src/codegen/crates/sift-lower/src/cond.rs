//! Conditions under construction: a piece of control flow with one entry and two lists of
//! unpatched exits, taken when the condition is true or false.
//!
//! This is how libpcap's code generator composes predicates (`gen_and`, `gen_or`, `gen_not`,
//! `backpatch`), and the composition order is part of the language's meaning: a packet load that
//! falls outside the captured bytes rejects the whole packet, so which tests run first matters.
//! `and(a, b)` runs `a` first and `b` only when `a` holds; `or(a, b)` runs `b` only when `a` fails.

use sift_ir::{Block, Function, Target, Terminator};

/// Which edge of a block's terminator an exit is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Edge {
    Then,
    Else,
    Jump,
}

/// An unpatched edge.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Exit {
    pub block: Block,
    pub edge: Edge,
}

/// A placeholder target, replaced when exits are patched.
pub(crate) const UNPATCHED: Block = Block(u32::MAX);

#[derive(Clone, Debug)]
pub(crate) struct Cond {
    pub entry: Block,
    pub when_true: Vec<Exit>,
    pub when_false: Vec<Exit>,
}

impl Cond {
    /// A block whose terminator is already set, as a condition with no exits: combined with
    /// `and`/`or` it is entered, but control never comes back out of it.
    pub fn terminated(block: Block) -> Cond {
        Cond {
            entry: block,
            when_true: vec![],
            when_false: vec![],
        }
    }

    pub fn not(self) -> Cond {
        Cond {
            entry: self.entry,
            when_true: self.when_false,
            when_false: self.when_true,
        }
    }
}

/// Points every exit in `exits` at `target`.
pub(crate) fn patch(f: &mut Function, exits: &[Exit], target: Block) {
    for exit in exits {
        let term = &mut f.block_mut(exit.block).term;
        let slot = match (term, exit.edge) {
            (Terminator::Branch { then_, .. }, Edge::Then) => then_,
            (Terminator::Branch { else_, .. }, Edge::Else) => else_,
            (Terminator::Jump(t), Edge::Jump) => t,
            _ => unreachable!("exit does not match its block's terminator"),
        };
        *slot = Target::from(target);
    }
}

/// `a and b`: `b` runs only when `a` holds.
pub(crate) fn and(f: &mut Function, a: Cond, b: Cond) -> Cond {
    patch(f, &a.when_true, b.entry);
    let mut when_false = a.when_false;
    when_false.extend(b.when_false);
    Cond {
        entry: a.entry,
        when_true: b.when_true,
        when_false,
    }
}

/// `a or b`: `b` runs only when `a` fails.
pub(crate) fn or(f: &mut Function, a: Cond, b: Cond) -> Cond {
    patch(f, &a.when_false, b.entry);
    let mut when_true = a.when_true;
    when_true.extend(b.when_true);
    Cond {
        entry: a.entry,
        when_true,
        when_false: b.when_false,
    }
}
