//! Control-flow skeletons: a random acyclic graph, or the shape of a pcap-filter expression.

use super::*;

impl<E: Entropy> Gen<'_, E> {
    /// A random acyclic graph: block `i` only targets blocks after it.
    pub(super) fn random_skeleton(&mut self, size: Size) -> Vec<Node> {
        let n = 1 + self.e.below(size.blocks);
        let mut nodes = Vec::with_capacity(n);
        for i in 0..n {
            let params = if i == 0 || !self.e.chance(25) {
                0
            } else {
                1 + self.e.below(2)
            };
            let later = n - i - 1;
            let kind = if later == 0 {
                if self.e.chance(70) {
                    Kind::Return(self.return_constant())
                } else {
                    Kind::ReturnValue
                }
            } else {
                match self.e.below(20) {
                    0..=8 => Kind::Branch(self.maybe_field(50)),
                    9..=10 => Kind::Switch(self.maybe_field(50)),
                    11..=13 => Kind::Jump,
                    14..=17 => Kind::Return(self.return_constant()),
                    _ => Kind::ReturnValue,
                }
            };
            let count = match kind {
                Kind::Branch(_) => 2,
                Kind::Switch(_) => 2 + self.e.below(4),
                Kind::Jump => 1,
                Kind::Return(_) | Kind::ReturnValue => 0,
            };
            let targets = (0..count)
                .map(|_| {
                    let reach = if self.e.chance(70) {
                        later.min(3)
                    } else {
                        later
                    };
                    i + 1 + self.e.below(reach)
                })
                .collect();
            nodes.push(Node {
                params,
                kind,
                targets,
                clean: false,
            });
        }
        nodes
    }

    fn maybe_field(&mut self, percent: u32) -> Option<usize> {
        if self.e.chance(percent) {
            Some(self.e.below(self.fields.len()))
        } else {
            None
        }
    }

    fn return_constant(&mut self) -> u32 {
        if self.e.chance(30) {
            0
        } else {
            self.e.pick(&ACCEPT)
        }
    }

    /// A predicate tree laid out as lowering does. Nodes are allocated targets first, so
    /// reversing the allocation order numbers them topologically.
    pub(super) fn filter_skeleton(&mut self, size: Size) -> Vec<Node> {
        let mut alloc: Vec<Node> = Vec::new();
        let reject = push(&mut alloc, 0, Kind::Return(0), vec![]);
        let accept_kind = if self.e.chance(85) {
            Kind::Return(self.e.pick(&ACCEPT))
        } else {
            Kind::ReturnValue
        };
        let accept = push(&mut alloc, 0, accept_kind, vec![]);
        let mut budget = 4 + self.e.below(size.tests.saturating_sub(4));
        let root = self.predicate(&mut alloc, size.depth, &mut budget, accept, reject);
        // The root must become block 0, so it must have been allocated last.
        if root + 1 != alloc.len() {
            push(&mut alloc, 0, Kind::Jump, vec![root]);
        }
        let n = alloc.len();
        alloc
            .into_iter()
            .rev()
            .map(|mut node| {
                for t in &mut node.targets {
                    *t = n - 1 - *t;
                }
                node
            })
            .collect()
    }

    /// Allocates the blocks of a random predicate going to `t` when it holds and to `f`
    /// otherwise; returns its entry.
    fn predicate(
        &mut self,
        alloc: &mut Vec<Node>,
        depth: usize,
        budget: &mut usize,
        t: usize,
        f: usize,
    ) -> usize {
        if depth == 0 || *budget <= 1 {
            return self.atom(alloc, budget, None, t, f);
        }
        match self.e.below(16) {
            0..=2 => self.atom(alloc, budget, None, t, f),
            3 => self.predicate(alloc, depth - 1, budget, f, t), // not
            choice @ 4..=9 => {
                // `and` (4..=6) or `or` (7..=9) of 2..=4 operands, folded right to left.
                let is_and = choice <= 6;
                let k = 2 + self.e.below(3);
                let mut cur = self.predicate(alloc, depth - 1, budget, t, f);
                for _ in 1..k {
                    cur = if is_and {
                        self.predicate(alloc, depth - 1, budget, cur, f)
                    } else {
                        self.predicate(alloc, depth - 1, budget, t, cur)
                    };
                }
                cur
            }
            10..=11 => {
                // An equality chain on one field: a lookup table in the making.
                let field = Some(self.e.below(self.fields.len()));
                let k = 2 + self.e.below(6);
                let clean = self.e.chance(50);
                let mut cur = f;
                for i in 0..k {
                    cur = self.atom(alloc, budget, field, t, cur);
                    // The head (allocated last) loads the field for the others.
                    alloc[cur].clean = clean && i + 1 < k;
                }
                cur
            }
            12 => {
                // The same test twice on one path (redundant predicate).
                let field = Some(self.e.below(self.fields.len()));
                let second = self.atom(alloc, budget, field, t, f);
                self.atom(alloc, budget, field, second, f)
            }
            13..=14 => {
                // A diamond joining in a block parameter: `join(p)` tests something (often a
                // load indexed by `p`), its predecessors pass different values.
                let join_rest = self.predicate(alloc, depth - 1, budget, t, f);
                let join = push(alloc, 1, Kind::Branch(None), vec![join_rest, f]);
                *budget = budget.saturating_sub(1);
                if self.e.chance(50) {
                    let left = push(alloc, 0, Kind::Jump, vec![join]);
                    let right = push(alloc, 0, Kind::Jump, vec![join]);
                    push(
                        alloc,
                        0,
                        Kind::Branch(self.maybe_field(70)),
                        vec![left, right],
                    )
                } else {
                    // Both edges of one branch to the join, with different arguments.
                    push(
                        alloc,
                        0,
                        Kind::Branch(self.maybe_field(70)),
                        vec![join, join],
                    )
                }
            }
            _ => {
                // A switch on a field with predicates behind its cases.
                let field = Some(self.e.below(self.fields.len()));
                let cases = 1 + self.e.below(4);
                let mut targets = Vec::new();
                for _ in 0..cases {
                    let target = if self.e.chance(50) {
                        t
                    } else {
                        self.predicate(alloc, depth - 1, budget, t, f)
                    };
                    targets.push(target);
                }
                targets.push(f);
                *budget = budget.saturating_sub(1);
                push(alloc, 0, Kind::Switch(field), targets)
            }
        }
    }

    fn atom(
        &mut self,
        alloc: &mut Vec<Node>,
        budget: &mut usize,
        field: Option<usize>,
        t: usize,
        f: usize,
    ) -> usize {
        *budget = budget.saturating_sub(1);
        let field = field.or_else(|| self.maybe_field(85));
        push(alloc, 0, Kind::Branch(field), vec![t, f])
    }
}
