"""`check --pid PID`: when MASTER_PORT is held, say which process holds it, the job itself or
another one, and what that means. Real processes listening on real loopback ports."""
from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from distdoctor.probes.netmaster import port_facts

DISTDOCTOR = Path(sys.executable).with_name("distdoctor")
# a stand-in rank 0: binds MASTER_PORT (as TCPStore does) and waits; `hold=0` only waits
RANK = ("import os, socket, sys, time\n"
        "if sys.argv[1] == '1':\n"
        "    s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)\n"
        "    s.bind(('127.0.0.1', int(os.environ['MASTER_PORT']))); s.listen()\n"
        "print('ready', flush=True); time.sleep(120)\n")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def port() -> int:
    return _free_port()


def _start(port: int, hold: bool) -> subprocess.Popen[str]:
    env = dict(os.environ, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK="0", WORLD_SIZE="1",
               LOCAL_RANK="0", LOCAL_WORLD_SIZE="1")
    proc = subprocess.Popen([sys.executable, "-c", RANK, "1" if hold else "0"], env=env,
                            stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
    return proc


@pytest.fixture
def procs() -> Iterator[list[subprocess.Popen[str]]]:
    started: list[subprocess.Popen[str]] = []
    yield started
    for proc in started:
        proc.kill()
        proc.wait(timeout=30)


def _check(pid: int) -> tuple[int, dict, str]:
    argv = [str(DISTDOCTOR), "check", "--pid", str(pid), "--only", "network"]
    text = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    data = subprocess.run(argv + ["--json"], capture_output=True, text=True, timeout=120)
    return data.returncode, json.loads(data.stdout), text.stdout


def test_the_job_holding_its_own_port_is_expected(port: int, procs: list) -> None:
    job = _start(port, hold=True)
    procs.append(job)
    code, data, text = _check(job.pid)
    facts = data["facts"]["network"]
    assert facts["master_port_free"] is False and facts["master_port_held_by_job"] is True
    assert facts["master_port_holder_pid"] == job.pid
    assert f"MASTER_PORT {port} is held by the job itself (pid {job.pid}" in " ".join(text.split())
    assert "expected while it runs" in " ".join(text.split()) and "is free here" not in text
    assert code == 0


def test_another_process_holding_the_port_is_named(port: int, procs: list) -> None:
    squatter = _start(port, hold=True)   # a leftover of an earlier run
    job = _start(port, hold=False)       # the rank we were asked about
    procs += [squatter, job]
    code, data, text = _check(job.pid)
    facts = data["facts"]["network"]
    assert facts["master_port_held_by_job"] is False and facts["master_port_in_use"] is True
    flat = " ".join(text.split())
    assert f"MASTER_PORT {port} is held by another process: pid {squatter.pid}" in flat
    assert f"not the job (--pid {job.pid})" in flat and f"kill {squatter.pid}" in flat
    assert code == 1


def test_a_free_port_says_so(port: int) -> None:
    facts = port_facts(port, None, True, connections=lambda: [])
    assert facts["master_port_free"] is True and facts["master_port_state"] == "is free here"
