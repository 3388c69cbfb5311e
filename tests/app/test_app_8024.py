"""The app at 80x24 with --learn: the highlighted choice is always on screen as the arrows move it,
focus shows as a bar (not colour alone) and the focus line names where Tab goes, Enter never does
nothing silently, evidence names the rank's file, and a copy tmux would drop says so and keeps the
text in a file."""
from __future__ import annotations

import base64
import subprocess
from pathlib import Path
from typing import Any

import appkit
from appkit import run_async, terminal_lines
from snapkit import open_step

from distdoctor.tui.app import clipboard

INCIDENT = appkit.FIXTURES / "recorded" / "incident-crash" / "logs"
SIZE = (80, 24)
NAV = 18  # the step list's width: the content column starts after it


async def settle(pilot: Any) -> None:
    for _ in range(2):
        await pilot.pause()
        for worker in list(pilot.app.workers):
            await worker.wait()
    await pilot.pause()


def on_screen(app: Any, text: str) -> bool:
    """Whether `text` is in the visible terminal (joined words, so a wrapped phrase counts)."""
    flat = " ".join(" ".join(terminal_lines(app)).split())
    return " ".join(text.split()) in flat


def row_text(table: Any, row: int, column: int, width: int = 24) -> str:
    """The start of one cell, as a table shows it cut to its column."""
    return str(table.get_row_at(row)[column]).strip()[:width]


async def walk_rows(pilot: Any, table_id: str, column: int) -> list[int]:
    """Press Down through every row of a table; the rows whose text was NOT on screen."""
    app = pilot.app
    table = app.screen.query_one(f"#{table_id}")
    assert app.screen.focused is table, app.screen.focused
    missing = []
    for row in range(table.row_count):
        if row:
            await pilot.press("down")
            await pilot.pause()
            await pilot.pause()
        assert table.cursor_row == row
        if not on_screen(app, row_text(table, row, column)):
            missing.append(row)
    return missing


def focus_bar_rows(app: Any) -> int:
    """Terminal rows that start the content column with the focus bar (a full block)."""
    return sum(1 for line in terminal_lines(app) if line[NAV:NAV + 2].strip().startswith("█"))


async def open_classify(pilot: Any) -> None:
    await pilot.pause()
    await pilot.pause()


@run_async
async def test_classify_choices_stay_on_screen_under_the_learn_text(tmp_path: Path) -> None:
    app = appkit.build(tmp_path, appkit.HANG_ENV, learn=True)
    async with app.run_test(size=SIZE) as pilot:
        await open_classify(pilot)
        kinds = app.screen.query_one("#kind")
        assert app.screen.focused is kinds
        for n in range(kinds.option_count):  # every choice, as the highlight reaches it
            if n:
                await pilot.press("down")
                await pilot.pause()
            title = str(kinds.get_option_at_index(n).prompt).split(":")[0]
            assert kinds.highlighted == n and on_screen(app, title), (n, terminal_lines(app))
        await pilot.press("up")
        await pilot.press("enter")  # Hang: the where-exactly list opens below
        await pilot.pause()
        subs = app.screen.query_one("#sub")
        assert app.screen.focused is subs
        for n in range(subs.option_count):
            if n:
                await pilot.press("down")
                await pilot.pause()
            title = str(subs.get_option_at_index(n).prompt).splitlines()[0]
            assert subs.highlighted == n and on_screen(app, title), (n, "\n".join(terminal_lines(app)))
        # focus is a bar beside the focused list, and the focus line says where Tab goes
        assert focus_bar_rows(app) >= 2
        assert on_screen(app, "▶ where · tab: paste field")


async def to_logs(pilot: Any) -> None:
    await open_classify(pilot)
    await pilot.press("enter", "enter")  # Hang, at process-group init
    await pilot.pause()
    await pilot.press("n")
    await pilot.pause()
    await pilot.press("f")
    pilot.app.focused.value = str(INCIDENT)
    await pilot.press("enter")
    await settle(pilot)


@run_async
async def test_logs_causes_and_evidence_rows_stay_on_screen(tmp_path: Path) -> None:
    app = appkit.build(tmp_path, appkit.HANG_ENV, learn=True)
    async with app.run_test(size=SIZE) as pilot:
        await to_logs(pilot)
        assert on_screen(app, "Culprit: rank 1 (crashed)")  # the verdict first, with row 1
        assert await walk_rows(pilot, "causes", 3) == []
        evidence = app.screen.query_one("#evidence")
        # torchrun's per-rank folders: the rank's file, as the command line names it
        wheres = [str(evidence.get_row_at(i)[1]) for i in range(evidence.row_count)]
        assert "1/stderr.log:6" in wheres and not any(w.startswith("stderr.log") for w in wheres)
        await pilot.press("tab")
        await pilot.pause()
        assert on_screen(app, "▶ evidence lines")
        assert await walk_rows(pilot, "evidence", 1) == []


@run_async
async def test_enter_on_a_cause_without_lines_says_why(tmp_path: Path) -> None:
    app = appkit.build(tmp_path, appkit.HANG_ENV, learn=True)
    async with app.run_test(size=SIZE) as pilot:
        await to_logs(pilot)
        causes = app.screen.query_one("#causes")
        bare = next(i for i in range(causes.row_count) if str(causes.get_row_at(i)[2]) == "0")
        for _ in range(bare):
            await pilot.press("down")
        await pilot.press("enter")
        await pilot.pause()
        assert app.screen.focused is causes  # no jump to another cause's lines
        notes = [str(n.message) for n in app._notifications]
        assert any(n.startswith("No log lines for") and "basis: prior" in n for n in notes), notes


@run_async
async def test_environment_findings_and_their_what_why_fix_stay_on_screen(tmp_path: Path) -> None:
    app = appkit.build(tmp_path, appkit.ERROR_ENV, learn=True)
    async with app.run_test(size=SIZE) as pilot:
        await open_classify(pilot)
        await open_step(pilot, "environment")
        await settle(pilot)
        findings = app.screen.query_one("#findings")
        assert findings.row_count >= 3 and app.screen.focused is findings
        for row in range(findings.row_count):
            if row:
                await pilot.press("down")
                await pilot.pause()
                await pilot.pause()
            title = row_text(findings, row, 2, 20)
            assert on_screen(app, title) and on_screen(app, "What: " + title[:12]), \
                (row, "\n".join(terminal_lines(app)))


@run_async
async def test_conclusion_causes_stay_on_screen(tmp_path: Path) -> None:
    app = appkit.build(tmp_path, appkit.HANG_ENV, learn=True)
    async with app.run_test(size=SIZE) as pilot:
        await to_logs(pilot)
        await pilot.press("escape")
        await open_step(pilot, "conclusion")
        await settle(pilot)
        assert await walk_rows(pilot, "ranking", 2) == []
        assert on_screen(app, "Why: basis")
        assert "score" not in " ".join(terminal_lines(app))  # basis and evidence, not scores


@run_async
async def test_fleet_dialog_enter_on_an_empty_field_says_what_to_type(tmp_path: Path) -> None:
    app = appkit.build(tmp_path, appkit.HANG_ENV, learn=True)
    async with app.run_test(size=SIZE) as pilot:
        await open_classify(pilot)
        await open_step(pilot, "environment")
        await settle(pilot)
        await pilot.press("f")
        await pilot.pause()
        await pilot.press("enter")
        await pilot.pause()
        assert on_screen(app, "Type a path first") and on_screen(app, "distdoctor collect -o")


def fake_tmux(options: dict[str, str | None]) -> Any:
    """A `subprocess.run` that answers `tmux show-options` from a table (None: unknown option)."""
    def run(argv: list[str], **kwargs: Any) -> subprocess.CompletedProcess[str]:
        assert argv[:2] == ["tmux", "show-options"] and kwargs.get("timeout")
        value = options.get(argv[-1])
        return subprocess.CompletedProcess(argv, 0 if value is not None else 1,
                                           stdout=f"{value}\n" if value is not None else "", stderr="")
    return run


def test_clipboard_route_under_tmux() -> None:
    tmux = {"TMUX": "/tmp/tmux-0/default,1,0", "TMUX_PANE": "%1"}
    assert clipboard.route({}).mode == "direct"
    assert clipboard.route(tmux, fake_tmux({"set-clipboard": "on"})).mode == "direct"
    assert clipboard.route(tmux, fake_tmux({"set-clipboard": "external",
                                            "allow-passthrough": "on"})).mode == "passthrough"
    # tmux before 3.3 has no allow-passthrough and passes DCS through
    assert clipboard.route(tmux, fake_tmux({"set-clipboard": "external"})).mode == "passthrough"
    dropped = clipboard.route(tmux, fake_tmux({"set-clipboard": "external", "allow-passthrough": "off"}))
    assert dropped.mode == "none" and "tmux set -g allow-passthrough on" in dropped.why
    wrapped = clipboard.osc52("export NCCL_DEBUG=INFO", "passthrough")
    assert wrapped.startswith("\x1bPtmux;\x1b\x1b]52;c;") and wrapped.endswith("\a\x1b\\")
    payload = wrapped[len("\x1bPtmux;\x1b\x1b]52;c;"):-len("\a\x1b\\")]
    assert base64.b64decode(payload).decode() == "export NCCL_DEBUG=INFO"


@run_async
async def test_a_copy_tmux_drops_says_so_and_keeps_the_text_in_a_file(tmp_path: Path) -> None:
    app = appkit.build(tmp_path, appkit.HANG_ENV, learn=True)
    async with app.run_test(size=SIZE) as pilot:
        app._clip_route = clipboard.Route("none", "tmux drops clipboard escapes here (set-clipboard "
                                          "external, allow-passthrough off); to copy next time: "
                                          + clipboard.FIX)
        await open_classify(pilot)
        await open_step(pilot, "logs")
        await pilot.pause()
        await pilot.press("c")
        await pilot.pause()
        note = [str(n.message) for n in app._notifications][-1]
        assert note.startswith("Not copied: tmux drops clipboard escapes") and "copied" not in note[11:40]
        path = Path(note.rsplit(" are in ", 1)[1].replace("~", str(Path.home()), 1))
        assert path.read_text().strip() == app.screen.launcher.text.strip()
        assert path.stat().st_mode & 0o777 == 0o600
