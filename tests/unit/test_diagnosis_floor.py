"""A floor under the aggregate diagnosis figures (tests/bench/eval_diagnosis.py prints them all).

Not a per-case test: rules must come from mechanisms, so no single case is demanded. The floors
sit a little under the figures measured when they were last raised; a change that lowers any of
them is a regression to explain. Healthy runs must never be called failures. Sets that are absent
(the shared fixtures on a user's machine) are skipped.
"""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parents[1]))
import eval_diagnosis  # noqa: E402

FLOORS = {  # set: (top-1, top-3)
    # 0.84: 030 matched only through one reporter's typo (a pattern now gone); 044's OOM on one
    # rank's own failure line now comes before the deadlock it caused (labelled the other way round,
    # with cuda-oom in `also`): a consequence never outranks its explanation
    "logs": (0.8, 0.9),
    "logs-batch2": (0.7, 0.9),
    "recorded": (0.8, 0.8),
    "own-recorded": (0.9, 0.9),
    "fresh-recorded": (0.75, 0.9),  # held out at 0.53 / 0.80 before the rules its misses taught; 0.82 / 0.94 now
    "fresh2-recorded": (0.9, 0.95),  # held out at 0.53 / 0.82 (issue 21), 0.71 / 0.88 after, 1.00 / 1.00 now
    "fresh3-recorded": (0.8, 0.9),  # held out at 0.74 / 0.84 (stop 29), 0.79 / 0.89 with that stop's rules, 0.89 / 0.95 now
    "fresh4-recorded": (0.8, 0.8),  # held out at 0.71 / 0.79 (stop 29, measured once); 0.86 / 0.86 with its misses' mechanisms
    # held out at 0.83 / 0.89, culprit 0.64 (batch 5, measured once); 0.89 / 0.89, culprit 0.79 with its misses'
    # mechanisms (skipped until eval_diagnosis.SETS holds batch 5)
    "fresh5-recorded": (0.85, 0.85),
    # held out at 0.56 / 0.88, culprit 0.67 (batch 6, measured once); 0.69 / 0.88 with DL206's and DL409's mechanisms
    "fresh6-recorded": (0.65, 0.85),
}
# the public sets gathered for issue 21: their cases without evidence or outside the guide count
# toward the cap below, their confident answers toward CONFIDENT_FLOOR (held out: public3 11/12,
# public4 11/12)
PUBLIC = ("public-fresh", "public3", "public4", "public5", "public6")  # public5 held out at 1/1 confirmed, 10/11 likely; 1/1, 14/14 now; public6 held out 10/11 likely, 14/14 now
# confident answers (likely or confirmed) must be right this often over the failure sets together
CONFIDENT_FLOOR = 0.95  # measured 0.91, then 128/129 (confirmed 34/34, likely 94/95) after batch 4's mechanisms
# public-fresh (issue 21): where the paste holds no evidence or the cause is outside the guide,
# at most this share may be answered confidently wrong (held out at 8/14 before the engine)
CONFIDENTLY_WRONG_CAP = 0.05  # 3/43 before batch 4's mechanisms, 0/43 now (public-fresh, public3, public4, fresh3, fresh4)
CULPRIT_FLOOR = 0.75
# held out: fresh3 at 0.47 (0.59 now), fresh4 at 0.38: naming the rank is the weakest figure
CULPRIT_FLOORS = {"fresh2-recorded": 0.65, "fresh3-recorded": 0.7, "fresh4-recorded": 0.8, "fresh5-recorded": 0.7,
                  "fresh6-recorded": 0.6,  # held out at 0.67
                  "own-recorded": 0.85}  # fresh5 0.79 (held out 0.64), own-recorded 0.92 (0.83 before DL916)  # now 0.73, 0.82, 0.92  # held out at 0.53; 0.60 now (uneven shards and key=value rank tags unread)


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
        assert f["culprit_rank"] >= CULPRIT_FLOORS.get(name, CULPRIT_FLOOR), [r for r in result[name]["cases"] if r.get("rank_ok") is False]


def test_confident_answers_are_right_often_enough(result: dict) -> None:
    rows = [r for name in (*FLOORS, *PUBLIC) if name in result for r in result[name]["cases"]
            if not r.get("healthy") and r["confidence"] != "unknown"]
    if not rows:
        pytest.skip("no failure sets here")
    right = sum(r["top1"] for r in rows) / len(rows)
    assert right >= CONFIDENT_FLOOR, [f"{r['case']}: want {r['want']} got {r['got']}" for r in rows if not r["top1"]]


def test_no_evidence_is_rarely_answered_confidently_wrong(result: dict) -> None:
    unsure = [r for name in (*PUBLIC, "fresh3-recorded", "fresh4-recorded", "fresh5-recorded", "fresh6-recorded")
              if name in result
              for r in result[name]["cases"]
              if r.get("unsure")]
    if not unsure:
        pytest.skip("no set with cases lacking the evidence here")
    wrong = [r["case"] for r in unsure if r["confident_wrong"]]
    assert len(wrong) <= CONFIDENTLY_WRONG_CAP * len(unsure), wrong


@pytest.mark.parametrize("name", ["healthy", "own-healthy", "fresh-healthy", "fresh2-healthy", "fresh3-healthy",
                                  "fresh4-healthy", "fresh5-healthy", "fresh6-healthy"])
def test_healthy_runs_are_never_failures(result: dict, name: str) -> None:
    if name not in result:
        pytest.skip(f"{name}: no cases here")
    alarms = [r for r in result[name]["cases"] if r["false_alarm"]]
    assert not alarms, alarms
