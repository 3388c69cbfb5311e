"""The app walked end to end with Pilot: hang path and error path on a recorded host, and the
Environment step against the real host."""
from __future__ import annotations

import contextlib
import os
import sys
from pathlib import Path

import appkit
import psutil
import pytest
from appkit import run_async, screen_text
from snapkit import open_step, walk_to
from textual.worker import WorkerCancelled

from distdoctor.tui.record.session import SessionStore

LOGS = appkit.FIXTURES / "app"


async def settle(pilot) -> None:
    """Let workers finish and their messages land: no sleeps. A DirectoryTree's "_loader" worker
    lives as long as the tree, so it is not waited for; the loads it starts are."""
    for _ in range(2):  # a worker's messages may start another worker (the tree's loads do)
        await pilot.pause()
        for worker in list(pilot.app.workers):
            if worker.group != "_loader":
                await worker.wait()
    await pilot.pause()
    assert pilot.app.saver.flush(timeout=30)  # results reach the session file off the event loop


def saved_events(app, session: str) -> list[dict]:
    """The session file as written, once the app's writer has caught up (it saves off the loop)."""
    assert app.saver.flush(timeout=30)
    return SessionStore(app.store.directory).load(session)["events"]


def kinds(app, session: str) -> list[str]:
    return [e["kind"] for e in saved_events(app, session)]


def latest(app, session: str, kind: str) -> dict:
    return [e["data"] for e in saved_events(app, session) if e["kind"] == kind][-1]


async def load_logs(pilot, path: Path) -> None:
    await pilot.press("f")
    assert pilot.app.focused.id == "path"
    pilot.app.focused.value = str(path)
    await pilot.press("enter")
    await settle(pilot)
    await pilot.press("escape")  # out of the field, so letter keys drive the app again


@run_async
async def test_hang_path_from_classify_to_export(tmp_path: Path) -> None:
    app = appkit.build(tmp_path, appkit.HANG_ENV, session_id="hang")
    async with app.run_test(size=(80, 24)) as pilot:
        # 1. classify: the two top-level symptoms from the knowledge base, then where it hangs
        text = screen_text(app)
        assert "What do you see?" in text and "Hang:" in text and "Error:" in text
        assert app.current_step == "classify"
        await pilot.press("enter")  # Hang
        await pilot.pause()
        assert "Hang: where exactly?" in screen_text(app)
        assert kinds(app, "hang") == ["answer"]
        await pilot.press("enter")  # Hang at process-group init
        await pilot.pause()
        classify = latest(app, "hang", "classify")
        assert (classify["symptom"], classify["sub"]) == ("hang", "hang-init")
        assert classify["suspects"][0]["id"] == "rank-env-mismatch"  # 3 (init) + 2.5 (hang)
        text = screen_text(app)
        assert "Rank variables disagree" in text and "5.5 = Hang at process-group init 3 + Hang 2.5" in text
        assert "First suspect: Rank variables disagree" in text

        # 2. logs: torchrun detected from the job's environment; the lines to copy
        await pilot.press("n")
        assert app.current_step == "logs"
        text = screen_text(app)
        assert "Launcher: torchrun (TORCHELASTIC_RUN_ID is set)" in text
        assert "export NCCL_DEBUG=INFO" in text and "export NCCL_DEBUG_SUBSYS=INIT,NET" in text
        assert "export NCCL_DEBUG_FILE=./nccl-logs/nccl.%h.%p.log" in text
        await load_logs(pilot, LOGS / "logs-hang")
        logs = latest(app, "hang", "logs")
        assert logs["paths"] == [str(LOGS / "logs-hang")]
        found = [c["id"] for c in logs["causes"]]
        assert "nic-selection" in found and "collective-timeout" in found
        text = screen_text(app)
        assert "NCCL or Gloo picked the wrong network interface" in text
        assert "rank0.log:1" in text and "Bootstrap : Using lo:127.0.0.1<0>" in text
        # an evidence line opens in its file, marked, with its neighbours
        app.set_focus(app.screen.query_one("#evidence"))
        await pilot.press("enter")
        await settle(pilot)
        viewer = screen_text(app)
        # the first evidence line (rank0.log:1) is marked; its neighbours come from the file
        assert ">1 | node-a:1201:1201 [0] NCCL INFO Bootstrap : Using lo:127.0.0.1<0>" in viewer
        assert " 2 | node-a:1201:1201 [0] NCCL INFO NET/Plugin : No plugin found" in viewer
        await pilot.press("escape")
        await pilot.pause()

        # 3. environment: probes run when the step opens, with progress and words for status
        await walk_to(pilot, "environment")
        await settle(pilot)
        assert app.current_step == "environment"
        text = screen_text(app)
        assert f"{len(app.probes)} probes done" in text  # the registry's, hardware ones aside (appkit)
        assert "FAIL | shm | /dev/shm is only 64.0 MiB (runtime: docker)" in text
        assert "MASTER_ADDR=127.0.0.1 is loopback but the job spans several nodes" in text
        assert "What: /dev/shm is only 64.0 MiB" in text and "Fix: docker run --shm-size=16g" in text
        check = latest(app, "hang", "check")
        assert set(check["facts"]) == set(app.probes) >= {"versions", "shm", "launch", "switches", "network", "topology"}
        assert {f["status"] for f in check["findings"]} >= {"fail", "ok"}
        # a probe that ran but found a problem reads as its worst finding, never OK
        failed = sorted({f["probe"] for f in check["findings"] if f["status"] == "fail"})
        lines = screen_text(app).splitlines()
        for probe in failed:
            assert any(line.split()[:2] == [probe, "FAIL"] for line in lines), probe
        await pilot.press("down")  # the detail follows the highlighted finding
        await pilot.pause()
        assert "What: MASTER_ADDR=127.0.0.1 is loopback" in screen_text(app)
        await pilot.press("a")  # OK findings are listed on request
        await pilot.pause()
        assert "OK | launch | MASTER_PORT=29911 is a valid port" in screen_text(app)

        # 4 and 5: the plans, from the repro module and the knowledge base's switches
        await walk_to(pilot, "repro")
        assert "baseline: 2 ranks on this node" in screen_text(app)
        await walk_to(pilot, "bisect")
        text = screen_text(app)
        assert "then alone: NCCL_IB_DISABLE=1 (if only this passes: ib-rdma-failure)" in text

        # 6. conclusion: every piece of evidence counted, the fix, switches to remove, export
        await walk_to(pilot, "conclusion")
        await pilot.pause()
        assert app.current_step == "conclusion"
        conclusion = latest(app, "hang", "conclusion")
        ranked = [c["id"] for c in conclusion["causes"]]
        assert ranked[0] == "nic-selection", ranked  # symptom prior + log evidence
        assert "shm-insufficient" in ranked  # from the FAIL finding alone
        why = " ".join(conclusion["causes"][0]["why"])
        assert "logs (evidence): score" in why and "symptom: Hang at process-group init" in why
        text = screen_text(app)
        assert "NCCL_SOCKET_IFNAME" in text  # the fix of the top cause, from kb.causes
        assert "If you added the Logs step's logging lines to the job (NCCL_DEBUG," in text
        await pilot.press("c")  # the top cause's fix, ready to paste
        assert "export NCCL_SOCKET_IFNAME=eth0" in app.clipboard.splitlines()
        target = tmp_path / "incident.md"
        app.screen.query_one("#export-path").value = str(target)
        await pilot.press("e", "enter")  # e: the field, in view; Enter writes
        await settle(pilot)
        assert f"OK wrote {target}" in screen_text(app)
        report = target.read_text(encoding="utf-8")
        assert "hang" in report.lower() and "nic-selection" in report

    assert kinds(app, "hang") == ["answer", "classify", "logs", "check", "topo", "conclusion"]


@run_async
async def test_error_path_with_pasted_line_learn_mode_and_jumps(tmp_path: Path) -> None:
    app = appkit.build(tmp_path, appkit.ERROR_ENV, session_id="err", learn=True)
    async with app.run_test(size=(100, 30)) as pilot:
        # learn mode shows why each step exists and its terms, from kb.steps
        text = screen_text(app)
        assert "Why this step: Hangs and errors have different usual suspects" in text
        assert "collective: An operation every rank must join" in text
        await pilot.press("down", "enter")  # Error
        await pilot.pause()
        assert "Error: where exactly?" in screen_text(app)
        await pilot.press("slash")
        app.focused.value = ("torch.distributed.DistBackendError: NCCL error in: ProcessGroupNCCL.cpp:1269, "
                             "unhandled system error, NCCL version 2.18.1")
        await pilot.press("enter")
        await settle(pilot)
        classify = latest(app, "err", "classify")
        assert "unhandled system error" in classify["text"]
        assert "network-unreachable" in [m["id"] for m in classify["matches"]]
        assert "The line matches:" in screen_text(app)
        await pilot.press("escape")
        app.set_focus(app.screen.query_one("#sub"))
        await pilot.press("enter")  # the first error sub-symptom: a worker crashed or raised
        await pilot.pause()
        assert latest(app, "err", "classify")["sub"] == "error-worker-raised"

        await open_step(pilot, "logs")
        text = screen_text(app)
        assert "Launcher: Slurm (srun) (SLURM_JOB_ID is set)" in text
        assert "srun --export=ALL ... python train.py" in text
        # a path that does not exist is an error on the screen, not a crash
        await load_logs(pilot, tmp_path / "no-such-dir")
        assert f"ERROR no such file or folder: {tmp_path / 'no-such-dir'}" in screen_text(app)
        await load_logs(pilot, LOGS / "logs-error" / "rank0.log")
        assert "shm-insufficient" in [c["id"] for c in latest(app, "err", "logs")["causes"]]

        await open_step(pilot, "environment")
        await settle(pilot)
        text = screen_text(app)
        assert "FAIL | shm | /dev/shm is only 64.0 MiB" in text
        check = latest(app, "err", "check")
        titles = " ".join(f["title"] for f in check["findings"] if f["status"] in ("warn", "fail"))
        assert "NCCL_P2P_DISABLE" in titles

        await open_step(pilot, "conclusion")
        await pilot.pause()
        conclusion = latest(app, "err", "conclusion")
        assert conclusion["causes"][0]["id"] == "shm-insufficient"
        removed = {s["name"] for s in conclusion["switches_to_remove"]}
        assert {"NCCL_P2P_DISABLE", "NCCL_DEBUG"} <= removed
        assert "NCCL_P2P_DISABLE=1" in screen_text(app)

        # jump back: the classify screen still shows what was chosen and pasted
        await open_step(pilot, "classify")
        await pilot.pause()
        assert app.current_step == "classify"
        text = screen_text(app)
        assert "unhandled system error" in text and "The line matches:" in text
        await pilot.press("l")  # learn mode off
        await pilot.pause()
        assert "Why this step" not in screen_text(app)


@run_async
async def test_help_and_command_palette_list_every_action(tmp_path: Path) -> None:
    app = appkit.build(tmp_path, appkit.HANG_ENV)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("question_mark")
        await pilot.pause()
        text = screen_text(app)
        for key, what in (("n", "Next step"), ("l", "Learn"), ("/", "Paste a line"), ("c", "Copy lines"),
                          ("r", "Rerun probes"), ("a", "Show OK"), ("x", "Stop"), ("e", "Export report")):
            assert any(line.split()[:1] == [key] and what in line for line in text.splitlines()), (key, what)
        await pilot.press("escape")
        names = [name for name, _, _ in app.palette_commands()]
        assert "Go to step 3: Check the environment" in names
        for name in ("Run the environment probes", "Run the minimal repro", "Run the bisection",
                     "Export the report", "Toggle learn mode", "Compare fleet snapshots"):
            assert name in names
        # the palette runs a step's action: here, open the repro step's plan
        await pilot.press("ctrl+p")
        await pilot.pause()
        await pilot.press(*f"Go to step {app.order.index('repro') + 1}")
        await pilot.press("enter")
        await pilot.pause()
        assert app.current_step == "repro"


@run_async
async def test_a_broken_install_is_an_error_not_a_missing_feature(tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    # issue 11: distdoctor's own modules are never optional; an ImportError of the log analyser
    # is a bug to surface (the worker fails with it), not "not available in this build"
    from textual.worker import Worker, WorkerState

    failed: list = []

    def hook(message: object) -> None:
        if isinstance(message, Worker.StateChanged) and message.state == WorkerState.ERROR:
            failed.append(message.worker.error)

    monkeypatch.setitem(sys.modules, "distdoctor.knowledge.logs", None)  # import now fails
    app = appkit.build(tmp_path, appkit.HANG_ENV, session_id="nolog")
    async with app.run_test(size=(80, 24), message_hook=hook) as pilot:
        await open_step(pilot, "logs")
        await load_logs(pilot, LOGS / "logs-hang")
        assert "not available" not in screen_text(app)
        assert failed and all(isinstance(e, ImportError) for e in failed)


@run_async
async def test_fleet_snapshots_name_the_odd_node_and_count_in_the_conclusion(tmp_path: Path) -> None:
    from fleet_gen import write_fleet

    write_fleet(tmp_path / "fleet", 4, plants={2: {"driver": "535.104.05"}})
    app = appkit.build(tmp_path, appkit.HANG_ENV, session_id="fleet")
    async with app.run_test(size=(100, 30)) as pilot:
        await open_step(pilot, "environment")
        await settle(pilot)
        await pilot.press("f")
        await pilot.pause()
        app.screen.query_one("#fleet-path").value = str(tmp_path / "fleet")
        app.set_focus(app.screen.query_one("#fleet-path"))
        await pilot.press("enter")
        await settle(pilot)
        text = screen_text(app)
        assert "4 node(s): 1 odd value(s) out" in text
        assert "node-02 | driver | 535.104.05 | 550.54.15 (3)" in text
        await pilot.press("escape")
        await open_step(pilot, "conclusion")
        await pilot.pause()
    fleet = latest(app, "fleet", "fleet")
    assert fleet["outliers"][0]["node"] == "node-02"
    causes = {c["id"]: c["why"] for c in latest(app, "fleet", "conclusion")["causes"]}
    assert "fleet: nodes disagree on driver" in causes["version-mismatch"]


@run_async
async def test_browse_picks_a_folder_for_the_logs(tmp_path: Path) -> None:
    app = appkit.build(tmp_path, appkit.HANG_ENV, session_id="pick")
    async with app.run_test(size=(80, 24)) as pilot:
        await open_step(pilot, "logs")
        await pilot.press("f")
        app.focused.value = str(LOGS / "logs-hang")
        await pilot.press("escape", "b")  # the tree opens at the typed folder
        await settle(pilot)
        assert str(LOGS / "logs-hang") in screen_text(app)
        assert "rank0.log" in screen_text(app)
        await pilot.press("down", "s")  # the highlighted entry's folder
        await settle(pilot)
        assert app.current_step == "logs"
        assert app.screen.query_one("#path").value == str(LOGS / "logs-hang")


@pytest.fixture
def own_jobs_only(monkeypatch: pytest.MonkeyPatch) -> None:
    """The real host's job lookups (the job's python, the job to watch) see only jobs under this
    test's process: a job another test runs on this machine at the same time (pytest -n) is not
    this test's running job (found, its interpreter replaced the repro's python3 and no run started)."""
    from distdoctor.probes import stacks
    from distdoctor.probes.stacks import discover

    real = discover.find_jobs

    def own(ctx=None, scope=None):  # type: ignore[no-untyped-def]
        mine = {p.pid for p in psutil.Process().children(recursive=True)}
        return [job for job in real(ctx, scope) if {r.pid for r in job.ranks} <= mine]

    monkeypatch.setattr(discover, "find_jobs", own)  # as probes/repro/interpreter.py imports it
    monkeypatch.setattr(stacks, "find_jobs", own)  # as the screens call it


@run_async
async def test_environment_step_on_the_real_host(tmp_path: Path, own_jobs_only: None) -> None:
    """The registry's probes against this machine: whatever it has, every probe ends in a word."""
    from distdoctor.knowledge import load_knowledge
    from distdoctor.probes.base import ProbeContext
    from distdoctor.probes.registry import PROBES
    from distdoctor.tui.app.app import make_app

    app = make_app(load_knowledge(), ProbeContext(), SessionStore(tmp_path), session_id="host")
    async with app.run_test(size=(80, 24)) as pilot:
        await open_step(pilot, "environment")
        await settle(pilot)
        text = screen_text(app)
        check = SessionStore(tmp_path).load("host")["events"][-1]["data"]
        assert list(check["probes"]) == list(PROBES)  # every registered probe, in the registry's order
        for name, probe in check["probes"].items():
            word = {"ok": "OK", "warn": "WARN", "fail": "FAIL", "unavailable": "N/A", "error": "ERROR"}
            assert f" {name} " in f" {text} " and word[probe["status"]] in text
        assert check["findings"] and all(f["status"] for f in check["findings"])
        assert check["facts"]["versions"] or check["probes"]["versions"]["status"] == "unavailable"


@pytest.mark.slow
@run_async
async def test_repro_step_runs_for_real(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                        own_jobs_only: None) -> None:
    """A real two-rank Gloo job from the Repro step, live output into the Log, result recorded."""
    from distdoctor.knowledge import load_knowledge
    from distdoctor.probes.base import ProbeContext
    from distdoctor.tui.app.app import make_app

    # the repro runs the job's interpreter, python3 on PATH: here, this virtual environment's
    monkeypatch.setenv("PATH", f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}")
    app = make_app(load_knowledge(), ProbeContext(), SessionStore(tmp_path), session_id="rep")
    async with app.run_test(size=(100, 30)) as pilot:
        await open_step(pilot, "repro")
        await pilot.pause()
        app.screen.query_one("#backend").value = "gloo"
        await pilot.press("r")
        await settle(pilot)
        result = SessionStore(tmp_path).load("rep")["events"][-1]
        assert result["kind"] == "repro"
        assert result["data"]["outcome"] == "pass", result["data"].get("first_error")
        text = screen_text(app)
        assert "DISTDOCTOR_STEP done" in text  # live output reached the Log widget
        assert "repro | PASS" in text and "finished in" in text
        # Stop: a second run cancelled at once ends "stopped", its processes gone
        await pilot.press("r", "x")
        await settle(pilot)
        stopped = SessionStore(tmp_path).load("rep")["events"][-1]["data"]
        assert stopped["outcome"] == "stopped" and stopped["cleanup"]["survivors"] == []
        # the bisection: a passing baseline stops there and clears this node's local setup
        await open_step(pilot, "bisect")
        await pilot.pause()
        assert app.screen.query_one("#backend").value == "gloo"  # as chosen for the repro
        await pilot.press("r")
        await settle(pilot)
        bisect = SessionStore(tmp_path).load("rep")["events"][-1]
        assert bisect["kind"] == "bisect" and bisect["data"]["baseline_passed"] is True
        text = screen_text(app)
        assert "baseline | PASS" in text and "Baseline PASS: this node's local setup works" in text


@run_async
async def test_a_broken_tree_in_an_overlay_ends_the_app_with_exit_code_2(tmp_path: Path) -> None:
    """The tree check runs after the first screen (it imports networkx); a cycle still fails."""
    from distdoctor.knowledge import load_knowledge
    from distdoctor.tui.app.app import make_app

    overlay = tmp_path / "overlay"
    overlay.mkdir()
    (overlay / "loop.toml").write_text('[[step]]\nid = "logs"\ntitle = "Logs"\nkind = "step"\n'
                                       'next = ["classify"]\n', encoding="utf-8")
    kb = load_knowledge(overlay, tree=False)  # everything but the tree is checked up front
    app = make_app(kb, appkit.recorded_ctx(appkit.HANG_ENV, tmp_path), SessionStore(tmp_path),
                   check_knowledge=str(overlay))
    assert app.order == ["classify", "logs"]  # the walk stops at the cycle
    async with app.run_test(size=(80, 24)) as pilot:
        # the check's message ends the app, and the exit cancels the workers still running: on a
        # loaded machine, the check's own before its thread's return reached the event loop
        with contextlib.suppress(WorkerCancelled):
            await settle(pilot)
    assert app.return_code == 2


@run_async
async def test_a_probe_bug_is_a_finding_and_a_crashing_worker_is_reported(tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    from distdoctor.knowledge import evaluate as evaluate_module

    def broken(ctx):
        raise RuntimeError("probe bug")

    app = appkit.build(tmp_path, appkit.HANG_ENV, session_id="bug")
    app.probes = dict(app.probes, shm=broken)
    async with app.run_test(size=(80, 24)) as pilot:
        await open_step(pilot, "environment")
        await settle(pilot)
        assert "shm       ERROR  RuntimeError: probe bug" in screen_text(app)  # run_sweep's own guard

        def crash(kb, results):
            raise KeyError("evaluate bug")

        monkeypatch.setattr(evaluate_module, "evaluate", crash)
        await pilot.press("r")
        await settle(pilot)
        text = screen_text(app)
        assert "ERROR: the sweep failed" in text and "KeyError: 'evaluate bug'" in text
        assert app.screen.running == ""  # the next-action panel is not stuck on "Probing"


APP_WITH_LOG_WORKERS = """
import asyncio, sys
sys.path[:0] = [sys.argv[1] + "/kits", sys.argv[1] + "/app"]
import appkit
from snapkit import open_step
from pathlib import Path
from test_app_flow import load_logs, screen_text

async def main():
    app = appkit.build(Path(sys.argv[2]), appkit.HANG_ENV, session_id="big")
    async with app.run_test(size=(80, 24)) as pilot:
        await open_step(pilot, "logs")
        await load_logs(pilot, Path(sys.argv[3]))
        print(screen_text(app))

asyncio.run(main())
"""


def test_log_worker_processes_start_under_the_app(tmp_path: Path) -> None:
    # Textual's stand-in stderr answers fileno() -1; multiprocessing handed that to its resource
    # tracker and every log set of 64 MiB or more failed in the app ("bad value(s) in
    # fds_to_keep"). A fresh interpreter, so no tracker started by an earlier test hides it.
    import subprocess

    env = dict(os.environ, DISTDOCTOR_LOG_WORKERS="2")  # workers even for a small log set
    proc = subprocess.run([sys.executable, "-c", APP_WITH_LOG_WORKERS, str(Path(__file__).parents[1]),
                           str(tmp_path), str(LOGS / "logs-hang")],
                          env=env, capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "cannot read the logs" not in proc.stdout
    assert "NCCL or Gloo picked the wrong network interface" in proc.stdout, proc.stdout[-1500:]


@run_async
async def test_nothing_readable_is_an_error_not_a_diagnosis(tmp_path: Path) -> None:
    binary = tmp_path / "core.bin"
    binary.write_bytes(b"\x7fELF\x00\x01\x02" * 100)
    app = appkit.build(tmp_path, appkit.HANG_ENV, session_id="bin")
    async with app.run_test(size=(80, 24)) as pilot:
        await open_step(pilot, "logs")
        await load_logs(pilot, LOGS / "logs-hang")
        assert app.screen.query_one("#causes").row_count > 0
        await load_logs(pilot, binary)
        text = screen_text(app)
        assert f"ERROR nothing readable in the given paths ({binary}: binary file" in text
        assert app.screen.query_one("#causes").row_count == 0  # the earlier diagnosis is gone
        assert kinds(app, "bin").count("logs") == 1  # only the readable load is a result


@run_async
async def test_export_before_any_evidence_says_why_in_view(tmp_path: Path) -> None:
    app = appkit.build(tmp_path, appkit.HANG_ENV, session_id="empty")
    async with app.run_test(size=(80, 24)) as pilot:
        await open_step(pilot, "conclusion")
        await pilot.pause()
        assert "No evidence yet: classify the symptom first (1)" in screen_text(app)
        app.screen.query_one("#export-path").value = str(tmp_path / "r.md")
        await pilot.press("e", "enter")  # e: the field, in view; Enter writes
        await settle(pilot)
        # the status line is below the fold at 80x24: it is brought into view (no toast over it)
        status = app.screen.query_one("#export-status")
        assert "nothing to export yet: classify the symptom first (1)" in str(status.render())
        main = app.screen.query_one("#main")
        assert main.region.y <= status.region.y and status.region.bottom <= main.region.bottom
        assert not app._notifications
        assert not (tmp_path / "r.md").exists()
