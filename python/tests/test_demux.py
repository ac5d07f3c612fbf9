"""sift.Demux against running every filter alone (sift.Filter, itself checked against libpcap
in test_differential) in CSPF order, per packet and in batches; updates and errors."""

from __future__ import annotations

import array
import random
import threading
from pathlib import Path

import pytest

import sift

EXPRESSIONS = [
    "tcp port 80",
    "udp and dst port 53",
    "ip6",
    "arp",
    "vlan",
    "icmp or icmp6",
    "ip src net 10.0.0.0/8",
    "tcp[tcpflags] & tcp-syn != 0",
    "ether broadcast",
    "ip and greater 200",
    "not ip",
    "ip proto 47 or mpls",
]


@pytest.fixture(scope="module")
def records(shared: Path) -> list[sift.Record]:
    return list(sift.read_capture(shared / "corpus" / "synthetic" / "eth.pcap"))


def expected_delivery(installed: list[tuple[int, int, bool, sift.Filter]], r: sift.Record) -> list[int]:
    """CSPF by hand: by priority (higher first), then insertion order; copies continue the walk."""
    out = []
    for id, _priority, copy, f in sorted(installed, key=lambda t: (-t[1], t[0])):
        if f.match(r):
            out.append(id)
            if not copy:
                break
    return out


def install(demux: sift.Demux, seed: int) -> list[tuple[int, int, bool, sift.Filter]]:
    rng = random.Random(seed)
    installed = []
    for expr in EXPRESSIONS:
        priority, copy = rng.randint(-2, 2), rng.random() < 0.4
        id = demux.insert(expr, priority=priority, copy=copy)
        installed.append((id, priority, copy, sift.Filter(expr)))
    return installed


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_demux_equals_filters_run_alone(records: list[sift.Record], seed: int) -> None:
    demux = sift.Demux()
    installed = install(demux, seed)
    assert len(demux) == len(EXPRESSIONS)
    assert all(id in demux for id, *_ in installed)
    ids = [t[0] for t in installed]
    assert ids == sorted(ids) and ids[0] > 0
    expect = [expected_delivery(installed, r) for r in records]
    assert [demux.deliver(r) for r in records] == expect
    best = [e[0] if e else 0 for e in expect]
    assert [demux.match(r) for r in records] == best
    assert any(best) and not all(best)
    got = demux.match_many(records)
    assert isinstance(got, array.array) and got.typecode == "Q" and list(got) == best
    buffer = b"".join(r.data for r in records)
    lengths = [r.caplen for r in records]
    offsets, at = [], 0
    for n in lengths:
        offsets.append(at)
        at += n
    wirelens = [r.wirelen for r in records]
    assert list(demux.match_buffer(buffer, offsets, lengths, wirelens)) == best
    # Every accepting filter, whatever the delivery.
    for r in records[:300]:
        every = [id for id, _p, _c, f in sorted(installed, key=lambda t: (-t[1], t[0])) if f.match(r)]
        assert demux.deliver(r, all=True) == every


def test_remove_and_reinsert(records: list[sift.Record]) -> None:
    demux = sift.Demux()
    installed = install(demux, 7)
    gone = installed[::3]
    for id, *_ in gone:
        assert demux.remove(id)
        assert id not in demux
    assert not demux.remove(gone[0][0])
    kept = [t for t in installed if t not in gone]
    new_id = demux.insert("tcp", priority=5)
    assert new_id > max(t[0] for t in installed)
    kept.append((new_id, 5, False, sift.Filter("tcp")))
    assert len(demux) == len(kept)
    for r in records[:500]:
        assert demux.deliver(r) == expected_delivery(kept, r)


def test_empty_demux_and_errors() -> None:
    demux = sift.Demux(sift.LINKTYPE_RAW, 1500)
    assert (demux.linktype, demux.snaplen, len(demux)) == (101, 1500, 0)
    assert demux.match(b"\x45" + b"\0" * 19) == 0
    assert demux.deliver(b"") == []
    assert list(demux.match_buffer(b"", [], [])) == []
    with pytest.raises(sift.FilterError) as info:
        demux.insert("tcp port 99999")
    assert info.value.expression[info.value.start : info.value.end] == "99999"
    with pytest.raises(sift.FilterError):
        demux.insert("ether host 1:2:3:4:5:6")  # no Ethernet header on raw IP
    assert len(demux) == 0
    id = demux.insert("udp port 53")
    assert demux.placement(id) in ("keyed", "residual")
    assert demux.placement(id + 1000) is None
    stats = demux.stats()
    assert stats["filters"] == 1 and set(stats) >= {"shapes", "keys", "residuals"}
    assert "1 filters" in repr(demux)


def test_many_connections_share_a_shape() -> None:
    demux = sift.Demux()
    for i in range(200):
        demux.insert(f"ip src 10.0.{i // 256}.{i % 256} and tcp dst port {1000 + i}")
    s = demux.stats()
    assert s["filters"] == 200 and s["shapes"] <= 2 and s["residuals"] == 0


def test_updates_while_matching(records: list[sift.Record]) -> None:
    """Batches in one thread, inserts and removes in another: every batch result is a valid
    answer for some set of installed filters (here: the stable filter or a churned one)."""
    demux = sift.Demux()
    stable = demux.insert("ip or ip6 or arp or not ip", priority=-10)
    data = [r.data for r in records]
    stop = threading.Event()
    errors: list[BaseException] = []

    def churn() -> None:
        try:
            while not stop.is_set():
                id = demux.insert("tcp", priority=10)
                demux.remove(id)
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)

    t = threading.Thread(target=churn)
    t.start()
    try:
        for _ in range(20):
            got = demux.match_many(data)
            assert all(v != 0 for v in got)
            assert all(v == stable or v > stable for v in got)
    finally:
        stop.set()
        t.join()
    assert not errors
