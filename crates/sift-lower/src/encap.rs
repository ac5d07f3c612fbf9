//! Encapsulations that move every later offset: `vlan`, `mpls`, `pppoes` (and `pppoed`, which
//! does not). libpcap changes its offsets when it parses these primitives, so they affect every
//! primitive to their right in the expression, whatever the parentheses.

use sift_ir::LoadSize::{Byte, Half, Word};

use crate::cond::Cond;
use crate::gen::{Gen, GenResult, OffRel};
use crate::linktype::*;

const PPP_MPLS_UCAST: u32 = 0x0281;

impl Gen {
    pub fn vlan(&mut self, id: Option<u32>) -> GenResult<Cond> {
        if self.link.label_stack_depth > 0 {
            return Err("no VLAN match after MPLS".into());
        }
        if self.link.linktype != Dlt::En10mb {
            return Err(format!(
                "no VLAN support for {}",
                self.link.linktype.description()
            ));
        }
        let b0 = self.linktype(ETHERTYPE_8021Q)?;
        let b1 = self.linktype(ETHERTYPE_8021AD)?;
        let b1 = self.or(b0, b1);
        let b2 = self.linktype(ETHERTYPE_8021QINQ)?;
        let mut b0 = self.or(b1, b2);
        if let Some(set) = self.member_set {
            let b1 = self.member_cmp(OffRel::LinkPl, &[0], Half, 0x0fff, set);
            b0 = self.and(b0, b1);
        } else if let Some(id) = id {
            if id > 0x0fff {
                return Err(format!("VLAN tag {id} greater than maximum 4095"));
            }
            let b1 = self.mcmp(OffRel::LinkPl, 0, Half, id, 0x0fff);
            b0 = self.and(b0, b1);
        }
        self.link.off_linkpl = self.link.off_linkpl.plus(4);
        if let Some(t) = self.link.off_linktype.as_mut() {
            *t = t.plus(4);
        }
        self.link.vlan_stack_depth += 1;
        Ok(b0)
    }

    pub fn mpls(&mut self, label: Option<u32>) -> GenResult<Cond> {
        let mut b0 = if self.link.label_stack_depth > 0 {
            self.mcmp(OffRel::PrevMplsHdr, 2, Byte, 0, 0x01)
        } else {
            match self.link.linktype {
                Dlt::En10mb => self.linktype(ETHERTYPE_MPLS)?,
                Dlt::Ppp => self.linktype(PPP_MPLS_UCAST)?,
                other => return Err(format!("no MPLS support for {}", other.description())),
            }
        };
        if let Some(label) = label {
            if label > 0xfffff {
                return Err(format!("MPLS label {label} greater than maximum 1048575"));
            }
            let b1 = self.mcmp(OffRel::LinkPl, 0, Word, label << 12, 0xffff_f000);
            b0 = self.and(b0, b1);
        }
        self.link.off_nl_nosnap += 4;
        self.link.off_nl += 4;
        self.link.label_stack_depth += 1;
        Ok(b0)
    }

    pub fn pppoed(&mut self) -> GenResult<Cond> {
        self.linktype(ETHERTYPE_PPPOED)
    }

    pub fn pppoes(&mut self, session: Option<u32>) -> GenResult<Cond> {
        let mut b0 = self.linktype(ETHERTYPE_PPPOES)?;
        if let Some(s) = session {
            if s > 0xffff {
                return Err(format!(
                    "PPPoE session number {s} greater than maximum 65535"
                ));
            }
            let b1 = self.mcmp(OffRel::LinkPl, 0, Word, s, 0x0000_ffff);
            b0 = self.and(b0, b1);
        }
        // The PPP header starts 6 bytes into the PPPoE header; its protocol field is the link type.
        // (After `geneve` these offsets keep the run-time part of the payload's offset.)
        let l = &mut self.link;
        l.prevlinktype = l.linktype;
        l.off_prevlinkhdr = l.off_linkhdr;
        l.linktype = Dlt::Ppp;
        l.is_geneve = false;
        l.off_linkhdr = l.off_linkpl.plus(l.off_nl.wrapping_add(6));
        l.off_linktype = Some(l.off_linkhdr);
        l.off_linkpl = l.off_linkhdr.plus(2);
        l.off_nl = 0;
        l.off_nl_nosnap = 0;
        Ok(b0)
    }

    /// `llc`: an 802.2 frame (Ethernet only among sift's link types).
    pub fn llc(&mut self, kind: Option<&str>) -> GenResult<Cond> {
        if self.link.linktype != Dlt::En10mb {
            return Err(format!(
                "'llc' not supported for {}",
                self.link.linktype.description()
            ));
        }
        let is_8023 = self.cmp_gt(OffRel::LinkType, 0, Half, ETHERMTU).not();
        let not_raw = self.cmp(OffRel::Llc, 0, Half, 0xffff).not();
        let base = self.and(is_8023, not_raw);
        let Some(kind) = kind else {
            return Ok(base);
        };
        let control = match kind.to_ascii_lowercase().as_str() {
            // I frames: low bit of the control field clear.
            "i" => self.jset(OffRel::Llc, 2, Byte, 0x01).not(),
            // S frames: low two bits 01.
            "s" => self.mcmp(OffRel::Llc, 2, Byte, 0x01, 0x03),
            // U frames: low two bits 11.
            "u" => self.mcmp(OffRel::Llc, 2, Byte, 0x03, 0x03),
            other => {
                let (value, mask) = llc_subtype(other)
                    .ok_or_else(|| format!("unknown LLC type name \"{kind}\""))?;
                self.mcmp(OffRel::Llc, 2, Byte, value, mask)
            }
        };
        Ok(self.and(base, control))
    }
}

/// LLC S-frame and U-frame subtypes by name: (value, mask) of the control field.
fn llc_subtype(name: &str) -> Option<(u32, u32)> {
    Some(match name {
        "rr" => (0x01, 0x0f),
        "rnr" => (0x05, 0x0f),
        "rej" => (0x09, 0x0f),
        "ui" => (0x03, 0xef),
        "ua" => (0x63, 0xef),
        "disc" => (0x43, 0xef),
        "dm" => (0x0f, 0xef),
        "sabme" => (0x6f, 0xef),
        "test" => (0xe3, 0xef),
        "xid" => (0xaf, 0xef),
        "frmr" => (0x87, 0xef),
        _ => return None,
    })
}
