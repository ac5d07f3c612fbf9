//! `geneve [VNI]`: Geneve (RFC 8926) over UDP port 6081, and the switch of every later primitive
//! to the encapsulated packet (libpcap's `gen_geneve`, `gen_geneve4`, `gen_geneve6`,
//! `gen_geneve_check`, `gen_geneve_offsets` and `gen_geneve_ll_check`).
//!
//! Where the inner packet starts depends on the outer IPv4 header's length and on the Geneve
//! options' length, so after `geneve` the link-layer header, type field and payload offsets have
//! a run-time part ([`crate::gen::RuntimeOffset`]), computed by the code that runs when `geneve`
//! matches. libpcap keeps those values in scratch registers, so a test that can run when `geneve`
//! did *not* match (`geneve or ip`, `not geneve and tcp`) reads whatever the registers hold
//! there; the `offset_reads` module works that out. After `geneve` the link layer is
//! treated as Ethernet whatever the capture's link type: the "link type" field is the Geneve
//! protocol type, or the inner Ethernet type when the protocol is Transparent Ethernet Bridging.

use sift_ir::LoadSize::{Byte, Half, Word};
use sift_ir::{
    thin_vec, BinOp, Block, CmpOp, Function, Inst, LoadSize, Target, Terminator, ThinVec, Value,
};
use sift_syntax::ast::Dir;

use crate::cond::{Cond, Edge, Exits, UNPATCHED};
use crate::gen::{AbsOffset, Gen, GenResult, OffRel};
use crate::linktype::Dlt;
use crate::port::PortProto;
use crate::proto::IPPROTO_UDP;
use crate::scratch::{Register, RegisterWrite, Stored};

/// The UDP port Geneve uses.
const GENEVE_PORT: u32 = 6081;
/// Transparent Ethernet Bridging: the Geneve payload is an Ethernet frame.
const ETHERTYPE_TEB: u32 = 0x6558;
/// The largest VNI (24 bits).
const MAX_VNI: u32 = 0xff_ffff;

impl Gen {
    /// `geneve [VNI]`: Geneve over IPv4 or over IPv6; when it matches, the offsets of the inner
    /// packet are computed and every later primitive uses them.
    pub fn geneve(&mut self, vni: Option<u32>) -> GenResult<Cond> {
        // Each check ends by jumping to `offsets` with the variable part of the UDP header's
        // offset: the IP header's length plus the run-time part of the network layer's offset
        // (libpcap's accumulator on that edge).
        let offsets = self.f.create_block();
        let udp_var = self.f.add_param(offsets);

        let v4 = self.geneve_check(false, vni)?;
        let over_v4 = self.f.create_block();
        let ip_len = self.ipv4_header_len(over_v4);
        self.jump_with(over_v4, offsets, ip_len);
        let v4 = self.and(v4, Cond::terminated(over_v4));

        let v6 = self.geneve_check(true, vni)?;
        let over_v6 = self.f.create_block();
        let forty = self.f.iconst(over_v6, 40);
        let ip6_len = match self.runtime_part(over_v6, self.link.off_linkpl) {
            Some(r) => self.f.push(over_v6, Inst::Binary(BinOp::Add, forty, r)),
            None => forty,
        };
        self.jump_with(over_v6, offsets, ip6_len);
        let v6 = self.and(v6, Cond::terminated(over_v6));
        let either = self.or(v4, v6);

        // libpcap takes them in this order, for the link type, link header and link payload
        // offsets, and never gives them back.
        let registers = [
            self.alloc_register()?,
            self.alloc_register()?,
            self.alloc_register()?,
        ];
        let done = self.geneve_offsets(offsets, udp_var, registers);
        // libpcap's offset code contains a jump inside a block, which its optimizer cannot
        // handle, so it leaves the whole filter unoptimized.
        self.no_optimize = true;
        Ok(Cond {
            entry: either.entry,
            when_true: Exits::one(done, Edge::Jump),
            when_false: either.when_false,
        })
    }

    /// UDP to port 6081, Geneve version 0 and, if given, the VNI, over IPv4 or IPv6.
    fn geneve_check(&mut self, v6: bool, vni: Option<u32>) -> GenResult<Cond> {
        let rel = if v6 {
            OffRel::TranIpv6
        } else {
            OffRel::TranIpv4
        };
        let port = self.port_in(v6, GENEVE_PORT, PortProto::One(IPPROTO_UDP), Dir::Dst)?;
        // The version is the top two bits of the first byte after the UDP header.
        let version = self.mcmp(rel, 8, Byte, 0, 0xc0);
        let mut b = self.and(port, version);
        if let Some(vni) = vni {
            if vni > MAX_VNI {
                return Err(format!("Geneve VNI {vni} greater than maximum {MAX_VNI}"));
            }
            let id = self.mcmp(rel, 12, Word, vni << 8, 0xffff_ff00);
            b = self.and(b, id);
        }
        Ok(b)
    }

    fn jump_with(&mut self, from: Block, to: Block, arg: Value) {
        self.f.set_term(
            from,
            Terminator::Jump(Target {
                block: to,
                args: thin_vec![arg],
            }),
        );
    }

    /// Emits, from `entry` on, the code computing the inner packet's offsets (kept in
    /// `registers`: link type, link header, link payload), switches the link state to them, and
    /// returns the block where that code ends (its jump is unpatched).
    fn geneve_offsets(&mut self, entry: Block, udp_var: Value, registers: [Register; 3]) -> Block {
        let f = &mut self.f;
        let k = self
            .link
            .off_linkpl
            .constant
            .wrapping_add(self.link.off_nl)
            .wrapping_add(8);
        let kv = f.iconst(entry, k);
        let geneve = f.push(entry, Inst::Binary(BinOp::Add, udp_var, kv));
        let two = f.iconst(entry, 2);
        let protocol_field = f.push(entry, Inst::Binary(BinOp::Add, geneve, two));
        // Header length: 8 bytes plus the option length, in 4-byte words in the first byte.
        let first = load(f, entry, geneve, 0, Byte);
        let mask = f.iconst(entry, 0x3f);
        let words = f.push(entry, Inst::Binary(BinOp::And, first, mask));
        let four = f.iconst(entry, 4);
        let opt_len = f.push(entry, Inst::Binary(BinOp::Mul, words, four));
        let eight = f.iconst(entry, 8);
        let hdr_len = f.push(entry, Inst::Binary(BinOp::Add, opt_len, eight));
        let payload = f.push(entry, Inst::Binary(BinOp::Add, hdr_len, geneve));
        let protocol = load(f, entry, geneve, 2, Half);
        let teb = f.iconst(entry, ETHERTYPE_TEB);

        // An inner Ethernet frame: its type field and payload follow its 12 bytes of addresses.
        let ethernet = f.create_block();
        let twelve = f.iconst(ethernet, 12);
        let eth_type = f.push(ethernet, Inst::Binary(BinOp::Add, payload, twelve));
        let two = f.iconst(ethernet, 2);
        let eth_payload = f.push(ethernet, Inst::Binary(BinOp::Add, eth_type, two));

        let done = f.create_block();
        let linktype = f.add_param(done);
        let linkpl = f.add_param(done);
        f.set_term(
            entry,
            Terminator::Branch {
                op: CmpOp::Eq,
                lhs: protocol,
                rhs: teb,
                then_: Target {
                    block: ethernet,
                    args: ThinVec::new(),
                },
                else_: Target {
                    block: done,
                    args: thin_vec![protocol_field, payload],
                },
            },
        );
        f.set_term(
            ethernet,
            Terminator::Jump(Target {
                block: done,
                args: thin_vec![eth_type, eth_payload],
            }),
        );
        f.set_term(done, Terminator::Jump(UNPATCHED.into()));

        let [linktype_reg, linkhdr_reg, linkpl_reg] = registers;
        for (block, register, value) in [
            (entry, linkhdr_reg, payload),
            (done, linktype_reg, linktype),
            (done, linkpl_reg, linkpl),
        ] {
            self.register_writes.push(RegisterWrite {
                block,
                register,
                value: Stored::Value(value),
            });
        }
        let l = &mut self.link;
        l.prevlinktype = l.linktype;
        l.off_prevlinkhdr = l.off_linkhdr;
        l.linktype = Dlt::En10mb;
        l.off_linkhdr = AbsOffset::runtime(payload, entry, linkhdr_reg);
        l.off_linktype = Some(AbsOffset::runtime(linktype, done, linktype_reg));
        l.off_linkpl = AbsOffset::runtime(linkpl, done, linkpl_reg);
        l.off_nl = 0;
        l.is_geneve = true;
        done
    }

    /// Inside Geneve, link-level address tests first check that the payload is an Ethernet
    /// frame: the link header and payload offsets differ (libpcap compares only their run-time
    /// parts). `None` outside Geneve.
    pub fn ethernet_header_check(&mut self) -> Option<Cond> {
        if !self.link.is_geneve {
            return None;
        }
        let (hdr, pl) = (
            self.link.off_linkhdr.runtime?,
            self.link.off_linkpl.runtime?,
        );
        let block = self.f.create_block();
        let hdr = self.runtime_use(block, hdr);
        let pl = self.runtime_use(block, pl);
        Some(self.branch(block, CmpOp::Eq, hdr, pl).not())
    }
}

fn load(f: &mut Function, block: Block, index: Value, offset: u32, size: LoadSize) -> Value {
    f.push(
        block,
        Inst::Load {
            index: Some(index),
            offset,
            size,
        },
    )
}

#[cfg(test)]
mod tests {
    use sift_ir::{Cache, Interpreter};

    use crate::{lower, LowerError, LowerErrorKind, Options};

    fn compile(expr: &str, linktype: u32) -> Result<sift_ir::Function, LowerError> {
        let ast = sift_syntax::parse(expr).expect("parses");
        lower(ast.as_ref(), &Options::new(linktype, 65535))
    }

    /// Ethernet / IPv4 (with `ip_options` words of options) / UDP 6081 / Geneve (VNI 100, one
    /// option word, protocol `protocol`) / [Ethernet] / IPv4 10.1.1.1 -> 10.2.2.2 / TCP port 80.
    fn packet(ip_options: u8, protocol: u16) -> Vec<u8> {
        let mut inner_ip = vec![
            0x45, 0, 0, 40, 0, 0, 0, 0, 64, 6, 0, 0, 10, 1, 1, 1, 10, 2, 2, 2,
        ];
        inner_ip.extend([0x30, 0x39, 0, 80]);
        inner_ip.extend([0; 16]);
        let mut geneve = vec![0x01, 0];
        geneve.extend(protocol.to_be_bytes());
        geneve.extend([0, 0, 100, 0, 0xaa, 0xbb, 0xcc, 0xdd]);
        if protocol == 0x6558 {
            geneve.extend([0xff; 6]);
            geneve.extend([0x00, 0x11, 0x22, 0x33, 0x44, 0x55, 0x08, 0x00]);
        }
        geneve.extend(inner_ip);
        let mut udp = vec![0x12, 0x34, 0x17, 0xc1, 0, 0, 0, 0];
        udp.extend(geneve);
        let ihl = 5 + ip_options;
        let mut ip = vec![0x40 | ihl, 0, 0, 0, 0, 0, 0, 0, 64, 17, 0, 0];
        ip.extend([192, 168, 0, 1, 192, 168, 0, 2]);
        ip.extend(vec![1; 4 * usize::from(ip_options)]);
        ip.extend(udp);
        let mut eth = vec![2, 0, 0, 0, 0, 1, 2, 0, 0, 0, 0, 2, 0x08, 0x00];
        eth.extend(ip);
        eth
    }

    fn matches(expr: &str, pkt: &[u8]) -> bool {
        let f = compile(expr, 1).unwrap();
        let interp = Interpreter::new(f).expect("the lowered IR verifies");
        interp.run(&mut Cache::new(), pkt, pkt.len() as u32) != 0
    }

    #[test]
    fn later_primitives_look_inside_the_geneve_payload() {
        for ip_options in [0, 2] {
            for protocol in [0x6558, 0x0800] {
                let p = packet(ip_options, protocol);
                assert!(matches("geneve", &p));
                assert!(matches("geneve 100", &p));
                assert!(!matches("geneve 101", &p));
                assert!(matches("geneve and ip host 10.1.1.1", &p));
                assert!(!matches("geneve and ip host 192.168.0.1", &p));
                assert!(matches("geneve and tcp dst port 80", &p));
                // Only an inner Ethernet frame has addresses.
                let ether = matches("geneve and ether src 00:11:22:33:44:55", &p);
                assert_eq!(ether, protocol == 0x6558);
            }
        }
    }

    #[test]
    fn a_truncated_geneve_header_rejects() {
        let p = packet(0, 0x6558);
        // The Geneve header starts at 14 + 20 + 8 = 42; its protocol type, which the offset code
        // reads even though no test needs it, ends 4 bytes later.
        assert!(!matches("geneve", &p[..45]));
        assert!(matches("geneve", &p[..46]));
    }

    /// A packet that is not Geneve: Ethernet (to ff:ff:ff:ff:ff:ff) / IPv4 10.1.1.1 -> 10.2.2.2
    /// / TCP port 80 (the inner frame of [`packet`]).
    fn plain() -> Vec<u8> {
        let p = packet(0, 0x6558);
        p[p.len() - 54..].to_vec()
    }

    #[test]
    fn where_geneve_did_not_match_its_offsets_read_as_zero() {
        // The offsets are absolute and their registers hold 0: `ip` reads its type field at
        // offset 0, as libpcap does when its scratch memory happens to be zero.
        let mut p = plain();
        assert!(matches("ip", &p));
        assert!(!matches("geneve or ip", &p));
        p[0] = 0x08;
        p[1] = 0x00;
        assert!(matches("geneve or ip", &p));
        // A Geneve packet takes the inner offsets.
        let g = packet(2, 0x0800);
        assert!(matches("geneve 100 or ip host 10.9.9.9", &g));
        assert!(matches("geneve 101 or ip", &g) == (g[0..2] == [8, 0]));
    }

    #[test]
    fn where_geneve_did_not_match_its_offsets_read_an_earlier_register() {
        // `ether[0] = 2` keeps 0, ether[0] and 2 in registers 0, 1 and 2 and gives them back;
        // `geneve` takes registers 2 (link type offset), 3 and 4, so where it fails `ip` reads
        // its type field at offset 2.
        let expr = "ether[0] = 2 or geneve or ip";
        let mut p = plain();
        p[0] = 0;
        assert!(!matches(expr, &p));
        p[2] = 0x08;
        p[3] = 0x00;
        assert!(matches(expr, &p));
    }

    #[test]
    fn each_geneve_keeps_three_registers() {
        let n = |k: usize| vec!["geneve"; k].join(" and ");
        assert!(compile(&n(5), 1).is_ok());
        let err = compile(&n(6), 1).unwrap_err();
        assert_eq!(
            err.kind,
            LowerErrorKind::Rejected("too many registers needed to evaluate expression".into())
        );
    }

    #[test]
    fn the_link_layer_becomes_ethernet() {
        // Raw IP and Linux cooked captures have no VLAN support, but their Geneve payload does.
        for linktype in [101, 113] {
            assert!(compile("vlan", linktype).is_err());
            assert!(compile("geneve and vlan and ip", linktype).is_ok());
        }
        assert!(compile("geneve and protochain 6", 1).is_err());
    }
}
