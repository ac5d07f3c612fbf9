//! Watching the optimizer: a snapshot of the graph after each pass, as a readable dump of the
//! blocks (statements, deleted ones included, exit value numbers, use summaries, targets) and
//! as the linear code libpcap would emit from it at that point.

use std::fmt::Write as _;

use sift_bpf::{disasm, Insn};

use crate::atoms::{AtomSet, A, MEM_WORDS, X};
use crate::graph::Graph;
use crate::linearize::linearize;
use crate::state::Progress;

/// When a snapshot was taken.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stage {
    /// The recovered input graph, before any pass.
    Input,
    /// After pass `pass` (from 0) of the first (`do_stmts = false`) or second loop.
    Pass {
        /// Whether statements were being rewritten.
        do_stmts: bool,
        /// Pass number within the loop.
        pass: usize,
    },
    /// After merging equal blocks.
    Interned,
    /// After the root fix-up: the final graph.
    Rooted,
}

/// The graph at one point of the optimization.
#[derive(Clone, Debug)]
pub struct Snapshot {
    /// When.
    pub stage: Stage,
    /// For a pass: whether it changed nothing (`done`) and whether it changed more than edges.
    pub done: Option<(bool, bool)>,
    /// The reachable blocks, one paragraph each.
    pub blocks: String,
    /// The linear code of the graph at this point.
    pub program: Vec<Insn>,
}

impl Snapshot {
    fn header(&self) -> String {
        let stage = match self.stage {
            Stage::Input => "input".to_string(),
            Stage::Pass { do_stmts, pass } => {
                format!("opt_loop(do_stmts={}) pass {pass}", u8::from(do_stmts))
            }
            Stage::Interned => "after intern_blocks".to_string(),
            Stage::Rooted => "after opt_root".to_string(),
        };
        match self.done {
            Some((done, progressed)) => {
                format!(
                    "== {stage}: done={} non_branch={}",
                    u8::from(done),
                    u8::from(progressed)
                )
            }
            None => format!("== {stage}"),
        }
    }
}

impl std::fmt::Display for Snapshot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(f, "{}", self.header())?;
        f.write_str(&self.blocks)?;
        writeln!(f, "-- linear:")?;
        for (i, insn) in self.program.iter().enumerate() {
            writeln!(f, "{}", disasm::image(*insn, i))?;
        }
        Ok(())
    }
}

/// Passes snapshots to an optional callback.
pub struct Tracer<'a> {
    sink: Option<&'a mut dyn FnMut(&Snapshot)>,
}

impl<'a> Tracer<'a> {
    /// A tracer calling `sink`, or doing nothing.
    pub fn new(sink: Option<&'a mut dyn FnMut(&Snapshot)>) -> Tracer<'a> {
        Tracer { sink }
    }

    /// Reports the graph at `stage` if anyone listens.
    pub fn snapshot(&mut self, stage: Stage, g: &Graph, progress: Option<Progress>) {
        let Some(sink) = self.sink.as_mut() else {
            return;
        };
        let snap = Snapshot {
            stage,
            done: progress.map(|p| (p.done, p.progressed)),
            blocks: dump_blocks(g),
            program: linearize(&mut g.clone()),
        };
        sink(&snap);
    }
}

fn atoms(set: AtomSet) -> String {
    let mut names: Vec<String> = Vec::new();
    for atom in 0..MEM_WORDS + 2 {
        if set & (1 << atom) != 0 {
            names.push(match atom {
                A => "A".to_string(),
                X => "X".to_string(),
                m => format!("M{m}"),
            });
        }
    }
    format!("{{{}}}", names.join(","))
}

/// The reachable blocks in id order.
pub fn dump_blocks(g: &Graph) -> String {
    let live = g.reachable();
    let mut out = String::new();
    for (id, b) in g.blocks.iter().enumerate().filter(|(i, _)| live[*i]) {
        let mut vals = format!("A={} X={}", b.val[A], b.val[X]);
        for (m, v) in b.val[..MEM_WORDS].iter().enumerate() {
            if *v != 0 {
                let _ = write!(vals, " M{m}={v}");
            }
        }
        let root = if id == g.root { " root" } else { "" };
        let _ = writeln!(
            out,
            "B{id}{root} level={} in_use={} out_use={} exit: {vals}",
            b.level,
            atoms(b.in_use),
            atoms(b.out_use)
        );
        for s in &b.stmts {
            match s.code {
                Some(c) => {
                    let _ = writeln!(
                        out,
                        "    {}",
                        strip_index(&disasm::image(Insn::stmt(c, s.k), 0))
                    );
                }
                None => {
                    let _ = writeln!(out, "    (deleted)");
                }
            }
        }
        let branch = strip_index(&disasm::image(Insn::stmt(b.code, b.k), 0));
        let branch = branch
            .split("jt ")
            .next()
            .unwrap_or("")
            .trim_end()
            .to_string();
        match (b.jt, b.jf) {
            (Some(t), Some(f)) => {
                let _ = writeln!(out, "    {branch} -> B{t} / B{f}");
            }
            _ => {
                let _ = writeln!(out, "    {branch}");
            }
        }
    }
    out
}

/// `(000) ld ...` without the index.
fn strip_index(line: &str) -> String {
    line.get(6..).unwrap_or(line).to_string()
}
