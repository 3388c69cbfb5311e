"""From the per-group comparison to a culprit in the shared vocabulary, the --json document, the
evidence items for the diagnosis (knowledge/diagnosis.py), and the cross-check against `distdoctor stacks`.

Who is to blame for a disagreement is a judgement, made here in one place:
- a rank with no dump while the others wait: it crashed (rank-crash-deadlock);
- ranks that never issued the collective the others wait in: stuck (collective-timeout), unless
  they are the majority, in which case the few ranks that issued it are ahead: an asymmetric
  collective (only some ranks take the branch that calls it);
- a different op, size or dtype at the same SeqNum: the minority is misconfigured
  (asymmetric-collective: the ranks run different code paths).
An even split cannot be told from the dumps alone; the culprit then says so.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from distdoctor.knowledge.i18n import t
from distdoctor.knowledge.printable import clean

from .model import Culprit, FrResult, GroupResult, names as _names


def _culprit_of(group: GroupResult) -> Culprit | None:
    m = group.first_mismatch
    if m is None:
        return None
    label = t(" in group {pg}", pg=group.pg + (f" ({group.desc})" if group.desc else ""))
    # half against half where one side waits in a collective the other never issued: the side that
    # never issued it is named (most often it is late), with the doubt said
    unsure = t(" The split is even, so the dumps alone cannot tell which side is wrong: check "
               "`distdoctor stacks`.") if m.even_split else ""
    if m.even_split and m.kind != "missing" and not any(r in group.no_dump for r in m.ranks):
        # half the ranks against the other half, each issuing a different collective at this
        # SeqNum: no side is the odd one out, so no rank is named
        return Culprit((), "undecided", t(
            "at collective #{seq}{group}, {detail}: ranks {ranks} against ranks {others}, an even split, so the "
            "dumps alone cannot tell which side is wrong. Break the tie with `distdoctor stacks` (where each rank "
            "is now), `distdoctor lint` on the training script (a collective under a rank condition), or a "
            "third rank's dump", seq=m.seq, group=label, detail=m.detail or m.kind, ranks=_names(m.ranks),
            others=_names(m.others)), "asymmetric-collective", group.pg)
    if m.kind == "missing":
        gone = tuple(r for r in m.ranks if r in group.no_dump)
        if gone:
            return Culprit(gone, "crashed", t("{ranks} left no Flight Recorder dump while {others} reached "
                                              "{op} #{seq}{group}: it crashed or was killed (or was never set "
                                              "to dump)", ranks=_names(gone), others=_names(m.others), op=m.op,
                                              seq=m.seq, group=label), "rank-crash-deadlock", group.pg)
        never = tuple(r for r in m.ranks if r in group.never_joined)
        if len(m.ranks) <= len(m.others):
            if never and len(never) == len(m.ranks):
                return Culprit(m.ranks, "missing", t("{ranks} never issued a collective{group} while {others} "
                                                     "wait in {op} #{seq}", ranks=_names(m.ranks), group=label,
                                                     others=_names(m.others), op=m.op, seq=m.seq),
                               "collective-timeout", group.pg)
            stops = t(", ").join(t("rank {rank} at {op} #{seq}", rank=r, op=group.last_op.get(r, "?"),
                                   seq=group.last_enqueued.get(r)) for r in m.ranks)
            return Culprit(m.ranks, "stuck", t("{ranks} never reached {op} #{seq}{group} ({stops}); {others} "
                                               "wait in it.{unsure}", ranks=_names(m.ranks), op=m.op, seq=m.seq,
                                               group=label, stops=stops, others=_names(m.others), unsure=unsure),
                           "collective-timeout", group.pg)
        return Culprit(m.others, "misconfigured", t("{others} called {op} #{seq}{group} that {ranks} never "
                                                    "called: a collective only some ranks reach (e.g. under "
                                                    "`if rank == 0:`)", others=_names(m.others), op=m.op,
                                                    seq=m.seq, group=label, ranks=_names(m.ranks)),
                       "asymmetric-collective", group.pg)
    values = {"seq": m.seq, "group": label, "detail": m.detail, "ranks": _names(m.ranks), "unsure": unsure}
    why = (t("at collective #{seq}{group}, {detail}: {ranks} is the odd one out (the ranks run different code "
             "paths).{unsure}", **values) if len(m.ranks) == 1 else
           t("at collective #{seq}{group}, {detail}: {ranks} are the odd one out (the ranks run different code "
             "paths).{unsure}", **values))
    return Culprit(m.ranks, "misconfigured", why, "asymmetric-collective", group.pg)


def fr_trace_note(group: GroupResult, culprit: Culprit) -> str:
    """A sentence when fr_trace's way of naming culprits would point elsewhere."""
    m = group.first_mismatch
    if m is None:
        return ""
    if m.kind == "missing":
        if set(m.fr_trace_ranks) == set(culprit.ranks):
            return ""
        return t("fr_trace would report {reported} as missing from {op} #{seq}; distdoctor blames {ranks} "
                 "because only {n} of {total} ranks issued it", reported=_names(m.fr_trace_ranks), op=m.op,
                 seq=m.seq, ranks=_names(culprit.ranks), n=len(m.others), total=len(m.others) + len(m.ranks))
    return t("fr_trace compares every rank with whichever dump it reads first, so it may name {others} as the "
             "culprit instead (its own code warns its culprit can be the wrong rank); distdoctor names {ranks}, "
             "the odd one out ({n} of {total} ranks agree)", others=_names(m.others), ranks=_names(culprit.ranks),
             n=len(m.others), total=len(m.others) + len(m.ranks))


def pick_culprit(groups: Sequence[GroupResult]) -> Culprit | None:
    """The culprit of the group whose first disagreement happened first."""
    with_mismatch = [g for g in groups if g.first_mismatch is not None]
    if not with_mismatch:
        return None
    group = min(with_mismatch, key=lambda g: (g.mismatch_time_ns or 1 << 62, g.pg))
    culprit = _culprit_of(group)
    if culprit is None:
        return None
    note = fr_trace_note(group, culprit) if culprit.ranks else ""
    return Culprit(culprit.ranks, culprit.role, culprit.why, culprit.cause, culprit.pg, note)


def to_json(result: FrResult) -> dict[str, Any]:
    """The documented --json shape, exactly."""
    groups = []
    for g in result.groups:
        m = g.first_mismatch
        groups.append({
            "pg": g.pg,
            "ranks": [str(r) for r in g.ranks],
            "last_completed": {str(r): v for r, v in g.last_completed.items()},
            "first_mismatch": None if m is None else {
                "seq": m.seq, "kind": m.kind, "ranks": [str(r) for r in m.ranks], "detail": m.detail},
        })
    c = result.culprit
    return {"groups": groups,
            "culprit": None if c is None else {"ranks": [str(r) for r in c.ranks], "role": c.role,
                                               "why": c.why}}


def as_evidence(result: FrResult) -> list[dict[str, Any]]:
    """Evidence items for the diagnosis: the culprit, and each group's stall or mismatch."""
    items: list[dict[str, Any]] = []
    c = result.culprit
    if c is not None:
        items.append({"source": "fr", "ranks": [str(r) for r in c.ranks], "role": c.role,
                      "why": c.why, "cause": c.cause})
    for g in result.groups:
        if g.stalled:
            items.append({"source": "fr", "ranks": [], "role": None,
                          "why": t("group {pg}: {why}", pg=g.pg, why=g.stalled), "cause": "collective-timeout"})
        elif g.first_mismatch is not None and (c is None or g.pg != c.pg):
            other = _culprit_of(g)
            if other is not None:
                items.append({"source": "fr", "ranks": [str(r) for r in other.ranks],
                              "role": other.role, "why": other.why, "cause": other.cause})
    return items


def cross_check(result: FrResult, stacks: dict[str, Any] | None) -> list[str]:
    """Lines saying whether `distdoctor stacks --json` agrees with the Flight Recorder culprit."""
    c = result.culprit
    if c is None or not isinstance(stacks, dict):
        return []
    where = {clean(r.get("rank"), 24): clean(r.get("where") or "?", 200) for r in stacks.get("ranks") or []
             if isinstance(r, dict)}
    odd = {clean(o.get("rank"), 24) for o in stacks.get("odd") or [] if isinstance(o, dict)}
    blamed = {str(r) for r in c.ranks}
    seen = [t("rank {rank} is in {where}", rank=r, where=where[r]) for r in sorted(blamed) if r in where]
    if odd and not (odd & blamed):
        return [t("stacks disagree: they single out {odd} while Flight Recorder points at {ranks}",
                  odd=_names(int(r) for r in odd if r.isdigit()), ranks=_names(c.ranks))
                + (t(" ({seen})", seen=t("; ").join(seen)) if seen else "")]
    if seen:
        return [t("stacks agree: {seen}", seen=t("; ").join(seen))]
    return []


def cross_check_logs(result: FrResult, logs: dict[str, Any] | None) -> list[str]:
    """Lines saying whether `distdoctor logs --json` (its first failure, its crashed ranks) agrees
    with the Flight Recorder culprit."""
    c = result.culprit
    if c is None or not isinstance(logs, dict):
        return []
    blamed = {str(r) for r in c.ranks}
    first = logs.get("first_failure") if isinstance(logs.get("first_failure"), dict) else {}
    ranks = logs.get("ranks") if isinstance(logs.get("ranks"), dict) else {}
    crashed = {clean(r, 24) for r, v in ranks.items() if isinstance(v, dict) and v.get("status") == "crashed"}
    rank = clean(first.get("rank"), 24) if first.get("rank") is not None else None
    text = clean(first.get("text") or "", 160)
    if rank is None and not crashed:
        return []
    if (rank in blamed) or (crashed & blamed):
        who = rank if rank in blamed else sorted(crashed & blamed)[0]
        return [t("logs agree: rank {rank}", rank=who)
                + (t(" failed first ({text})", text=text) if who == rank and text else t(" crashed"))]
    named = rank or ", ".join(sorted(crashed))
    return [t("logs disagree: they show rank {rank} failing first", rank=named)
            + (t(" ({seen})", seen=text) if rank and text else "")
            + t(" while Flight Recorder points at {ranks}", ranks=_names(c.ranks))]
