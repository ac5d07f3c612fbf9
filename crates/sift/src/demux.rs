//! Many filters, one pass per packet: [`Demux`] compiles filters as [`Filter`] does and merges
//! them in [`sift_demux`]'s decision structure (shapes of canonical atoms with hashed keys,
//! priorities, copy delivery, live updates that never block readers).

use sift_demux::InsertError;
use sift_ir::Function;

pub use sift_demux::{Delivery, FilterId, LocalReader, Matches, Placement, Reader, Stats};
/// Fragment dispatch (MPF section 3): IP fragments follow their datagram's first fragment.
pub use sift_demux::{
    DropReason, FragmentConfig, FragmentDemux, FragmentError, FragmentOutcome, FragmentStats,
    Overflow, Recipients, Release, Verdict,
};

use crate::{compile_optimized_ir, Error, Filter, Options};

/// A demultiplexer for captures of one link type.
///
/// Filters are tried by priority, highest first; among equal priorities the earlier insertion
/// wins. A packet goes to the first matching [`Delivery::Exclusive`] filter, and to every
/// matching [`Delivery::Copy`] filter ranked before it (CSPF's "also deliver to lower
/// priorities"); [`Reader::match_all`] lists every matching filter instead.
#[derive(Debug)]
pub struct Demux {
    inner: sift_demux::Demux,
    options: Options,
}

fn insert_error(e: InsertError) -> Error {
    match e {
        InsertError::InvalidIr(e) => Error::InvalidIr(e),
    }
}

impl Demux {
    /// An empty demultiplexer for packets of `linktype`; accepting filters keep `snaplen`
    /// bytes (only matters for filters that return computed lengths).
    pub fn new(linktype: u32, snaplen: u32) -> Demux {
        Demux::with_options(Options::new(linktype, snaplen))
    }

    pub fn with_options(options: Options) -> Demux {
        Demux {
            inner: sift_demux::Demux::new(),
            options,
        }
    }

    /// Compiles `expr` and installs it.
    pub fn insert(
        &mut self,
        expr: &str,
        priority: i32,
        delivery: Delivery,
    ) -> Result<FilterId, Error> {
        let ir = compile_optimized_ir(expr, &self.options)?;
        self.insert_ir(&ir, priority, delivery)
    }

    /// Installs a compiled filter (any language the facade accepts).
    pub fn insert_filter(
        &mut self,
        filter: &Filter,
        priority: i32,
        delivery: Delivery,
    ) -> Result<FilterId, Error> {
        self.insert_ir(filter.optimized_ir(), priority, delivery)
    }

    /// Installs a filter given as IR (it is verified first).
    pub fn insert_ir(
        &mut self,
        ir: &Function,
        priority: i32,
        delivery: Delivery,
    ) -> Result<FilterId, Error> {
        self.inner
            .insert(ir, priority, delivery)
            .map_err(insert_error)
    }

    /// Removes a filter; `false` for an unknown id. No match that starts afterwards reports it.
    pub fn remove(&mut self, id: FilterId) -> bool {
        self.inner.remove(id)
    }

    /// Several updates published together when the batch is dropped: readers see all or none
    /// of them, and state shared between filters (the merged payload search) is rebuilt once
    /// instead of after each update.
    pub fn batch(&mut self) -> Batch<'_> {
        Batch {
            inner: self.inner.batch(),
        }
    }

    /// The installed filters that may match a packet `expr` matches (exact for filters that
    /// differ only in constants, conservative otherwise: never misses an overlap).
    pub fn overlaps(&self, expr: &str) -> Result<Vec<FilterId>, Error> {
        let ir = compile_optimized_ir(expr, &self.options)?;
        self.inner.overlaps(&ir).map_err(insert_error)
    }

    /// A handle for matching, on any thread, concurrently with updates.
    pub fn reader(&self) -> Reader {
        self.inner.reader()
    }

    /// How a filter is represented (keyed in a shape's table, or run whole).
    pub fn placement(&self, id: FilterId) -> Option<Placement> {
        self.inner.placement(id)
    }

    pub fn stats(&self) -> Stats {
        self.inner.stats()
    }

    pub fn len(&self) -> usize {
        self.inner.len()
    }

    pub fn is_empty(&self) -> bool {
        self.inner.is_empty()
    }
}

/// Updates of a [`Demux`] published together (see [`Demux::batch`]).
pub struct Batch<'a> {
    inner: sift_demux::Batch<'a>,
}

impl Batch<'_> {
    /// Installs a compiled filter, as [`Demux::insert_filter`] does.
    pub fn insert_filter(
        &mut self,
        filter: &Filter,
        priority: i32,
        delivery: Delivery,
    ) -> Result<FilterId, Error> {
        self.inner
            .insert(filter.optimized_ir(), priority, delivery)
            .map_err(insert_error)
    }

    pub fn remove(&mut self, id: FilterId) -> bool {
        self.inner.remove(id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn eth_ipv4_tcp(src: [u8; 4], sport: u16, dport: u16) -> Vec<u8> {
        let mut p = vec![0u8; 54];
        p[12] = 0x08;
        p[14] = 0x45;
        p[23] = 6;
        p[26..30].copy_from_slice(&src);
        p[34..36].copy_from_slice(&sport.to_be_bytes());
        p[36..38].copy_from_slice(&dport.to_be_bytes());
        p
    }

    #[test]
    fn priorities_copies_and_removal() {
        let mut d = Demux::new(1, 262144);
        let web = d.insert("tcp dst port 80", 0, Delivery::Exclusive).unwrap();
        let host = d
            .insert("src host 10.0.0.1", 5, Delivery::Exclusive)
            .unwrap();
        let monitor = d.insert("tcp", 10, Delivery::Copy).unwrap();
        let reader = d.reader();
        let mut m = Matches::new();
        reader.match_packet(&eth_ipv4_tcp([10, 0, 0, 1], 1234, 80), 54, &mut m);
        assert_eq!(m.exclusive(), Some(host));
        assert_eq!(m.delivered(), &[monitor, host]);
        reader.match_packet(&eth_ipv4_tcp([10, 0, 0, 2], 1234, 80), 54, &mut m);
        assert_eq!(m.exclusive(), Some(web));
        assert!(d.remove(web));
        assert!(!d.remove(web));
        reader.match_packet(&eth_ipv4_tcp([10, 0, 0, 2], 1234, 80), 54, &mut m);
        assert_eq!(m.exclusive(), None);
        assert_eq!(m.delivered(), &[monitor]);
        assert_eq!(
            d.overlaps("src host 10.0.0.1 and tcp").unwrap(),
            vec![host, monitor]
        );
    }

    #[test]
    fn bad_expressions_are_errors() {
        let mut d = Demux::new(1, 65535);
        let e = d
            .insert("tcp port 99999", 0, Delivery::Exclusive)
            .unwrap_err();
        assert!(e.render("tcp port 99999").contains('^'));
    }
}
