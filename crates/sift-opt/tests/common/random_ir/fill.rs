//! Filling a skeleton's blocks with instructions and terminators, in topological order.

use super::*;

impl<E: Entropy> Gen<'_, E> {
    pub(super) fn fill(mut self, nodes: Vec<Node>) -> Program {
        for node in &nodes {
            let b = self.f.create_block();
            for _ in 0..node.params {
                self.f.add_param(b);
            }
        }
        // Placeholder terminators with the real edges, for the dominator tree.
        for (i, node) in nodes.iter().enumerate() {
            let cases = node
                .targets
                .iter()
                .enumerate()
                .map(|(k, &t)| (k as u32, Target::from(Block(t as u32))))
                .collect();
            let term = if node.targets.is_empty() {
                Terminator::Return(0)
            } else {
                Terminator::Switch {
                    value: Value(0),
                    cases,
                    default: Block(node.targets[0] as u32).into(),
                }
            };
            self.f.set_term(Block(i as u32), term);
        }
        let (idom, _) = sift_ir::verify::dominators(&self.f);
        if self.e.chance(40) {
            // Every key defined once in the entry, as value numbering hoists constants.
            let mut keys: Vec<u32> = self.fields.iter().flat_map(|f| f.keys.clone()).collect();
            keys.sort_unstable();
            keys.dedup();
            for k in keys {
                self.f.iconst(Function::ENTRY, k);
            }
        }
        for (i, node) in nodes.iter().enumerate() {
            let b = Block(i as u32);
            let mut avail: Vec<Value> = Vec::new();
            let mut d = idom[i];
            while let Some(x) = d {
                let data = self.f.block(x);
                avail.extend(data.params.iter().chain(&data.insts));
                d = idom[x.index()];
            }
            avail.extend(self.f.block(b).params.clone());
            self.fill_block(b, node, &nodes, &mut avail);
        }
        Program {
            function: self.f,
            fields: self.fields,
            header_lengths: self.header_lengths,
        }
    }

    fn fill_block(&mut self, b: Block, node: &Node, nodes: &[Node], avail: &mut Vec<Value>) {
        let filler = if node.clean {
            0
        } else if matches!(node.kind, Kind::Branch(Some(_)) | Kind::Switch(Some(_))) {
            self.e.below(3)
        } else {
            self.e.below(6)
        };
        let params = if node.clean {
            sift_ir::ThinVec::new()
        } else {
            self.f.block(b).params.clone()
        };
        for p in params {
            if self.e.chance(60) {
                // A load indexed by the joined value, as after a variable-length header.
                let offset = self.e.below(24) as u32;
                let size = self
                    .e
                    .pick(&[LoadSize::Byte, LoadSize::Half, LoadSize::Word]);
                let v = self.f.push(
                    b,
                    Inst::Load {
                        index: Some(p),
                        offset,
                        size,
                    },
                );
                avail.push(v);
            }
        }
        for _ in 0..filler {
            let v = self.random_inst(b, avail);
            avail.push(v);
        }
        let mut targets = Vec::new();
        for &t in &node.targets {
            let args = (0..nodes[t].params)
                .map(|_| self.argument(b, avail))
                .collect();
            targets.push(Target {
                block: Block(t as u32),
                args,
            });
        }
        let term = match node.kind {
            Kind::Return(k) => Terminator::Return(k),
            Kind::ReturnValue => Terminator::ReturnValue(self.operand(b, avail)),
            Kind::Jump => Terminator::Jump(targets.pop().expect("a jump has a target")),
            Kind::Branch(field) => {
                let (op, lhs, rhs) = self.test(b, avail, field, node.clean);
                let else_ = targets.pop().expect("else");
                let then_ = targets.pop().expect("then");
                Terminator::Branch {
                    op,
                    lhs,
                    rhs,
                    then_,
                    else_,
                }
            }
            Kind::Switch(field) => {
                let default = targets.pop().expect("default");
                let value = match field {
                    Some(fi) => self.field_value(b, avail, fi),
                    None => self.operand(b, avail),
                };
                let mut cases: Vec<(u32, Target)> = Vec::new();
                for t in targets {
                    let mut key = match field {
                        Some(fi) if self.e.chance(80) => self.e.pick(&self.fields[fi].keys),
                        _ => self.constant(),
                    };
                    // Every edge of the skeleton must stay (the dominators were computed with
                    // it), so a repeated key is moved rather than dropped.
                    while cases.iter().any(|(k, _)| *k == key) {
                        key = key.wrapping_add(1);
                    }
                    cases.push((key, t));
                }
                Terminator::Switch {
                    value,
                    cases,
                    default,
                }
            }
        };
        self.f.set_term(b, term);
    }

    /// A comparison: on a field against one of its keys, or on anything.
    fn test(
        &mut self,
        b: Block,
        avail: &mut Vec<Value>,
        field: Option<usize>,
        clean: bool,
    ) -> (CmpOp, Value, Value) {
        let Some(fi) = field else {
            let op = self.e.pick(&CmpOp::ALL);
            let lhs = self.operand(b, avail);
            let rhs = self.operand(b, avail);
            return (op, lhs, rhs);
        };
        if clean {
            let loaded = avail
                .iter()
                .find(|v| self.field_of.get(v) == Some(&fi))
                .copied();
            let key = self.e.pick(&self.fields[fi].keys);
            let k = avail
                .iter()
                .find(|&&v| self.f.const_value(v) == Some(key))
                .copied();
            if let (Some(lhs), Some(rhs)) = (loaded, k) {
                let op = if self.e.chance(90) {
                    CmpOp::Eq
                } else {
                    CmpOp::Ne
                };
                return (op, lhs, rhs);
            }
        }
        let mut lhs = self.field_value(b, avail, fi);
        let key = self.e.pick(&self.fields[fi].keys);
        let op = self.e.weighted(&[
            (12, CmpOp::Eq),
            (2, CmpOp::Ne),
            (2, CmpOp::Gt),
            (2, CmpOp::Ge),
            (2, CmpOp::Lt),
            (2, CmpOp::Le),
            (3, CmpOp::Set),
        ]);
        if op != CmpOp::Set && self.e.chance(15) {
            // A masked field, as `tcp[13] & 2 = 2` or `ip[6:2] & 0x1fff = 0`.
            let mask = self.e.pick(&[0xf, 0xf0, 0x1fff, 0x3, key, 0]);
            let m = self.f.iconst(b, mask);
            lhs = self.f.push(b, Inst::Binary(BinOp::And, lhs, m));
            avail.push(lhs);
        } else if op != CmpOp::Set && self.e.chance(10) {
            // Arithmetic on the field, as `len - 1 = 4321` (which wraps for len 0), compared
            // with the key moved the same way, so that packets carrying the key take both edges.
            let arith = self.e.pick(&[BinOp::Add, BinOp::Sub, BinOp::Xor]);
            let c = self.e.pick(&[1, 13, 0xffff_fff3, key]);
            let moved = arith.apply(key, c).expect("add, sub and xor are total");
            let key = if self.e.chance(80) { moved } else { key };
            let c = self.f.iconst(b, c);
            lhs = self.f.push(b, Inst::Binary(arith, lhs, c));
            avail.push(lhs);
            let rhs = self.reuse_or_const(b, avail, key);
            return (op, lhs, rhs);
        }
        let rhs = self.reuse_or_const(b, avail, key);
        (op, lhs, rhs)
    }

    /// A load of field `fi`: an available one, or a new load (computing its header length
    /// first if needed).
    fn field_value(&mut self, b: Block, avail: &mut Vec<Value>, fi: usize) -> Value {
        if self.e.chance(50) {
            if let Some(&v) = avail.iter().find(|v| self.field_of.get(v) == Some(&fi)) {
                return v;
            }
        }
        let field = self.fields[fi].clone();
        let index = field.header.map(|h| self.header_length(b, avail, h));
        let v = self.f.push(
            b,
            Inst::Load {
                index,
                offset: field.offset,
                size: field.size,
            },
        );
        self.field_of.insert(v, fi);
        avail.push(v);
        v
    }

    /// `(load.b [at] & 15) << 2` (or an equivalent spelling): an available one or a new one.
    fn header_length(&mut self, b: Block, avail: &mut Vec<Value>, h: usize) -> Value {
        if self.e.chance(60) {
            if let Some(&v) = avail.iter().find(|v| self.header_of.get(v) == Some(&h)) {
                return v;
            }
        }
        let at = self.header_lengths[h];
        let byte = self.f.push(
            b,
            Inst::Load {
                index: None,
                offset: at,
                size: LoadSize::Byte,
            },
        );
        let fifteen = self.f.iconst(b, 15);
        let low = self.f.push(b, Inst::Binary(BinOp::And, byte, fifteen));
        let v = if self.e.chance(70) {
            let two = self.f.iconst(b, 2);
            self.f.push(b, Inst::Binary(BinOp::Shl, low, two))
        } else {
            let four = self.f.iconst(b, 4);
            self.f.push(b, Inst::Binary(BinOp::Mul, low, four))
        };
        avail.extend([byte, fifteen, low, v]);
        self.header_of.insert(v, h);
        v
    }

    /// The constant `k`: an available definition of it, or a new one.
    fn reuse_or_const(&mut self, b: Block, avail: &mut Vec<Value>, k: u32) -> Value {
        if self.e.chance(30) {
            if let Some(&v) = avail.iter().find(|&&v| self.f.const_value(v) == Some(k)) {
                return v;
            }
        }
        let v = self.f.iconst(b, k);
        avail.push(v);
        v
    }

    fn constant(&mut self) -> u32 {
        match self.e.below(4) {
            0 => self.e.pick(&SPECIAL),
            1 => {
                let fi = self.e.below(self.fields.len());
                self.e.pick(&self.fields[fi].keys)
            }
            2 => self.e.below(64) as u32,
            _ => self.e.word(),
        }
    }

    /// Any value: mostly an available one, else a new constant or load.
    fn operand(&mut self, b: Block, avail: &mut Vec<Value>) -> Value {
        if !avail.is_empty() && self.e.chance(70) {
            return self.e.pick(avail);
        }
        let v = self.random_inst(b, avail);
        avail.push(v);
        v
    }

    /// An edge argument: a header length, a field, a constant or anything.
    fn argument(&mut self, b: Block, avail: &mut Vec<Value>) -> Value {
        match self.e.below(4) {
            0 if !self.header_lengths.is_empty() => {
                let h = self.e.below(self.header_lengths.len());
                self.header_length(b, avail, h)
            }
            1 => {
                let fi = self.e.below(self.fields.len());
                self.field_value(b, avail, fi)
            }
            2 => {
                let k = self.constant();
                self.reuse_or_const(b, avail, k)
            }
            _ => self.operand(b, avail),
        }
    }

    /// One random instruction appended to `b`.
    fn random_inst(&mut self, b: Block, avail: &mut Vec<Value>) -> Value {
        let pick = |e: &mut E, avail: &[Value]| -> Option<Value> {
            (!avail.is_empty()).then(|| e.pick(avail))
        };
        match self.e.below(20) {
            0..=3 => {
                let k = self.constant();
                self.f.iconst(b, k)
            }
            4 => self.f.push(b, Inst::WireLen),
            5..=7 => {
                let fi = self.e.below(self.fields.len());
                self.field_value(b, avail, fi)
            }
            8..=9 => {
                let index = if self.e.chance(50) {
                    pick(self.e, avail)
                } else {
                    None
                };
                let offset = if self.e.chance(5) {
                    u32::MAX - self.e.below(8) as u32
                } else {
                    self.e.below(72) as u32
                };
                let size = self
                    .e
                    .pick(&[LoadSize::Byte, LoadSize::Half, LoadSize::Word]);
                self.f.push(
                    b,
                    Inst::Load {
                        index,
                        offset,
                        size,
                    },
                )
            }
            10..=17 => {
                let op = self.e.pick(&BinOp::ALL);
                let lhs = match pick(self.e, avail) {
                    Some(v) => v,
                    None => {
                        let k = self.constant();
                        self.f.iconst(b, k)
                    }
                };
                let rhs = match pick(self.e, avail) {
                    Some(v) if self.e.chance(40) => v,
                    _ => {
                        let k = self.constant();
                        self.reuse_or_const(b, avail, k)
                    }
                };
                self.f.push(b, Inst::Binary(op, lhs, rhs))
            }
            18 => match pick(self.e, avail) {
                Some(v) => self.f.push(b, Inst::Neg(v)),
                None => self.f.push(b, Inst::WireLen),
            },
            19 if self.e.chance(40) => {
                // A header-chain walk: protocols the walk steps over are likely.
                let protocols = [0, 43, 44, 51, 59, 60, 6, 17];
                let proto = match pick(self.e, avail) {
                    Some(v) if self.e.chance(50) => v,
                    _ => {
                        let k = self.e.pick(&protocols);
                        self.f.iconst(b, k)
                    }
                };
                let offset = match pick(self.e, avail) {
                    Some(v) if self.e.chance(30) => v,
                    _ => {
                        let k = self.e.below(48) as u32;
                        self.f.iconst(b, k)
                    }
                };
                let inst = Inst::Protochain {
                    chain: self.e.pick(&[Chain::Ip, Chain::Ip6]),
                    base: self.e.below(24) as u32,
                    proto,
                    offset,
                    target: self.e.pick(&protocols),
                };
                self.f.push(b, inst)
            }
            _ if !self.header_lengths.is_empty() => {
                let h = self.e.below(self.header_lengths.len());
                self.header_length(b, avail, h)
            }
            _ => self.f.push(b, Inst::WireLen),
        }
    }
}
