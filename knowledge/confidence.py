"""How sure the diagnosis is, and in what order its causes come (knowledge/diagnosis.py calls
these): which causes can apply to the job, which the culprit contradicts, which explains a crash
rather than follows from it, and the confidence of the answer (the levels are explained in
knowledge/diagnosis.py's docstring)."""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .i18n import t as tr
from .verdict import Ranked

# a second cause with at least this share of the top cause's score "fits alike": nothing is sure
ALIKE = 0.75
# below this share the top cause stands alone (a confirmed answer needs no close rival)
ALONE = 0.5
# signatures.toml's weight for "strong" (4 is "decisive on its own")
STRONG = 3.0
# below this, a signature is "a weak hint" (signatures.toml's weight 1)
WEAK_ONLY = 1.5
# what a cause's premise says about the culprit (causes.toml `premise`); the roles that contradict it
CONTRADICTS: Mapping[str, tuple[str, ...]] = {"crash": ("stuck", "slow"), "no-crash": ("crashed",)}
WAITED = ("lost-peer", "timeout")  # how a waiter's own lines end


def advisory(kb: Any, finding: Mapping[str, Any]) -> bool:
    """A hardening advice (checks.toml `advisory = true`) is never evidence for this incident."""
    check = kb.checks.get(str(finding.get("check", "")))
    return bool(check is not None and getattr(check, "advisory", False))


def applicable(kb: Any, ranked: list[Ranked], backend: str | None,
                logs: Mapping[str, Any] | None) -> tuple[list[Ranked], list[dict[str, str]]]:
    """Causes that cannot apply to this job are left out with the reason: on a Gloo job that
    shows no GPU, the causes that need NCCL or a GPU (causes.toml `needs`). A cause with a
    failure line of its own in these logs stays: the line proves the premise wrong."""
    if backend != "gloo" or _gpu_seen(logs):
        return ranked, []
    kept, left = [], []
    for r in ranked:
        needs = set(getattr(kb.causes.get(r.id), "needs", ()) or ())
        if needs & {"gpu", "nccl"} and not (r.basis == "evidence" and r.strong):
            left.append({"id": r.id, "why": tr("a Gloo job with no GPU in its logs: this cause needs {needs}",
                                               needs=" + ".join(sorted(needs)))})
        else:
            kept.append(r)
    return kept, left


def _gpu_seen(logs: Mapping[str, Any] | None) -> bool:
    facts = (logs or {}).get("facts") or {}
    values = facts.get("values") if isinstance(facts.get("values"), Mapping) else {}
    return any(str(k).startswith(("nccl", "cuda", "gpu")) for k in (*values, *facts))


def against_culprit(kb: Any, ranked: list[Ranked], who: Mapping[str, Any] | None,
                     left: list[dict[str, str]]) -> tuple[list[Ranked], set[str]]:
    """A cause whose premise the culprit contradicts is argued against in words and can no longer
    come first: "no crashed rank in sight" beside a crashed culprit, "a rank died" beside a rank
    the waiters name as never arriving. Returns the ranking and the ids argued against (no rival
    to the answer)."""
    role = (who or {}).get("role")
    if not role:
        return ranked, set()
    out, demoted = [], []
    for r in ranked:
        premise = getattr(kb.causes.get(r.id), "premise", "")
        if role in CONTRADICTS.get(premise, ()) and not (r.basis == "evidence" and r.strong and not out):
            ranks = ", ".join(str(x) for x in who.get("ranks") or [])
            why = tr("the culprit, rank {ranks}, {role}: this cause's premise does not hold", ranks=ranks,
                     role=tr(str(role)))
            if r.basis == "prior":  # nothing in its favour but the symptom: it does not apply
                left.append({"id": r.id, "why": why})
                continue
            demoted.append(Ranked(r.id, r.score, r.reasons, "facts" if r.basis == "evidence" else r.basis,
                                  False, (*r.against, why)))
        else:
            out.append(r)
    return out + demoted, {r.id for r in demoted}


def explanation_first(kb: Any, ranked: list[Ranked], who: Mapping[str, Any] | None,
                       logs: Mapping[str, Any] | None) -> list[Ranked]:
    """A consequence never outranks its explanation. When the top cause is "a rank died and the
    others wait" and another cause with this incident's evidence explains why the rank died, that
    cause comes first (see `_explains`)."""
    if not ranked or getattr(kb.causes.get(ranked[0].id), "premise", "") != "crash":
        return ranked
    for n, r in enumerate(ranked[1:], 1):
        if _explains(kb, r, who, logs):
            return [r, *ranked[:n], *ranked[n + 1:]]
    return ranked


def _explains(kb: Any, r: Ranked, who: Mapping[str, Any] | None, logs: Mapping[str, Any] | None) -> bool:
    """Whether a cause explains the crash: it rests on this incident's evidence, can kill a rank
    (causes.toml `explains_crash`), and, when the culprit's own failure line is shown, cites that
    very line; when the crash is only inferred (a peer's lost connection, a launcher's exit code),
    it is a set-up cause (`setup`) with evidence of its own."""
    cause = kb.causes.get(r.id)
    if not (r.basis == "evidence" and r.strong and getattr(cause, "explains_crash", False)):
        return False
    if any(reason.startswith("hardware:") for reason in r.reasons):
        return True  # a fault on the culprit's node as it died
    ff = (logs or {}).get("first_failure") or {}
    blamed = [str(x) for x in (who or {}).get("ranks") or []]
    if (who or {}).get("role") == "crashed" and str(ff.get("rank")) in blamed:
        cites = next((c.get("evidence") or [] for c in (logs or {}).get("causes") or []
                      if isinstance(c, Mapping) and c.get("id") == r.id), [])
        return (ff.get("file"), ff.get("line")) in {(e.get("file"), e.get("line")) for e in cites
                                                     if isinstance(e, Mapping)}
    return bool(getattr(cause, "setup", False))


def how_sure(kb: Any, ranked: list[Ranked], who: Mapping[str, Any] | None, logs: Mapping[str, Any] | None,
             bisect: Mapping[str, str]) -> str:
    """confirmed, likely or unknown for the top of `ranked` (knowledge/diagnosis.py says what each means)."""
    top = ranked[0] if ranked else None
    if top is None or top.basis != "evidence" or not top.strong:
        return "unknown"
    needs = set(getattr(kb.causes.get(top.id), "answer_needs", ()) or ())
    named = (who or {}).get("ranks") or []
    # several ranks named only by elimination (`inferred`) do not identify the culprit
    if "culprit" in needs and (not named or (who or {}).get("inferred") and len(named) > 1):
        return "unknown"
    if "waiters" in needs and not _waiters(logs):
        return "unknown"
    # the deadlock a crash leaves behind is no rival of the cause that explains the crash
    compatible = _explains(kb, top, who, logs)
    rivals = [r.score for r in ranked[1:] if r.basis != "prior"
              and not (compatible and getattr(kb.causes.get(r.id), "premise", "") == "crash")]
    share = max(rivals, default=0.0) / top.score if top.score > 0 else 1.0
    if share >= ALIKE:
        return "unknown"
    chain = top.id in bisect or _chain(top, who, logs)
    if chain and share < ALONE and not (who or {}).get("inferred"):
        return "confirmed"  # a culprit named only by elimination (`inferred`) is likely at most
    # with no rank named, the line itself must be strong: one weak or moderate signature fits
    # several causes (a reset connection, a catch-all NCCL code)
    if not (who or {}).get("ranks") and not _other_source(top) and _weight(top, logs) < STRONG:
        return "unknown"
    # a named culprit says who failed, not why: a cause resting on one weak hint alone (weight 1,
    # no structural rule of this incident) fits several causes as well
    if not _other_source(top) and not _rules(top, logs) and 0 < _weight(top, logs) < WEAK_ONLY:
        return "unknown"
    return "likely"


def signatures_of(top: Ranked | None, logs: Mapping[str, Any] | None) -> tuple[str, ...]:
    """The signature ids of the top cause's log lines, in their order."""
    cause = next((c for c in (logs or {}).get("causes") or [] if isinstance(c, Mapping)
                  and top is not None and c.get("id") == top.id), {})
    return tuple(dict.fromkeys(str(e.get("signature")) for e in cause.get("evidence") or []
                               if isinstance(e, Mapping) and e.get("signature")))


def _weight(top: Ranked, logs: Mapping[str, Any] | None) -> float:
    """The weight of the top cause's strongest failure signature in the logs (0: none)."""
    cause = next((c for c in (logs or {}).get("causes") or [] if isinstance(c, Mapping) and c.get("id") == top.id), {})
    try:
        return float(cause.get("weight") or 0.0)
    except (TypeError, ValueError):
        return 0.0


def _rules(top: Ranked, logs: Mapping[str, Any] | None) -> tuple[str, ...]:
    """The structural rules (rules.toml ids) the logs' analysis fired for the top cause."""
    cause = next((c for c in (logs or {}).get("causes") or [] if isinstance(c, Mapping) and c.get("id") == top.id), {})
    return tuple(str(r) for r in cause.get("rules") or ())


def _other_source(top: Ranked) -> bool:
    """Whether evidence beyond the logs backs the cause (a check, the fleet, a switch, a live capture;
    not a topology pasted with them, a fact of the set-up)."""
    return any(not r.startswith(("logs", "symptom", "topology")) for r in top.reasons)


def _waiters(logs: Mapping[str, Any] | None) -> bool:
    """Whether any rank is seen waiting: its lines end in a timeout or a lost peer."""
    timeline = (logs or {}).get("timeline") or {}
    return any(((row or {}).get("end") or {}).get("kind") in WAITED for row in timeline.values())


def _chain(top: Ranked, who: Mapping[str, Any] | None, logs: Mapping[str, Any] | None) -> bool:
    """The mechanism end to end: the culprit's own failure line is evidence for the top cause and
    another rank's lines show what followed (it waited, lost its peer); or the waiters name a
    stuck rank whose lines simply stop."""
    if not who or not logs:
        return False
    timeline = logs.get("timeline") or {}
    blamed = [str(r) for r in who.get("ranks") or []]
    others = [row for r, row in timeline.items() if r not in blamed and isinstance(row, Mapping)]
    waited = any((row.get("end") or {}).get("kind") in WAITED for row in others)
    if not waited:
        return False
    if who.get("role") in ("stuck", "slow"):
        return True
    ff = logs.get("first_failure") or {}
    cause = next((c for c in logs.get("causes") or [] if c.get("id") == top.id), None)
    own = {(e.get("file"), e.get("line")) for e in (cause or {}).get("evidence") or [] if isinstance(e, Mapping)}
    return who.get("role") == "crashed" and str(ff.get("rank")) in blamed and (ff.get("file"), ff.get("line")) in own
