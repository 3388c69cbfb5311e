"""The one conclusion engine: every source of evidence about an incident combined into ranked
causes, each with its basis, and the culprit (which rank, in what role, and why).

The command line, the app's Conclusion step and the report all call `rank_causes` and `culprit`;
no renderer ranks causes itself. Sources: the symptom's priors, the log analysis (whose causes
carry their basis: evidence, facts or prior), failed checks, the fleet comparison, the bisection
verdict, and evidence items from live hangs and static analysis (stacks, Flight Recorder, NCCL RAS,
lint), each `{"source", "ranks", "role", "why", "cause"}`.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from .frozen import Frozen, frozen
from .i18n import t as tr

# How much each kind of evidence counts once normalised to 0..1. A switch that turns a failure
# into a pass is the strongest evidence the method produces; a symptom is only a prior.
WEIGHTS: Mapping[str, float] = {"symptom": 1.0, "logs": 2.0, "findings": 1.5, "fleet": 1.5,
                                "bisect": 3.0, "stacks": 2.5, "fr": 2.5, "ras": 2.5, "lint": 1.0,
                                "hardware": 3.0,  # a hardware fault on the culprit's node as it died
                                "topology": 1.0}  # a topology pasted with the logs: a fact of the set-up
# sources whose items are facts about the set-up, not this incident's evidence (never strong)
FACT_SOURCES = ("lint", "topology")
# The log analysis orders its own causes (a rank-0-only phase while the others wait may outrank
# their timeouts); a cause resting on the symptom alone comes from the symptom's priors instead.
BASIS_SHARE: Mapping[str, float] = {"evidence": 1.0, "facts": 1.0, "prior": 0.0}
RULED_OUT_FACTOR = 0.5  # a passing minimal repro weakens node-local causes, it does not disprove them
# A FAIL is a fact about this node; a WARN is a risk or a hardening advice, not an observed failure.
FINDING_STRENGTH: Mapping[str, float] = {"fail": 1.0, "warn": 0.3}


@frozen
class Ranked(Frozen):
    """One cause with its combined score and the reasons behind it, strongest first."""

    id: str
    score: float
    reasons: tuple[str, ...]
    basis: str = "evidence"  # evidence (a failure line, a failed check, a switch, a stack), facts, prior
    strong: bool = False  # evidence about this incident (log failure lines, bisect, fleet, live sources, lint)
    against: tuple[str, ...] = ()  # what argues against it (the logs' own, or the culprit's)

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "score": self.score, "reasons": list(self.reasons), "basis": self.basis,
                "strong": self.strong, "against": list(self.against)}


def _num(value: Any) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        return 0.0


def rank_causes(suspects: Sequence[Mapping[str, Any]] = (),
                log_causes: Sequence[Mapping[str, Any]] = (),
                findings: Sequence[Mapping[str, Any]] = (),
                bisect: Mapping[str, str] | None = None,
                fleet: Sequence[Mapping[str, Any]] = (),
                ruled_out: Mapping[str, str] | None = None,
                extra: Sequence[Mapping[str, Any]] = ()) -> list[Ranked]:
    """Combine the evidence into one ranking, best first.

    `suspects`: [{"id", "weight", "why"}] from the symptom; `log_causes`: [{"id", "score",
    "evidence"}] from log analysis; `findings`: Finding dicts (`status`, `cause_ids`, `check`);
    `bisect`: cause id -> why the bisection implicates it; `fleet`: compare()'s disagreements
    (`field`, `cause_id`); `ruled_out`: cause id -> why a passing repro weakens it; `extra`:
    evidence items from stacks, Flight Recorder, RAS and lint. Each source
    is scaled by its own maximum so no source swamps the others by its units; causes with no
    evidence are left out.
    """
    parts: dict[str, dict[str, float]] = {}
    reasons: dict[str, list[tuple[float, str]]] = {}
    bases: dict[str, str] = {}
    strong: set[str] = set()
    against: dict[str, list[str]] = {}
    # Records can hold events written by other versions or by hand: skip what is not a mapping.
    suspects, log_causes, findings, fleet = (
        [x for x in seq if isinstance(x, Mapping)] for seq in (suspects, log_causes, findings, fleet))

    def add(source: str, cause_id: str, strength: float, reason: str, basis: str = "evidence") -> None:
        if not cause_id or strength <= 0:
            return
        order = ("evidence", "facts", "prior")
        if cause_id not in bases or order.index(basis) < order.index(bases[cause_id]):
            bases[cause_id] = basis
        current = parts.setdefault(cause_id, {})
        value = WEIGHTS[source] * strength
        if value > current.get(source, 0.0):
            current[source] = value
        reasons.setdefault(cause_id, []).append((value, reason))
        if source not in ("symptom", "findings", "topology") and (source != "logs" or basis == "evidence"):
            strong.add(cause_id)

    top = max((_num(s.get("weight")) for s in suspects), default=0.0)
    for s in suspects:
        weight = _num(s.get("weight"))
        if top > 0:
            add("symptom", str(s.get("id", "")), weight / top,
                tr("symptom: {why}", why=s.get("why") or weight), "prior")
    log_causes = [c for c in log_causes if c.get("basis", "evidence") != "prior"]  # the symptom says it
    top = max((_num(c.get("score")) for c in log_causes), default=0.0)
    # ties keep the log analysis's own order (its tie-break: the strongest single signature)
    order = {str(c.get("id", "")): n for n, c in reversed(list(enumerate(log_causes)))}
    for n, c in enumerate(log_causes):
        basis = str(c.get("basis") or ("facts" if c.get("lead") else "evidence"))
        share = BASIS_SHARE.get(basis, 1.0)
        score = _num(c.get("score")) * share
        evidence = c.get("evidence")
        lines = len(evidence) if isinstance(evidence, list) else 0
        plural = (tr(", {n} evidence line", n=lines) if lines == 1 else tr(", {n} evidence lines", n=lines)) \
            if lines else ""
        against.setdefault(str(c.get("id", "")), []).extend(str(a) for a in c.get("against") or [])
        if top > 0:
            add("logs", str(c.get("id", "")), score / top, tr("logs ({basis}): score {score}{lines}",
                basis=tr(basis), score=f"{score:g}", lines=plural), basis)
        else:  # causes without scores (a hand-written or older record) still come best first
            add("logs", str(c.get("id", "")), share / (n + 1), tr("logs ({basis}): cause #{n}{lines}",
                basis=tr(basis), n=n + 1, lines=plural), basis)
    for f in findings:
        strength = FINDING_STRENGTH.get(str(f.get("status", "")), 0.0)
        for cause_id in f.get("cause_ids") or ():
            add("findings", str(cause_id), strength,
                tr("check {check}: {status}", check=f.get("check", "?"), status=tr(str(f.get("status", "")).upper())),
                "evidence" if f.get("status") == "fail" else "facts")
    for d in fleet:
        add("fleet", str(d.get("cause_id", "")), 1.0,
            tr("fleet: nodes disagree on {field}", field=d.get("field", "?")))
    for cause_id, why in (bisect or {}).items():
        add("bisect", cause_id, 1.0, tr("bisect: {why}", why=why))
    for item in (x for x in extra if isinstance(x, Mapping)):
        source = str(item.get("source", ""))
        if source in WEIGHTS and item.get("cause"):
            who = ", ".join(str(r) for r in item.get("ranks") or [])
            add(source, str(item["cause"]), 1.0,
                f"{source}: " + (tr("rank {ranks} {role}: ", ranks=who, role=tr(str(item.get("role", ""))))
                                  if who else "") + str(item.get("why", "")),
                "facts" if source in FACT_SOURCES else "evidence")
    ranked = []
    for cid, p in parts.items():
        score = sum(p.values())
        why = [r for _, r in sorted(reasons[cid], key=lambda x: -x[0])]
        if ruled_out and cid in ruled_out:
            score *= RULED_OUT_FACTOR
            why.append(tr("weakened: {why}", why=ruled_out[cid]))
        ranked.append(Ranked(cid, round(score, 3), tuple(why), bases.get(cid, "evidence"), cid in strong,
                             tuple(against.get(cid, ()))))
    given = {cid: n for n, cid in enumerate(parts)}  # then the order the sources gave them in
    return sorted(ranked, key=lambda r: (r.basis == "prior", -r.score, order.get(r.id, len(order)), given[r.id]))


def culprit(logs: Mapping[str, Any] | None, extra: Sequence[Mapping[str, Any]] = ()) -> dict[str, Any] | None:
    """The culprit: the logs' verdict when it names one, else a live-hang source's (stacks, Flight
    Recorder, RAS). When both name ranks and disagree, the logs' stays and the other is noted."""
    verdict = (logs or {}).get("verdict") if isinstance(logs, Mapping) else None
    found = verdict.get("culprit") if isinstance(verdict, Mapping) else None
    live = [x for x in extra if isinstance(x, Mapping) and x.get("source") in ("fr", "stacks", "ras")
            and x.get("ranks")]
    if not found and live:
        item = live[0]
        return {"ranks": [str(r) for r in item["ranks"]], "role": str(item.get("role") or "stuck"),
                "why": f"{item['source']}: {item.get('why', '')}"}
    if found and live:
        others = {str(r) for x in live for r in x.get("ranks") or []}
        if others and not others & {str(r) for r in found.get("ranks") or []}:
            found = dict(found, why=found.get("why", "") + tr(" (note: {source} points at rank {ranks})",
                                                               source=live[0]["source"], ranks=", ".join(sorted(others))))
    return dict(found) if isinstance(found, Mapping) else None



