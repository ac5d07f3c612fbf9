"""sift against libpcap 1.10 on the shared corpus: the same accept/reject decision for every
expression of the shared lists, and the same ``bpf_filter`` value for every packet.

libpcap compiles each expression against the capture file itself (``pcap_open_offline``,
optimizer on, netmask 0), as ``tcpdump -r FILE EXPR`` does; sift compiles it for the file's link
type and snapshot length and runs the whole capture through ``Filter.match_buffer``.
"""

from __future__ import annotations

import array
from pathlib import Path

import pytest

import sift
from conftest import load_tsv
import pcap_oracle

# (capture, LINKTYPE name in the shared lists, LINKTYPE number)
CAPTURES = [
    ("eth.pcap", "EN10MB", 1),
    ("raw.pcap", "RAW", 101),
    ("sll.pcap", "LINUX_SLL", 113),
    ("null.pcap", "NULL", 0),
]

# libpcap refuses a filter its optimizer reduces to "reject everything"; sift compiles it into a
# filter that rejects every packet, which is the same verdict on every packet.
REJECTS_ALL = "expression rejects all packets"


def expressions(shared: Path, name: str) -> list[str]:
    exprs_dir = shared / "exprs"
    listed = [
        expr
        for table in ("libpcap-accept.tsv", "libpcap-reject.tsv")
        for lt, expr in load_tsv(exprs_dir / table)
        if lt == name
    ]
    if name == "EN10MB":
        listed += (exprs_dir / "random.txt").read_text().splitlines()
    return listed


@pytest.mark.parametrize("capture,name,linktype", CAPTURES, ids=[c[0] for c in CAPTURES])
def test_shared_expressions_agree_with_libpcap(shared: Path, capture: str, name: str, linktype: int) -> None:
    path = shared / "corpus" / "synthetic" / capture
    if not path.exists():
        pytest.skip(f"{path} missing")
    with pcap_oracle.Savefile(str(path)) as savefile:
        packets, status = savefile.packets()
        assert status == -2, "libpcap could not read the whole capture"
        snaplen = savefile.snaplen
        exprs = expressions(shared, name)
        assert exprs, f"no expressions for {name}"
        buffer = b"".join(p.data for p in packets)
        lengths = array.array("I", (p.caplen for p in packets))
        wirelens = array.array("I", (p.wirelen for p in packets))
        offsets = array.array("Q", [0] * len(packets))
        for i in range(1, len(packets)):
            offsets[i] = offsets[i - 1] + lengths[i - 1]

        problems: list[str] = []
        compiled = refused = verdicts = 0
        for expr in exprs:
            expected = savefile.compile(expr)
            try:
                f = sift.Filter(expr, linktype, snaplen)
            except sift.FilterError as e:
                refused += 1
                if not isinstance(expected, str):
                    problems.append(f"{expr!r}: libpcap accepts, sift refuses: {e.message}")
                elif REJECTS_ALL in expected:
                    problems.append(f"{expr!r}: libpcap rejects all packets, sift refuses: {e.message}")
                continue
            compiled += 1
            got = f.match_buffer(buffer, offsets, lengths, wirelens)
            if isinstance(expected, str):
                if REJECTS_ALL in expected:
                    if any(got):
                        problems.append(f"{expr!r}: libpcap rejects all packets, sift accepts some")
                else:
                    problems.append(f"{expr!r}: libpcap refuses ({expected}), sift accepts")
                continue
            want = [expected.run(p.data, p.wirelen) for p in packets]
            verdicts += len(want)
            if list(got) != want:
                bad = [i for i in range(len(want)) if got[i] != want[i]]
                problems.append(
                    f"{expr!r}: {len(bad)} packets differ, first #{bad[0]}: "
                    f"sift {got[bad[0]]}, libpcap {want[bad[0]]}"
                )
        print(
            f"{capture}: {len(exprs)} expressions ({compiled} compiled, {refused} refused), "
            f"{len(packets)} packets, {verdicts} verdicts compared with {pcap_oracle.version()}"
        )
        assert not problems, f"{len(problems)} disagreements:\n" + "\n".join(problems[:20])
