"""The report's verdict box and per-rank table, built from the one diagnosis (a typed Diagnosis,
diagnosis_view); report_md and report_html only format them, from the report document."""
from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from distdoctor.knowledge.i18n import t

from .diagnosis_view import CONFIDENCE_WORDS, RECURRENCE_WORDS, culprit_line

if TYPE_CHECKING:
    from distdoctor.knowledge.diagnosis import Diagnosis

# the diagnosis's status words as the logs text says them (tui/commands/logs_text.py)
STATUS_WORDS = {"lost-peer": "lost peer", "timed-out": "timed out", "no-end-seen": "no end seen"}


def _d(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _l(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def explain_command(cause_id: Any) -> str:
    """Where the reader finds a cause explained (what, why, fix): the guide is not theirs to have."""
    return f"distdoctor knowledge show {cause_id}" if cause_id else ""


def diagnosis_of(record: Mapping[str, Any], kb: Any) -> Diagnosis:
    """The one diagnosis of a session record (the culprit's location filled)."""
    from .diagnosis_view import session_diagnosis
    from .state import Flow

    return session_diagnosis(kb, Flow.from_record(record))


def verdict(d: Diagnosis, kb: Any) -> dict[str, Any]:
    """The report's verdict section: the diagnosis `d` as JSON (its ranked causes and ranks left
    to their own sections) with the cause's title and where the cause is explained; the same in
    every language but for `title` and the diagnosis's own prose (the renderers put the rest in
    words: `words`)."""
    out: dict[str, Any] = {k: v for k, v in d.to_dict().items() if k not in ("causes", "ranks")}
    cause = (getattr(kb, "causes", {}) or {}).get(d.cause) if d.cause else None
    out["title"] = getattr(cause, "title", "") or (d.cause or "")
    out["explain"] = explain_command(d.cause)
    out["command"] = str(d.next_action.get("command") or "")
    return out


def words(v: Mapping[str, Any]) -> dict[str, str]:
    """The verdict's fixed words in the report's language: the culprit line, the confidence and
    the recurrence. `v` is the report's verdict section (`verdict`), as report_md and report_html
    read it from the report document (redacted, maybe pseudonymized), not a Diagnosis."""
    confidence = str(v.get("confidence") or "unknown")
    recurrence = v.get("recurrence")
    return {"culprit": culprit_line(v.get("culprit")),
            "confidence": t(CONFIDENCE_WORDS.get(confidence, confidence)),
            "recurrence": t(RECURRENCE_WORDS[recurrence]) if recurrence in RECURRENCE_WORDS else ""}


def rank_row_words(row: list[Any], columns: list[str]) -> list[Any]:
    """A per-rank row with its status and step in the report's language."""
    out = list(row)
    if "ended" in columns:
        i = columns.index("ended")
        out[i] = t(STATUS_WORDS.get(str(out[i]), str(out[i]))) if out[i] else "?"
    if "last step" in columns:
        i = columns.index("last step")
        out[i] = t("step {n}", n=out[i]) if out[i] not in (None, "") else ""
    return out


def ranks_table(d: Diagnosis) -> dict[str, Any] | None:
    """How each rank ended, its last step and collective, its exit code, host and files: one row
    per rank the logs show (None without logs)."""
    from .report_causes import short_file

    ranks = d.ranks
    if not ranks:
        return None
    rows = []
    for rank in sorted(ranks, key=lambda r: (not str(r).isdigit(), int(r) if str(r).isdigit() else 0, str(r))):
        row = _d(ranks[rank])
        step = _d(row.get("step"))
        coll = _d(row.get("last_collective"))
        files = [short_file(f) for f in _l(row.get("files"))]
        hosts = ", ".join(str(h) for h in _l(row.get("hosts")))
        rows.append([str(rank), str(row.get("status") or ""), step.get("n"),
                     " ".join(str(x) for x in (coll.get("op"), f"#{coll['seq']}" if coll.get("seq") is not None else "")
                              if x) if coll else "",
                     "" if row.get("exitcode") is None else str(row["exitcode"]),
                     hosts, ", ".join(dict.fromkeys(files))])
    columns = ["rank", "ended", "last step", "last collective", "exit code", "host", "files"]
    if not any(row[5] for row in rows):  # one host, or none named: no column of blanks
        columns.pop(5)
        rows = [row[:5] + row[6:] for row in rows]
    return {"columns": columns, "rows": rows}
