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

/// The target of an edge not patched yet, and the end of a list of [`Exits`].
pub(crate) const UNPATCHED: Block = Block(u32::MAX);

/// A list of unpatched edges, linked through the edges themselves, as libpcap links its
/// backpatch lists: the target of each unpatched edge names the next edge of its list
/// ([`UNPATCHED`] ends it). Joining two lists and building one allocate nothing: long chains
/// build hundreds of thousands of them. An edge is named by its block and side (`then` or a
/// `jump` 0, `else` 1), `2 * block + side`.
///
/// Not `Clone`: patching a list overwrites its links, so each list is patched once.
#[derive(Debug)]
pub(crate) struct Exits {
    first: u32,
    last: u32,
}

impl Exits {
    pub const NONE: Exits = Exits {
        first: UNPATCHED.0,
        last: UNPATCHED.0,
    };

    /// The list holding edge `edge` of `block`, whose target is [`UNPATCHED`].
    pub fn one(block: Block, edge: Edge) -> Exits {
        let side = u32::from(edge == Edge::Else);
        // Block numbers stay far below 2^31: a block takes more bytes than that bound allows.
        let id = 2 * block.0 + side;
        Exits {
            first: id,
            last: id,
        }
    }

    /// `self` followed by `other`.
    pub fn append(self, f: &mut Function, other: Exits) -> Exits {
        if self.first == UNPATCHED.0 {
            return other;
        }
        if other.first != UNPATCHED.0 {
            edge_target(f, self.last).block = Block(other.first);
        }
        Exits {
            first: self.first,
            last: if other.first == UNPATCHED.0 {
                self.last
            } else {
                other.last
            },
        }
    }
}

/// The target of the edge named `id` (see [`Exits`]).
fn edge_target(f: &mut Function, id: u32) -> &mut Target {
    match (&mut f.block_mut(Block(id / 2)).term, id % 2) {
        (Terminator::Branch { then_, .. }, 0) => then_,
        (Terminator::Branch { else_, .. }, _) => else_,
        (Terminator::Jump(t), 0) => t,
        _ => unreachable!("exit does not match its block's terminator"),
    }
}

#[derive(Debug)]
pub(crate) struct Cond {
    pub entry: Block,
    pub when_true: Exits,
    pub when_false: Exits,
}

impl Cond {
    /// A block whose terminator is already set, as a condition with no exits: combined with
    /// `and`/`or` it is entered, but control never comes back out of it.
    pub fn terminated(block: Block) -> Cond {
        Cond {
            entry: block,
            when_true: Exits::NONE,
            when_false: Exits::NONE,
        }
    }

    /// The test of a branch ending `block`, both of whose targets are [`UNPATCHED`]: true
    /// along `then`, false along `else`.
    pub fn branch(block: Block) -> Cond {
        Cond {
            entry: block,
            when_true: Exits::one(block, Edge::Then),
            when_false: Exits::one(block, Edge::Else),
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
pub(crate) fn patch(f: &mut Function, exits: Exits, target: Block) {
    let mut id = exits.first;
    while id != UNPATCHED.0 {
        let slot = edge_target(f, id);
        id = slot.block.0;
        *slot = Target::from(target);
    }
}

/// `a and b`: `b` runs only when `a` holds.
pub(crate) fn and(f: &mut Function, a: Cond, b: Cond) -> Cond {
    patch(f, a.when_true, b.entry);
    Cond {
        entry: a.entry,
        when_true: b.when_true,
        when_false: a.when_false.append(f, b.when_false),
    }
}

/// `a or b`: `b` runs only when `a` fails.
pub(crate) fn or(f: &mut Function, a: Cond, b: Cond) -> Cond {
    patch(f, a.when_false, b.entry);
    Cond {
        entry: a.entry,
        when_true: a.when_true.append(f, b.when_true),
        when_false: b.when_false,
    }
}
