"""Log diagnosis: stream every rank's logs, find the first failure and rank the root causes."""
from __future__ import annotations

from typing import TYPE_CHECKING

from ..lazymod import lazy_exports

if TYPE_CHECKING:
    from .engine import analyse, analyse_text
    from .report import CauseScore, Evidence, LogReport
    from .sources import read_context

# Imported on first use (PEP 562, as the knowledge package does): a scan worker imports
# knowledge.logs.parallel, and the engine behind these names (culprit, score, setup rules: ~0.1 s)
# is no part of its work; every worker of every run paid for it.
_LAZY = {"analyse": ".engine", "analyse_text": ".engine", "CauseScore": ".report", "Evidence": ".report",
         "LogReport": ".report", "read_context": ".sources"}

__all__ = ["CauseScore", "Evidence", "LogReport", "analyse", "analyse_text", "read_context"]


__getattr__ = lazy_exports(__name__, _LAZY, globals())
