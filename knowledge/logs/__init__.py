"""Log diagnosis: stream every rank's logs, find the first failure and rank the root causes."""
from __future__ import annotations

from .engine import analyse, analyse_text
from .report import CauseScore, Evidence, LogReport
from .sources import read_context

__all__ = ["CauseScore", "Evidence", "LogReport", "analyse", "analyse_text", "read_context"]
