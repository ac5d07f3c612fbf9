//! The native matchers never read past the end of a table's memory.
//!
//! Every allocation made while the tables are built (and while they change) comes from a
//! guard-page allocator: it ends exactly where an inaccessible page begins, so a probe that
//! read one byte past a leaf (an index not masked, a wrong mask, a slot size that does not
//! match the table's) would fault and kill this test. Freed blocks are unmapped, so a read of
//! a leaf an update replaced faults too. The matchers then look up packets of installed and
//! absent connections, damaged and truncated ones, one by one and in batches, on tables of
//! 0 to a few thousand keys (a single leaf, then trie levels), two- and six-word keys, and on a
//! leaf whose probes all start at its last slot and wrap round, and the answers are checked
//! against the Rust walk of the same table.
//!
//! Reads before a leaf would land in its reference counts rather than in a guard page, so
//! this test does not catch those; the code computes no negative offsets (indices are masked
//! unsigned values).

use std::alloc::{GlobalAlloc, Layout, System};
use std::num::NonZeroU64;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use sift_jit::demux_matcher::fixtures::{four_tuple, four_tuple_at};
use sift_jit::demux_matcher::{DemuxMatcher, BATCH};
use sift_jit::demux_table::{KeyHash, Slot, Table};
use sift_jit::key_extractor::{KeyProgram, NativeExtractor, PacketOrder, KEY_WORDS};
use sift_jit::PacketRef;
use sift_testgen::Rng;

const PAGE: usize = 4096;
/// Address space reserved for guarded blocks (never touched unless allocated).
const REGION: usize = 1 << 36;

/// Allocations go to guarded pages while `ARMED`; everything else to the system allocator.
struct Guarded;

static ARMED: AtomicBool = AtomicBool::new(false);
static BASE: AtomicUsize = AtomicUsize::new(0);
static NEXT: AtomicUsize = AtomicUsize::new(0);

fn region() -> usize {
    let base = BASE.load(Ordering::Acquire);
    if base != 0 {
        return base;
    }
    // SAFETY: an anonymous, inaccessible reservation; nothing else uses it.
    let p = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            REGION,
            libc::PROT_NONE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
            -1,
            0,
        )
    };
    assert_ne!(p, libc::MAP_FAILED);
    match BASE.compare_exchange(0, p as usize, Ordering::AcqRel, Ordering::Acquire) {
        Ok(_) => p as usize,
        Err(other) => {
            // SAFETY: our own reservation, unused.
            unsafe { libc::munmap(p, REGION) };
            other
        }
    }
}

fn guarded(addr: usize) -> bool {
    let base = BASE.load(Ordering::Acquire);
    base != 0 && addr >= base && addr < base + REGION
}

// SAFETY: blocks are either the system allocator's or distinct, suitably aligned ranges of
// pages made accessible for them alone (never handed out twice: the region is never reused).
unsafe impl GlobalAlloc for Guarded {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if !ARMED.load(Ordering::Relaxed) || layout.align() > PAGE || layout.size() == 0 {
            return System.alloc(layout);
        }
        let pages = layout.size().div_ceil(PAGE);
        let first = NEXT.fetch_add(pages + 1, Ordering::Relaxed);
        if (first + pages + 1) * PAGE > REGION {
            return std::ptr::null_mut();
        }
        let start = region() + first * PAGE;
        if libc::mprotect(
            start as *mut libc::c_void,
            pages * PAGE,
            libc::PROT_READ | libc::PROT_WRITE,
        ) != 0
        {
            return std::ptr::null_mut();
        }
        // The block ends where the guard page (the next one, left inaccessible) begins.
        let end = start + pages * PAGE;
        ((end - layout.size()) & !(layout.align() - 1)) as *mut u8
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        let addr = ptr as usize;
        if !guarded(addr) {
            return System.dealloc(ptr, layout);
        }
        let first = addr & !(PAGE - 1);
        let end = (addr + layout.size()).div_ceil(PAGE) * PAGE;
        // Back to inaccessible, memory returned: a later read faults.
        libc::munmap(first as *mut libc::c_void, end - first);
        libc::mmap(
            first as *mut libc::c_void,
            end - first,
            libc::PROT_NONE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE | libc::MAP_FIXED,
            -1,
            0,
        );
    }
}

#[global_allocator]
static ALLOCATOR: Guarded = Guarded;

fn packet(rng: &mut Rng, c: u64) -> Vec<u8> {
    let mut p = vec![0u8; 60];
    p[12] = 0x08;
    p[14] = 0x45;
    p[23] = 6;
    p[26..30].copy_from_slice(&(0x0a00_0000 | (c as u32 & 0xfff)).to_be_bytes());
    p[30..34].copy_from_slice(&(0xc0a8_0000 | (c as u32 >> 12 & 0xff)).to_be_bytes());
    p[34..36].copy_from_slice(&1024u16.to_be_bytes());
    p[36..38].copy_from_slice(&80u16.to_be_bytes());
    match rng.next_u64() % 8 {
        0 => p.truncate((rng.next_u64() % 60) as usize),
        1 => p[14] = 0x40 | (rng.next_u64() % 16) as u8,
        _ => {}
    }
    p
}

/// The key the matcher computes: the extractor's, in packet order.
fn key_of<const W: usize>(x: &NativeExtractor, order: &PacketOrder, p: &[u8]) -> Option<[u64; W]> {
    let mut key = [0u64; KEY_WORDS];
    x.extract(p, 60, &mut key).then(|| {
        order.apply(&mut key);
        std::array::from_fn(|i| key[i])
    })
}

fn probe_guarded_tables<const W: usize>(program: KeyProgram, seed: u64) {
    let matcher = DemuxMatcher::<W>::compile(&program).unwrap();
    // Batches over these tables in passes too (by default they take one pass).
    let in_passes = DemuxMatcher::<W>::compile_one_pass_up_to(&program, 0).unwrap();
    let extractor = NativeExtractor::compile(&program).unwrap();
    let order = program.packet_order();
    let mut rng = Rng::new(seed);
    let mut table = Table::<W>::new(KeyHash::random());
    let mut checked = 0;
    for size in [0usize, 1, 5, 40, 300, 3000] {
        ARMED.store(true, Ordering::SeqCst);
        // Grow to `size` keys with some churn; keep an older version alive as readers would.
        let before = table.clone();
        while table.len() < size {
            let c = rng.next_u64() % 4000;
            if let Some(k) = key_of::<W>(&extractor, &order, &packet(&mut Rng::new(1), c)) {
                let tag = NonZeroU64::new(c + 1).unwrap();
                table.insert(k, tag);
            }
            if rng.next_u64().is_multiple_of(5) {
                let c = rng.next_u64() % 4000;
                if let Some(k) = key_of::<W>(&extractor, &order, &packet(&mut Rng::new(1), c)) {
                    table.remove(&k);
                }
            }
        }
        ARMED.store(false, Ordering::SeqCst);
        table.check_layout().unwrap();
        for t in [&before, &table] {
            let packets: Vec<Vec<u8>> = (0..500)
                .map(|_| {
                    let c = rng.next_u64() % 4200;
                    packet(&mut rng, c)
                })
                .collect();
            for p in &packets {
                let want = key_of::<W>(&extractor, &order, p).and_then(|k| t.slot(&k));
                let got = matcher.lookup(t, p, 60);
                assert_eq!(got.map(|s| s as *const _), want.map(|s| s as *const _));
                checked += 1;
            }
            let refs: Vec<PacketRef> = packets.iter().map(|p| PacketRef::new(p, 60)).collect();
            for chunk in refs.chunks(BATCH) {
                for m in [&matcher, &in_passes] {
                    let mut out = [None; BATCH];
                    m.lookup_batch(t, chunk, &mut out);
                }
            }
        }
    }
    assert!(checked >= 6000);
}

/// A table whose keys all start their probe at the leaf's last slot (seeds that make a
/// connection key's hash its address word, addresses alike in the low byte): every probe reads
/// the slot next to the guard page and wraps round to the leaf's first, hits and misses that
/// walk the whole cluster, checked against the Rust walk.
fn probe_guarded_cluster() {
    let program = four_tuple([0, 0, 1, 1]);
    let matchers = [
        DemuxMatcher::<2>::compile(&program).unwrap(),
        DemuxMatcher::<2>::compile_one_pass_up_to(&program, 0).unwrap(),
    ];
    let extractor = NativeExtractor::compile(&program).unwrap();
    let order = program.packet_order();
    let connection = |c: u64| {
        let mut p = packet(&mut Rng::new(0), 0);
        p.resize(60, 0);
        p[12] = 0x08;
        p[14] = 0x45;
        p[23] = 6;
        // Destination byte 0: bits 0-7 of the address word in packet order.
        p[30] = 0xff;
        p[31] = c as u8;
        p
    };
    let key = |p: &[u8]| key_of::<2>(&extractor, &order, p).expect("an undamaged packet");
    // Every connection has the same second key word: the hash of a key is its first word.
    let hash = KeyHash::first_word_for(key(&connection(0))[1]);
    ARMED.store(true, Ordering::SeqCst);
    let mut table = Table::<2>::new(hash);
    // 40 keys: a leaf of 256 slots, every probe starting at slot 255.
    for c in 0..40 {
        let tag = NonZeroU64::new(c + 1).unwrap();
        table.insert(key(&connection(c)), tag);
    }
    ARMED.store(false, Ordering::SeqCst);
    table.check_layout().unwrap();
    assert_eq!(hash.hash(&key(&connection(7))) & 0xff, 0xff);
    let packets: Vec<Vec<u8>> = (0..64).map(connection).collect();
    let want: Vec<_> = packets.iter().map(|p| table.slot(&key(p))).collect();
    assert_eq!(want.iter().filter(|w| w.is_some()).count(), 40);
    let refs: Vec<PacketRef> = packets.iter().map(|p| PacketRef::new(p, 60)).collect();
    for m in &matchers {
        for (p, w) in packets.iter().zip(&want) {
            let got = m.lookup(&table, p, 60);
            assert_eq!(got.map(|s| s as *const _), w.map(|s| s as *const _));
        }
        for (chunk, w) in refs.chunks(BATCH).zip(want.chunks(BATCH)) {
            let mut out = [None; BATCH];
            m.lookup_batch(&table, chunk, &mut out);
            let values: Vec<_> = w.iter().map(|s| s.and_then(Slot::value)).collect();
            assert_eq!(&out[..chunk.len()], &values[..]);
        }
    }
}

#[test]
fn native_probes_stay_inside_guarded_tables() {
    if !sift_jit::supported() {
        return;
    }
    // The allocator works: an armed block ends at a page boundary (the guard page's start).
    ARMED.store(true, Ordering::SeqCst);
    let probe = vec![0u64; 3];
    ARMED.store(false, Ordering::SeqCst);
    assert!(guarded(probe.as_ptr() as usize));
    assert_eq!((probe.as_ptr() as usize + 24) % PAGE, 0);
    drop(probe);
    probe_guarded_tables::<2>(four_tuple([0, 0, 1, 1]), 7);
    probe_guarded_tables::<6>(four_tuple([0, 2, 5, 3]), 8);
    // Both addresses and both ports each read with one load, in packet order.
    probe_guarded_tables::<2>(four_tuple_at([0, 0, 1, 1], [0, 32, 0, 16]), 9);
    probe_guarded_cluster();
}
