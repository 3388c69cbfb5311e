"""The same evidence gives the same diagnosis everywhere (issue 21): `distdoctor logs --json`, the
app's verdict banner on the Conclusion step (the real app under Pilot, resuming the session the
command wrote) and the report made from that session, compared field by field."""
from __future__ import annotations

import json
from pathlib import Path

import appkit
import pytest
from appkit import run_async, settle

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
        await pilot.press("6")  # Conclusion
        await settle(pilot)
        shown = app.screen.query_one("#verdict-banner").diagnosis
    assert shown is not None

    assert _fields(cli)["confidence"] in ("confirmed", "likely")
    assert _fields(shown) == _fields(cli) == _fields(report["verdict"])
    assert [c["id"] for c in shown["causes"]] == [c["id"] for c in cli["causes"]]
    assert {r: v["status"] for r, v in shown["ranks"].items()} == {r: v["status"] for r, v in cli["ranks"].items()}
    ended = {row[0]: row[1] for row in report["ranks"]["rows"]}
    assert ended == {r: v["status"] for r, v in cli["ranks"].items()}
