"""Finds the candidate lines of a block with C-speed substring and rooted-regex passes, and
drops NCCL's repeated init and transport lines before anything decodes them."""
from __future__ import annotations

import re
from collections.abc import Iterator

from . import extractors
from .collect import ELASTIC_SPAN
from .compiled import Compiled, Rooted
from .sources import Block

VIA = b" via "  # NCCL channel lines: sampled, there can be millions
# sre scans for a literal's first character: 'v' is rarer than ' ' (0.3 s/GB instead of 0.55)
_VIA = re.compile(rb"via ")
CHANNEL_BUDGET = 96  # channel lines read per file: transports repeat for every communicator
NCCL_INFO = b" NCCL INFO "
# NCCL prints its init and transport lines again for every communicator a process joins (FSDP,
# TP and PP groups: hundreds), differing only in the communicator's address and id. The facts
# they carry are decided by their first line (Collector: first wins), so a repeat is dropped here.
_COMM_ID = re.compile(rb"(comm(?:Id)? 0x)[0-9a-f]+(?= )")
# Whether a repeated line can change what the extractors record is declared with each one
# (extractors.TABLE): a line with an event word (exceptions, tracebacks, watchdog records, launcher
# exits, announcements, collectives in frames, sample ids) is never dropped; a fact word's line is
# decided once (first wins) or keeps a maximum, so its repeats are.


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
    starts = found_lines(comp, data, end)
    find, rfind = data.find, data.rfind
    if len(starts) > 1:
        starts = _drop_repeats(comp, data, end, starts)
    taken = 0
    via: set[int] = set()
    if channel_budget > 0:
        m = _VIA.search(data, 0, end)
        while m is not None and taken < channel_budget:
            pos = m.start()
            if pos == 0 or data[pos - 1] != 32:  # not " via "
                m = _VIA.search(data, pos + 1, end)
                continue
            ls = rfind(b"\n", 0, pos) + 1
            if ls not in starts:
                via.add(ls)
            taken += 1
            nl = find(b"\n", pos, end)
            if nl < 0:
                break
            m = _VIA.search(data, nl + 1, end)
    return sorted(starts | via), via, taken


def found_lines(comp: Compiled, data: bytes, end: int) -> set[int]:
    """Start offsets of the lines of data[:end] that hold one of the plan's literals: each
    literal found with bytes.find; each rooted group with bytes.find on its root character
    where that is rare (or the input so far small), else with its regex."""
    starts: set[int] = set()
    for lit in comp.finds:
        _literal(data, end, lit, starts)
    small = _scanned[0] < SMALL_INPUT
    tries = max(64, end >> 12)  # about prefilter.RARE of the block's bytes
    probe = PROBE if end >= 8 * PROBE else 0  # counting a small block costs what searching it does
    for g in comp.groups:
        if g.rare or (probe and not small and data.count(g.root, 0, probe) * end < tries * probe):
            # rare in the input as sampled, or in this block's first bytes
            _found(data, end, g, starts, tries)
        elif small and not g.compiled:
            if len(g.tails) == 1:  # one literal (a frequent root: ' faile')
                _literal(data, end, g.tails[0], starts)
            else:
                _found(data, end, g, starts, 0)
        else:
            _searched(data, end, g.rx, 0, starts)
    _scanned[0] += end
    return starts


def _literal(data: bytes, end: int, lit: bytes, starts: set[int]) -> None:
    """Lines of data[:end] holding `lit`, found with bytes.find."""
    find = data.find
    pos = find(lit, 0, end)
    while pos >= 0:
        starts.add(data.rfind(b"\n", 0, pos) + 1)
        nl = find(b"\n", pos, end)
        if nl < 0:
            return
        pos = find(lit, nl + 1, end)


# Bytes this process scans before the groups' regexes are worth compiling (~1.5 ms each): below
# it, a group is found with bytes.find and startswith, which need none (a 2-rank run scans ~50 KB:
# 8 ms instead of 17; the two cost the same at about 110 KiB, and at 1 MiB finding is 4x slower).
SMALL_INPUT = 96 << 10
_scanned = [0]
PROBE = 64 << 10  # bytes of a block counted to see whether a group's root is rare in it


def _found(data: bytes, end: int, g: Rooted, starts: set[int], tries: int) -> None:
    """Lines where one of the group's literals occurs, jumping between occurrences of its root
    character with bytes.find (memchr for one byte) and checking the literals that go on with
    the next byte (startswith: no regex). `tries` > 0: past that many occurrences in this block
    the character is not rare here after all, and the group's regex searches the rest. The same
    lines as _searched, either way."""
    find, rfind = data.find, data.rfind
    root, by_next = g.root, g.by_next
    pos = find(root, 0, end)
    while pos >= 0:
        nxt = by_next.get(data[pos + 1]) if pos + 1 < end else None
        if nxt is not None and data.startswith(nxt, pos, end):
            starts.add(rfind(b"\n", 0, pos) + 1)
            nl = find(b"\n", pos, end)
            if nl < 0:
                return
            pos = find(root, nl + 1, end)
        else:
            pos = find(root, pos + 1, end)
        tries -= 1
        if tries == 0 and pos >= 0:
            _searched(data, end, g.rx, pos, starts)
            return


def _searched(data: bytes, end: int, rx: re.Pattern[bytes], pos: int, starts: set[int]) -> None:
    """Lines from `pos` on where `rx` matches (one search per line found)."""
    find, rfind = data.find, data.rfind
    m = rx.search(data, pos, end)
    while m is not None:
        pos = m.start()
        starts.add(rfind(b"\n", 0, pos) + 1)
        nl = find(b"\n", pos, end)
        if nl < 0:
            return
        m = rx.search(data, nl + 1, end)


def _drop_repeats(comp: Compiled, data: bytes, end: int, starts: set[int]) -> set[int]:
    """The starts without NCCL INFO lines that repeat an earlier fact-only line of the block.

    A line is keyed by its whole text (so by its process and device too) with communicator
    addresses blanked; the first of each key is kept, and decides whether the key is fact-only.
    After a torchelastic `(local_rank: N)` line, lines take their rank from it: nothing more
    is dropped in that block.
    """
    find = data.find
    memo: dict[bytes, bool] = {}
    keep: set[int] = set()
    blank = comp.comm_ids_free
    # the block's first lines may still belong to a `(local_rank: N)` line of the block before
    settled = 0
    for _ in range(ELASTIC_SPAN + 1):
        settled = find(b"\n", settled, end) + 1
        if settled <= 0:
            return starts
    for st in sorted(starts):
        nl = find(b"\n", st, end)
        raw = data[st:nl if nl >= 0 else end]
        if st < settled:
            if b"local_rank" in raw:
                return starts
            keep.add(st)
            continue
        if NCCL_INFO not in raw:
            if b"local_rank" in raw:
                return keep | {s for s in starts if s >= st}
            keep.add(st)
            continue
        key = blank_comm_ids(raw) if blank and b"comm" in raw else raw
        inert = memo.get(key)
        if inert is None:
            memo[key] = fact_only(comp, raw.decode("utf-8", "replace"))
            keep.add(st)
        elif not inert:
            keep.add(st)
    return keep


def blank_comm_ids(raw: bytes) -> bytes:
    """`raw` with each communicator address and id blanked to `comm 0x` / `commId 0x`: the same
    as _COMM_ID.sub(rb"\\1", raw), whose template costs a Python call per match (4x slower)."""
    return b"".join(_COMM_ID.split(raw))


def fact_only(comp: Compiled, text: str) -> bool:
    """True when feeding `text` to a Collector can only set facts (first wins), channels, the
    process's rank and the world and node counts: a repeat of it changes nothing."""
    if extractors.event(text):
        return False
    return not any(sig.match(part) for part in text.split("\r") for sig in comp.sigs)


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
