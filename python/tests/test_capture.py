"""Capture files: sift.read_capture against libpcap's reader, write/read round trips
(byte-identical to the input for pcap files), and errors with byte offsets."""

from __future__ import annotations

from pathlib import Path

import pytest

import sift
import pcap_oracle

SYNTHETIC = ["eth.pcap", "raw.pcap", "sll.pcap", "null.pcap"]


def capture_files(shared: Path) -> list[Path]:
    files = [shared / "corpus" / "synthetic" / name for name in SYNTHETIC]
    real = shared / "corpus" / "real"
    if real.is_dir():
        files += sorted(p for p in real.rglob("*") if p.suffix in (".pcap", ".pcapng"))
    return [f for f in files if f.is_file()]


def test_reader_agrees_with_libpcap(shared: Path) -> None:
    """Every file of the shared corpus: the same packets (bytes, lengths, microsecond time
    stamps as libpcap hands them to tcpdump) and the same end (clean or an error)."""
    compared = 0
    for path in capture_files(shared):
        try:
            savefile = pcap_oracle.Savefile(str(path))
        except OSError:
            # libpcap refuses the file outright; sift must refuse it too.
            with pytest.raises((sift.CaptureError, OSError)):
                list(sift.read_capture(path))
            continue
        with savefile:
            want, status = savefile.packets()
        got: list[sift.Record] = []
        error = None
        try:
            for r in sift.read_capture(path):
                got.append(r)
        except sift.CaptureError as e:
            error = e
        assert len(got) == len(want), path
        assert (error is not None) == (status == -1), (path, error, status)
        for r, p in zip(got, want):
            assert (r.data, r.caplen, r.wirelen) == (p.data, p.caplen, p.wirelen), path
            if path.suffix == ".pcap":
                secs, frac = divmod(r.timestamp_ns, 1_000_000_000)
                assert (secs, frac // 1000) == (p.ts_sec, p.ts_usec), path
        compared += len(got)
    assert compared > 1000


@pytest.mark.parametrize("name", SYNTHETIC)
def test_round_trip_is_byte_identical(shared: Path, tmp_path: Path, name: str) -> None:
    source = shared / "corpus" / "synthetic" / name
    reader = sift.read_capture(source)
    assert reader.format == "pcap" and not reader.nanosecond
    records = list(reader)
    out = tmp_path / name
    with sift.CaptureWriter(out, reader.linktype, reader.snaplen) as w:
        for r in records:
            w.write(r)
    assert w.closed and w.count == len(records)
    assert out.read_bytes() == source.read_bytes()
    again = list(sift.read_capture(out))
    assert again == records
    assert all(r.linktype == reader.linktype for r in again)


def test_pcapng_to_pcap(shared: Path, tmp_path: Path) -> None:
    ng = [p for p in capture_files(shared) if p.suffix == ".pcapng"]
    if not ng:
        pytest.skip("no pcapng file in the shared corpus")
    for path in ng:
        reader = sift.read_capture(path)
        assert reader.format == "pcapng"
        records = list(reader)
        if not records:
            continue
        out = tmp_path / (path.stem + ".pcap")
        with sift.CaptureWriter(out, records[0].linktype, reader.snaplen or 262144) as w:
            w.write_all(records)
        back = list(sift.read_capture(out))
        assert [(r.data, r.wirelen) for r in back] == [(r.data, r.wirelen) for r in records]
        # pcap keeps microseconds.
        assert [r.timestamp_ns // 1000 for r in back] == [r.timestamp_ns // 1000 for r in records]


def test_write_tuples_and_new_records(tmp_path: Path) -> None:
    out = tmp_path / "new.pcap"
    with sift.CaptureWriter(out, sift.LINKTYPE_RAW, 1500, nanosecond=True) as w:
        w.write((1.5, b"\x45" + b"\0" * 19))
        w.write((2, bytearray(b"\x60" + b"\0" * 39), 1000))
        w.write(sift.Record(b"\x45" * 20, timestamp_ns=3_000_000_007, wirelen=64, linktype=101))
    reader = sift.read_capture(out)
    assert (reader.linktype, reader.snaplen, reader.nanosecond) == (101, 1500, True)
    recs = list(reader)
    assert [r.timestamp_ns for r in recs] == [1_500_000_000, 2_000_000_000, 3_000_000_007]
    assert [r.timestamp for r in recs] == [1.5, 2.0, 3.000000007]
    assert [(r.caplen, r.wirelen) for r in recs] == [(20, 20), (40, 1000), (20, 64)]
    # A microsecond file truncates nanoseconds, as libpcap does.
    micro = tmp_path / "micro.pcap"
    with sift.CaptureWriter(micro, sift.LINKTYPE_RAW, 1500) as w:
        w.write_all(recs)
    assert [r.timestamp_ns for r in sift.read_capture(micro)] == [
        1_500_000_000,
        2_000_000_000,
        3_000_000_000,
    ]


def test_writer_misuse(tmp_path: Path) -> None:
    w = sift.CaptureWriter(tmp_path / "x.pcap")
    with pytest.raises(TypeError):
        w.write(b"bytes alone have no time stamp")
    with pytest.raises(TypeError):
        w.write((1.0,))
    with pytest.raises(ValueError):
        w.write((float("nan"), b"x"))
    w.close()
    w.close()
    with pytest.raises(ValueError, match="closed"):
        w.write((0, b"x"))
    with pytest.raises(OSError):
        sift.CaptureWriter(tmp_path / "no" / "such" / "dir.pcap")


def test_record_construction() -> None:
    r = sift.Record(b"abc", 10.25)
    assert (r.data, r.caplen, r.wirelen, r.linktype, r.interface_id) == (b"abc", 3, 3, 1, 0)
    assert r.timestamp_ns == 10_250_000_000
    assert sift.Record(b"abc", timestamp_ns=-1).timestamp_ns == -1
    assert r == sift.Record(b"abc", timestamp_ns=10_250_000_000)
    assert r != sift.Record(b"abd", 10.25)
    assert r != "abc"
    with pytest.raises(TypeError):
        sift.Record(b"abc", 1.0, timestamp_ns=1)
    assert "caplen=3" in repr(r)


def test_truncated_file_delivers_records_then_raises(shared: Path, tmp_path: Path) -> None:
    source = (shared / "corpus" / "synthetic" / "eth.pcap").read_bytes()
    records = list(sift.read_capture(shared / "corpus" / "synthetic" / "eth.pcap"))
    # Cut in the middle of the eleventh record's data.
    end_of_ten = 24 + sum(16 + r.caplen for r in records[:10])
    cut = tmp_path / "cut.pcap"
    cut.write_bytes(source[: end_of_ten + 16 + 5])
    got = []
    with pytest.raises(sift.CaptureError) as info:
        for r in sift.read_capture(cut):
            got.append(r)
    assert got == records[:10]
    e = info.value
    assert e.truncated and e.offset == end_of_ten and e.path == str(cut)
    assert str(cut) in str(e)


def test_bad_files(tmp_path: Path) -> None:
    bad = tmp_path / "bad.pcap"
    bad.write_bytes(b"not a capture file at all")
    with pytest.raises(sift.CaptureError) as info:
        sift.read_capture(bad)
    assert info.value.offset == 0 and not info.value.truncated
    with pytest.raises(FileNotFoundError):
        sift.read_capture(tmp_path / "missing.pcap")
    empty = tmp_path / "empty.pcap"
    empty.write_bytes(b"")
    with pytest.raises(sift.CaptureError):
        sift.read_capture(empty)


def test_reader_context_manager(shared: Path) -> None:
    path = shared / "corpus" / "synthetic" / "raw.pcap"
    with sift.read_capture(str(path)) as reader:
        first = next(reader)
        assert reader.offset == 24 + 16 + first.caplen
        assert reader.path == str(path)
    assert list(reader) == []
