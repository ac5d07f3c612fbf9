"""Shared fixtures: where the shared corpus is, and the expression lists in it."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

# The shared lists name hosts under `libpcap.test`, which both libpcap and sift look up with the
# system resolver; where they are not in /etc/hosts, each lookup waits for DNS. One short try
# is enough for the answer (both see the same one) and keeps the suite fast.
os.environ.setdefault("RES_OPTIONS", "timeout:1 attempts:1")


def shared_dir() -> Path | None:
    """``../shared`` next to the repository (or ``$SIFT_SHARED``), if present."""
    path = Path(os.environ.get("SIFT_SHARED", REPO.parent / "shared"))
    return path if path.is_dir() else None


@pytest.fixture(scope="session")
def shared() -> Path:
    path = shared_dir()
    if path is None:
        pytest.skip(f"shared corpus not found at {REPO.parent / 'shared'} (set SIFT_SHARED)")
    return path


def unescape(text: str) -> str:
    r"""The TSV lists' escapes: ``\n``, ``\t`` and ``\\`` (but ``proto \tcp`` keeps its backslash,
    as libpcap's own test tables intend)."""
    out: list[str] = []
    i = 0
    while i < len(text):
        c = text[i]
        nxt = text[i + 1] if i + 1 < len(text) else ""
        so_far = "".join(out)
        after_proto = so_far.rstrip().endswith("proto") and so_far[-1:].isspace()
        if c == "\\" and nxt in "nt" and nxt and not after_proto:
            out.append("\n" if nxt == "n" else "\t")
            i += 2
        elif c == "\\" and nxt == "\\":
            out.append("\\")
            i += 2
        else:
            out.append(c)
            i += 1
    return "".join(out)


def load_tsv(path: Path) -> list[tuple[str, str]]:
    """``(LINKTYPE name, expression)`` per line of one of the shared TSV lists."""
    pairs = []
    for line in path.read_text().splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        name, _, expr = line.partition("\t")
        pairs.append((name.strip(), unescape(expr)))
    return pairs
