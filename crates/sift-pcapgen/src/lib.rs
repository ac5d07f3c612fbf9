//! libpcap's unoptimized classic BPF code, rebuilt from sift's unoptimized IR.
//!
//! libpcap's optimizer changes what some filters mean: it deletes loads, and through stale
//! value numbers even `ldxb` statements, so that later loads read an index register nothing
//! set. To reproduce those effects exactly, sift runs a statement-level model of that optimizer
//! (in `sift-libpcap`) on exactly the statements libpcap's code generator (`gencode.c`) would
//! have produced. This crate produces them: [`libpcap_code`] takes sift's IR as lowered (before
//! any optimization; sift's lowering mirrors gencode function by function, one IR block per
//! gencode block, instructions in gencode's statement order) and gives gencode's block graph:
//! the same blocks, each with the same statements (opcodes, constants and scratch slots
//! `M[0..15]`) and the same conditional jump.
//!
//! [`from_linear`] rebuilds that graph from libpcap's own linear output and [`same_graph`]
//! compares two graphs, which is how the translation is checked against libpcap itself.

#![forbid(unsafe_code)]

mod compare;
mod error;
mod graph;
mod registers;
mod statements;

pub use compare::{same_graph, Mismatch, MismatchKind};
pub use error::Unsupported;
pub use graph::{from_linear, statement_text, BlockCode, BlockId, Exit, Graph};
pub use registers::Registers;

use sift_ir::{Block, Function};

use statements::BlockTranslator;

/// gencode's unoptimized block graph for `f`, sift's IR as lowered with `optimize: false`.
/// Block `i` of the graph is block `i` of `f` (so the entry is block 0).
///
/// Scratch slots are assigned by replaying gencode's allocator over the whole filter, block by
/// block in the order the blocks were generated, which is the order of their instructions'
/// value numbers (values are numbered as they are created; blocks are renumbered after
/// lowering). Blocks no path reaches are gone from `f`, but gencode built them too; that is
/// harmless for header tests (no scratch memory), so only leftover arithmetic is refused.
pub fn libpcap_code(f: &Function) -> Result<Graph, Unsupported> {
    let mut order: Vec<Block> = (0..f.blocks.len()).map(|i| Block(i as u32)).collect();
    order.sort_by_key(|&b| f.block(b).insts.first().map_or(u32::MAX, |v| v.0));
    statements::check_unlisted(f)?;
    let mut registers = Registers::default();
    let mut graph = Graph {
        blocks: vec![BlockCode::default(); f.blocks.len()],
    };
    for b in order {
        graph.blocks[b.index()] = BlockTranslator::new(f, b, &mut registers).translate()?;
    }
    Ok(graph)
}
