"""Incident memory: an SQLite store of concluded diagnoses, "seen before" and repeat offenders.

Importing the package costs nothing: `record_event`, the hook every session write calls, returns
at once for an event that concludes nothing, and the rest loads on first use."""
from __future__ import annotations

import importlib
from typing import Any

# Session events that conclude something worth remembering, and those that add to it (a check
# gives the session's incident its versions).
CONCLUDING = ("logs", "conclusion", "diagnosis", "bisect", "repro")
ENRICHING = ("check",)

_WHERE = {"record_diagnosis": "memory", "seen_before": "memory", "recall": "memory", "repeat_offenders": "memory",
          "repeat_offender": "memory", "drain_commands": "memory", "open_store": "memory",
          "import_session_files": "memory", "HOST_CAUSES": "memory", "IncidentStore": "store",
          "HistoryError": "store", "MAX_INCIDENTS": "store", "default_path": "store", "Incident": "incident"}


def record_event(session_id: str | None, kind: str, data: Any, **options: Any) -> int | None:
    """The session hook (memory.record_event); an event of another kind than CONCLUDING and
    ENRICHING returns None before anything is imported. Never raises."""
    if kind not in CONCLUDING and kind not in ENRICHING:
        return None
    from .memory import record_event as record

    return record(session_id, kind, data, **options)


def __getattr__(name: str) -> Any:
    if name not in _WHERE:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f".{_WHERE[name]}", __name__), name)


__all__ = ["CONCLUDING", "ENRICHING", "record_event", *_WHERE]
