"""What a Flight Recorder comparison finds: per-group results, the first mismatch, the culprit."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from distdoctor.knowledge.i18n import t

from .reader import RankDump


@dataclass(frozen=True)
class Mismatch:
    seq: int
    kind: str  # missing | op | size | dtype
    ranks: tuple[int, ...]  # the ranks that disagree with the rest (for missing: the absent ones)
    detail: str
    others: tuple[int, ...]  # the ranks on the other side
    op: str  # the collective the majority (or the present ranks) issued
    fr_trace_ranks: tuple[int, ...]  # whom fr_trace's reasoning would name
    even_split: bool = False


@dataclass(frozen=True)
class GroupResult:
    pg: str
    desc: str
    ranks: tuple[int, ...]
    last_completed: dict[int, int | None]
    last_enqueued: dict[int, int | None]
    first_mismatch: Mismatch | None
    no_dump: tuple[int, ...]
    never_joined: tuple[int, ...]
    stalled: str = ""  # every rank in the same collective and none completed it
    notes: tuple[str, ...] = ()
    last_op: dict[int, str] = field(default_factory=dict)
    mismatch_time_ns: int = 0


@dataclass(frozen=True)
class Culprit:
    ranks: tuple[int, ...]
    role: str
    why: str
    cause: str | None
    pg: str = ""
    fr_trace_note: str = ""


@dataclass(frozen=True)
class FrResult:
    groups: tuple[GroupResult, ...]
    culprit: Culprit | None
    dumps: dict[int, RankDump]
    skipped: tuple[str, ...] = ()


def names(ranks: Any) -> str:
    """'rank 3', 'ranks 0, 1', 'ranks 0-6, 9' (runs of three or more collapse: worlds are big)."""
    ranks = sorted(ranks)
    if not ranks:
        return t("no rank")
    runs: list[list[int]] = []
    for r in ranks:
        if runs and runs[-1][-1] == r - 1:
            runs[-1].append(r)
        else:
            runs.append([r])
    parts = [f"{run[0]}-{run[-1]}" if len(run) >= 3 else ", ".join(map(str, run)) for run in runs]
    shown = ", ".join(parts)
    return t("rank {ranks}", ranks=shown) if len(ranks) == 1 else t("ranks {ranks}", ranks=shown)
