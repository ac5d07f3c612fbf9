//! Instructions with symbolic jump targets, resolved into the 16-bit relative offsets of eBPF
//! jumps once every label is placed.

use crate::codegen::{CodegenError, MAX_INSNS};
use crate::insn::{Insn, JmpOp, Reg, Src};

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct Label(usize);

/// An instruction whose jump target is still a label.
enum Item {
    Insn(Insn),
    Ja(Label),
    Jmp {
        op: JmpOp,
        dst: Reg,
        src: Src,
        target: Label,
    },
}

#[derive(Default)]
pub(crate) struct Assembler {
    items: Vec<Item>,
    /// Item index of each label once placed.
    labels: Vec<usize>,
}

impl Assembler {
    pub(crate) fn new_label(&mut self) -> Label {
        self.labels.push(usize::MAX);
        Label(self.labels.len() - 1)
    }

    pub(crate) fn place(&mut self, label: Label) {
        self.labels[label.0] = self.items.len();
    }

    pub(crate) fn emit(&mut self, insn: Insn) {
        self.items.push(Item::Insn(insn));
    }

    pub(crate) fn ja(&mut self, target: Label) {
        self.items.push(Item::Ja(target));
    }

    pub(crate) fn jmp(&mut self, op: JmpOp, dst: Reg, src: Src, target: Label) {
        self.items.push(Item::Jmp {
            op,
            dst,
            src,
            target,
        });
    }

    /// The instructions with offsets in place of labels (every label used must be placed).
    pub(crate) fn finish(self) -> Result<Vec<Insn>, CodegenError> {
        let n = self.items.len();
        if n > MAX_INSNS {
            return Err(CodegenError::TooLarge { instructions: n });
        }
        let offset = |from: usize, l: Label| -> Result<i16, CodegenError> {
            let to = self.labels[l.0];
            i16::try_from(to as i64 - from as i64 - 1)
                .map_err(|_| CodegenError::JumpTooFar { from, to })
        };
        let mut insns = Vec::with_capacity(n);
        for (i, item) in self.items.iter().enumerate() {
            insns.push(match *item {
                Item::Insn(insn) => insn,
                Item::Ja(l) => Insn::Ja { off: offset(i, l)? },
                Item::Jmp {
                    op,
                    dst,
                    src,
                    target,
                } => Insn::Jmp {
                    op,
                    dst,
                    src,
                    off: offset(i, target)?,
                },
            });
        }
        Ok(insns)
    }
}
