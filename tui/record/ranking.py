"""The session's events fed to the one conclusion engine (distdoctor.knowledge.verdict)."""
from __future__ import annotations

from typing import Any

from distdoctor.knowledge.i18n import t
from distdoctor.knowledge.verdict import Ranked, culprit, rank_causes

__all__ = ["Ranked", "rank_causes", "rank_session", "session_culprit"]


def _baseline_rules_out() -> tuple[str, ...]:
    """The causes a passing minimal repro weakens, as the repro module defines them."""
    from distdoctor.probes.repro.bisect import BASELINE_RULES_OUT

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
                implicated[str(cause_id)] = t("the job passes only with {env}", env=verdict.get("env", "?"))
    ruled_out = {}
    if bisect.get("baseline_passed") or repro.get("outcome") == "pass":
        for cause_id in bisect.get("rules_out") or _baseline_rules_out():
            ruled_out[str(cause_id)] = t("the minimal repro passes on this node")
    ranked = rank_causes(
        suspects(kb, flow.symptom or flow.kind), flow.log_causes + repro_causes, flow.findings,
        implicated, (events.get("fleet") or {}).get("disagreements") or [], ruled_out, _extra(events))
    # log signatures may name "other" (host OOM killer...): evidence, but not a cause to fix
    return [r for r in ranked if r.id in kb.causes]


def _extra(events: dict[str, Any]) -> list[dict[str, Any]]:
    """Evidence items recorded by stacks, fr, ras and lint (each event may carry an "evidence" list)."""
    out: list[dict[str, Any]] = []
    for kind in ("stacks", "fr", "ras", "lint"):
        event = events.get(kind)
        items = event.get("evidence") if isinstance(event, dict) else None
        out.extend(x for x in items or [] if isinstance(x, dict))
    return out


def session_culprit(flow: Any) -> dict[str, Any] | None:
    """The culprit and the logs' summary for the Conclusion step and the report."""
    logs = flow.events.get("logs")
    found = culprit(logs if isinstance(logs, dict) else None, _extra(flow.events))
    if found is None:
        return None
    verdict = (logs or {}).get("verdict") if isinstance(logs, dict) else None
    summary = verdict.get("summary") if isinstance(verdict, dict) else ""
    return dict(found, summary=summary or "")
