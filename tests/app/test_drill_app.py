"""The drill in the app, played with Pilot on a recorded drill (nothing runs): a right answer,
then a wrong one, with the score checked each time, in the session and in drills.json."""
from __future__ import annotations

from pathlib import Path

from appkit import run_async, screen_text
from textual.widgets import OptionList

from distdoctor.knowledge import load_knowledge
from distdoctor.probes.drill import store as drills_store
from distdoctor.tui.app.screens.drill import DrillApp
from distdoctor.tui.record.session import SessionStore

CRASH = Path(__file__).resolve().parents[1] / "fixtures" / "recorded" / "01-drill-crash"


async def _choose(pilot, app, key: str) -> None:
    """Highlight the option whose id is `key` and select it with Enter, as a learner would."""
    menu = app.screen.query_one("#drill-choices", OptionList)
    ids = [menu.get_option_at_index(i).id for i in range(menu.option_count)]
    assert key in ids, (key, ids)
    menu.focus()
    menu.highlighted = ids.index(key)
    await pilot.press("enter")
    await pilot.pause()


@run_async
async def test_learner_right_then_wrong(tmp_path: Path) -> None:
    kb = load_knowledge(use_env=False)
    store = SessionStore(tmp_path / "sessions")
    app = DrillApp("crash", kb, store, from_dir=CRASH)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        text = screen_text(app)
        # Classify shows what on call sees first: the console's end, not the answer
        assert "You are paged" in text and "Hang:" in text and "Error:" in text
        assert "Root Cause" in text or "FAILED" in text
        assert "rank 1 raises ValueError" not in text  # the answer key stays hidden
        await pilot.press("down", "enter")  # Error
        await pilot.pause()
        assert "Open the evidence" in screen_text(app)
        await _choose(pilot, app, "file:1")  # the first per-rank file after console.log
        await _choose(pilot, app, "answer")
        assert "Which root cause?" in screen_text(app)
        await _choose(pilot, app, "rank-crash-deadlock")
        assert "Which rank" in screen_text(app)
        await _choose(pilot, app, "1")
        text = screen_text(app)
        assert "PASSED" in text and "score 100/100" in text
        assert "rank 1 raises ValueError" in text  # the reveal: what was injected
        assert "ValueError: Corrupted record in shard-00001.bin" in text  # and the proof line
        first = app.drill_screen.result
        assert first["passed"] and first["steps"] == {"taken": 3, "shortest": 3,
                                                      "path": first["steps"]["path"]}

        # again, wrong: classify as a hang, no evidence, the wrong cause and rank
        await _choose(pilot, app, "again")
        await _choose(pilot, app, "hang")
        await _choose(pilot, app, "answer")
        await _choose(pilot, app, "collective-timeout")
        await _choose(pilot, app, "0")
        text = screen_text(app)
        assert "NOT PASSED" in text and "score 20/100" in text
        second = app.drill_screen.result
        assert not second["cause"]["right"] and not second["rank"]["right"]
        assert second["steps"]["taken"] == 2
        session_id = app.drill_screen.session_id

    events = [e for e in store.load(session_id)["events"] if e.get("kind") == "drill-score"]
    assert [e["data"]["points"] for e in events] == [100, 20]
    assert drills_store.passed()["crash"]["score"] == 100  # the wrong try did not lower it


@run_async
async def test_drill_screen_is_readable_at_both_sizes(tmp_path: Path) -> None:
    kb = load_knowledge(use_env=False)
    for size in ((80, 24), (120, 40)):
        app = DrillApp("crash", kb, SessionStore(tmp_path / "s"), from_dir=CRASH)
        async with app.run_test(size=size) as pilot:
            await pilot.pause()
            menu = app.screen.query_one("#drill-choices", OptionList)
            view = app.screen.query_one("#drill-view")
            assert menu.region.height >= 2 and view.region.height >= 5, size
            assert menu.region.bottom <= view.region.y  # nothing overlaps


def test_score_reads_in_a_session_report_line():
    from distdoctor.probes.drill import get
    from distdoctor.probes.drill.score import Attempt, score
    from distdoctor.tui.record.report import _step_summary

    attempt = Attempt("straggler", steps=["classify:hang", "open:console.log", "open:rank 1 stdout",
                                          "answer"], cause="collective-timeout", rank="1",
                      switches=["NCCL_P2P_DISABLE=1"])
    result = score(get("straggler"), attempt)
    assert result["passed"] and result["points"] == 50 + 30 + 15 - 10
    line = _step_summary("drill-score", result)
    assert "points=85" in line and "passed=True" in line and "4 steps (shortest 3)" in line
    assert "NCCL_P2P_DISABLE=1" in line
