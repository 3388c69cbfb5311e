"""The session's ranked causes, read off the one diagnosis (tui/record/diagnosis_feed.py)."""
from __future__ import annotations

from typing import Any

from distdoctor.knowledge.verdict import Ranked, rank_causes

from .diagnosis_feed import diagnose_flow

__all__ = ["Ranked", "rank_causes", "rank_session"]


def rank_session(kb: Any, flow: Any) -> list[Ranked]:
    """The causes in the diagnosis's order (those outside the guide's list are evidence, not
    causes to fix, and are left to the log view)."""
    return [r for r in diagnose_flow(kb, flow).causes if r.id in kb.causes]
