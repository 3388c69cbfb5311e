"""From every rank's frames to the answer: identical stacks grouped, the place most ranks are in,
the odd ranks out, the culprit and a one-line summary. Pure functions over JSON-ready dicts, so a
fleet's merged ranks are read exactly as one node's."""
from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from typing import Any

from distdoctor.knowledge.i18n import t
from distdoctor.knowledge.ranks import rank_key, span

from .classify import CHECKPOINT, EVAL, Place, classify
from .frames import python_frames

NOT_RUNNING = "not running"


def rank_list(ranks: Iterable[str]) -> str:
    """["0","1","2","5"] -> "0-2,5": every rank once, every name shown (knowledge/ranks.py)."""
    return span(sorted(set(ranks), key=rank_key), names=None)


def _ranks_words(ranks: Sequence[str]) -> str:
    return t("rank {rank}", rank=ranks[0]) if len(ranks) == 1 else \
        t("{n} ranks ({ranks})", n=len(ranks), ranks=rank_list(ranks))


def _subject(ranks: Sequence[str], why: str) -> str:
    """"rank 1" + "is in broadcast ..." (a rank's why), agreeing in number."""
    if len(ranks) > 1 and why.startswith("is "):
        why = "are " + why[3:]
    return f"{_ranks_words(ranks)} {why}"


def _stack_key(frames: list[dict[str, Any]]) -> tuple[tuple[str, str, int], ...]:
    # Python frames only: native frames carry addresses that differ from process to process
    return tuple((str(f.get("name")), str(f.get("file")), int(f.get("line") or 0))
                 for f in python_frames(frames))


def group_stacks(ranks: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Ranks with identical stacks, biggest group first: {"ranks", "where", "frames"}."""
    groups: dict[tuple, list[dict[str, Any]]] = defaultdict(list)
    for r in ranks:
        if r.get("frames"):
            groups[_stack_key(r["frames"])].append(r)
    out = [{"ranks": sorted((m["rank"] for m in members), key=rank_key),
            "where": members[0]["where"], "frames": members[0]["frames"]}
           for members in groups.values()]
    out.sort(key=lambda g: (-len(g["ranks"]), rank_key(g["ranks"][0])))
    return out


def _reference(places: dict[str, Place], counts: Counter[str],
               first_rank: dict[str, str]) -> str:
    """The place the job is in: most ranks; on a tie, a collective or barrier (ranks waiting
    there are the ones left behind), then the place of the lowest rank."""
    return min(counts, key=lambda w: (-counts[w], not places[w].waiting, rank_key(first_rank[w])))


def _why(place: Place, ref: Place, ref_ranks: list[str]) -> str:
    who = _ranks_words(ref_ranks)
    waiting = (t("{who} wait in {where}", who=who, where=ref.where) if len(ref_ranks) > 1
               else t("{who} waits in {where}", who=who, where=ref.where))
    inner = t(", in {inner}", inner=place.inner) if place.inner else ""
    if place.waiting and ref.waiting:
        if place.op != ref.op:
            return t("is in {where}{inner}, a different collective: {waiting}", where=place.where, inner=inner,
                     waiting=waiting)
        return t("is in {op} from another line ({site}): {waiting}", op=place.op, site=place.site, waiting=waiting)
    if ref.waiting:
        return t("is in {where}{inner}, not in the collective: {waiting}", where=place.where, inner=inner,
                 waiting=waiting)
    if len(ref_ranks) > 1:
        return t("is in {where}{inner}, while {who} are in {ref}", where=place.where, inner=inner, who=who,
                 ref=ref.where)
    return t("is in {where}{inner}, while {who} is in {ref}", where=place.where, inner=inner, who=who, ref=ref.where)


def analyse(ranks: list[dict[str, Any]], expected: Iterable[str] = ()) -> dict[str, Any]:
    """The stacks result for `ranks` ({"rank", "pid", "host", "frames"}, plus "error" for a rank
    that could not be dumped). `expected` names ranks that should exist (from WORLD_SIZE): those
    with no process are odd ranks, `not running`."""
    places: dict[str, Place] = {}
    by_where: dict[str, list[str]] = defaultdict(list)
    out_ranks = []
    for r in sorted(ranks, key=lambda r: (rank_key(str(r["rank"])), r.get("host", ""))):
        entry = {"rank": str(r["rank"]), "pid": r.get("pid"), "host": r.get("host", ""),
                 "where": "", "frames": list(r.get("frames") or [])}
        if r.get("error"):
            entry["where"] = f"not dumped: {r['error']}"
        else:
            place = classify(entry["frames"])
            entry["where"] = place.where
            places[place.where] = place
            by_where[place.where].append(entry["rank"])
        out_ranks.append(entry)
    seen = {e["rank"] for e in out_ranks}
    missing = sorted((str(x) for x in expected if str(x) not in seen), key=rank_key)
    groups = group_stacks([e for e in out_ranks if e["rank"] in
                           {x for v in by_where.values() for x in v}])
    odd: list[dict[str, Any]] = []
    ref_where = ""
    if by_where:
        counts = Counter({w: len(v) for w, v in by_where.items()})
        ref_where = _reference(places, counts, {w: sorted(v, key=rank_key)[0] for w, v in by_where.items()})
        ref, ref_ranks = places[ref_where], sorted(by_where[ref_where], key=rank_key)
        for where in sorted(by_where, key=lambda w: rank_key(sorted(by_where[w], key=rank_key)[0])):
            if where == ref_where:
                continue
            for rank in sorted(by_where[where], key=rank_key):
                odd.append({"rank": rank, "where": where, "why": _why(places[where], ref, ref_ranks)})
    for rank in missing:
        odd.append({"rank": rank, "where": NOT_RUNNING,
                    "why": t("is not running: its process exited or never started")})
    result: dict[str, Any] = {"ranks": out_ranks, "groups": groups, "odd": odd}
    result["culprit"] = _culprit(places, by_where, ref_where, odd, missing)
    result["summary"] = summary(by_where, ref_where, missing, out_ranks)
    return result


def _clear_odd(places: dict[str, Place], by_where: dict[str, list[str]], ref_where: str) -> list[str]:
    """The places whose ranks are clearly the ones holding the job: the job waits in a
    collective and those ranks are elsewhere, or in another collective with fewer ranks."""
    if not ref_where or not places[ref_where].waiting:
        return []
    size = len(by_where[ref_where])
    return [w for w in by_where if w != ref_where
            and (not places[w].waiting or len(by_where[w]) < size)]


def _culprit(places: dict[str, Place], by_where: dict[str, list[str]], ref_where: str,
             odd: list[dict[str, Any]], missing: list[str]) -> dict[str, Any] | None:
    """The shared vocabulary's culprit, only when it is clear."""
    if missing:
        return {"ranks": missing, "role": "missing",
                "why": (t("{who} is not running while the others wait", who=_ranks_words(missing))
                        if len(missing) == 1 else
                        t("{who} are not running while the others wait", who=_ranks_words(missing)))}
    clear = _clear_odd(places, by_where, ref_where)
    if not clear or len(clear) != len({o['where'] for o in odd}):
        return None
    ranks = sorted((r for w in clear for r in by_where[w]), key=rank_key)
    first = next(o for o in odd if o["rank"] == ranks[0])
    return {"ranks": ranks, "role": "stuck", "why": _subject(ranks, first["why"])}


def summary(by_where: dict[str, list[str]], ref_where: str, missing: Sequence[str],
            ranks: list[dict[str, Any]]) -> str:
    """"7 ranks in all_reduce (train.py:88); rank 3 in save_checkpoint (ckpt.py:41)"."""
    parts = []
    order = sorted(by_where, key=lambda w: (w != ref_where, -len(by_where[w]),
                                            rank_key(sorted(by_where[w], key=rank_key)[0])))
    for where in order:
        members = sorted(by_where[where], key=rank_key)
        parts.append(f"{_ranks_words(members) if len(members) == 1 else f'{len(members)} ranks'} "
                     f"in {where}")
    if missing:
        parts.append(f"{_ranks_words(list(missing))} not running")
    failed = [r["rank"] for r in ranks if r["where"].startswith("not dumped")]
    if failed:
        parts.append(f"{_ranks_words(failed)} not dumped")
    return "; ".join(parts) if parts else "no rank dumped"


def _cause(place: Place | None, ref: Place | None, ranks: list[str]) -> str | None:
    if place is None:
        return "rank-crash-deadlock"  # a rank not running while the others wait
    if ref is None or not ref.waiting:
        return None
    if place.waiting:
        return "asymmetric-collective"
    if place.kind in (CHECKPOINT, EVAL) and ranks == ["0"]:
        return "rank0-overload"
    return "collective-timeout"


def as_evidence(result: dict[str, Any]) -> list[dict[str, Any]]:
    """Evidence for the verdict engine: one item per place the culprit ranks are in,
    {"source": "stacks", "ranks", "role", "why", "cause"} (cause: a cause id or None)."""
    culprit = result.get("culprit")
    if not culprit:
        return []
    by_where: dict[str, list[str]] = defaultdict(list)
    for odd in result.get("odd", []):
        if odd["rank"] in culprit["ranks"]:
            by_where[odd["where"]].append(odd["rank"])
    places = {r["where"]: classify(r["frames"]) for r in result.get("ranks", []) if r.get("frames")}
    counts = Counter(r["where"] for r in result.get("ranks", []) if r.get("frames"))
    odd_places = {o["where"] for o in result.get("odd", [])}
    ref_where = next((w for w, _ in counts.most_common() if w not in odd_places), None)
    ref = places.get(ref_where) if ref_where else None
    items = []
    for where, ranks in by_where.items():
        why = next(o["why"] for o in result["odd"] if o["where"] == where)
        place = None if where == NOT_RUNNING else places.get(where)
        items.append({"source": "stacks", "ranks": ranks,
                      "role": "missing" if place is None else "stuck",
                      "why": _subject(ranks, why), "cause": _cause(place, ref, ranks)})
    return items
