//! Packets placed so that their last captured byte is the last byte before a page the process
//! may not read (PROT_NONE). Any read past the captured bytes, by one byte or by a wide
//! coalesced load, kills the test with SIGSEGV instead of passing by luck. Every truncation
//! length of every packet is run, through the single and the batch entry, for expressions whose
//! loads reach far into the packet (and the JIT's results are compared with the interpreter's).

mod common;

use common::{bytecode, option_sets, GuardedPage};
use sift_bytecode::Cache;
use sift_jit::{JitFilter, PacketRef};
use sift_testgen::generate_packets;

#[test]
fn no_read_crosses_the_end_of_the_packet() {
    if !sift_jit::supported() {
        return;
    }
    let exprs = [
        "ip src 10.1.1.1 and ip dst 10.2.2.2 and tcp src port 20 and tcp dst port 30",
        "tcp port 80 or udp port 53",
        "ip6 host fe80::1 and tcp",
        "ether host 00:11:22:33:44:55 or ether dst 66:77:88:99:aa:bb",
        "tcp[tcpflags] & tcp-syn != 0 and tcp[13] & 2 = 2",
        "ip[2:2] > 1000 or ip[40:4] = 0x01020304",
        "vlan and ip and udp and udp[8:4] = 0",
        "host 10.0.0.1 or host 10.0.0.2 or host 10.0.0.3 or host 10.0.0.4 or host 10.0.0.5",
    ];
    let mut page = GuardedPage::new();
    let packets = generate_packets(1, 0x6a4d, 80);
    let mut cache = Cache::new();
    let mut runs = 0;
    for expr in exprs {
        for optimize in [true, false] {
            let program = bytecode(expr, 1, optimize).expect(expr);
            for options in option_sets() {
                let jit = JitFilter::compile_with(&program, &options).unwrap();
                for p in &packets {
                    let bytes = &p.data[..p.data.len().min(page.page)];
                    for n in 0..=bytes.len() {
                        let placed = page.place(&bytes[..n]);
                        let want = program.run(&mut cache, placed, p.wire_len);
                        assert_eq!(jit.run(placed, p.wire_len), want, "{expr} caplen {n}");
                        let mut out = [u32::MAX];
                        jit.run_refs(&[PacketRef::new(placed, p.wire_len)], &mut out);
                        assert_eq!(out[0], want, "{expr} caplen {n} (batch)");
                        runs += 1;
                    }
                }
            }
        }
    }
    eprintln!("{runs} runs against the guard page");
}
