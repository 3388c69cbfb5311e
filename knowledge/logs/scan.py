"""Finds the candidate lines of a block with C-speed substring and rooted-regex passes."""
from __future__ import annotations

from typing import Iterator

from .compiled import Compiled
from .sources import Block

VIA = b" via "  # NCCL channel lines: sampled, there can be millions
CHANNEL_BUDGET = 96  # channel lines read per file: transports repeat for every communicator


def candidates(comp: Compiled, blk: Block, channel_budget: int) -> tuple[list[int], set[int], int]:
    """Sorted start offsets of the block's lines worth reading, those read only for their
    channel transport, and how many channel lines were taken."""
    data, end = blk.data, blk.end
    starts: set[int] = set()
    if comp.unanchored:
        pos = 0
        while pos < end:
            starts.add(pos)
            nl = data.find(b"\n", pos, end)
            pos = end if nl < 0 else nl + 1
        return sorted(starts), set(), 0
    find, rfind = data.find, data.rfind
    for lit in comp.finds:
        pos = find(lit, 0, end)
        while pos >= 0:
            ls = rfind(b"\n", 0, pos) + 1
            starts.add(ls)
            nl = find(b"\n", pos, end)
            if nl < 0:
                break
            pos = find(lit, nl + 1, end)
    for rx in comp.roots:
        m = rx.search(data, 0, end)
        while m is not None:
            pos = m.start()
            starts.add(rfind(b"\n", 0, pos) + 1)
            nl = find(b"\n", pos, end)
            if nl < 0:
                break
            m = rx.search(data, nl + 1, end)
    taken = 0
    via: set[int] = set()
    if channel_budget > 0:
        pos = find(VIA, 0, end)
        while pos >= 0 and taken < channel_budget:
            ls = rfind(b"\n", 0, pos) + 1
            if ls not in starts:
                via.add(ls)
            taken += 1
            nl = find(b"\n", pos, end)
            if nl < 0:
                break
            pos = find(VIA, nl + 1, end)
    return sorted(starts | via), via, taken


def lines_at(blk: Block, starts: list[int]) -> Iterator[tuple[int, int, str]]:
    """(offset, line number, text) per start; sets blk.nlines so the reader need not count."""
    data, end = blk.data, blk.end
    line_no, prev = blk.first_line, 0
    count = data.count
    for st in starts:
        line_no += count(b"\n", prev, st)
        prev = st
        nl = data.find(b"\n", st, end)
        raw = data[st:nl if nl >= 0 else end]
        yield st, line_no, raw.decode("utf-8", "replace").rstrip("\r")
    blk.nlines = (line_no - blk.first_line) + count(b"\n", prev, end)
