"""The session's one diagnosis (a typed `knowledge.diagnosis.Diagnosis`) and the verdict's rows
every renderer shows: the app's banner, the report's verdict box."""
from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from distdoctor.knowledge.i18n import t

if TYPE_CHECKING:
    from distdoctor.knowledge.diagnosis import Diagnosis

CONFIDENCE_WORDS = {"confirmed": "confirmed", "likely": "likely", "unknown": "not enough evidence"}
RECURRENCE_WORDS = {"will-recur": "will happen again until fixed",
                    "may-pass": "may pass on a rerun (transient)",
                    "exclude-node": "exclude the node until repaired"}


def _d(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _l(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def session_diagnosis(kb: Any, flow: Any) -> Diagnosis:
    """The one diagnosis (knowledge/diagnosis.py, fed by tui/record/diagnosis_feed.py) of
    everything a session (a tui.record.state.Flow) gathered, with the culprit's location filled
    in from the logs' first failure when the engine names none."""
    from .diagnosis_feed import diagnose_flow

    d = diagnose_flow(kb, flow)
    culprit = d.culprit
    if isinstance(culprit, dict) and not culprit.get("location"):
        where = _location(_d(flow.events.get("logs")), [str(r) for r in _l(culprit.get("ranks"))])
        if where:
            d = dataclasses.replace(d, culprit=dict(culprit, location=where))
    return d


def _location(logs: Mapping[str, Any], ranks: list[str]) -> str | None:
    first = _d(logs.get("first_failure"))
    rank = first.get("rank")
    if not first.get("file") or (rank is not None and str(rank) not in ranks):
        return None
    from .report_causes import short_file

    return f"{short_file(first['file'])}:{first.get('line', '?')}"


def first_command(command: Any) -> str:
    """The first line of a next action's command that is not a comment, without its trailing
    comment (`distdoctor stacks --job auto   # while the job still hangs`)."""
    for line in str(command or "").splitlines():
        line = line.split("  #", 1)[0].strip()
        if line and not line.startswith("#"):
            return line
    return ""


def culprit_line(culprit: Mapping[str, Any] | None) -> str:
    """'Culprit: rank 1 (crashed)', or that the evidence names no rank."""
    who = _d(culprit)
    ranks = ", ".join(str(r) for r in _l(who.get("ranks")))
    if not ranks:
        return t("No rank is named by the evidence gathered.")
    return t("Culprit: rank {ranks} ({role})", ranks=ranks, role=t(str(who.get("role") or "?")))


def verdict_rows(d: Diagnosis, kb: Any = None) -> list[tuple[str, str]]:
    """(label, text) rows of the verdict, in the order a person reads them; empty fields are left
    out. The labels are the row keys the banner and the report's box style: culprit, confidence,
    summary, location, cause, next, command, recurrence."""
    rows: list[tuple[str, str]] = []
    culprit = d.culprit or {}
    rows.append(("culprit", culprit_line(culprit)))
    if d.confidence:
        rows.append(("confidence", t(CONFIDENCE_WORDS.get(d.confidence, d.confidence))))
    summary = d.summary.strip()
    if summary:
        rows.append(("summary", summary))
    where = [str(x) for x in (culprit.get("location"), culprit.get("host")) if x]
    if where:
        rows.append(("location", t(" on ").join(where) if len(where) == 2 else where[0]))
    cause_id = d.cause
    if cause_id:
        cause = (getattr(kb, "causes", {}) or {}).get(cause_id) if kb is not None else None
        rows.append(("cause", f"{getattr(cause, 'title', '') or cause_id} ({cause_id})"))
    action = d.next_action
    if action.get("text"):
        rows.append(("next", str(action["text"])))
    command = first_command(action.get("command"))
    if command:
        rows.append(("command", command))
    recurrence = d.recurrence
    if recurrence:
        rows.append(("recurrence", t(RECURRENCE_WORDS.get(str(recurrence), str(recurrence)))))
    return rows


ROW_LABELS = {"culprit": "Culprit", "confidence": "Confidence", "summary": "What happened",
              "location": "Where", "cause": "Cause", "next": "Next", "command": "Run",
              "recurrence": "Recurrence"}


def row_label(key: str) -> str:
    """A verdict row's label in the reader's language."""
    return t(ROW_LABELS.get(key, key))
