"""Packets per second: sift's batch API against a per-packet Python loop, and against libpcap's
``bpf_filter`` called per packet through ctypes.

    python python/bench/bench_batch.py [CAPTURE] [--repeat N] [--expr EXPR ...]

By default it filters ../shared/corpus/synthetic/eth.pcap (replicated to about a million
packets) with a few representative expressions. Each measurement is the best of ``--repeat``
runs. The numbers are for one thread; batch calls release the GIL, so several threads scale.
"""

from __future__ import annotations

import argparse
import array
import sys
import time
from pathlib import Path

import sift

HERE = Path(__file__).resolve()
sys.path.insert(0, str(HERE.parents[1] / "tests"))

DEFAULT_EXPRS = [
    "tcp port 80",
    "ip and udp and dst port 53",
    "ip6 or arp or vlan",
    "tcp[tcpflags] & (tcp-syn|tcp-ack) == tcp-syn and not net 10.0.0.0/8",
]


def best(repeat: int, run) -> float:
    """The fastest of ``repeat`` runs, in seconds."""
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return min(times)


def main() -> None:
    default_capture = HERE.parents[3] / "shared" / "corpus" / "synthetic" / "eth.pcap"
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("capture", nargs="?", default=str(default_capture))
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--packets", type=int, default=1_000_000, help="replicate to this many")
    parser.add_argument("--expr", action="append", help="expression (repeatable)")
    args = parser.parse_args()

    reader = sift.read_capture(args.capture)
    records = list(reader)
    if not records:
        sys.exit(f"{args.capture}: no packets")
    linktype, snaplen = records[0].linktype, reader.snaplen or 262144
    copies = max(1, args.packets // len(records))
    records = records * copies
    data = [r.data for r in records]
    wirelens = array.array("I", (r.wirelen for r in records))
    lengths = array.array("I", (len(d) for d in data))
    offsets = array.array("Q", [0]) * len(data)
    at = 0
    for i, d in enumerate(data):
        offsets[i] = at
        at += len(d)
    buffer = b"".join(data)
    n = len(records)

    try:
        import pcap_oracle

        savefile = pcap_oracle.Savefile(args.capture)
    except OSError as e:
        print(f"(libpcap not available: {e})")
        savefile = None

    print(f"{n} packets ({len(buffer) / n:.0f} bytes on average) from {args.capture}, "
          f"sift {sift.__version__}, best of {args.repeat}")
    header = f"{'expression':<48} {'batch buffer':>13} {'batch list':>13} {'py loop':>13} {'libpcap loop':>13} {'buffer/loop':>11}"
    print(header)
    print("-" * len(header))
    for expr in args.expr or DEFAULT_EXPRS:
        f = sift.Filter(expr, linktype, snaplen)
        match = f.match
        t_buffer = best(args.repeat, lambda: f.match_buffer(buffer, offsets, lengths, wirelens))
        t_list = best(args.repeat, lambda: f.match_many(data, wirelens))
        t_loop = best(args.repeat, lambda: [match(d, w) for d, w in zip(data, wirelens)])
        expected = list(f.match_buffer(buffer, offsets, lengths, wirelens))
        assert expected == [match(d, w) for d, w in zip(data, wirelens)]
        t_pcap = float("nan")
        if savefile is not None:
            prog = savefile.compile(expr)
            if not isinstance(prog, str):
                run = prog.run
                t_pcap = best(args.repeat, lambda: [run(d, w) for d, w in zip(data, wirelens)])
                verdicts = [run(d, w) for d, w in zip(data, wirelens)]
                assert verdicts == expected, expr
        rate = lambda t: f"{n / t / 1e6:9.2f} M/s"  # noqa: E731
        print(f"{expr[:48]:<48} {rate(t_buffer):>13} {rate(t_list):>13} {rate(t_loop):>13} "
              f"{rate(t_pcap):>13} {t_loop / t_buffer:10.1f}x")


if __name__ == "__main__":
    main()
