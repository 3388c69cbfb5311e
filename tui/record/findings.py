"""A check event's findings as typed `Finding`s (knowledge/evaluate.py), read once at the session's
edge: the app's Environment step, its next action and the reports use the fields, never the
stored dict's keys. A finding of a damaged or older record is read field by field: a field of the
wrong kind is empty, an entry that is not a table is skipped, never an exception."""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from distdoctor.knowledge.evaluate import Finding


def finding_of(stored: Mapping[str, Any]) -> Finding:
    """One finding from its stored form (Finding.to_dict())."""
    def text(key: str) -> str:
        value = stored.get(key)
        return str(value) if isinstance(value, (str, int, float)) else ""

    causes = stored.get("cause_ids")
    return Finding(probe=text("probe"), check=text("check"), status=text("status"), title=text("title"),
                   detail=text("detail"), fix=text("fix"),
                   cause_ids=tuple(str(c) for c in causes) if isinstance(causes, (list, tuple)) else ())


def findings_of(check: Any) -> tuple[Finding, ...]:
    """The findings of a check event's data (`{"findings": [...], ...}`), in their order."""
    stored = check.get("findings") if isinstance(check, Mapping) else None
    return tuple(finding_of(f) for f in stored or () if isinstance(f, Mapping)) \
        if isinstance(stored, (list, tuple)) else ()
