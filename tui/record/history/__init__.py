"""Incident memory: an SQLite store of concluded diagnoses, "seen before" and repeat offenders.

Importing the package costs nothing: `record_event`, the hook every session write calls, returns
at once for an event that concludes nothing, `anything_to_recall` is a stat, and the rest loads on
first use."""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from distdoctor.knowledge.lazymod import lazy_exports
from distdoctor.knowledge.statedir import state_dir

# Session events that conclude something worth remembering, and those that add to it (a check
# gives the session's incident its versions).
CONCLUDING = ("logs", "conclusion", "diagnosis", "bisect", "repro")
ENRICHING = ("check",)

_WHERE = {"record_diagnosis": "memory", "seen_before": "memory", "recall": "memory", "repeat_offenders": "memory",
          "repeat_offender": "memory", "drain_commands": "memory", "open_store": "memory",
          "import_session_files": "memory", "HOST_CAUSES": "memory", "IncidentStore": "store",
          "HistoryError": "store", "MAX_INCIDENTS": "store", "Incident": "incident"}
DB_NAME = "incidents.db"


def default_path() -> Path:
    """$DISTDOCTOR_DB, else incidents.db in distdoctor's state folder (beside sessions/)."""
    env = os.environ.get("DISTDOCTOR_DB")
    if env:
        return Path(env).expanduser()
    return state_dir(DB_NAME)


def anything_to_recall() -> bool:
    """Whether the default store could hold a past incident: its file exists, or a saved session
    its first open would import. When neither does, recall finds nothing, and a command that
    shows "seen before" (`logs`) skips importing SQLite, the incident model and the redactor, and
    opening (creating) and migrating a store: ~5 ms of a small `distdoctor logs`."""
    if default_path().exists():
        return True
    try:
        with os.scandir(state_dir("sessions")) as entries:
            return any(entry.name.endswith(".json") for entry in entries)
    except OSError:  # no sessions folder (or an unreadable one: the import would skip it too)
        return False


def record_event(session_id: str | None, kind: str, data: Any, **options: Any) -> int | None:
    """The session hook (memory.record_event); an event of another kind than CONCLUDING and
    ENRICHING returns None before anything is imported. Never raises."""
    if kind not in CONCLUDING and kind not in ENRICHING:
        return None
    from .memory import record_event as record

    return record(session_id, kind, data, **options)


__getattr__ = lazy_exports(__name__, _WHERE, globals())


__all__ = ["CONCLUDING", "ENRICHING", "DB_NAME", "anything_to_recall", "default_path", "record_event", *_WHERE]
