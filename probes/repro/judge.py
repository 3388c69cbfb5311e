"""Judging a run's output: the step markers, the first error, exit codes, and the outcome."""
from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

STEPS = ("init", "selfcheck", "barrier", "allreduce", "broadcast", "done")
STEP_RE = re.compile(r"DISTDOCTOR_STEP (\w+) rank=(\d+)")
FAIL_RE = re.compile(r"DISTDOCTOR_FAIL .*")
ERROR_RE = re.compile(r"\b[A-Za-z_.]*(?:Error|Exception): .+")
# torchrun's failure summary: "rank : 1 (local_rank: 1)" then "exitcode : 1 (pid: 123)"
SUMMARY_RE = re.compile(r"rank\s*:\s*(\d+)\s*\(local_rank[^\n]*\n\s*exitcode\s*:\s*(-?\d+)")


def parse_steps(line: str) -> list[tuple[str, int]]:
    """The (step, rank) markers in one output line (ranks can share a line when writes mix)."""
    return [(m.group(1), int(m.group(2))) for m in STEP_RE.finditer(line) if m.group(1) in STEPS]


def progress_of(text: str) -> dict[int, str]:
    """rank -> the furthest step it finished."""
    progress: dict[int, str] = {}
    for name, rank in parse_steps(text):
        if STEPS.index(name) >= STEPS.index(progress.get(rank, name)):
            progress[rank] = name
    return progress


def stuck_at(progress: Mapping[int, str], nproc: int) -> str:
    """The first step that not every rank finished ("" when all did)."""
    for index, name in enumerate(STEPS):
        if any(r not in progress or STEPS.index(progress[r]) < index for r in range(nproc)):
            return name
    return ""


def first_error(text: str) -> str:
    """The script's own failure line, else the first `...Error: ...` line."""
    for pattern in (FAIL_RE, ERROR_RE):
        found = pattern.search(text)
        if found:
            return found.group(0).strip()[:300]
    return ""


def exit_codes(text: str, launcher: int | None, outcome: str, nproc: int) -> dict[str, Any]:
    """{"launcher": torchrun's code, "ranks": {rank: code}} (ranks from torchrun's summary)."""
    ranks: dict[str, int] = {}
    for rank, code in SUMMARY_RE.findall(text):
        ranks.setdefault(rank, int(code))
    if outcome == "pass":
        ranks = {str(r): 0 for r in range(nproc)}
    return {"launcher": launcher, "ranks": dict(sorted(ranks.items(), key=lambda kv: int(kv[0])))}


@dataclass(frozen=True)
class Judgement:
    outcome: str
    progress: dict[int, str] = field(default_factory=dict)
    stuck_at: str = ""
    first_error: str = ""
    exit_codes: dict[str, Any] = field(default_factory=dict)


def judge(text: str, launcher: int | None, how: str, nproc: int) -> Judgement:
    """`how` is how the wait ended: "exited", "timeout" (a hang) or "cancelled" (stopped).
    A pass needs every rank's `done` marker and exit code 0, or the timeout after every `done`
    (then stuck_at is "exit")."""
    progress = progress_of(text)
    finished = all(progress.get(r) == "done" for r in range(nproc))
    if how == "timeout" and finished:
        # every rank got through destroy_process_group: the collectives work; only the exit
        # (interpreter teardown, torchrun's shutdown) outlasted the timeout
        return Judgement("pass", progress, "exit", "", exit_codes(text, launcher, "killed", nproc))
    if how == "timeout":
        outcome = "hang"
    elif how == "cancelled":
        outcome = "stopped"
    elif launcher == 0 and finished:
        outcome = "pass"
    else:
        outcome = "error"
    error = "" if outcome == "pass" else first_error(text)
    if outcome == "error" and not error and launcher == 0:
        error = "the launcher exited 0 but not every rank printed DISTDOCTOR_STEP done"
    return Judgement(outcome, progress, "" if outcome == "pass" else stuck_at(progress, nproc),
                     error, exit_codes(text, launcher, outcome, nproc))
