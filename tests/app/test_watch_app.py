"""The app's live sources under Pilot: "s Stacks now" on a real job of this node (two Python
processes with RANK and WORLD_SIZE set, dumped for real with py-spy)."""
from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import appkit
import pytest
from appkit import run_async, screen_text
from snapkit import open_step

SLEEPER = "import time\nopen({ready!r}, 'w').close()\ntime.sleep(120)\n"


def _start_ranks(tmp: Path, n: int = 2) -> list[subprocess.Popen]:
    procs = []
    for rank in range(n):
        ready = tmp / f"ready.{rank}"
        env = {"PATH": "/usr/bin:/bin", "RANK": str(rank), "LOCAL_RANK": str(rank),
               "WORLD_SIZE": str(n), "LOCAL_WORLD_SIZE": str(n)}
        procs.append(subprocess.Popen([sys.executable, "-c", SLEEPER.format(ready=str(ready))],
                                      env=env, start_new_session=True))
    deadline = time.monotonic() + 30
    while not all((tmp / f"ready.{r}").exists() for r in range(n)):
        assert time.monotonic() < deadline, "the stand-in ranks did not start"
        time.sleep(0.05)
    return procs


@run_async
async def test_s_takes_every_ranks_stack_of_the_job_on_this_node(tmp_path: Path, monkeypatch) -> None:
    from distdoctor.probes import stacks
    from distdoctor.probes.base import ProbeContext

    try:
        stacks.find_pyspy()
    except stacks.NoPySpy:
        pytest.skip("py-spy is not installed")
    procs = _start_ranks(tmp_path)
    mine = {p.pid for p in procs}
    real = stacks.find_jobs

    def this_job(ctx=None, scope=None):  # the app's ctx is a recorded host: look at the real one
        jobs = [j for j in real(ProbeContext(), scope={}) if {r.pid for r in j.ranks} & mine]
        for job in jobs:
            job.ranks = [r for r in job.ranks if r.pid in mine]
        return jobs

    monkeypatch.setattr(stacks, "find_jobs", this_job)
    try:
        app = appkit.build(tmp_path, appkit.ERROR_ENV, session_id="stk")
        async with app.run_test(size=(100, 40)) as pilot:
            await open_step(pilot, "logs")
            await pilot.pause()
            await pilot.press("s")
            await appkit.settle(pilot)
            text = screen_text(app)
            assert "Stacks now:" in text, text
            assert "2 rank(s) in" in text and "rank 0, 1" in text
            assert "TypeError" not in text
    finally:
        for p in procs:
            p.kill()
            p.wait(10)


@run_async
async def test_classify_offers_to_watch_the_running_job_and_its_hang_leads_to_the_conclusion(
        tmp_path: Path, monkeypatch) -> None:
    from distdoctor.probes import stacks
    from distdoctor.probes.base import ProbeContext
    from distdoctor.tui.app.screens import watching

    try:
        stacks.find_pyspy()
    except stacks.NoPySpy:
        pytest.skip("py-spy is not installed")
    procs = _start_ranks(tmp_path)
    mine = {p.pid for p in procs}
    real = stacks.find_jobs

    def this_job(ctx=None, scope=None):
        jobs = [j for j in real(ProbeContext(), scope={}) if {r.pid for r in j.ranks} & mine]
        for job in jobs:
            job.ranks = [r for r in job.ranks if r.pid in mine]
        return jobs

    monkeypatch.setattr(stacks, "find_jobs", this_job)
    monkeypatch.setattr(watching, "STALL_S", 3.0)
    monkeypatch.setattr(watching.WatchScreen.__init__, "__defaults__", (3.0,))
    try:
        app = appkit.build(tmp_path, appkit.HANG_ENV, session_id="watch")
        async with app.run_test(size=(120, 40)) as pilot:
            await appkit.settle(pilot)
            assert str(app.screen.query_one("#watch-job").label) == "w: Watch the running job (2 ranks)"
            await pilot.press("w")
            await pilot.pause()
            assert isinstance(app.screen, watching.WatchScreen)
            await appkit.settle(pilot)  # the watch runs until the hang is confirmed and captured
            text = screen_text(app)
            assert "Hang confirmed" in text, text
            assert "0 | " in text and "1 | " in text  # a row per rank
            saved = app.flow.events["watch"]
            assert saved["outcome"] == "hang" and saved["hang"]["detected_after_s"] >= 3
            await pilot.press("c")
            await pilot.pause()
            assert app.current_step == "conclusion"
    finally:
        for p in procs:
            p.kill()
            p.wait(10)
