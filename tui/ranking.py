"""Ranks causes by all the evidence gathered: symptom priors, log scores, findings, bisection."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Sequence

# How much each kind of evidence counts once normalised to 0..1. A switch that turns a failure
# into a pass is the strongest evidence the method produces; a symptom is only a prior.
WEIGHTS: Mapping[str, float] = {"symptom": 1.0, "logs": 2.0, "findings": 1.5, "fleet": 1.5,
                                "bisect": 3.0}
RULED_OUT_FACTOR = 0.5  # a passing minimal repro weakens node-local causes, it does not disprove them
# A FAIL is a fact about this node; a WARN is a risk or a hardening advice, not an observed failure.
FINDING_STRENGTH: Mapping[str, float] = {"fail": 1.0, "warn": 0.3}


@dataclass(frozen=True)
class Ranked:
    """One cause with its combined score and the reasons behind it, strongest first."""

    id: str
    score: float
    reasons: tuple[str, ...]

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "score": self.score, "reasons": list(self.reasons)}


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
                ruled_out: Mapping[str, str] | None = None) -> list[Ranked]:
    """Combine the evidence into one ranking, best first.

    `suspects`: [{"id", "weight", "why"}] from the symptom; `log_causes`: [{"id", "score",
    "evidence"}] from log analysis; `findings`: Finding dicts (`status`, `cause_ids`, `check`);
    `bisect`: cause id -> why the bisection implicates it; `fleet`: compare()'s disagreements
    (`field`, `cause_id`); `ruled_out`: cause id -> why a passing repro weakens it. Each source
    is scaled by its own maximum so no source swamps the others by its units; causes with no
    evidence are left out.
    """
    parts: dict[str, dict[str, float]] = {}
    reasons: dict[str, list[tuple[float, str]]] = {}
    # Records can hold events written by other versions or by hand: skip what is not a mapping.
    suspects, log_causes, findings, fleet = (
        [x for x in seq if isinstance(x, Mapping)] for seq in (suspects, log_causes, findings, fleet))

    def add(source: str, cause_id: str, strength: float, reason: str) -> None:
        if not cause_id or strength <= 0:
            return
        current = parts.setdefault(cause_id, {})
        value = WEIGHTS[source] * strength
        if value > current.get(source, 0.0):
            current[source] = value
        reasons.setdefault(cause_id, []).append((value, reason))

    top = max((_num(s.get("weight")) for s in suspects), default=0.0)
    for s in suspects:
        weight = _num(s.get("weight"))
        if top > 0:
            add("symptom", str(s.get("id", "")), weight / top,
                f"symptom: {s.get('why') or weight}")
    top = max((_num(c.get("score")) for c in log_causes), default=0.0)
    for n, c in enumerate(log_causes):
        score = _num(c.get("score"))
        evidence = c.get("evidence")
        lines = len(evidence) if isinstance(evidence, list) else 0
        plural = f", {lines} evidence line{'s' * (lines != 1)}" if lines else ""
        if top > 0:
            add("logs", str(c.get("id", "")), score / top, f"logs: score {score:g}{plural}")
        else:  # causes without scores (a hand-written or older record) still come best first
            add("logs", str(c.get("id", "")), 1.0 / (n + 1), f"logs: cause #{n + 1}{plural}")
    for f in findings:
        strength = FINDING_STRENGTH.get(str(f.get("status", "")), 0.0)
        for cause_id in f.get("cause_ids") or ():
            add("findings", str(cause_id), strength,
                f"check {f.get('check', '?')}: {str(f.get('status', '')).upper()}")
    for d in fleet:
        add("fleet", str(d.get("cause_id", "")), 1.0,
            f"fleet: nodes disagree on {d.get('field', '?')}")
    for cause_id, why in (bisect or {}).items():
        add("bisect", cause_id, 1.0, f"bisect: {why}")
    ranked = []
    for cid, p in parts.items():
        score = sum(p.values())
        why = [r for _, r in sorted(reasons[cid], key=lambda x: -x[0])]
        if ruled_out and cid in ruled_out:
            score *= RULED_OUT_FACTOR
            why.append(f"weakened: {ruled_out[cid]}")
        ranked.append(Ranked(cid, round(score, 3), tuple(why)))
    return sorted(ranked, key=lambda r: (-r.score, r.id))


def _baseline_rules_out() -> tuple[str, ...]:
    """The causes a passing minimal repro weakens, as the repro module defines them."""
    try:
        from distdoctor.probes.repro.bisect import BASELINE_RULES_OUT
    except ImportError:
        return ()
    return tuple(BASELINE_RULES_OUT)


def rank_session(kb: Any, flow: Any) -> list[Ranked]:
    """Everything a session gathered (a tui.state.Flow) fed to rank_causes."""
    from .state import suspects

    events = flow.events
    repro = events.get("repro") or {}
    repro_causes = [c if isinstance(c, dict) else {"id": c, "score": 1.0}
                    for c in repro.get("causes") or []]
    bisect = events.get("bisect") or {}
    verdict = bisect.get("verdict") if isinstance(bisect.get("verdict"), dict) else None
    implicated = {}
    if verdict:
        for cause_id in verdict.get("causes") or [verdict.get("cause")]:
            if cause_id:
                implicated[str(cause_id)] = f"the job passes only with {verdict.get('env', '?')}"
    ruled_out = {}
    if bisect.get("baseline_passed") or repro.get("outcome") == "pass":
        for cause_id in bisect.get("rules_out") or _baseline_rules_out():
            ruled_out[str(cause_id)] = "the minimal repro passes on this node"
    ranked = rank_causes(
        suspects(kb, flow.symptom or flow.kind), flow.log_causes + repro_causes, flow.findings,
        implicated, (events.get("fleet") or {}).get("disagreements") or [], ruled_out)
    # log signatures may name "other" (host OOM killer...): evidence, but not a cause to fix
    return [r for r in ranked if r.id in kb.causes]
