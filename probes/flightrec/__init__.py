"""PyTorch Flight Recorder dumps: read them safely, compare the ranks, name the culprit."""
from __future__ import annotations

from .analyse import analyse
from .blame import as_evidence, cross_check, cross_check_logs, to_json
from .model import Culprit, FrResult, GroupResult, Mismatch
from .reader import DumpError, RankDump, loads_plain, read_dumps


def read_and_analyse(paths: list[str]) -> FrResult:
    """Read every rank's dump under the paths and compare them (DumpError when unreadable)."""
    dumps, skipped = read_dumps(paths)
    return analyse(dumps, tuple(skipped))


__all__ = ["Culprit", "DumpError", "FrResult", "GroupResult", "Mismatch", "RankDump", "analyse",
           "as_evidence", "cross_check", "cross_check_logs", "loads_plain", "read_and_analyse", "read_dumps", "to_json"]
