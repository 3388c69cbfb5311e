"""From the captured evidence to the verdict: the culprit (which rank, in what role, why) and the
ranked causes, through the one diagnosis (knowledge/diagnosis.py). Everything goes through
conclude(), so the engine behind it is called in one place."""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from distdoctor.knowledge.i18n import t


def conclude(capture: Mapping[str, Any], kb: Any = None) -> dict[str, Any]:
    """{"culprit", "summary", "confidence", "causes", "logs", "diagnosis"} for a capture:
    {"kind": hang|failed|finished, "logs": [paths], "stacks", "fr", "ras": documents or None,
    "extra": [evidence items the watcher saw itself], "backend": str or None}."""
    from distdoctor.knowledge import load_knowledge
    from distdoctor.knowledge.diagnosis import IncidentEvidence, diagnose
    from distdoctor.knowledge.logs import analyse

    kb = kb or load_knowledge()
    symptom = "hang" if capture.get("kind") == "hang" else "error"
    logs: dict[str, Any] | None = None
    paths = list(capture.get("logs") or [])
    if paths:
        report = analyse(paths, kb, symptom=symptom)
        if report.files_read:
            logs = report.to_dict()
    live: list[dict[str, Any]] = list(capture.get("extra") or [])
    for source in ("stacks", "fr", "ras"):
        doc = capture.get(source)
        if isinstance(doc, Mapping):
            live.extend(dict(x) for x in doc.get("evidence") or [] if isinstance(x, Mapping))
    found = diagnose(kb, IncidentEvidence(symptom=symptom, logs=logs, live=tuple(live),
                                          backend=capture.get("backend")))
    who = dict(found.culprit) if found.culprit else None
    summary = found.summary or (capture.get("stacks") or {}).get("summary") or ""
    if who and not summary:
        summary = t("rank {ranks} ({role}): {why}", ranks=", ".join(who["ranks"]), role=t(who["role"]),
                    why=who.get("why", ""))
    data = found.to_dict()
    return {"culprit": who, "summary": summary, "confidence": found.confidence,
            "causes": data["causes"][:5], "logs": logs, "diagnosis": data}
