"""The Logs step's other sources under Pilot: the launcher the loaded logs reveal, the evidence
switches (k), Flight Recorder dumps in a loaded folder, and stacks when no job runs here."""
from __future__ import annotations

import shutil
from pathlib import Path

import appkit
from appkit import run_async, screen_text
from snapkit import open_step

from distdoctor.tui.record.session import SessionStore

HERE = Path(__file__).parents[1] / "fixtures"


async def settle(pilot) -> None:
    await pilot.pause()
    for worker in list(pilot.app.workers):
        await worker.wait()
    await pilot.pause()


def events(app, session: str) -> dict:
    assert app.saver.flush(timeout=30)
    return {e["kind"]: e["data"] for e in SessionStore(app.store.directory).load(session)["events"]}


@run_async
async def test_logs_reveal_the_launcher_and_a_folder_with_dumps_is_read_as_flight_recorder(tmp_path: Path) -> None:
    folder = tmp_path / "job"
    shutil.copytree(HERE / "recorded" / "incident-crash" / "logs", folder)
    shutil.copytree(HERE / "fr" / "asymmetric" / "json", folder / "fr")
    env = {k: v for k, v in appkit.ERROR_ENV.items() if k != "SLURM_JOB_ID"}  # no launcher variable
    app = appkit.build(tmp_path, env, session_id="src")
    async with app.run_test(size=(100, 40)) as pilot:
        await open_step(pilot, "logs")
        await pilot.pause()
        assert "Launcher: plain python" in screen_text(app)
        await pilot.press("f")
        app.focused.value = str(folder)
        await pilot.press("enter")
        await settle(pilot)
        text = screen_text(app)
        assert "Launcher: torchrun (seen in the loaded logs, gloo backend)" in text
        assert "Culprit: rank 1 (crashed)" in text
        saved = events(app, "src")
        assert saved["logs"]["verdict"]["culprit"]["ranks"] == ["1"]
        assert saved["fr"]["groups"] and saved["fr"]["evidence"][0]["source"] == "fr"
        await pilot.press("k")
        await pilot.pause()
        assert "TORCH_FR_BUFFER_SIZE" in screen_text(app)
        await pilot.press("k")
        await pilot.pause()
        assert "torchrun" in screen_text(app) and "TORCH_FR_BUFFER_SIZE" not in screen_text(app)


@run_async
async def test_the_palette_says_how_to_practise_on_a_drill(tmp_path: Path) -> None:
    app = appkit.build(tmp_path, appkit.ERROR_ENV, session_id="drills")
    async with app.run_test(size=(100, 30)) as pilot:
        entry = [c for c in app.palette_commands() if c[0] == "Practise on a drill"]
        assert entry
        entry[0][2]()
        await pilot.pause()
        shown = " ".join(str(n.message) for n in app._notifications)
        assert "distdoctor --drill NAME" in shown and "straggler" in shown
