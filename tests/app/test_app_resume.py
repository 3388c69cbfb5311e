"""Resume: the real app in a real process, killed with SIGKILL in the middle of a probe run, then
reopened with `--resume`; and a check recorded by the headless command, shown by the app."""
from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
from pathlib import Path

import appkit
import pytest
from appkit import run_async, screen_text
from ptykit import Term
from snapkit import open_step

# The installed entry point (`distdoctor`), run by this interpreter. (`python -m
# distdoctor.tui.cli` would load cli.py twice, as __main__ and as the module commands import.)
DISTDOCTOR = [sys.executable, "-c", "import sys; from distdoctor.tui.cli import main; sys.exit(main())"]

from distdoctor.knowledge import load_knowledge
from distdoctor.tui.app.app import make_app
from distdoctor.tui.record.session import SessionStore

# Loaded by every Python started with this PYTHONPATH; acts only in the versions probe's child
# (its command line carries the probe's output marker): it reports its pid through the FIFO, the
# test's signal that a probe is running, then sits there like a wedged interpreter.
SITECUSTOMIZE = '''\
import os


def _wedge():
    fifo = os.environ.get("DISTDOCTOR_TEST_FIFO")
    try:
        with open("/proc/self/cmdline", "rb") as fh:
            cmdline = fh.read()
    except OSError:
        return
    if fifo and b"DISTDOCTOR_JSON" in cmdline:
        with open(fifo, "w") as out:
            out.write(str(os.getpid()))
        os.read(os.open(fifo + ".never", os.O_RDONLY | os.O_CREAT), 1)  # blocks: a FIFO, never written


_wedge()
'''


def wait_readable(fd: int, timeout: float) -> bytes:
    ready, _, _ = select.select([fd], [], [], timeout)
    if not ready:
        raise TimeoutError("the versions probe never started")
    return os.read(fd, 64)


@run_async
async def test_sigkill_during_probe_run_then_resume(tmp_path: Path) -> None:
    state = tmp_path / "state"
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(SITECUSTOMIZE, encoding="utf-8")
    fifo = tmp_path / "probe.fifo"
    os.mkfifo(fifo)
    os.mkfifo(str(fifo) + ".never")
    env = dict(os.environ, TERM="xterm-256color", XDG_STATE_HOME=str(state), PYTHONPATH=str(site),
               DISTDOCTOR_TEST_FIFO=str(fifo))
    reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)  # so the child's open for writing returns
    term = Term([*DISTDOCTOR], env, size=(100, 30))
    wedged = 0
    try:
        term.wait_for("What do you see?")
        term.send("\r")  # Hang
        term.wait_for("Hang: where exactly?")
        term.send("\r")  # at process-group init: the classification is saved before this shows
        term.wait_for("First suspect:")
        term.send("3")  # the Environment step starts the probes
        wedged = int(wait_readable(reader, 60))
        term.wait_for("Probing this node")
        assert term.kill(signal.SIGKILL) == -signal.SIGKILL
    finally:
        if term.proc.poll() is None:
            term.kill()
        if wedged:
            os.kill(wedged, signal.SIGKILL)
        os.close(reader)

    directory = state / "distdoctor" / "sessions"
    files = [p for p in directory.glob("*.json")]
    assert len(files) == 1
    record = json.loads(files[0].read_text(encoding="utf-8"))  # whole: written atomically
    assert [e["kind"] for e in record["events"]] == ["answer", "classify"]
    assert record["events"][1]["data"]["sub"] == "hang-init"

    store = SessionStore(directory)
    app = make_app(load_knowledge(), appkit.recorded_ctx(appkit.HANG_ENV, tmp_path), store,
                   resume="last", probes=appkit.recorded_probes())
    async with app.run_test(size=(80, 24)) as pilot:
        assert app.flow.session_id == record["id"]
        assert app.current_step == "logs"  # the first step not done
        text = screen_text(app)
        assert "✓ 1 Classify" in text and "> 2 Logs" in text
        await open_step(pilot, "classify")
        await pilot.pause()
        text = screen_text(app)
        assert "Hang: where exactly?" in text and "Rank variables disagree" in text
        assert app.screen.query_one("#sub").highlighted == 0  # hang-init, as answered
        await open_step(pilot, "environment")  # the interrupted step runs again, into the same record
        await pilot.pause()
        await app.workers.wait_for_complete()
        await pilot.pause()
    kinds = [e["kind"] for e in store.load(record["id"])["events"]]
    assert kinds[:2] == ["answer", "classify"] and "check" in kinds


@pytest.mark.slow
@run_async
async def test_check_recorded_by_the_command_shows_in_the_app(tmp_path: Path) -> None:
    env = dict(os.environ, XDG_STATE_HOME=str(tmp_path))
    done = subprocess.run([*DISTDOCTOR, "check", "--session", "node7",
                           "--json"], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode in (0, 1), done.stderr
    printed = json.loads(done.stdout)
    store = SessionStore(tmp_path / "distdoctor" / "sessions")
    app = make_app(load_knowledge(), appkit.recorded_ctx(appkit.HANG_ENV, tmp_path), store,
                   resume="node7", probes=appkit.recorded_probes())
    async with app.run_test(size=(100, 30)) as pilot:
        assert app.current_step == "classify"  # a scripted check does not classify for you
        await open_step(pilot, "environment")
        await pilot.pause()
        await app.workers.wait_for_complete()
        text = screen_text(app)
        assert "recorded earlier; r reruns" in text
        shown = [f for f in printed["findings"] if f["status"] != "ok"]
        for finding in shown:
            assert finding["title"] in text
    assert [e["kind"] for e in store.load("node7")["events"]] == ["check"]  # nothing re-ran


def test_resume_without_a_session_is_a_usage_error(tmp_path: Path) -> None:
    env = dict(os.environ, XDG_STATE_HOME=str(tmp_path))
    for argv, message in ((["--resume"], "no sessions yet"),
                          (["--resume", "nope"], "no session 'nope'"),
                          (["--resume", "../x"], "bad session id")):
        done = subprocess.run([*DISTDOCTOR, *argv], env=env,
                              capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
        assert done.returncode == 2, done.stderr
        assert done.stderr.startswith("distdoctor: error: ") and message in done.stderr
        assert "Traceback" not in done.stderr


@run_async
async def test_a_stuck_session_file_never_freezes_the_app_and_nothing_is_lost(tmp_path: Path) -> None:
    # Another process holds the session's lock (as a writer on a hung NFS home would hold the
    # write): the app answers keys meanwhile and saves everything, in order, once it lets go.
    store = SessionStore(tmp_path / "sessions")
    store.create("stuck")
    holder = subprocess.Popen(
        # held until stdin closes, or 20 s: an app that waited on it fails the test, never hangs it
        [sys.executable, "-c", "import fcntl, os, select, sys; "
         "fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT); fcntl.flock(fd, fcntl.LOCK_EX); "
         "print('held', flush=True); select.select([sys.stdin], [], [], 20)",
         str(store.directory / ".stuck.lock")], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
        text=True)
    try:
        assert holder.stdout.readline() == "held\n"
        app = appkit.build(tmp_path, appkit.HANG_ENV, session_id="stuck", store=store)
        async with app.run_test(size=(80, 24)) as pilot:
            await pilot.press("enter")  # Hang
            await pilot.pause()
            await pilot.press("enter")  # at process-group init
            await pilot.pause()
            assert "Rank variables disagree" in screen_text(app)  # the screen moved on
            assert not app.saver.flush(timeout=0.5)  # while nothing could be written
            assert store.load("stuck")["events"] == []
            holder.stdin.close()  # the lock goes with its holder
            assert holder.wait(timeout=30) == 0
            assert app.saver.flush(timeout=30)
        assert [e["kind"] for e in store.load("stuck")["events"]] == ["answer", "classify"]
    finally:
        holder.kill()


def test_keys_typed_right_after_quit_do_not_crash_the_app(tmp_path: Path) -> None:
    # "qpp" in one burst: p switched to a step whose screen mounted while the app closed, and
    # its on_mount met no widgets (NoMatches, exit code 1, a traceback on the terminal)
    env = dict(os.environ, TERM="xterm-256color", XDG_STATE_HOME=str(tmp_path))
    term = Term([*DISTDOCTOR], env, size=(80, 24))
    try:
        term.wait_for("What do you see?")
        term.send("6")
        term.wait_for("Conclusion")
        term.send("qpp")
        with pytest.raises(EOFError):
            term.wait_for("the app keeps running after q")
        assert term.proc.wait(timeout=30) == 0
        assert "Traceback" not in term.text and "NoMatches" not in term.text
    finally:
        term.kill()  # reaps it and closes the pty either way
