"""From the captured evidence to the verdict: the culprit (which rank, in what role, why) and the
ranked causes, through the one conclusion engine. Everything goes through conclude(), so the
engine behind it is changed in one place."""
from __future__ import annotations

from typing import Any, Mapping

from distdoctor.knowledge.i18n import t


def conclude(capture: Mapping[str, Any], kb: Any = None) -> dict[str, Any]:
    """{"culprit", "summary", "causes", "logs"} for a capture: {"kind": hang|failed|finished,
    "logs": [paths], "stacks", "fr", "ras": documents or None, "extra": [evidence items]}."""
    from distdoctor.knowledge import load_knowledge
    from distdoctor.knowledge.logs import analyse
    from distdoctor.knowledge.verdict import culprit, rank_causes

    kb = kb or load_knowledge()
    symptom = "hang" if capture.get("kind") == "hang" else "error"
    logs: dict[str, Any] | None = None
    paths = list(capture.get("logs") or [])
    if paths:
        report = analyse(paths, kb, symptom=symptom)
        if report.files_read:
            logs = report.to_dict()
    extra: list[dict[str, Any]] = list(capture.get("extra") or [])
    for source in ("stacks", "fr", "ras"):
        doc = capture.get(source)
        if isinstance(doc, Mapping):
            extra.extend(x for x in doc.get("evidence") or [] if isinstance(x, Mapping))
    who = culprit(logs, extra)
    ranked = rank_causes(log_causes=(logs or {}).get("causes") or [], extra=extra)
    ranked = [r for r in ranked if r.id in kb.causes]
    verdict = (logs or {}).get("verdict") or {}
    summary = verdict.get("summary") or (capture.get("stacks") or {}).get("summary") or ""
    if who and not summary:
        summary = t("rank {ranks} ({role}): {why}", ranks=", ".join(who["ranks"]), role=t(who["role"]),
                    why=who.get("why", ""))
    return {"culprit": who, "summary": summary, "causes": [r.to_dict() for r in ranked[:5]],
            "logs": logs, "extra": extra}
