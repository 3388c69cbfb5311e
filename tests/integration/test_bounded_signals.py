"""Signals around `distdoctor logs` and its start-up (issue 25, items 8 and 19): Ctrl-C during the
imports, Ctrl-C to the whole process group during a parallel scan, SIGHUP under nohup, the
parent killed while its scan workers start, a worker killed mid-scan. Quiet in every case: at
most one line on stderr, the right exit, no traceback, no worker left behind."""
from __future__ import annotations

import os
import random
import re
import signal
import subprocess
import time
import uuid
from pathlib import Path

import psutil
import pytest
from test_signals_logs import DISTDOCTOR, GONE_WITHIN_S, TAG, busy, scan_workers
from test_signals_repro import tagged, wait_gone

from distdoctor.knowledge.logs.parallel import MIN_TOTAL

pytestmark = pytest.mark.slow
REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def big_log(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("biglog") / "rank0.log"
    block = "".join(f"node-17:4242:4242 [0] NCCL INFO Channel {i % 32:02d}/0 : 0[0] -> 1[1] via "
                    f"P2P/IPC step {i}\n" for i in range(4096)).encode()
    with open(path, "wb") as fh:
        # 256 MiB past the parallel threshold: the scan of repeated lines runs at some 200 MiB/s,
        # and with only 8 MiB it could end before a signal sent once the workers are busy arrived
        while fh.tell() < MIN_TOTAL + (256 << 20):
            fh.write(block)
        fh.write(b"[rank1]: RuntimeError: NCCL error: unhandled system error\n")
    return path


def start(argv: list[str], tmp_path: Path, **kw) -> tuple[subprocess.Popen, str]:
    tag = uuid.uuid4().hex
    env = {**os.environ, TAG: tag, "XDG_STATE_HOME": str(tmp_path / "state")}
    env.pop("DISTDOCTOR_LOG_WORKERS", None)
    proc = subprocess.Popen([str(DISTDOCTOR), *argv], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True, **kw)
    return proc, tag


def wait_busy(proc: subprocess.Popen, log: Path) -> list[int]:
    deadline = time.monotonic() + 120
    while not busy(scan_workers(proc.pid), log):
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "no worker process ever started scanning"
        time.sleep(0.02)
    return [w.pid for w in scan_workers(proc.pid)]


def finish(proc: subprocess.Popen, tag: str) -> tuple[str, str, list]:
    try:
        out, err = proc.communicate(timeout=120)
        left = wait_gone(tag, GONE_WITHIN_S)
    finally:
        for p in tagged(tag):
            try:
                p.kill()
            except psutil.Error:
                pass
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return out, err, left


def quiet(err: str) -> None:
    assert "Traceback" not in err and "EOFError" not in err and "leaked" not in err, err
    assert len(err.strip().splitlines()) <= 1, err


def test_sighup_under_nohup_stays_ignored(big_log: Path, tmp_path: Path) -> None:
    proc, tag = start(["logs", "--json", str(big_log)], tmp_path,
                      preexec_fn=lambda: signal.signal(signal.SIGHUP, signal.SIG_IGN))
    wait_busy(proc, big_log)
    os.kill(proc.pid, signal.SIGHUP)
    out, err, left = finish(proc, tag)
    quiet(err)
    assert proc.returncode in (0, 1), err
    assert "unhandled system error" in out  # the scan went on to the end
    assert left == []


def test_ctrl_c_to_the_process_group_mid_scan(big_log: Path, tmp_path: Path) -> None:
    proc, tag = start(["logs", str(big_log)], tmp_path)
    wait_busy(proc, big_log)
    os.killpg(proc.pid, signal.SIGINT)  # what a terminal sends: every process of the job
    _out, err, left = finish(proc, tag)
    quiet(err)
    assert proc.returncode == 130 and "interrupted" in err
    assert left == []


def test_parent_killed_while_its_workers_start(big_log: Path, tmp_path: Path) -> None:
    proc, tag = start(["logs", str(big_log)], tmp_path)
    deadline = time.monotonic() + 120
    while not scan_workers(proc.pid):  # a worker exists: the pool is starting
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline
        time.sleep(0.005)
    os.kill(proc.pid, signal.SIGKILL)
    _out, err, left = finish(proc, tag)
    quiet(err)
    assert left == []


def test_a_worker_killed_mid_scan_is_made_up_for(big_log: Path, tmp_path: Path) -> None:
    proc, tag = start(["logs", "--json", str(big_log)], tmp_path)
    workers = wait_busy(proc, big_log)
    os.kill(workers[0], signal.SIGKILL)
    out, err, left = finish(proc, tag)
    quiet(err)
    assert proc.returncode in (0, 1) and "unhandled system error" in out
    assert left == []


OUR_CODE = re.compile(r'File "' + re.escape(str(REPO)) + r"/(?:tui|knowledge|probes)/")


@pytest.mark.parametrize("seed", range(6))
def test_ctrl_c_during_start_up_is_one_line(tmp_path: Path, seed: int) -> None:
    """SIGINT at a random moment of the first 0.6 s. Python's own start-up (before any line of
    distdoctor runs) may still print its KeyboardInterrupt; a traceback through our code may not."""
    (tmp_path / "r.log").write_text("[rank1]: RuntimeError: NCCL error: unhandled system error\n")
    delay = random.Random(seed).uniform(0.02, 0.6)
    proc = subprocess.Popen([str(DISTDOCTOR), "logs", str(tmp_path / "r.log")], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "XDG_STATE_HOME": str(tmp_path / "state")})
    time.sleep(delay)
    proc.send_signal(signal.SIGINT)
    _out, err = proc.communicate(timeout=60)
    assert not OUR_CODE.search(err), err
    if "Traceback" not in err:
        assert len(err.strip().splitlines()) <= 1, err
        assert proc.returncode in (0, 1, 130, -signal.SIGINT), err
