"""Nothing left running: a real `distdoctor repro` / `bisect` subprocess, with a real torchrun
Gloo job that hangs, gets SIGINT, SIGTERM, SIGHUP or SIGKILL before the job starts, while it
starts, or during the hang; no process of it may outlive distdoctor by more than a few seconds
(after SIGKILL: its watchdog or PDEATHSIG ends the run long before the job's own deadline)."""
from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import psutil
import pytest

from distdoctor.probes.repro.proctree import port_is_free

DISTDOCTOR = Path(sys.executable).with_name("distdoctor")
TAG = "DISTDOCTOR_SIGNAL_TEST_TAG"
TIMEOUT = 40  # distdoctor's --timeout: the script's own deadline is 100 s after its start
GONE_WITHIN_S = 15.0  # "a few seconds", generous for a loaded machine
SIGKILL_GONE_WITHIN_S = 45.0  # still well before the job's own deadline


def tagged(tag: str) -> list[psutil.Process]:
    """Live processes (not zombies) carrying this test's tag in their environment: whatever
    distdoctor started, wherever it was reparented."""
    out = []
    for proc in psutil.process_iter():
        try:
            if proc.status() == psutil.STATUS_ZOMBIE:
                continue
            if proc.environ().get(TAG) == tag:
                out.append(proc)
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess, OSError):
            continue
    return out


def wait_gone(tag: str, within: float) -> list[str]:
    """[] once no tagged process is left, else what is still alive after `within` seconds."""
    deadline = time.monotonic() + within
    while True:
        left = tagged(tag)
        if not left or time.monotonic() > deadline:
            break
        time.sleep(0.25)
    described = []
    for proc in left:
        try:
            described.append(f"{proc.pid} {' '.join(proc.cmdline())[:120]}")
        except psutil.Error:
            continue
    return described


def children(pid: int) -> list[psutil.Process]:
    try:
        return psutil.Process(pid).children(recursive=True)
    except psutil.NoSuchProcess:
        return []


def launcher_port(pid: int) -> int | None:
    for child in children(pid):
        try:
            argv = child.cmdline()
        except psutil.Error:
            continue
        if "torch.distributed.run" in argv and "--master-port" in argv:
            return int(argv[argv.index("--master-port") + 1])
    return None


def wait_for(moment: str, proc: subprocess.Popen, run_dir: Path, limit: float = 240.0) -> int | None:
    """Block until `moment` is reached; returns the run's port when known."""
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        assert proc.poll() is None, proc.communicate()
        if moment == "before":
            # the interpreter check (python -c ...) is running; no launcher yet
            kids = children(proc.pid)
            if kids and launcher_port(proc.pid) is None:
                return None
        elif moment == "during":
            port = launcher_port(proc.pid)
            if port is not None:
                return port
        else:  # hang: a rank sleeps on purpose, the other waits in the all-reduce
            logs = list(run_dir.rglob("output.log"))
            if any("hangs on purpose" in p.read_text(errors="replace") for p in logs):
                return launcher_port(proc.pid)
        time.sleep(0.05)
    raise AssertionError(f"{moment} never came")


MOMENTS = {  # one hang per signal; every signal at every moment; repro and bisect both
    "hang": [("repro", signal.SIGINT), ("repro", signal.SIGTERM), ("repro", signal.SIGHUP),
             ("repro", signal.SIGKILL)],
    "during": [("bisect", signal.SIGINT), ("bisect", signal.SIGTERM), ("bisect", signal.SIGHUP),
               ("bisect", signal.SIGKILL)],
    "before": [("repro", signal.SIGINT), ("bisect", signal.SIGTERM), ("repro", signal.SIGHUP),
               ("bisect", signal.SIGKILL)],
}


def one_case(tmp_path: Path, command: str, moment: str, sig: signal.Signals) -> None:
    """Start a real distdoctor, wait for `moment`, send `sig` to it as a terminal would, and
    check what is left."""
    tag = uuid.uuid4().hex
    run_dir = tmp_path / "run"
    env = {**os.environ, TAG: tag, "XDG_STATE_HOME": str(tmp_path / "state")}
    python = sys.executable
    if moment == "before":
        # the interpreter check takes milliseconds since it no longer imports torch for Gloo: an
        # interpreter that starts 3 s late keeps "before the run started" a moment a signal can hit
        python = str(tmp_path / "slow-python")
        tmp_path.mkdir(parents=True, exist_ok=True)
        Path(python).write_text(f'#!/bin/sh\nsleep 3\nexec "{sys.executable}" "$@"\n', encoding="utf-8")
        os.chmod(python, 0o755)
    argv = [str(DISTDOCTOR), command, "--backend", "gloo", "--python", python,
            "--timeout", str(TIMEOUT), "--env", "DISTDOCTOR_REPRO_HANG_RANK=1",
            "--run-dir", str(run_dir), "--json"]
    if command == "bisect":
        argv += ["--switch", "GLOO_SOCKET_IFNAME=lo"]
    # its own session, signalled as a whole: what a terminal does on Ctrl-C or when it closes
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, start_new_session=True)
    try:
        port = wait_for(moment, proc, run_dir)
        os.killpg(proc.pid, sig)
        out, err = proc.communicate(timeout=120)
        gone_within = SIGKILL_GONE_WITHIN_S if sig == signal.SIGKILL else GONE_WITHIN_S
        left = wait_gone(tag, gone_within)
    finally:
        for p in tagged(tag):  # never leave anything behind, even when the test fails
            try:
                p.kill()
            except psutil.Error:
                pass
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert left == [], f"still running {gone_within:g}s after distdoctor exited: {left}"
    if port is not None:
        assert port_is_free(port)
    if sig == signal.SIGKILL:
        assert proc.returncode == -signal.SIGKILL
        return
    assert proc.returncode == 128 + sig, err
    assert "Traceback" not in err and err.count("\n") == 1, err
    assert err.startswith(f"distdoctor: stopped by {sig.name}")
    if moment == "before":
        assert "before the run started; nothing left running" in err
    else:
        assert "the run's processes are gone and port" in err, err
        stated = int(re.search(r"port (\d+) is free", err).group(1))
        assert port is None or stated == port
        assert port_is_free(stated)


@pytest.mark.slow
@pytest.mark.parametrize("moment", list(MOMENTS))
def test_no_process_outlives_distdoctor(tmp_path: Path, moment: str) -> None:
    """The four signals at one moment, as four distdoctors at once (each waits mostly on its
    job's start-up: side by side they take little more than one)."""
    from concurrent.futures import ThreadPoolExecutor

    cases = MOMENTS[moment]
    with ThreadPoolExecutor(len(cases)) as pool:
        futures = {f"{command} {sig.name}": pool.submit(one_case, tmp_path / f"{command}-{sig.name}",
                                                        command, moment, sig)
                   for command, sig in cases}
    failures = {}
    for name, fut in futures.items():
        try:
            fut.result()
        except AssertionError as exc:
            failures[name] = str(exc)[:1500]
    assert failures == {}


def test_signals_during_the_run_set_cancel_and_never_lose_the_result() -> None:
    """The KeyError 'result' of the report: signals that land while the main thread waits must
    only ask the run to stop; the run's own result (its cleanup done) always comes back."""
    import threading

    from distdoctor.tui.commands.repro import _in_thread

    started = threading.Event()

    def work(cancel: threading.Event) -> str:
        started.set()
        cancel.wait(60)
        time.sleep(0.5)  # the tree's kill and check take a while: signals keep coming meanwhile
        return "stopped and cleaned up"

    def pester() -> None:
        started.wait(30)
        for sig in (signal.SIGINT, signal.SIGINT, signal.SIGTERM, signal.SIGINT):
            os.kill(os.getpid(), sig)
            time.sleep(0.05)

    before = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
    threading.Thread(target=pester, daemon=True).start()
    assert _in_thread(work) == ("stopped and cleaned up", signal.SIGINT)
    assert {s: signal.getsignal(s) for s in before} == before  # handlers put back
