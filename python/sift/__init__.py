"""sift: packet filters in the tcpdump/libpcap language, with libpcap 1.10's exact semantics.

>>> import sift
>>> f = sift.Filter("tcp port 80", linktype=sift.LINKTYPE_ETHERNET)
>>> kept = [r for r in sift.read_capture("in.pcap") if f.match(r)]   # doctest: +SKIP

* ``Filter(expression, linktype=1, snaplen=262144)``: a compiled filter. ``match(packet)``
  returns what libpcap's ``bpf_filter`` returns (0 rejects, else the bytes to keep);
  ``match_many(packets)`` and ``match_buffer(buffer, offsets, lengths)`` run a whole batch
  without a Python-level loop and with the GIL released, returning an ``array.array('I')``.
* ``Demux(linktype=1)``: many filters matched in one pass per packet. ``insert(expression,
  priority=0, copy=False)`` returns an id; ``match(packet)`` the id of the highest-ranked filter
  receiving the packet (0 if none); ``deliver(packet)`` every receiving id (CSPF delivery);
  ``match_many``/``match_buffer`` as for ``Filter`` (an ``array.array('Q')`` of ids).
* ``read_capture(path)``: iterate over the ``Record`` objects of a pcap or pcapng file.
* ``CaptureWriter(path, linktype, snaplen)``: write a pcap file as ``tcpdump -w`` does.
* ``FilterError`` (with the position of the problem in the expression) and ``CaptureError``
  (with the byte offset of the problem in the file), both ``ValueError`` subclasses.
"""

from __future__ import annotations

from sift._errors import CaptureError, FilterError
from sift._sift import (
    CaptureReader,
    CaptureWriter,
    Demux,
    Filter,
    Record,
    __version__,
    read_capture,
)

#: ``LINKTYPE_NULL``: BSD loopback (4-byte address family in the capturing host's byte order).
LINKTYPE_NULL = 0
#: ``LINKTYPE_ETHERNET``: Ethernet (``DLT_EN10MB``).
LINKTYPE_ETHERNET = 1
#: ``LINKTYPE_RAW``: raw IPv4 or IPv6, no link-layer header.
LINKTYPE_RAW = 101
#: ``LINKTYPE_LOOP``: OpenBSD loopback (address family in network byte order).
LINKTYPE_LOOP = 108
#: ``LINKTYPE_LINUX_SLL``: Linux cooked capture v1.
LINKTYPE_LINUX_SLL = 113
#: ``LINKTYPE_IPV4``: raw IPv4.
LINKTYPE_IPV4 = 228
#: ``LINKTYPE_IPV6``: raw IPv6.
LINKTYPE_IPV6 = 229
#: ``LINKTYPE_LINUX_SLL2``: Linux cooked capture v2.
LINKTYPE_LINUX_SLL2 = 276

__all__ = [
    "CaptureError",
    "CaptureReader",
    "CaptureWriter",
    "Demux",
    "Filter",
    "FilterError",
    "LINKTYPE_ETHERNET",
    "LINKTYPE_IPV4",
    "LINKTYPE_IPV6",
    "LINKTYPE_LINUX_SLL",
    "LINKTYPE_LINUX_SLL2",
    "LINKTYPE_LOOP",
    "LINKTYPE_NULL",
    "LINKTYPE_RAW",
    "Record",
    "__version__",
    "read_capture",
]
