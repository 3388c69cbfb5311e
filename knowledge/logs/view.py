"""A resolved view of a Collector: hits and timeouts with ranks mapped, facts per rank, crashes."""
from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

from . import extract as x
from .collect import Collector
from .compiled import Sig
from .records import Hit


@dataclass
class View:
    col: Collector
    sigs: dict[str, Sig]
    timeouts: dict[str, dict[str, x.Timeout]] = field(default_factory=dict)  # pg -> rank -> timeout
    unranked: list[x.Timeout] = field(default_factory=list)
    facts: dict[str, dict[str, str]] = field(default_factory=dict)
    fact_hits: dict[tuple[str, str], Hit] = field(default_factory=dict)
    channels: dict[str, list[str]] = field(default_factory=dict)
    crashes: list[Hit] = field(default_factory=list)  # root crashes, consequences removed
    consequence_crashes: list[Hit] = field(default_factory=list)

    def rank(self, hit: Hit) -> str | None:
        return resolve(self.col, hit.rank, hit.proc)

    @property
    def waiting(self) -> set[str]:
        return {r for per in self.timeouts.values() for r in per}

    @property
    def one_host(self) -> bool:
        """Whether the logs themselves say the whole job ran on one host: NCCL's `nNodes 1`, or
        a listing of every rank (nccl-tests' device table) that names one host. One host seen in
        an excerpt says nothing: other nodes' lines may just not be in it."""
        listed = self.col.rank_hosts
        whole = bool(listed) and sorted(int(r) for r in listed) == list(range(len(listed)))
        return self.col.nodes == 1 or (whole and len(set(listed.values())) == 1)

    def hits_with(self, tag: str) -> list[Hit]:
        return [h for sid, hs in self.col.hits.items() if tag in self.sigs[sid].tags for h in hs]


def resolve(col: Collector, rank: str | None, proc: str | None) -> str | None:
    if rank is not None:
        return rank
    if proc is not None:
        mapped = col.proc_rank.get(proc)
        return mapped[1] if mapped else proc
    return None


def build(col: Collector, sigs: dict[str, Sig]) -> View:
    v = View(col, sigs)
    for (key, pg), t in col.timeouts.items():
        r = resolve(col, key if not _is_proc(key) else None, key if _is_proc(key) else None) or key
        v.timeouts.setdefault(pg, {}).setdefault(r, t)
    v.unranked = list(col.unranked_timeouts)
    for key, facts in col.facts.items():
        r = resolve(col, None, key) if _is_proc(key) else key
        merged = v.facts.setdefault(r or key, {})
        for k, val in facts.items():
            if k not in merged:
                merged[k] = val
                v.fact_hits[(r or key, k)] = col.fact_lines[(key, k)]
    chans: dict[str, set[str]] = defaultdict(set)
    for key, kinds in col.channels.items():
        r = resolve(col, None, key) if _is_proc(key) else key
        chans[r or key] |= kinds
    v.channels = {k: sorted(s) for k, s in chans.items()}
    _crashes(v)
    return v


def _is_proc(key: str) -> bool:
    return ":" in key


def _crashes(v: View) -> None:
    """Split crash lines into root failures and consequences of a timeout."""
    waiting = v.waiting
    first_timeout = {f.name: f.first_timeout for f in v.col.files}
    timeout_ts = [t.ts for per in v.timeouts.values() for t in per.values() if t.ts]
    timeout_ts += [t.ts for t in v.unranked if t.ts]
    for h in v.hits_with("crash"):
        r = v.rank(h)
        if r is not None:
            # a rank that timed out and then died was torn down by the watchdog; a rank that
            # never timed out died first, wherever its lines sit in an interleaved file
            consequence = r in waiting
        else:
            consequence = first_timeout.get(h.file) is not None and h.line > (first_timeout[h.file] or 0)
            if h.ts and timeout_ts:
                same = [ts[1] for ts in timeout_ts if ts[0] == h.ts[0]]
                if same:
                    consequence = h.ts[1] > min(same)
        (v.consequence_crashes if consequence else v.crashes).append(h)
