"""SVG snapshots of every step screen at 80x24 (happy path) and of error states.

Review each SVG before accepting it (`pytest --snapshot-update`, then open the files under
tests/app/__snapshots__/): nothing host-specific may show (no times, host names, pids, tmp paths).
"""
from __future__ import annotations

import sys
from pathlib import Path

import appkit
import pytest
from appkit import classified, settle
from snapkit import open_step

LOGS = appkit.FIXTURES / "app"


@pytest.fixture
def app(tmp_path: Path):
    return appkit.build(tmp_path, appkit.HANG_ENV, session_id="snap")






def test_classify_first_screen(app, snap_compare) -> None:
    assert snap_compare(app, terminal_size=(80, 24))


def test_classify_answered_with_suspects(app, snap_body) -> None:
    async def run_before(pilot) -> None:
        await classified(pilot)
        pilot.app.screen.query_one("#suspects").scroll_visible(animate=False)

    assert snap_body(app, terminal_size=(100, 30), run_before=run_before)


def test_classify_learn_mode(tmp_path: Path, snap_body) -> None:
    app = appkit.build(tmp_path, appkit.HANG_ENV, session_id="snap", learn=True)
    assert snap_body(app, terminal_size=(80, 24))


def test_logs_switches_for_torchrun(app, snap_body) -> None:
    async def run_before(pilot) -> None:
        await classified(pilot)
        await open_step(pilot, "logs")

    assert snap_body(app, terminal_size=(80, 24), run_before=run_before)


def test_logs_error_missing_path(app, snap_body) -> None:
    async def run_before(pilot) -> None:
        await open_step(pilot, "logs")
        await pilot.press("f")
        pilot.app.focused.value = "./no-such-logs"
        await pilot.press("enter", "escape")
        pilot.app.screen.query_one("#logs-status").scroll_visible(animate=False)

    assert snap_body(app, terminal_size=(80, 24), run_before=run_before)


async def logs_loaded(pilot) -> None:
    await classified(pilot)
    await open_step(pilot, "logs")
    await pilot.press("f")
    pilot.app.focused.value = "logs-hang"  # relative: no checkout path in the frame
    await pilot.press("enter")
    await settle(pilot)
    await pilot.press("escape")


def test_logs_diagnosis(app, snap_body, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(LOGS)

    async def run_before(pilot) -> None:
        await logs_loaded(pilot)
        pilot.app.screen.query_one("#evidence").scroll_visible(animate=False)

    assert snap_body(app, terminal_size=(100, 30), run_before=run_before)


def test_log_viewer(app, snap_body, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(LOGS)

    async def run_before(pilot) -> None:
        await logs_loaded(pilot)
        pilot.app.set_focus(pilot.app.screen.query_one("#evidence"))
        await pilot.press("down", "enter")
        await settle(pilot)

    assert snap_body(app, terminal_size=(80, 24), run_before=run_before)


def test_environment_findings(app, snap_body) -> None:
    async def run_before(pilot) -> None:
        await classified(pilot)
        await open_step(pilot, "environment")
        await settle(pilot)

    assert snap_body(app, terminal_size=(80, 24), run_before=run_before)


def test_environment_probes_missing(tmp_path: Path, snap_body, monkeypatch: pytest.MonkeyPatch) -> None:
    """Error state: a build without the probe registry says so instead of crashing."""
    from distdoctor.knowledge import load_knowledge
    from distdoctor.tui.app.app import make_app
    from distdoctor.tui.record.session import SessionStore

    monkeypatch.setitem(sys.modules, "distdoctor.probes.registry", None)
    app = make_app(load_knowledge(), appkit.recorded_ctx(appkit.HANG_ENV, tmp_path), SessionStore(tmp_path),
                   session_id="snap")

    async def run_before(pilot) -> None:
        await open_step(pilot, "environment")
        await settle(pilot)

    assert snap_body(app, terminal_size=(80, 24), run_before=run_before)


def test_topology_view(app, snap_body) -> None:
    async def run_before(pilot) -> None:
        await open_step(pilot, "environment")
        await settle(pilot)
        await pilot.press("t")
        await pilot.pause()

    assert snap_body(app, terminal_size=(80, 24), run_before=run_before)


def test_repro_plan(app, snap_body) -> None:
    assert snap_body(app, terminal_size=(80, 24), run_before=lambda pilot: open_step(pilot, "repro"))


def test_bisect_plan(app, snap_body, monkeypatch: pytest.MonkeyPatch) -> None:
    import distdoctor.probes.repro.bisect as bisect

    # the plan lists one NCCL_SOCKET_IFNAME run per interface of the host: fix them
    monkeypatch.setattr(bisect, "candidate_interfaces", lambda: ["eth0", "lo"])
    assert snap_body(app, terminal_size=(80, 24), run_before=lambda pilot: open_step(pilot, "bisect"))


def test_conclusion(app, snap_compare) -> None:
    async def run_before(pilot) -> None:
        await classified(pilot)
        await open_step(pilot, "environment")
        await settle(pilot)
        await open_step(pilot, "conclusion")
        await pilot.pause()

    assert snap_compare(app, terminal_size=(80, 24), run_before=run_before)


def test_help(app, snap_body) -> None:
    assert snap_body(app, terminal_size=(80, 24), press=["question_mark"])
