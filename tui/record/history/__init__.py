"""Incident memory: an SQLite store of concluded diagnoses, "seen before" and repeat offenders."""
from __future__ import annotations

from .recall import (HOST_CAUSES, drain_commands, import_session_files, open_store, recall,
                     record_diagnosis, record_event, repeat_offender, repeat_offenders, seen_before)
from .store import MAX_INCIDENTS, HistoryError, IncidentStore, default_path

__all__ = ["HOST_CAUSES", "MAX_INCIDENTS", "HistoryError", "IncidentStore", "default_path", "drain_commands",
           "import_session_files", "open_store", "recall", "record_diagnosis", "record_event",
           "repeat_offender", "repeat_offenders", "seen_before"]
