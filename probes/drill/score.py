"""Scoring a learner's attempt at a drill: right cause, right rank, path length, switches left on.

Points (100 at best): 50 for the cause, 30 for the rank (naming "no single rank" is right where
the drill has none), 20 scaled by the shortest path over the steps taken, minus 10 for each
debugging switch left on. Passed = right cause and right rank, whatever the path.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .catalog import Drill

# classify the symptom, open one piece of evidence that shows the fault, answer
SHORTEST_PATH = ("classify", "evidence", "answer")


@dataclass
class Attempt:
    drill: str
    steps: list[str] = field(default_factory=list)  # "classify:hang", "open:rank 1 stderr", "answer"
    symptom: str | None = None
    cause: str | None = None
    rank: str | None = None  # None: "no single rank"
    switches: list[str] = field(default_factory=list)  # debugging switches left on at the end

    def step(self, what: str) -> None:
        self.steps.append(what)


def score(drill: Drill, attempt: Attempt) -> dict[str, Any]:
    right_cause = attempt.cause == drill.cause
    right_rank = attempt.rank == drill.culprit
    taken = max(len(attempt.steps), 1)
    shortest = len(SHORTEST_PATH)
    path_points = round(20 * min(1.0, shortest / taken))
    points = 50 * right_cause + 30 * right_rank + path_points - 10 * len(attempt.switches)
    rank = lambda r: "no single rank" if r is None else f"rank {r}"  # noqa: E731
    summary = (f"cause {'right' if right_cause else 'wrong'} ({attempt.cause} for {drill.cause}), "
               f"rank {'right' if right_rank else 'wrong'} ({rank(attempt.rank)} for "
               f"{rank(drill.culprit)}), {len(attempt.steps)} steps (shortest {shortest}), "
               f"switches left on: {', '.join(attempt.switches) or 'none'}")
    # scalars first: a session report's step line shows the first few (tui/record/report.py)
    return {"drill": drill.name, "points": max(0, points), "passed": right_cause and right_rank,
            "summary": summary,
            "cause": {"picked": attempt.cause, "expected": drill.cause, "right": right_cause},
            "rank": {"picked": attempt.rank, "expected": drill.culprit, "right": right_rank},
            "symptom": {"picked": attempt.symptom, "expected": drill.symptom},
            "steps": {"taken": len(attempt.steps), "shortest": shortest, "path": list(attempt.steps)},
            "switches_left_on": list(attempt.switches)}
