"""The same evidence gives the same diagnosis everywhere (issue 21): `distdoctor logs --json`, the
app's verdict banner on the Conclusion step (the real app under Pilot, resuming the session the
command wrote) and the report made from that session, compared field by field."""
from __future__ import annotations

import json
from pathlib import Path

import appkit
import pytest
from appkit import run_async, settle
from snapkit import open_step

from distdoctor.tui.cli import main
from distdoctor.tui.record.session import SessionStore

RECORDED = Path(__file__).resolve().parents[1] / "fixtures" / "recorded"
CASES = [("incident-crash", "error"), ("incident-hang", "hang")]


def _fields(d: dict) -> dict:
    who = d.get("culprit") or {}
    return {"confidence": d.get("confidence"), "cause": d.get("cause"),
            "culprit": (who.get("ranks"), who.get("role")), "recurrence": d.get("recurrence")}


@pytest.mark.parametrize("case,symptom", CASES)
@run_async
async def test_cli_app_and_report_show_one_diagnosis(case: str, symptom: str, tmp_path: Path,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    from distdoctor.knowledge import load_knowledge
    from distdoctor.tui.app.app import make_app

    assert main(["logs", str(RECORDED / case / "logs"), "--symptom", symptom, "--json", "--session", "agree"]) == 1
    cli = json.loads(capsys.readouterr().out)["verdict"]
    out = tmp_path / "report.json"
    assert main(["report", "agree", "--format", "json", "-o", str(out)]) == 0
    capsys.readouterr()
    report = json.loads(out.read_text())

    home = tmp_path / "home"
    home.mkdir()
    app = make_app(load_knowledge(), appkit.recorded_ctx(appkit.HANG_ENV, home), SessionStore(), resume="agree",
                   probes=appkit.recorded_probes())
    async with app.run_test(size=(120, 40)) as pilot:
        await open_step(pilot, "conclusion")  # Conclusion
        await settle(pilot)
        shown = app.screen.query_one("#verdict-banner").diagnosis
    assert shown is not None

    assert _fields(cli)["confidence"] in ("confirmed", "likely")
    assert _fields(shown) == _fields(cli) == _fields(report["verdict"])
    assert [c["id"] for c in shown["causes"]] == [c["id"] for c in cli["causes"]]
    assert {r: v["status"] for r, v in shown["ranks"].items()} == {r: v["status"] for r, v in cli["ranks"].items()}
    ended = {row[0]: row[1] for row in report["ranks"]["rows"]}
    assert ended == {r: v["status"] for r, v in cli["ranks"].items()}


async def _logs_loaded(pilot, logs: str) -> None:
    await appkit.classified(pilot)
    await open_step(pilot, "logs")
    await pilot.press("f")
    pilot.app.focused.value = logs
    await pilot.press("enter")
    await settle(pilot)
    await pilot.press("escape")


@pytest.mark.parametrize("logs,confident", [("logs-hang", False), ("logs-error", True)])
@run_async
async def test_logs_and_conclusion_texts_follow_the_one_diagnosis(logs: str, confident: bool, tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """The Logs step's count and the next actions say what the verdict banner says: causes found
    and the top one's fix when the diagnosis names one; candidates and what to collect when it
    says "not enough evidence" (the hang's timeouts alone), never "apply the fix"."""
    monkeypatch.chdir(appkit.FIXTURES / "app")
    app = appkit.build(tmp_path, appkit.HANG_ENV, session_id="agree")
    async with app.run_test(size=(100, 30)) as pilot:
        await _logs_loaded(pilot, logs)
        banner = app.screen.query_one("#verdict-banner").diagnosis
        assert (banner["confidence"] in ("confirmed", "likely")) is confident
        status = str(app.screen.query_one("#logs-status").render())
        texts = status + app.next_action_text("logs") + app.next_action_text("conclusion")
        if confident:
            assert "cause(s) found" in status and "Apply the fix of the top cause" in texts
            assert "not enough evidence" not in texts.lower()
        else:
            assert "candidate cause(s), not enough evidence to name one" in status
            assert "Not enough evidence to name a cause: collect what Next" in app.next_action_text("logs")
            assert "cause(s) found" not in texts and "Apply the fix" not in texts
            assert banner["next_action"]["kind"] == "collect" and banner["next_action"]["command"]
