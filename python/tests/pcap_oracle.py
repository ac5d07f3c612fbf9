"""libpcap 1.10 through ctypes: the oracle the Python tests compare sift with.

Filters are compiled against a handle on the capture file itself (``pcap_open_offline``),
optimized and with netmask 0, exactly as ``tcpdump -r FILE EXPR`` compiles them, and run with
libpcap's own interpreter (``bpf_filter``). Packets are read with ``pcap_next_ex``, which gives an
independent reader to compare ``sift.read_capture`` with.
"""

from __future__ import annotations

import ctypes
import ctypes.util
from dataclasses import dataclass

PCAP_ERRBUF_SIZE = 256


class BpfInsn(ctypes.Structure):
    _fields_ = [
        ("code", ctypes.c_ushort),
        ("jt", ctypes.c_ubyte),
        ("jf", ctypes.c_ubyte),
        ("k", ctypes.c_uint32),
    ]


class BpfProgram(ctypes.Structure):
    _fields_ = [("bf_len", ctypes.c_uint), ("bf_insns", ctypes.POINTER(BpfInsn))]


class Timeval(ctypes.Structure):
    _fields_ = [("tv_sec", ctypes.c_long), ("tv_usec", ctypes.c_long)]


class PcapPkthdr(ctypes.Structure):
    _fields_ = [("ts", Timeval), ("caplen", ctypes.c_uint32), ("len", ctypes.c_uint32)]


def _load() -> ctypes.CDLL:
    names = ["libpcap.so.0.8", "libpcap.so.1", ctypes.util.find_library("pcap")]
    errors = []
    for name in names:
        if not name:
            continue
        try:
            lib = ctypes.CDLL(name)
            break
        except OSError as e:
            errors.append(str(e))
    else:
        raise OSError("libpcap not found (apt-get install libpcap-dev): " + "; ".join(errors))
    lib.pcap_open_offline.argtypes = [ctypes.c_char_p, ctypes.c_char_p]
    lib.pcap_open_offline.restype = ctypes.c_void_p
    lib.pcap_close.argtypes = [ctypes.c_void_p]
    lib.pcap_compile.argtypes = [
        ctypes.c_void_p,
        ctypes.POINTER(BpfProgram),
        ctypes.c_char_p,
        ctypes.c_int,
        ctypes.c_uint32,
    ]
    lib.pcap_compile.restype = ctypes.c_int
    lib.pcap_geterr.argtypes = [ctypes.c_void_p]
    lib.pcap_geterr.restype = ctypes.c_char_p
    lib.pcap_freecode.argtypes = [ctypes.POINTER(BpfProgram)]
    lib.pcap_snapshot.argtypes = [ctypes.c_void_p]
    lib.pcap_datalink.argtypes = [ctypes.c_void_p]
    lib.pcap_next_ex.argtypes = [
        ctypes.c_void_p,
        ctypes.POINTER(ctypes.POINTER(PcapPkthdr)),
        ctypes.POINTER(ctypes.POINTER(ctypes.c_ubyte)),
    ]
    lib.pcap_next_ex.restype = ctypes.c_int
    lib.bpf_filter.argtypes = [
        ctypes.POINTER(BpfInsn),
        ctypes.c_char_p,
        ctypes.c_uint,
        ctypes.c_uint,
    ]
    lib.bpf_filter.restype = ctypes.c_uint
    lib.pcap_lib_version.restype = ctypes.c_char_p
    return lib


LIB = _load()


def version() -> str:
    return LIB.pcap_lib_version().decode()


@dataclass
class Packet:
    ts_sec: int
    ts_usec: int
    caplen: int
    wirelen: int
    data: bytes


class Savefile:
    """A libpcap handle reading a capture file (what ``tcpdump -r`` compiles against)."""

    def __init__(self, path: str) -> None:
        err = ctypes.create_string_buffer(PCAP_ERRBUF_SIZE)
        self.handle = LIB.pcap_open_offline(path.encode(), err)
        if not self.handle:
            raise OSError(f"pcap_open_offline({path}): {err.value.decode(errors='replace')}")

    def close(self) -> None:
        if self.handle:
            LIB.pcap_close(self.handle)
            self.handle = None

    def __enter__(self) -> "Savefile":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def snaplen(self) -> int:
        return LIB.pcap_snapshot(self.handle)

    @property
    def dlt(self) -> int:
        return LIB.pcap_datalink(self.handle)

    def compile(self, expression: str) -> "Program | str":
        """The optimized program, or libpcap's error message."""
        prog = BpfProgram()
        if LIB.pcap_compile(self.handle, ctypes.byref(prog), expression.encode(), 1, 0) != 0:
            return LIB.pcap_geterr(self.handle).decode(errors="replace")
        return Program(prog)

    def packets(self) -> tuple[list[Packet], int]:
        """Every packet ``pcap_next_ex`` delivers, and its last status (-2 end, -1 error)."""
        out = []
        hdr = ctypes.POINTER(PcapPkthdr)()
        data = ctypes.POINTER(ctypes.c_ubyte)()
        while True:
            rc = LIB.pcap_next_ex(self.handle, ctypes.byref(hdr), ctypes.byref(data))
            if rc != 1:
                return out, rc
            h = hdr.contents
            out.append(
                Packet(
                    h.ts.tv_sec,
                    h.ts.tv_usec,
                    h.caplen,
                    h.len,
                    ctypes.string_at(data, h.caplen),
                )
            )


class Program:
    """A compiled classic BPF program, run with libpcap's ``bpf_filter``."""

    def __init__(self, prog: BpfProgram) -> None:
        self.prog = prog
        self.insns = prog.bf_insns

    def __del__(self) -> None:
        LIB.pcap_freecode(ctypes.byref(self.prog))

    def run(self, data: bytes, wirelen: int) -> int:
        return LIB.bpf_filter(self.insns, data, wirelen, len(data))
