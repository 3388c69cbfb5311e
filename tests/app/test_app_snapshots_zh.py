"""SVG snapshots of the main screens in Simplified Chinese at 80x24 (issue 15): the same steps as
tests/app/test_app_snapshots.py, with the app built in Chinese. They show that wide characters keep
the step list, the tables and the key bar aligned.

Review each SVG before accepting it (`pytest --snapshot-update tests/app/test_app_snapshots_zh.py`):
every text of the app is Chinese; commands, env lines, ids and log lines stay as they are.
"""
from __future__ import annotations

from pathlib import Path

import appkit
import pytest
from appkit import classified, settle
from snapkit import open_step

from distdoctor.knowledge import i18n

LOGS = appkit.FIXTURES / "app"


@pytest.fixture
def app(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("DISTDOCTOR_LANG", "zh")
    i18n.set_lang(None)
    return appkit.build(tmp_path, appkit.HANG_ENV, session_id="snap")






def test_classify_first_screen_zh(app, snap_compare) -> None:
    assert snap_compare(app, terminal_size=(80, 24))


def test_classify_answered_zh(app, snap_body) -> None:
    assert snap_body(app, terminal_size=(80, 24), run_before=classified)


def test_logs_diagnosis_zh(app, snap_body, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(LOGS)

    async def run_before(pilot) -> None:
        await classified(pilot)
        await open_step(pilot, "logs")
        await pilot.press("f")
        pilot.app.focused.value = "logs-hang"  # relative: no checkout path in the frame
        await pilot.press("enter")
        await settle(pilot)
        await pilot.press("escape")

    assert snap_body(app, terminal_size=(80, 24), run_before=run_before)


def test_environment_findings_zh(app, snap_body) -> None:
    async def run_before(pilot) -> None:
        await classified(pilot)
        await open_step(pilot, "environment")
        await settle(pilot)

    assert snap_body(app, terminal_size=(80, 24), run_before=run_before)


def test_conclusion_zh(app, snap_body) -> None:
    async def run_before(pilot) -> None:
        await classified(pilot)
        await open_step(pilot, "environment")
        await settle(pilot)
        await open_step(pilot, "conclusion")
        await pilot.pause()

    assert snap_body(app, terminal_size=(80, 24), run_before=run_before)
