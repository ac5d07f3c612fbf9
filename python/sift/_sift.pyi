"""Type stubs for sift's native module (crates/sift-python)."""

import array
import os
from collections.abc import Iterable, Iterator
from types import TracebackType
from typing import Self, SupportsInt, TypeAlias, TypeVar

from typing_extensions import Buffer

__version__: str

#: Anything with the buffer protocol and one-byte items: bytes, bytearray, memoryview, a
#: NumPy uint8 array. ``bytes`` is read in place; other buffers are copied once per call.
BytesLike: TypeAlias = Buffer

#: A one-dimensional integer array (NumPy array of any integer dtype, ``array.array``) or a
#: sequence of non-negative ints.
IndexArray: TypeAlias = Buffer | Iterable[SupportsInt]

StrPath: TypeAlias = str | os.PathLike[str]

_Out = TypeVar("_Out", bound=Buffer)

class Filter:
    """A packet filter compiled from a pcap-filter (tcpdump) expression, with libpcap 1.10's
    exact semantics.

    ``Filter(expression, linktype=1, snaplen=262144)`` compiles ``expression`` for packets of
    link type ``linktype`` (a ``LINKTYPE_*`` number) captured with snapshot length ``snaplen``,
    as ``tcpdump -r`` does for a capture file with that header. Raises ``sift.FilterError``
    with the position of the problem if the expression is invalid.

    Matching returns what libpcap's ``bpf_filter`` returns: 0 to reject, otherwise the number
    of bytes to keep. Filters are immutable and thread-safe; batch methods release the GIL.
    """

    def __init__(
        self, expression: str, linktype: int = 1, snaplen: int = 262144, extensions: bool = False
    ) -> None: ...
    @property
    def expression(self) -> str:
        """The expression the filter was compiled from."""
    @property
    def linktype(self) -> int:
        """The link type (``LINKTYPE_*`` number) the filter expects packets of."""
    @property
    def snaplen(self) -> int:
        """The snapshot length the filter was compiled for."""
    def match(self, packet: BytesLike | Record, wirelen: int | None = None) -> int:
        """Runs the filter on one packet: 0 rejects, else the number of bytes to keep.

        ``wirelen`` defaults to the record's wire length, or to ``len(packet)``."""
    def matches(self, packet: BytesLike | Record, wirelen: int | None = None) -> bool:
        """``True`` if the filter accepts the packet (``match(...) != 0``)."""
    def match_many(
        self,
        packets: Iterable[BytesLike | Record],
        wirelens: IndexArray | None = None,
        *,
        out: _Out | None = None,
    ) -> array.array[int] | _Out:
        """Runs the filter on every packet of a sequence without a Python-level loop (GIL
        released). Returns ``array.array('I')``, or fills and returns ``out`` (a writable
        uint32 buffer with one entry per packet)."""
    def match_buffer(
        self,
        buffer: BytesLike,
        offsets: IndexArray,
        lengths: IndexArray,
        wirelens: IndexArray | None = None,
        *,
        out: _Out | None = None,
    ) -> array.array[int] | _Out:
        """Runs the filter on packets stored back to back in one buffer: packet ``i`` is
        ``buffer[offsets[i]:offsets[i] + lengths[i]]``; ``wirelens`` defaults to ``lengths``.
        Returns ``array.array('I')``, or fills and returns ``out``. Raises ``IndexError`` for a
        packet outside the buffer."""
    def ir(self) -> str:
        """The IR as lowered from the expression (the semantic reference), as text."""
    def optimized_ir(self) -> str:
        """The optimized IR the bytecode is generated from, as text."""
    def bytecode(self) -> str:
        """The verified bytecode the filter runs, as text."""

class Demux:
    """Many filters, one pass per packet: which installed filters receive a packet.

    Filters are tried by decreasing priority, ties broken by insertion order. An accepting
    exclusive filter (``copy=False``) receives the packet and ends the walk; an accepting copy
    filter (``copy=True``) receives a copy and the walk continues (CSPF's delivery rule). The
    result is exactly what running every filter alone in that order would give. Matching may
    run in several threads (batches release the GIL) while another thread updates."""

    def __init__(self, linktype: int = 1, snaplen: int = 262144, *, extensions: bool = False) -> None: ...
    @property
    def linktype(self) -> int:
        """The link type expressions are compiled for."""
    @property
    def snaplen(self) -> int:
        """The snapshot length expressions are compiled for."""
    def insert(self, expression: str, priority: int = 0, copy: bool = False) -> int:
        """Compiles and installs a filter; returns its id (positive, never reused). Raises
        ``sift.FilterError`` for an invalid expression."""
    def remove(self, id: int) -> bool:
        """Removes a filter; ``False`` if there is no such filter."""
    def __len__(self) -> int: ...
    def __contains__(self, id: int) -> bool: ...
    def match(self, packet: BytesLike | Record, wirelen: int | None = None) -> int:
        """The id of the highest-ranked filter that receives the packet, or 0."""
    def deliver(
        self, packet: BytesLike | Record, wirelen: int | None = None, *, all: bool = False
    ) -> list[int]:
        """Every filter receiving the packet, in matching order (copies ranked before the
        exclusive winner, then the winner); ``all=True``: every accepting filter."""
    def match_many(
        self,
        packets: Iterable[BytesLike | Record],
        wirelens: IndexArray | None = None,
        *,
        out: _Out | None = None,
    ) -> array.array[int] | _Out:
        """``match`` for every packet of a sequence (GIL released); an ``array.array('Q')`` of
        ids, or ``out`` (a writable uint64 buffer) filled."""
    def match_buffer(
        self,
        buffer: BytesLike,
        offsets: IndexArray,
        lengths: IndexArray,
        wirelens: IndexArray | None = None,
        *,
        out: _Out | None = None,
    ) -> array.array[int] | _Out:
        """``match`` for packets stored back to back in one buffer (as
        ``Filter.match_buffer``); an ``array.array('Q')`` of ids, or ``out`` filled."""
    def placement(self, id: int) -> str | None:
        """``"keyed"`` (hashed paths), ``"residual"`` (run whole), or ``None``."""
    def stats(self) -> dict[str, int]:
        """``filters``, ``shapes``, ``keys``, ``residuals``, ``table_bytes``."""

class Record:
    """One captured packet.

    Records read from a file keep their time stamp exactly as the file stored it, so writing
    them back out reproduces the file. Two records are equal when their bytes, lengths, link
    type, interface and time (in nanoseconds) are."""

    def __init__(
        self,
        data: BytesLike,
        timestamp: float | None = None,
        *,
        timestamp_ns: int | None = None,
        wirelen: int | None = None,
        linktype: int = 1,
        interface_id: int = 0,
    ) -> None: ...
    @property
    def data(self) -> bytes:
        """The captured bytes."""
    @property
    def caplen(self) -> int:
        """The number of captured bytes."""
    @property
    def wirelen(self) -> int:
        """The packet's length on the wire."""
    @property
    def linktype(self) -> int:
        """The link-layer header type (``LINKTYPE_*`` number, FCS bits removed)."""
    @property
    def interface_id(self) -> int:
        """The pcapng interface the packet was captured on (0 for pcap)."""
    @property
    def timestamp(self) -> float:
        """Seconds since the Unix epoch."""
    @property
    def timestamp_ns(self) -> int:
        """Nanoseconds since the Unix epoch (exact for pcap files)."""
    def __eq__(self, other: object) -> bool: ...

class CaptureReader(Iterator[Record]):
    """Reads a pcap or pcapng file one ``Record`` at a time (see ``read_capture``).

    A file that is not a valid capture raises ``sift.CaptureError`` (with the byte offset of
    the problem) after every record before the problem has been delivered."""

    def __init__(self, path: StrPath) -> None: ...
    @property
    def path(self) -> str:
        """The path the file was opened with."""
    @property
    def format(self) -> str:
        """``"pcap"`` or ``"pcapng"``."""
    @property
    def linktype(self) -> int | None:
        """The file's link type (pcapng: the first interface's)."""
    @property
    def snaplen(self) -> int | None:
        """The snapshot length in the file header (pcapng: the first interface's)."""
    @property
    def nanosecond(self) -> bool:
        """``True`` for a pcap file with nanosecond time stamps."""
    @property
    def offset(self) -> int:
        """Bytes of the file consumed so far."""
    def __iter__(self) -> Self: ...
    def __next__(self) -> Record: ...
    def close(self) -> None:
        """Closes the file; iteration then stops."""
    def __enter__(self) -> Self: ...
    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> bool: ...

def read_capture(path: StrPath) -> CaptureReader:
    """Opens a pcap or pcapng file for reading; iterate over the result for ``Record`` objects."""

class CaptureWriter:
    """Writes a classic pcap file byte for byte as ``tcpdump -w`` does (native byte order,
    microsecond time stamps unless ``nanosecond``). Records are written as given."""

    def __init__(
        self,
        path: StrPath,
        linktype: int = 1,
        snaplen: int = 262144,
        *,
        nanosecond: bool = False,
    ) -> None: ...
    @property
    def path(self) -> str:
        """The path being written."""
    @property
    def linktype(self) -> int:
        """The link type in the file header."""
    @property
    def snaplen(self) -> int:
        """The snapshot length in the file header."""
    @property
    def count(self) -> int:
        """The number of packets written so far."""
    @property
    def closed(self) -> bool:
        """``True`` once the writer is closed."""
    def write(
        self,
        item: Record | tuple[float, BytesLike] | tuple[float, BytesLike, int],
    ) -> None:
        """Writes one packet: a ``Record`` (time stamp kept exactly) or a tuple
        ``(timestamp_seconds, data[, wirelen])``."""
    def write_all(
        self,
        items: Iterable[Record | tuple[float, BytesLike] | tuple[float, BytesLike, int]],
    ) -> None:
        """Writes every item of an iterable, as ``write``."""
    def flush(self) -> None:
        """Flushes buffered packets to the file."""
    def close(self) -> None:
        """Flushes and closes the file (closing twice is harmless)."""
    def __enter__(self) -> Self: ...
    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> bool: ...
