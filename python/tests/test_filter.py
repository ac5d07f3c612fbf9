"""sift.Filter: per-packet and batch matching agree, every accepted input form, errors with
positions, and the small things (properties, debug views, pickling, threads)."""

from __future__ import annotations

import array
import pickle
import threading
from pathlib import Path

import pytest

import sift

try:
    import numpy as np
except ImportError:  # the batch API itself does not need NumPy
    np = None

needs_numpy = pytest.mark.skipif(np is None, reason="numpy not installed")

EXPRESSIONS = [
    "",
    "tcp port 80",
    "ip and udp",
    "vlan and ip6",
    "icmp[icmptype] == icmp-echo or arp",
    "ip[2:2] > 100",
    "ether broadcast or ether multicast",
    "not ip and not ip6",
]


def eth_tcp(dport: int, length: int = 60) -> bytes:
    """An Ethernet/IPv4/TCP packet to ``dport``, zero-padded to ``length`` bytes."""
    p = bytearray(max(length, 54))
    p[12:14] = b"\x08\x00"
    p[14] = 0x45
    p[16:18] = (40).to_bytes(2, "big")
    p[23] = 6
    p[36:38] = dport.to_bytes(2, "big")
    return bytes(p[:length])


@pytest.fixture(scope="module")
def records(shared: Path) -> list[sift.Record]:
    return list(sift.read_capture(shared / "corpus" / "synthetic" / "eth.pcap"))


def layout(packets: list[bytes]) -> tuple[bytes, list[int], list[int]]:
    offsets, lengths, at = [], [], 0
    for p in packets:
        offsets.append(at)
        lengths.append(len(p))
        at += len(p)
    return b"".join(packets), offsets, lengths


def test_match_returns_bpf_filter_value() -> None:
    f = sift.Filter("tcp dst port 80", sift.LINKTYPE_ETHERNET, 65535)
    assert f.match(eth_tcp(80)) == 65535
    assert f.match(eth_tcp(81)) == 0
    assert f.matches(eth_tcp(80)) and not f.matches(eth_tcp(81))
    # Cut before the port: the load is out of bounds and rejects, whatever the wire length.
    assert f.match(eth_tcp(80)[:36], wirelen=60) == 0
    assert sift.Filter("").match(b"") == 262144


def test_wirelen_is_used() -> None:
    f = sift.Filter("greater 100")
    assert f.match(b"\0" * 60) == 0
    assert f.match(b"\0" * 60, 200) == 262144
    assert f.match(b"\0" * 60, wirelen=200) == 262144
    r = sift.Record(b"\0" * 60, wirelen=200)
    assert f.match(r) == 262144
    assert f.match(r, 60) == 0


@pytest.mark.parametrize("expr", EXPRESSIONS)
def test_batch_equals_per_packet(records: list[sift.Record], expr: str) -> None:
    f = sift.Filter(expr)
    one_by_one = [f.match(r.data, r.wirelen) for r in records]
    assert any(one_by_one) or expr == "not ip and not ip6"
    assert list(f.match_many(records)) == one_by_one
    assert list(f.match_many([r.data for r in records], [r.wirelen for r in records])) == one_by_one
    buffer, offsets, lengths = layout([r.data for r in records])
    wirelens = [r.wirelen for r in records]
    assert list(f.match_buffer(buffer, offsets, lengths, wirelens)) == one_by_one


def test_batch_input_forms(records: list[sift.Record]) -> None:
    f = sift.Filter("tcp or udp port 53")
    data = [r.data for r in records[:200]]
    expect = [f.match(d) for d in data]
    assert list(f.match_many(data)) == expect
    assert list(f.match_many(tuple(data))) == expect
    assert list(f.match_many(iter(data))) == expect
    assert list(f.match_many([bytearray(d) for d in data])) == expect
    assert list(f.match_many([memoryview(d) for d in data])) == expect
    buffer, offsets, lengths = layout(data)
    for buf in (buffer, bytearray(buffer), memoryview(buffer)):
        for kind in ("I", "Q", "L", "i", "q"):
            got = f.match_buffer(buf, array.array(kind, offsets), array.array(kind, lengths))
            assert list(got) == expect, (type(buf), kind)


@needs_numpy
def test_batch_numpy(records: list[sift.Record]) -> None:
    f = sift.Filter("ip6 or arp")
    data = [r.data for r in records]
    expect = [f.match(d) for d in data]
    buffer, offsets, lengths = layout(data)
    raw = np.frombuffer(buffer, dtype=np.uint8)
    for dtype in (np.uint32, np.uint64, np.int64, np.int32):
        got = f.match_buffer(raw, np.array(offsets, dtype=dtype), np.array(lengths, dtype=dtype))
        assert list(got) == expect, dtype
    # A zero-copy NumPy view of the result, and results written into an existing array.
    assert (np.asarray(f.match_buffer(buffer, offsets, lengths)) == np.array(expect)).all()
    out = np.zeros(len(data), dtype=np.uint32)
    assert f.match_buffer(buffer, offsets, lengths, out=out) is out
    assert out.tolist() == expect
    out2 = np.zeros(len(data), dtype=np.uint32)
    f.match_many(data, out=out2)
    assert out2.tolist() == expect
    # Non-contiguous index arrays are read correctly.
    wide = np.zeros((len(data), 2), dtype=np.int64)
    wide[:, 0] = offsets
    assert list(f.match_buffer(buffer, wide[:, 0], np.array(lengths))) == expect


def test_batch_result_type() -> None:
    got = sift.Filter("tcp").match_many([eth_tcp(1), b"\0" * 20])
    assert isinstance(got, array.array) and got.typecode == "I"
    assert list(got) == [262144, 0]
    assert list(sift.Filter("tcp").match_many([])) == []
    assert list(sift.Filter("tcp").match_buffer(b"", [], [])) == []


def test_batch_errors() -> None:
    f = sift.Filter("tcp")
    with pytest.raises(IndexError, match="packet 1"):
        f.match_buffer(b"\0" * 10, [0, 5], [5, 6])
    with pytest.raises(ValueError, match="offsets has 2 entries, lengths 1"):
        f.match_buffer(b"\0" * 10, [0, 5], [5])
    with pytest.raises(ValueError, match=r"offsets\[1\] is negative"):
        f.match_buffer(b"\0" * 10, array.array("q", [0, -5]), [5, 5])
    with pytest.raises(ValueError, match="wirelens has 1 entries for 2 packets"):
        f.match_many([b"a", b"b"], [1])
    with pytest.raises(TypeError, match=r"packets\[1\]"):
        f.match_many([b"a", "not bytes"])
    with pytest.raises(TypeError):
        f.match("a string is not a packet")
    with pytest.raises(OverflowError):
        f.match(b"a", 1 << 32)
    with pytest.raises(ValueError, match="out has 3 entries for 2 packets"):
        f.match_many([b"a", b"b"], out=array.array("I", [0, 0, 0]))
    with pytest.raises(TypeError, match="out must be"):
        f.match_many([b"a", b"b"], out=array.array("d", [0, 0]))
    with pytest.raises(ValueError, match="read-only"):
        f.match_many([b"a"], out=memoryview(array.array("I", [0]).tobytes()).cast("I"))


def test_errors_carry_positions() -> None:
    with pytest.raises(sift.FilterError) as info:
        sift.Filter("tcp and")
    e = info.value
    assert isinstance(e, ValueError)
    assert e.kind == "syntax" and e.expression == "tcp and"
    assert (e.start, e.end) == (7, 7)
    assert "unexpected end of expression" in e.message
    assert e.rendered.splitlines()[-1].endswith("^") and "tcp and" in e.rendered
    assert str(e).startswith(e.message) and "^" in str(e)

    with pytest.raises(sift.FilterError) as info:
        sift.Filter("tcp port 99999")
    e = info.value
    assert e.kind == "semantic"
    assert e.expression[e.start : e.end] == "99999"
    assert e.rendered.splitlines()[-1] == "  |          ^^^^^"


def test_error_positions_are_string_indices() -> None:
    # Python indexes by code point; the position must not count UTF-8 bytes.
    expr = "ether host ñ or tcp port 99999"
    with pytest.raises(sift.FilterError) as info:
        sift.Filter(expr)
    e = info.value
    # "ñ" is two bytes: byte offsets would give (11, 13).
    assert (e.start, e.end) == (11, 12)
    assert expr[e.start : e.end] == "ñ"
    expr = "(ip) and ñ"
    with pytest.raises(sift.FilterError) as info:
        sift.Filter(expr)
    assert expr[info.value.start : info.value.end] == "ñ"


def test_link_type_errors() -> None:
    with pytest.raises(sift.FilterError) as info:
        sift.Filter("ip", linktype=105)
    assert "not supported" in info.value.message
    with pytest.raises(sift.FilterError) as info:
        sift.Filter("ether host 1:2:3:4:5:6", linktype=sift.LINKTYPE_RAW)
    assert info.value.kind == "semantic"


def test_properties_and_views() -> None:
    f = sift.Filter("udp port 53", linktype=sift.LINKTYPE_RAW, snaplen=1500)
    assert (f.expression, f.linktype, f.snaplen) == ("udp port 53", 101, 1500)
    assert repr(f) == 'sift.Filter("udp port 53", linktype=101, snaplen=1500)'
    assert "return" in f.ir().lower() or "ret" in f.ir().lower()
    assert f.optimized_ir()
    assert "ld" in f.bytecode()
    g = pickle.loads(pickle.dumps(f))
    assert (g.expression, g.linktype, g.snaplen) == (f.expression, f.linktype, f.snaplen)
    assert g.bytecode() == f.bytecode()


def test_threads_share_a_filter(records: list[sift.Record]) -> None:
    f = sift.Filter("tcp or (udp and port 53) or vlan")
    buffer, offsets, lengths = layout([r.data for r in records])
    expect = list(f.match_buffer(buffer, offsets, lengths))
    results: list[list[int]] = []
    lock = threading.Lock()

    def work() -> None:
        for _ in range(5):
            got = list(f.match_buffer(buffer, offsets, lengths))
            with lock:
                results.append(got)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(results) == 20 and all(r == expect for r in results)


def test_extensions() -> None:
    expr = 'tcp dst port in {80, 8000-8100} and payload contains nocase "get /"'
    with pytest.raises(sift.FilterError):
        sift.Filter(expr)
    f = sift.Filter(expr, extensions=True)
    p = bytearray(eth_tcp(8080, 70))
    p[46] = 0x50  # TCP data offset: 5 words
    p[54:60] = b"xGeT /"
    assert f.match(bytes(p))
    assert not f.match(bytes(p[:58]))
    assert not f.match(eth_tcp(8080, 70))
    again = pickle.loads(pickle.dumps(f))
    assert again.match(bytes(p)) and "extensions=True" in repr(again)
    d = sift.Demux(extensions=True)
    fid = d.insert(expr)
    assert d.match(bytes(p)) == fid
