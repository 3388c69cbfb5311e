"""The runner's limits on real processes: output caps, timeouts while output flows, and pipes
held open by grandchildren. Nothing here may hang the test run, so calls that could run away
are made in a thread with a generous bound."""
from __future__ import annotations

import os
import signal
import sys
import threading
from pathlib import Path

import psutil

from distdoctor.probes.runner import CommandResult, SubprocessRunner

MiB = 1024 * 1024


def call(runner: SubprocessRunner, argv: list[str], timeout: float) -> CommandResult:
    """Run in a thread; a runner that failed to stop the command fails the test, not hangs it."""
    box: list[CommandResult] = []
    worker = threading.Thread(target=lambda: box.append(runner(argv, timeout=timeout)), daemon=True)
    worker.start()
    worker.join(300)  # far past every timeout used here: only a hang gets this far
    assert box, f"runner did not return: {argv}"
    return box[0]


def gone(pid: int) -> bool:
    try:
        psutil.Process(pid).wait(timeout=10)  # a killed orphan is reaped by init
    except psutil.NoSuchProcess:
        pass
    except psutil.TimeoutExpired:
        return False
    return not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE


def test_endless_stdout_is_stopped_at_the_default_cap(tmp_path: Path) -> None:
    pidfile = tmp_path / "yes.pid"
    result = call(SubprocessRunner(), ["sh", "-c", f"echo $$ > {pidfile}; exec yes garbage"],
                  timeout=600)
    assert result.error == "sh: stopped after 16 MiB of output (a program that never stops printing?)"
    assert result.returncode is None
    assert len(result.stdout.encode()) == 16 * MiB and result.stdout.startswith("garbage\ngarbage\n")
    assert gone(int(pidfile.read_text()))


def test_endless_stderr_is_stopped_at_a_chosen_cap() -> None:
    code = "import sys\nwhile True: sys.stderr.write('noise ' * 100 + '\\n')"
    result = call(SubprocessRunner(max_stderr=64 * 1024), [sys.executable, "-c", code], timeout=600)
    assert result.error == (f"{sys.executable}: stopped after 64 KiB of error output "
                            "(a program that never stops printing?)")
    assert len(result.stderr.encode()) == 64 * 1024 and result.stdout == ""


def test_a_little_output_comes_back_whole() -> None:
    code = ("import sys\nfor i in range(2000): print('line', i)\n"
            "sys.stderr.write('warn\\r\\n'); sys.stdout.buffer.write(b'bad \\xff byte\\n'); sys.exit(5)")
    result = call(SubprocessRunner(max_stdout=1 * MiB), [sys.executable, "-c", code], timeout=120)
    assert not result.error and result.returncode == 5
    lines = result.stdout.splitlines()
    assert lines[:2000] == [f"line {i}" for i in range(2000)]
    assert lines[2000] == "bad \ufffd byte" and len(lines) == 2001
    assert result.stderr == "warn\n"  # text mode as before: universal newlines


def test_the_timeout_holds_while_output_keeps_coming() -> None:
    code = "import time\nwhile True: print('tick', flush=True); time.sleep(0.01)"
    result = call(SubprocessRunner(), [sys.executable, "-c", code], timeout=5)
    assert result.error == f"{sys.executable}: timed out after 5s"
    assert result.returncode is None and result.stdout.startswith("tick\n")


def test_a_grandchild_holding_stdout_is_killed_at_the_timeout(tmp_path: Path) -> None:
    pidfile = tmp_path / "sleep.pid"
    # sh exits at once; its background sleep keeps stdout open for 600 s.
    result = call(SubprocessRunner(), ["sh", "-c", f"sleep 600 & echo $! > {pidfile}; echo started"],
                  timeout=5)
    assert result.error == "sh: timed out after 5s" and result.stdout == "started\n"
    assert gone(int(pidfile.read_text()))


def test_a_grandchild_that_left_the_group_cannot_hold_the_call(tmp_path: Path) -> None:
    pidfile = tmp_path / "daemon.pid"
    # A daemon in its own session survives the group kill; its open pipe must not keep us waiting.
    code = (f"import subprocess, sys\np = subprocess.Popen(['sleep', '600'], start_new_session=True)\n"
            f"open({str(pidfile)!r}, 'w').write(str(p.pid))")
    try:
        result = call(SubprocessRunner(), [sys.executable, "-c", code], timeout=2)
        assert result.error == f"{sys.executable}: timed out after 2s"
    finally:
        if pidfile.exists():
            os.kill(int(pidfile.read_text()), signal.SIGKILL)
