"""Compare every rank's Flight Recorder buffer: per process group, the last collective each rank
completed, the first collective where the ranks disagree, and the rank to blame.

The comparison is by collective sequence number (SeqNum) within a group, as torch's fr_trace
does, but it names the odd rank out by majority: fr_trace takes the first rank as the reference
and calls every rank that differs from it a culprit, which blames the healthy ranks when the first
rank is the odd one. Where the two readings differ the result says so.
"""
from __future__ import annotations

from collections import Counter
from typing import Any

from distdoctor.knowledge.i18n import t
from distdoctor.knowledge.printable import clean

from .model import FrResult, GroupResult, Mismatch, names as _names
from .reader import Entry, RankDump

# ops whose inputs (or outputs) may legitimately differ in size across ranks: fr_trace's list
# (all_to_all and scatter inputs, all_to_all and gather outputs) plus the uneven-split variants
_VARIABLE_IN = {"all_to_all", "all_to_all_single", "all_to_all_v_single", "scatter",
                "all_gather_v", "reduce_scatter_v"}
_VARIABLE_OUT = {"all_to_all", "all_to_all_single", "all_to_all_v_single", "gather",
                 "all_gather_v", "reduce_scatter_v"}


def _members(pg: str, desc: str, dumps: dict[int, RankDump], single: bool) -> tuple[list[int] | None, str]:
    """The group's global ranks from any rank's pg_config, and a note on how they were found.

    Gloo dumps in torch 2.13 key the config by an empty name while entries name the group '0'
    (the KeyError ('0', 0) fr_trace dies on): an unnamed config is the default group's."""
    found: set[int] = set()
    unnamed: set[int] = set()
    for dump in dumps.values():
        for key, conf in dump.pg_config.items():
            ranks = conf.get("ranks")
            if ranks is None:
                continue
            if key == pg or conf.get("name", "") == pg and pg:
                found.update(ranks)
            elif key == "" and not conf.get("name"):
                unnamed.update(ranks)
    if found:
        return sorted(found), ""
    if unnamed and (desc == "default_pg" or single):
        return sorted(unnamed), t("group {pg} taken as the unnamed group in pg_config (a Gloo dump)", pg=repr(pg))
    return None, t("group {pg} is not in any pg_config: its members are the ranks that recorded it", pg=repr(pg))


def _status(dump: RankDump, pg: str, key: str) -> int | None:
    value = (dump.pg_status.get(pg) or {}).get(key)
    return value if isinstance(value, int) else None


def _odd_out(values: dict[int, Any]) -> tuple[tuple[int, ...], tuple[int, ...], bool, Any]:
    """Split ranks by value: (minority ranks, majority ranks, even split?, majority value).
    On a tie the side holding the lowest rank is taken as the reference, as fr_trace does."""
    counts = Counter(values.values())
    lowest = min(values)
    best = max(counts.items(), key=lambda kv: (kv[1], values[lowest] == kv[0]))[0]
    odd = tuple(sorted(r for r, v in values.items() if v != best))
    rest = tuple(sorted(r for r, v in values.items() if v == best))
    return odd, rest, len(odd) == len(rest) or counts[best] <= len(values) / 2, best


def _vs_first(values: dict[int, Any]) -> tuple[int, ...]:
    """fr_trace's way of reading, with the lowest rank as the reference (fr_trace itself takes
    whichever dump it read first): every rank that differs from it."""
    ref = values[min(values)]
    return tuple(sorted(r for r, v in values.items() if v != ref))


def _signature(e: Entry) -> tuple[Any, ...]:
    return (e.op, e.input_sizes if e.op not in _VARIABLE_IN else None,
            e.output_sizes if e.op not in _VARIABLE_OUT else None, frozenset(e.dtypes))


def _compare(seq: int, present: dict[int, Entry]) -> Mismatch | None:
    entries = iter(present.values())
    first = _signature(next(entries))
    if all(_signature(e) == first for e in entries):
        return None  # the common case, thousands of times per buffer: no detail needed
    ops = {r: e.op for r, e in present.items()}
    if len(set(ops.values())) > 1:
        odd, rest, even, best = _odd_out(ops)
        said = t("; ").join(t("{ranks} called {op}", ranks=_names([r for r in ops if ops[r] == op]), op=op)
                         for op in sorted(set(ops.values()), key=lambda o: min(r for r in ops if ops[r] == o)))
        return Mismatch(seq, "op", odd, said, rest, best, _vs_first(ops), even)
    op = next(iter(ops.values()))
    sizes = {r: ((e.input_sizes if op not in _VARIABLE_IN else None),
                 (e.output_sizes if op not in _VARIABLE_OUT else None)) for r, e in present.items()}
    if len(set(sizes.values())) > 1:
        odd, rest, even, best = _odd_out(sizes)
        parts = []
        for value in sorted(set(sizes.values()), key=lambda v: min(r for r in sizes if sizes[r] == v)):
            who = [r for r in sizes if sizes[r] == value]
            parts.append(t("{value} on {ranks}", value=clean(value[0] if value[0] is not None else value[1], 160),
                           ranks=_names(who)))
        return Mismatch(seq, "size", odd, t("{op} with sizes {sizes}", op=op, sizes=t(" and ").join(parts)), rest, op,
                        _vs_first(sizes), even)
    dtypes = {r: tuple(sorted(set(e.dtypes))) for r, e in present.items()}
    if len(set(dtypes.values())) > 1:
        odd, rest, even, best = _odd_out(dtypes)
        parts = [t("{value} on {ranks}", value="/".join(v) or "?", ranks=_names([r for r in dtypes if dtypes[r] == v]))
                 for v in sorted(set(dtypes.values()), key=lambda v: min(r for r in dtypes if dtypes[r] == v))]
        return Mismatch(seq, "dtype", odd, t("{op} with dtype {dtypes}", op=op, dtypes=t(" and ").join(parts)), rest, op,
                        _vs_first(dtypes), even)
    return None


def analyse_group(pg: str, desc: str, dumps: dict[int, RankDump], single: bool) -> GroupResult:
    members, note = _members(pg, desc, dumps, single)
    by_rank: dict[int, dict[int, Entry]] = {}
    for rank, dump in dumps.items():
        seqs: dict[int, Entry] = {}
        for e in dump.entries:
            if e.pg == pg and not e.p2p and e.seq not in seqs:
                seqs[e.seq] = e  # the first entry of a coalesced group stands for it
        if seqs or members is None and _status(dump, pg, "last_enqueued_collective"):
            by_rank[rank] = seqs
    if members is None and desc == "default_pg" and dumps:
        # the world group holds every global rank up to the highest dump seen, so a missing low
        # rank is still named (Gloo dumps with subgroups record the world's ranks as "[]")
        members = list(range(max(dumps) + 1))
        note = t("group {pg} has no member list in pg_config: taken as ranks 0-{last}", pg=repr(pg), last=max(dumps))
    if members is None:
        members = sorted(by_rank)
    notes = [note] if note else []
    no_dump = tuple(r for r in members if r not in dumps)
    dumped = [r for r in members if r in dumps]
    last_completed: dict[int, int | None] = {r: None for r in no_dump}
    last_enqueued: dict[int, int | None] = {r: None for r in no_dump}
    last_op: dict[int, str] = {}
    for r in dumped:
        seqs = by_rank.get(r, {})
        done = [s for s, e in seqs.items() if e.completed]
        status_done = _status(dumps[r], pg, "last_completed_collective")
        status_enq = _status(dumps[r], pg, "last_enqueued_collective")
        last_completed[r] = max([s for s in (status_done,) if s is not None and s >= 0] + done + [0])
        last_enqueued[r] = max([s for s in (status_enq,) if s is not None and s >= 0] + list(seqs) + [0])
        if seqs:
            last_op[r] = seqs[max(seqs)].op
    never_joined = tuple(r for r in dumped if not last_enqueued[r])
    present = [r for r in dumped if by_rank.get(r)]
    mismatch: Mismatch | None = None
    stalled = ""
    when = 0
    if present:
        # a ring buffer forgets the oldest entries: compare only what every rank still holds
        start = max(min(by_rank[r]) for r in present)
        end = max(max(by_rank[r]) for r in present)
        open_seqs = [last_completed[r] + 1 for r in present if last_completed[r] is not None]  # type: ignore[operator]
        lost_at = min([min(open_seqs), end] if open_seqs else [end])
        # only the SeqNums some rank recorded: a gap (or a SeqNum of 2**64) is never walked
        for seq in sorted({s for r in present for s in by_rank[r] if start <= s <= end}):
            have = {r: by_rank[r][seq] for r in present if seq in by_rank[r]}
            absent = [r for r in dumped if r not in have and (r in never_joined or (last_enqueued[r] or 0) < seq)]
            if seq >= lost_at:
                absent += list(no_dump)
            if not have:
                continue
            when = min(e.time_ns for e in have.values())
            if absent:
                op = Counter(e.op for e in have.values()).most_common(1)[0][0]
                detail = _missing_detail(seq, op, absent, have, no_dump, never_joined, last_enqueued, last_op)
                mismatch = Mismatch(seq, "missing", tuple(sorted(absent)), detail, tuple(sorted(have)), op,
                                    tuple(sorted(absent)), len(absent) == len(have))
                break
            mismatch = _compare(seq, have)
            if mismatch:
                break
        if mismatch is None and no_dump:
            mismatch = Mismatch(end, "missing", no_dump,
                                t("no dump from {ranks}", ranks=_names(no_dump)), tuple(present), "?", no_dump)
        if mismatch is None:
            waiting = [r for r in present if (last_completed[r] or 0) < end]
            if waiting and len(waiting) == len(present):
                op = by_rank[present[0]][end].op
                stalled = t("every rank entered {op} #{seq} and none completed it: no rank is missing from it, "
                            "so look at the transport or a slow rank", op=op, seq=end)
    last_completed = {r: last_completed[r] for r in members}
    last_enqueued = {r: last_enqueued[r] for r in members}
    return GroupResult(pg=pg, desc=desc, ranks=tuple(members), last_completed=last_completed,
                       last_enqueued=last_enqueued, first_mismatch=mismatch, no_dump=no_dump,
                       never_joined=never_joined, stalled=stalled, notes=tuple(notes),
                       last_op=last_op, mismatch_time_ns=when)


def _missing_detail(seq: int, op: str, absent: list[int], have: dict[int, Entry], no_dump: tuple[int, ...],
                    never_joined: tuple[int, ...], last_enqueued: dict[int, int | None],
                    last_op: dict[int, str]) -> str:
    parts = [t("{ranks} reached {op} #{seq}", ranks=_names(have), op=op, seq=seq)]
    gone = sorted(r for r in absent if r in no_dump)
    if gone:
        parts.append(t("{ranks} left no dump (crashed, killed, or never dumped)", ranks=_names(gone)))
    joined_never = sorted(r for r in absent if r in never_joined and r not in no_dump)
    if joined_never:
        parts.append(t("{ranks} never issued a collective in this group", ranks=_names(joined_never)))
    for r in sorted(absent):
        if r in no_dump or r in joined_never:
            continue
        parts.append(t("rank {rank} stopped at {op} #{seq}", rank=r, op=last_op.get(r, "?"),
                       seq=last_enqueued.get(r)))
    return t("; ").join(parts)


def analyse(dumps: dict[int, RankDump], skipped: tuple[str, ...] = ()) -> FrResult:
    """Analyse every process group the dumps mention and pick the culprit."""
    from .blame import pick_culprit

    groups: dict[str, str] = {}
    for dump in dumps.values():
        for e in dump.entries:
            if not e.p2p:
                groups.setdefault(e.pg, e.desc)
    single = len(groups) == 1
    results = tuple(analyse_group(pg, desc, dumps, single)
                    for pg, desc in sorted(groups.items(), key=lambda kv: (not kv[0].isdigit(), kv[0].zfill(8))))
    return FrResult(groups=results, culprit=pick_culprit(results), dumps=dumps, skipped=skipped)
