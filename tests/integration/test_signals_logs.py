"""Nothing left running after `distdoctor logs` is killed during a parallel scan: a real 64+ MiB
log, a real distdoctor subprocess, SIGTERM / SIGHUP / SIGKILL once its worker processes run;
no worker and no resource tracker may outlive it by more than a few seconds."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import psutil
import pytest
from test_signals_repro import SIGKILL_GONE_WITHIN_S, tagged, wait_gone

from distdoctor.knowledge.logs.parallel import MIN_TOTAL

DISTDOCTOR = Path(sys.executable).with_name("distdoctor")
TAG = "DISTDOCTOR_SIGNAL_TEST_TAG"
GONE_WITHIN_S = 15.0


def gone_within(sig: signal.Signals | None = None) -> float:
    """How long the tree may take to go: a few seconds, as test_signals_repro allows (more after
    SIGKILL, which the workers learn of only from their parent's death), stretched by the load
    average per core: on a machine shared by a whole suite, waiting is not failing."""
    base = SIGKILL_GONE_WITHIN_S if sig == signal.SIGKILL else GONE_WITHIN_S
    load = os.getloadavg()[0] / (os.cpu_count() or 1)
    return base * max(1.0, load)


@pytest.fixture(scope="module")
def big_log(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A log just over the size that starts worker processes (and two ranges of work)."""
    path = tmp_path_factory.mktemp("biglog") / "rank0.log"
    block = "".join(f"node-17:4242:4242 [0] NCCL INFO Channel {i % 32:02d}/0 : 0[0] -> 1[1] via "
                    f"P2P/IPC step {i}\n" for i in range(4096)).encode()
    with open(path, "wb") as fh:
        while fh.tell() < MIN_TOTAL + (8 << 20):
            fh.write(block)
        fh.write(b"[rank1]: RuntimeError: NCCL error: unhandled system error\n")
    return path


def scan_workers(pid: int) -> list[psutil.Process]:
    try:
        kids = psutil.Process(pid).children(recursive=True)
    except psutil.NoSuchProcess:
        return []
    out = []
    for kid in kids:
        try:
            if "spawn_main" in " ".join(kid.cmdline()):
                out.append(kid)
        except psutil.Error:
            continue
    return out


def busy(workers: list[psutil.Process], log: Path) -> bool:
    """A worker holds the log open: it is inside a range, past starting up."""
    for worker in workers:
        try:
            if any(f.path == str(log) for f in worker.open_files()):
                return True
        except psutil.Error:
            continue
    return False


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP, signal.SIGKILL],
                         ids=lambda s: s.name)
def test_no_worker_outlives_a_killed_logs_scan(big_log: Path, tmp_path: Path,
                                               sig: signal.Signals) -> None:
    tag = uuid.uuid4().hex
    env = {**os.environ, TAG: tag, "XDG_STATE_HOME": str(tmp_path / "state")}
    env.pop("DISTDOCTOR_LOG_WORKERS", None)  # the size alone must start the workers
    proc = subprocess.Popen([str(DISTDOCTOR), "logs", str(big_log)], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    try:
        deadline = time.monotonic() + 120
        while not busy(scan_workers(proc.pid), big_log):  # scanning, not just starting up
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "no worker process ever started scanning"
            time.sleep(0.05)
        workers = [w.pid for w in scan_workers(proc.pid)]
        os.kill(proc.pid, sig)
        _out, err = proc.communicate(timeout=60)
        within = gone_within(sig)
        left = wait_gone(tag, within)
    finally:
        for p in tagged(tag):
            try:
                p.kill()
            except psutil.Error:
                pass
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert workers
    assert proc.returncode == -sig, err  # it still dies by the signal, as a shell expects
    assert "Traceback" not in err
    assert left == [], f"still running {within:.0f}s after distdoctor logs died: {left}"


def test_a_scan_that_finishes_leaves_no_worker(big_log: Path, tmp_path: Path) -> None:
    """The handlers are only there during the scan, and the ordinary path is unchanged."""
    tag = uuid.uuid4().hex
    env = {**os.environ, TAG: tag, "XDG_STATE_HOME": str(tmp_path / "state")}
    done = subprocess.run([str(DISTDOCTOR), "logs", "--json", str(big_log)], env=env,
                          capture_output=True, text=True, timeout=300)
    import json

    verdict = json.loads(done.stdout)["verdict"]
    # the exit code is the diagnosis's: 1 only for an answer (one bare NCCL line is "unknown")
    assert done.returncode == (1 if verdict["confidence"] in ("confirmed", "likely") else 0), done.stderr
    assert "unhandled system error" in done.stdout
    assert wait_gone(tag, gone_within()) == []
