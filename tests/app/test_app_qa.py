"""Regressions found by driving the real app over an 80x24 terminal: what the user sees on the
terminal (not only what the widgets hold), keys that did nothing, wrong or missing text."""
from __future__ import annotations

import os
import shutil
import threading
from pathlib import Path

import appkit
from appkit import run_async, screen_text, terminal_lines
from snapkit import open_step

from distdoctor.tui.record.session import SessionStore

LOGS = appkit.FIXTURES / "app"


async def settle(pilot) -> None:
    """Let workers finish and their messages land (a DirectoryTree's loader lives on)."""
    for _ in range(2):
        await pilot.pause()
        for worker in list(pilot.app.workers):
            if worker.group != "_loader":
                await worker.wait()
    await pilot.pause()


def screen(app) -> str:
    return "\n".join(terminal_lines(app))


def key_bar(app) -> str:
    """The key bar's lines on the terminal, joined."""
    region = app.screen.query_one("#keys").region
    return " ".join(line.strip() for line in terminal_lines(app)[region.y:region.bottom])


def resumed(tmp_path: Path, events: list[tuple[str, dict]], **probes) -> object:
    """The app reopened on a session that already holds `events` (as the headless commands or
    an earlier run of the app wrote them)."""
    from distdoctor.knowledge import load_knowledge
    from distdoctor.tui.app.app import make_app

    store = SessionStore(tmp_path / "sessions")
    for kind, data in events:
        store.append("qa", kind, data)
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    return make_app(load_knowledge(), appkit.recorded_ctx(appkit.HANG_ENV, home), store,
                    resume="qa", probes={**appkit.recorded_probes(), **probes})


@run_async
async def test_80x24_shows_every_step_on_one_line_and_the_whole_next_action(tmp_path: Path) -> None:
    app = appkit.build(tmp_path, appkit.HANG_ENV, session_id="qa")
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("enter")  # Hang
        await pilot.pause()
        await pilot.press("enter")  # at process-group init
        await pilot.pause()
        lines = terminal_lines(app)
        # the sidebar wrapped every title onto two lines; now a label each, the full title on top
        steps = [line[:16].rstrip() for line in lines[1:1 + len(app.order)]]
        assert [s[:4] for s in steps] == [f"{'>' if n == 1 else ' '} {n} " for n in range(1, len(app.order) + 1)]
        assert {"Classify", "Logs", "Environment", "Repro", "Bisect", "Conclusion"} <= {s[4:] for s in steps}
        assert f"1/{len(app.order)} Classify the symptom" in lines[0]
        # the key bar used to cover the next action's second line
        text = screen(app)
        assert "First suspect: Rank variables disagree with the processes really started." in text
        assert "Next: n for 'Turn on logs and read them'." in text
        # the chosen symptom in words, not only as a list's highlight
        assert "Suspects for 'Hang at process-group init', most likely first" in screen_text(app)

        await open_step(pilot, "environment")  # the longest key bar: it wraps instead of losing "q Quit"
        await settle(pilot)
        keys = key_bar(app)
        assert "r Rerun probes" in keys and "q Quit" in keys and "^p palette" in keys


@run_async
async def test_n_and_p_are_listed_only_where_they_move(tmp_path: Path) -> None:
    app = appkit.build(tmp_path, appkit.HANG_ENV, session_id="qa")
    async with app.run_test(size=(120, 40)) as pilot:
        keys = key_bar(app)
        assert "n Next step" in keys and "p Prev step" not in keys  # step 1: nothing before it
        await open_step(pilot, "repro")
        await pilot.pause()
        keys = key_bar(app)
        assert "n Next step" in keys and "p Prev step" in keys
        await open_step(pilot, "conclusion")
        await pilot.pause()
        keys = key_bar(app)
        assert "n Next step" not in keys and "p Prev step" in keys
        # in a text field letters type: the key bar says how to get out
        await open_step(pilot, "classify")
        await pilot.press("slash")
        await pilot.pause()
        assert key_bar(app).startswith("esc leave field")
        await pilot.press("escape")
        await pilot.pause()
        assert "esc leave field" not in key_bar(app)


@run_async
async def test_quit_from_the_palette_stops_a_running_job(tmp_path: Path) -> None:
    app = appkit.build(tmp_path, appkit.HANG_ENV, session_id="qa")
    running = threading.Event()  # what a repro worker waits on; set means "stop now"
    async with app.run_test(size=(80, 24)) as pilot:
        app.cancel_events.add(running)
        await pilot.press("ctrl+p")
        await pilot.pause()
        await pilot.press(*"Quit")
        await settle(pilot)  # the palette searches in a worker
        from textual.command import CommandList

        hits = app.screen.query_one(CommandList)
        names = [str(hits.get_option_at_index(i).prompt).split("\n")[0] for i in range(hits.option_count)]
        # there were two: Textual's (action_quit) and the app's own, which called exit() and
        # left the run going (the interpreter then waited for its thread at exit)
        assert [n for n in names if n.startswith("Quit")] == ["Quit"], names
        await pilot.press("enter")
        await pilot.pause()
    assert running.is_set()


@run_async
async def test_fleet_dialog_takes_the_path_at_once_and_says_why_files_were_skipped(tmp_path: Path) -> None:
    from fleet_gen import write_fleet

    fleet = tmp_path / "fleet"
    write_fleet(fleet, 3, plants={1: {"driver": "535.104.05"}})
    (fleet / "broken.json").write_text("{not json", encoding="utf-8")
    app = appkit.build(tmp_path, appkit.HANG_ENV, session_id="qa")
    async with app.run_test(size=(100, 30)) as pilot:
        await open_step(pilot, "environment")
        await settle(pilot)
        await pilot.press("f")
        await pilot.pause()
        assert app.focused.id == "fleet-path"  # typing went nowhere until a Tab
        await pilot.press(*str(fleet), "enter")
        await settle(pilot)
        text = screen_text(app)
        assert "3 node(s): 1 odd value(s) out; 1 file(s) skipped:" in text
        assert f"{fleet / 'broken.json'}: truncated" in text  # the reason, from the fleet loader


@run_async
async def test_topology_view_says_why_there_is_nothing_to_draw(tmp_path: Path) -> None:
    from distdoctor.probes.base import unavailable

    app = appkit.build(tmp_path, appkit.HANG_ENV, session_id="qa")
    app.probes = dict(app.probes, topology=lambda ctx: unavailable("topology", "no NVIDIA driver (recorded)"))
    async with app.run_test(size=(80, 24)) as pilot:
        await open_step(pilot, "environment")
        await settle(pilot)
        await pilot.press("t")
        await pilot.pause()
        text = screen_text(app)
        # it said "the 'topology' probe has not run", right after it ran
        assert "has not run" not in text
        assert "N/A: the 'topology' probe ran and found nothing to draw: no NVIDIA driver (recorded)" in text


@run_async
async def test_topology_facts_from_another_version_are_an_error_line_not_a_crash(tmp_path: Path) -> None:
    # a check and a topology picture recorded earlier, the latter missing most of its keys
    app = resumed(tmp_path, [("check", {"findings": [], "facts": {}, "probes": {}}),
                             ("topo", {"source": "nvml", "gpus": [{"index": 0}]})])
    async with app.run_test(size=(80, 24)) as pilot:
        await open_step(pilot, "environment")
        await settle(pilot)
        assert "recorded earlier" in screen_text(app)  # no new sweep replaced the old facts
        await pilot.press("t")
        await pilot.pause()
        assert "ERROR: cannot draw these topology facts" in screen_text(app)
        assert app.return_code is None  # still running


@run_async
async def test_a_folder_of_runs_names_each_log_apart_and_brings_the_diagnosis_up(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    for run in ("001-node-a", "002-node-b"):
        (runs / run).mkdir(parents=True)
        shutil.copy(LOGS / "logs-hang" / "rank0.log", runs / run / "log.txt")
    app = appkit.build(tmp_path, appkit.HANG_ENV, session_id="qa")
    async with app.run_test(size=(80, 24)) as pilot:
        await open_step(pilot, "logs")
        await pilot.press("f")
        app.focused.value = str(runs)
        await pilot.press("enter")
        await settle(pilot)
        text = screen_text(app)
        # every file was "log.txt:1": which run's log?
        assert "001-node-a/log.txt:1" in text and "002-node-b/log.txt:1" in text
        # the diagnosis was below the fold and the focus stayed in the field
        shown = screen(app)
        assert "Read 2 file(s)" in shown and "Diagnosis (Enter on a cause: its lines)" in shown
        assert app.focused.id == "causes"
        # Enter on a cause: its evidence lines, the first one under the cursor
        await pilot.press("down", "enter")
        await pilot.pause()
        evidence = app.screen.query_one("#evidence")
        assert app.focused is evidence
        assert evidence.get_row_at(evidence.cursor_row)[0] == "2"  # the second cause's first line


@run_async
async def test_log_viewer_keeps_the_marked_line_in_view_with_more_context(tmp_path: Path) -> None:
    from distdoctor.tui.app.screens.logviewer import LogViewerScreen

    log = tmp_path / "job.log"
    lines = [f"[rank0] step {n} loss 0.5" for n in range(1, 301)]
    lines[149] = "torch.distributed.DistBackendError: NCCL error in: ProcessGroupNCCL.cpp:1970, " \
                 "unhandled system error (run with NCCL_DEBUG=INFO for details), NCCL version 2.18.1"
    log.write_text("\n".join(lines) + "\n", encoding="utf-8")
    app = appkit.build(tmp_path, appkit.HANG_ENV, session_id="qa")
    async with app.run_test(size=(80, 24)) as pilot:
        app.push_screen(LogViewerScreen(str(log), 150))
        await settle(pilot)
        assert ">150 | torch.distributed.DistBackendError" in screen(app)
        for key in ("plus", "plus", "minus", "minus", "minus"):
            await pilot.press(key)
            await settle(pilot)
            # more context scrolled the marked line out of the box
            assert ">150 | torch.distributed.DistBackendError" in screen(app), key


@run_async
async def test_a_run_opens_its_log_and_the_interpreter_carries_over(tmp_path: Path) -> None:
    log = tmp_path / "output.log"
    log.write_text("".join(f"line {n}\n" for n in range(1, 200)) + "Traceback: the last words\n",
                   encoding="utf-8")
    python = str(tmp_path / "venv" / "bin" / "python")
    repro = {"outcome": "error", "duration_s": 1.5, "causes": [], "log": str(log),
             "command": [python, "-m", "torch.distributed.run"], "first_error": "RuntimeError: boom",
             "stuck_at": "init"}
    app = resumed(tmp_path, [("repro", repro)])
    async with app.run_test(size=(80, 24)) as pilot:
        await open_step(pilot, "repro")
        await pilot.pause()
        assert app.screen.query_one("#python").value == python
        assert "Minimal repro ERROR: RuntimeError: boom." in screen(app)  # was "The minimal repro done."
        # the recorded result stays up: the filled-in field's Changed event redrew the plan over it
        text = screen_text(app)
        assert "Result\nOutcome: ERROR" in text and "What would run" not in text
        app.set_focus(app.screen.query_one("#runs"))
        await pilot.press("enter")
        await settle(pilot)
        assert "200 | Traceback: the last words" in screen(app)
        await pilot.press("escape")
        await open_step(pilot, "bisect")
        await pilot.pause()
        assert app.screen.query_one("#python").value == python  # typed once, for both steps


@run_async
async def test_a_python_without_torch_is_named_before_anything_runs(tmp_path: Path) -> None:
    fake = tmp_path / "python"
    fake.write_text("#!/bin/sh\necho \"ModuleNotFoundError: No module named 'torch'\" >&2\nexit 1\n",
                    encoding="utf-8")
    fake.chmod(0o755)
    app = appkit.build(tmp_path, appkit.HANG_ENV, session_id="qa")
    notes: list[str] = []
    async with app.run_test(size=(80, 24)) as pilot:
        app.notify = lambda message, **kw: notes.append(str(message))  # type: ignore[method-assign]
        await open_step(pilot, "repro")
        await pilot.pause()
        app.screen.query_one("#python").value = str(fake)
        await pilot.press("r")
        await settle(pilot)
        # it ran torchrun anyway and reported "ERROR stuck at init"
        assert any("torch is not installed there" in note for note in notes), notes
        assert "torch is not installed there" in screen_text(app)
        assert not (tmp_path / "sessions" / "qa.json").exists()  # nothing ran, nothing recorded


@run_async
async def test_a_stopped_run_is_not_a_done_step(tmp_path: Path) -> None:
    stopped = {"outcome": "stopped", "duration_s": 1.5, "causes": [], "log": "", "command": [],
               "stuck_at": "init"}  # where it was when the user stopped it: not a fault
    app = resumed(tmp_path, [("answer", {"question": "kind", "answer": "hang"}),
                             ("classify", {"symptom": "hang", "sub": "hang-init", "kind": "hang"}),
                             ("logs", {"paths": ["x"], "causes": []}),
                             ("check", {"findings": [], "facts": {}, "probes": {}}),
                             ("repro", stopped)])
    async with app.run_test(size=(80, 24)) as pilot:
        assert app.current_step == "repro"  # --resume reopens the interrupted step
        text = screen(app)
        n = app.order.index("repro") + 1
        assert f"> {n} Repro" in text and f"✓ {app.order.index('environment') + 1} Environment" in text
        await open_step(pilot, "bisect")
        await pilot.pause()
        assert f"  {n} Repro" in screen(app) and f"✓ {n} Repro" not in screen(app)
        await open_step(pilot, "repro")
        await pilot.pause()
        text = screen(app)
        assert "The minimal repro was stopped before a result; r runs it again." in text
        assert "recorded earlier" in text
        assert "Outcome: STOPPED" in text and "stuck at" not in text
        await pilot.pause()


@run_async
async def test_export_says_where_the_report_went(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    app = appkit.build(tmp_path, appkit.HANG_ENV, session_id="qa")
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.press("enter")
        await pilot.pause()
        await pilot.press("enter")
        await open_step(pilot, "conclusion")
        await pilot.pause()
        app.screen.query_one("#export-path").value = "incident.html"
        await pilot.press("e", "enter")  # e: the field, in view; Enter writes
        await settle(pilot)
        # "OK wrote incident.html": relative to a working folder the user may not know
        assert f"OK wrote {tmp_path / 'incident.html'}" in screen_text(app)
        assert (tmp_path / "incident.html").read_text(encoding="utf-8").startswith("<!")


@run_async
async def test_enter_on_a_finding_or_a_cause_brings_its_explanation_up(tmp_path: Path) -> None:
    app = appkit.build(tmp_path, appkit.HANG_ENV, session_id="qa")
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("enter")
        await pilot.pause()
        await pilot.press("enter")
        await open_step(pilot, "environment")
        await settle(pilot)
        assert app.focused.id == "findings"
        await pilot.press("enter")  # did nothing; the fix sat below the fold
        await pilot.pause()
        assert "Fix: docker run --shm-size=16g" in screen(app)
        await open_step(pilot, "conclusion")
        await pilot.pause()
        assert app.focused.id == "ranking"
        await pilot.press("enter")
        await pilot.pause()
        fix = app.kb.causes[app.screen.ranked[0].id].fix
        assert fix[:40] in screen(app)


@run_async
async def test_help_lists_the_dialogs_keys_in_full_lines(tmp_path: Path) -> None:
    app = appkit.build(tmp_path, appkit.HANG_ENV, session_id="qa")
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("question_mark")
        await pilot.pause()
        text = screen_text(app)
        for section in ("Log viewer", "Log picker", "Topology (t on the Environment step)", "Fleet"):
            assert section in text
        assert any(line.split()[:1] == ["+"] and "More context" in line for line in text.splitlines())
        # a long heading in the key column squeezed every description to a word a line
        assert "ctrl+p          Command palette: every action by name" in screen(app)


@run_async
async def test_path_completion_lists_folders_off_the_event_loop(tmp_path: Path) -> None:
    from distdoctor.tui.app.widgets import PathSuggester

    (tmp_path / "nccl-logs").mkdir()
    threads: list[int] = []
    suggester = PathSuggester()
    scan = suggester.scan
    suggester.scan = lambda folder, prefix: threads.append(threading.get_ident()) or scan(folder, prefix)
    assert await suggester.get_suggestion(f"{tmp_path}{os.sep}ncc") == f"{tmp_path}{os.sep}nccl-logs/"
    assert threads and threads[0] != threading.get_ident()  # a slow NFS folder froze typing


@run_async
async def test_typed_paths_are_checked_off_the_event_loop(tmp_path: Path, monkeypatch) -> None:
    """A stat of a path on a hung network mount never returns: not on the UI's thread."""
    stats: list[int] = []
    real_exists = os.path.exists

    def exists(path) -> bool:
        if "no-such" in str(path):
            stats.append(threading.get_ident())
        return real_exists(path)

    monkeypatch.setattr(os.path, "exists", exists)
    app = appkit.build(tmp_path, appkit.HANG_ENV, session_id="qa")
    async with app.run_test(size=(80, 24)) as pilot:
        await open_step(pilot, "logs")
        await pilot.press("f")
        app.focused.value = str(tmp_path / "no-such-logs")
        await pilot.press("enter")
        await settle(pilot)
        assert f"ERROR no such file or folder: {tmp_path / 'no-such-logs'}" in screen_text(app)
        await pilot.press("escape")
        await open_step(pilot, "environment")
        await settle(pilot)
        await pilot.press("f")
        await pilot.press(*str(tmp_path / "no-such-fleet"), "enter")
        await settle(pilot)
        assert f"ERROR no such file or folder: {tmp_path / 'no-such-fleet'}" in screen_text(app)
    main = threading.get_ident()
    assert len(stats) == 2 and main not in stats
    recorded = tmp_path / "sessions" / "qa.json"
    # a typo is not an answer: nothing was recorded for it
    assert not recorded.exists() or "log_paths" not in recorded.read_text(encoding="utf-8")


@run_async
async def test_work_after_the_first_frame_runs_even_if_textual_never_calls_the_hook(tmp_path: Path,
                                                                                    monkeypatch) -> None:
    """after_first_frame hangs on Textual's private App._display; if a release stops calling it,
    the timer from on_mount still runs the work (garbage collection back on, the knowledge check)."""
    from textual.app import App

    from distdoctor.tui.app.app import FIRST_FRAME_LATEST_S, DistDoctorApp

    monkeypatch.setattr(DistDoctorApp, "_display", App._display)  # the hook is never reached
    app = appkit.build(tmp_path, appkit.HANG_ENV, session_id="frame")
    ran: list[int] = []
    async with app.run_test(size=(80, 24)) as pilot:
        app.after_first_frame(lambda: ran.append(1))
        assert ran == []
        await pilot.pause(FIRST_FRAME_LATEST_S + 0.5)
        assert ran == [1] and app._first_frame is None
