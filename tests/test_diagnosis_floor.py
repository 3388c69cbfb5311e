"""A floor under the aggregate diagnosis figures (tests/eval_diagnosis.py prints them all).

Not a per-case test: rules must come from mechanisms, so no single case is demanded. The floors
sit a little under the figures measured when they were last raised; a change that lowers any of
them is a regression to explain. Healthy runs must never be called failures. Sets that are absent
(the shared fixtures on a user's machine) are skipped.
"""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
import eval_diagnosis  # noqa: E402

FLOORS = {  # set: (top-1, top-3)
    "logs": (0.85, 0.9),  # 0.88: 030 matched only through one reporter's typo, a pattern now gone
    "logs-batch2": (0.7, 0.9),
    "recorded": (0.8, 0.8),
    "own-recorded": (0.9, 0.9),
    "fresh-recorded": (0.6, 0.85),  # held out at 0.53 / 0.80 before the rules its misses taught
}
CULPRIT_FLOOR = 0.75


@pytest.fixture(scope="module")
def result() -> dict:
    return eval_diagnosis.run()


@pytest.mark.parametrize("name", sorted(FLOORS))
def test_failure_sets_stay_above_their_floor(result: dict, name: str) -> None:
    if name not in result:
        pytest.skip(f"{name}: no cases here")
    f = result[name]["figures"]
    top1, top3 = FLOORS[name]
    misses = [f"{r['case']}: want {r['want']} got {r['got']}" for r in result[name]["cases"] if not r["top1"]]
    assert f["top1"] >= top1 and f["top3"] >= top3, (f, misses)
    if "culprit_rank" in f:  # the recordings that name the rank at fault
        assert f["culprit_rank"] >= CULPRIT_FLOOR, [r for r in result[name]["cases"] if r.get("rank_ok") is False]


@pytest.mark.parametrize("name", ["healthy", "own-healthy", "fresh-healthy"])
def test_healthy_runs_are_never_failures(result: dict, name: str) -> None:
    if name not in result:
        pytest.skip(f"{name}: no cases here")
    alarms = [r for r in result[name]["cases"] if r["false_alarm"]]
    assert not alarms, alarms
