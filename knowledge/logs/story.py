"""The story of a log set in two or three sentences: who failed, who waited and where, what the
launcher said; and the phrases the culprit rules reuse (how a rank ended, a list of ranks)."""
from __future__ import annotations

from typing import Any

from ..i18n import t as tr
from .timeline import INTERRUPTED, RankLine, exceptions_unranked, when, where
from .view import View

WAITING = ("timeout", "lost-peer")  # how a waiter's own lines end


def ended(rl: RankLine) -> str:
    e = rl.end
    at = tr(" ({at})", at=where(e.hit)) if e.hit is not None else ""
    during = when(rl)
    if e.exc is not None:
        msg = e.exc.message if len(e.exc.message) <= 90 else e.exc.message[:87] + "..."
        return tr("raised {type}{when}{at}", type=e.exc.type, when=during, at=at) + (tr(": ") + msg if msg else "")
    if e.kind == "killed":
        return tr("was killed ({detail}){when}{at}", detail=e.detail, when=during, at=at)
    return tr("failed{when}{at}: {detail}", when=during, at=at, detail=e.detail[:100])


def names(rls: list[RankLine]) -> str:
    return ", ".join(rl.rank for rl in rls[:6]) + (tr(" and {n} more", n=len(rls) - 6) if len(rls) > 6 else "")


def summary(view: View, lines: dict[str, RankLine], who: dict[str, Any] | None) -> str:
    """What happened, in order, in two or three sentences."""
    parts: list[str] = []
    named = lines.get(who["ranks"][0]) if who else None  # absent when named from the others' lines alone
    if who and who["role"] == "crashed" and named is not None and named.end.kind in ("crashed", "killed"):
        parts.append(tr("rank {rank} {ended}", rank=who["ranks"][0], ended=ended(named)))
    elif who and who["role"] == "crashed" and named is None:
        parts.append(who["why"])
    elif who and who["role"] == "crashed":
        rl = named
        how = tr("exited with code {code} and no traceback", code=rl.exitcode) if rl.exitcode not in (None, 0) \
            else tr("exited without an error of its own")
        parts.append(tr("rank {rank} {how}{when}", rank=rl.rank, how=how, when=when(rl, phase=False)))
    elif who and who["role"] in ("stuck", "slow"):
        waiting = {rl.rank for rl in lines.values() if rl.end.kind in WAITING}
        if set(who["ranks"]) & waiting:  # the culprit is one of the waiters: say why it is the one
            rl = lines.get(who["ranks"][0])
            parts.append(who["why"] + (_where_waiting(rl) if rl else ""))
        else:
            for r in who["ranks"][:3]:
                rl = lines.get(r)
                doing = rl.doing() if rl else ""
                parts.append(tr("rank {rank} never reached the collective", rank=r)
                             + (tr(" (last seen {doing})", doing=doing) if doing else ""))
        done = [rl for rl in lines.values() if rl.end.kind == "finished"]
        if done and waiting:
            parts.append(tr("rank {ranks} had finished", ranks=names(done)))
    elif who:
        parts.append(who["why"])
    elif len(stopped := [rl for rl in lines.values() if rl.end.detail == INTERRUPTED]) > 1 and len(stopped) == len(lines):
        parts.append(tr("every rank was interrupted (SIGINT) together: the job was stopped from outside (Ctrl-C to "
                        "the launcher), not by a failure of one rank"))
    else:
        unranked = exceptions_unranked(view)
        if unranked:
            e = unranked[0]
            parts.append(tr("a process raised {type} ({at}): {msg}", type=e.type, at=where(e.hit),
                           msg=e.message[:90]))
    blamed = set(who["ranks"]) if who else set()
    for kind, words in (("lost-peer", "rank {ranks} lost its peer{where}"), ("timeout", "rank {ranks} timed out{where}")):
        by_op: dict[Any, list[RankLine]] = {}  # waiters in different collectives are told apart
        for rl in lines.values():
            if rl.end.kind == kind and rl.rank not in blamed:
                by_op.setdefault((rl.last_collective or {}).get("op"), []).append(rl)
        for rls in by_op.values():
            parts.append(tr(words, ranks=names(rls), where=_where_waiting(rls[0])))
    launcher = _launcher_blame(lines, blamed)
    if launcher:
        parts.append(launcher)
    if not parts:
        return ""
    text = tr("; ").join(parts)
    return text[0].upper() + text[1:] + tr(".")


def _where_waiting(rl: RankLine) -> str:
    """` in allreduce (SeqNum 12) after step 4 (0/stderr.log:11)`: what a waiter was doing."""
    lc = rl.last_collective or {}
    op = tr(" in {op}", op=str(lc["op"]).lower()) + (f" (SeqNum {lc['seq']})" if lc.get("seq") is not None else "") \
        if lc.get("op") else ""
    at = tr(" ({at})", at=where(rl.end.hit)) if rl.end.hit is not None else ""
    return tr("{op}{when}{at}", op=op, when=when(rl, phase=False), at=at)


def _launcher_blame(lines: dict[str, RankLine], blamed: set[str]) -> str:
    """torchrun names the first rank to EXIT as the root cause; say so when that is a waiter."""
    exited = [rl for rl in lines.values() if rl.exitcode not in (None, 0) and rl.end.kind != "stopped"]
    stopped = [rl for rl in lines.values() if rl.end.kind == "stopped"]
    if exited and blamed and not blamed & {rl.rank for rl in exited}:
        return tr("the launcher reported rank {ranks} (exit code {code}) as the first failure, but that rank "
                 "was waiting for rank {blamed}", ranks=names(exited), code=exited[0].exitcode,
                 blamed=", ".join(sorted(blamed)))
    if stopped:
        return tr("the launcher then stopped rank {ranks}", ranks=names(stopped))
    return ""
