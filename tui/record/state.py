"""The app's view of one session: what each step found, rebuilt from the session's events."""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from distdoctor.knowledge.evaluate import Finding

from .findings import findings_of

# The session event that completes a step of the method is the one named as the step (a new
# step's screen records an event of its own id), except these. Step ids come from the tree; a
# step that records nothing (a site overlay's prose step) is never "done".
STEP_EVENTS: Mapping[str, str] = {"environment": "check"}


def is_stopped(result: Mapping[str, Any]) -> bool:
    """A repro or bisection the user stopped before it could conclude."""
    return result.get("outcome") == "stopped" or bool(result.get("stopped"))


@dataclass
class Flow:
    """Everything gathered so far; `apply` folds one session event in (the latest of a kind wins)."""

    session_id: str
    kind: str | None = None  # top-level symptom: "hang" | "error"
    symptom: str | None = None  # the sub-symptom id (or the top-level one when no sub was chosen)
    pasted: str = ""
    paste_causes: list[dict[str, Any]] = field(default_factory=list)
    answers: dict[str, Any] = field(default_factory=dict)
    events: dict[str, dict[str, Any]] = field(default_factory=dict)
    log_paths: list[str] = field(default_factory=list)

    def apply(self, kind: str, data: Any) -> None:
        data = data if isinstance(data, dict) else {"value": data}
        if kind == "answer":
            self.answers[str(data.get("question", "?"))] = data.get("answer")
            if data.get("question") == "kind" and data.get("answer") != self.kind:
                self.kind = data.get("answer")
                self.symptom = None
            return
        if kind == "classify":
            # {"symptom": top-level id, "sub": sub-symptom id, "kind": "hang" | "error", ...}
            self.kind = data.get("kind") or data.get("symptom") or self.kind
            self.symptom = data.get("sub") or data.get("symptom") or self.symptom
            if "text" in data:
                self.pasted = str(data.get("text") or "")
                self.paste_causes = list(data.get("matches") or [])
        elif kind == "logs":
            self.log_paths = [str(p) for p in data.get("paths") or []]
        self.events[kind] = data

    def done(self, step_id: str) -> bool:
        """A step is done when its event is recorded, and complete (a sweep cut short is not,
        nor a repro or bisection stopped by the user: it concluded nothing)."""
        event = self.events.get(STEP_EVENTS.get(step_id, step_id))
        return bool(event) and not event.get("partial") and not is_stopped(event)

    def first_undone(self, order: list[str]) -> str:
        for step_id in order:
            if not self.done(step_id):
                return step_id
        return order[-1]

    @property
    def findings(self) -> tuple[Finding, ...]:
        """The latest check's findings, typed (tui/record/findings.py)."""
        return findings_of(self.events.get("check"))

    @property
    def log_causes(self) -> list[dict[str, Any]]:
        return list((self.events.get("logs") or {}).get("causes") or []) + self.paste_causes

    @classmethod
    def from_record(cls, record: Mapping[str, Any]) -> Flow:
        """Replay a stored session: every event in order, whoever wrote it (app or command)."""
        flow = cls(session_id=str(record.get("id", "")))
        for event in record.get("events") or []:
            if isinstance(event, dict) and isinstance(event.get("kind"), str):
                flow.apply(event["kind"], event.get("data"))
        return flow


def symptom_weights(kb: Any, symptom: str | None) -> dict[str, list[tuple[str, float]]]:
    """Cause id -> [(symptom title, weight), ...] for the symptom and its ancestors."""
    out: dict[str, list[tuple[str, float]]] = {}
    seen: set[str] = set()
    while symptom and symptom in kb.symptoms and symptom not in seen:
        seen.add(symptom)
        sym = kb.symptoms[symptom]
        for cause_id, weight in sym.causes.items():
            out.setdefault(cause_id, []).append((sym.title, float(weight)))
        symptom = sym.parent
    return out


def suspects(kb: Any, symptom: str | None) -> list[dict[str, Any]]:
    """Causes to suspect for a symptom, most likely first, each with its reasons."""
    rows = []
    for cause_id, parts in symptom_weights(kb, symptom).items():
        cause = kb.causes.get(cause_id)
        rows.append({"id": cause_id, "title": cause.title if cause else cause_id,
                     "weight": round(sum(w for _, w in parts), 2),
                     "why": " + ".join(f"{title} {w:g}" for title, w in parts)})
    return sorted(rows, key=lambda r: (-r["weight"], r["id"]))
