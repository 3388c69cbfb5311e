"""`distdoctor stacks` as a command on real processes (plain Python ranks, no torch: fast): exit
codes, text and JSON, sessions, bad usage in one line, a refused ptrace explained."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from test_stacks_real import skip_if_refused

from distdoctor.probes.repro.proctree import free_port
from distdoctor.tui.cli import main

RANK = """import sys, time

def wait_for_peers():
    time.sleep(120)

def save_checkpoint():
    time.sleep(120)

globals()[sys.argv[1]]()
"""


@pytest.fixture()
def ranks(tmp_path: Path):
    """Start plain Python 'ranks' of one job (same MASTER_ADDR:PORT): {rank: function}."""
    started: list[subprocess.Popen] = []
    port = str(free_port())

    def start(plan: dict[int, str]) -> list[int]:
        script = tmp_path / "train.py"
        script.write_text(RANK)
        for rank, call in plan.items():
            env = dict(os.environ, RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE=str(len(plan)),
                       LOCAL_WORLD_SIZE=str(len(plan)), MASTER_ADDR="127.0.0.1", MASTER_PORT=port)
            started.append(subprocess.Popen([sys.executable, str(script), call], env=env))
        time.sleep(1.0)  # into the function
        return [p.pid for p in started]

    start.job = f"127.0.0.1:{port}"  # type: ignore[attr-defined]
    yield start
    for proc in started:
        proc.kill()
        proc.wait()


def cli(*args: str) -> subprocess.CompletedProcess:
    proc = subprocess.run([sys.executable, "-m", "distdoctor.tui.cli", "stacks", *args],
                          capture_output=True, text=True, timeout=120)
    skip_if_refused(proc)
    return proc


def test_odd_rank_text_json_and_session(ranks) -> None:
    pids = ranks({0: "wait_for_peers", 1: "wait_for_peers", 2: "save_checkpoint"})
    res = cli("--job", ranks.job, "--json", "--session", "inc-9")
    assert res.returncode == 1, res.stderr
    doc = json.loads(res.stdout)
    assert [r["pid"] for r in doc["ranks"]] == pids
    assert [(o["rank"], o["where"]) for o in doc["odd"]] == [("2", "save_checkpoint (train.py:7)")]
    assert doc["summary"] == "2 ranks in wait_for_peers (train.py:4); rank 2 in save_checkpoint (train.py:7)"
    assert doc["culprit"] is None  # the others are not in a collective: odd, but no culprit
    assert doc["job"]["world_size"] == 3
    from distdoctor.tui.record.session import SessionStore

    events = SessionStore().load("inc-9")["events"]
    assert [e["kind"] for e in events] == ["stacks"] and events[0]["data"]["odd"] == doc["odd"]
    text = cli("--pid", *map(str, pids))
    assert text.returncode == 1
    assert text.stdout.startswith("stacks: 2 ranks in wait_for_peers (train.py:4); rank 2 in "
                                  "save_checkpoint (train.py:7)")
    assert f"py-spy dump --pid {pids[2]} --locals" in text.stdout


def test_every_rank_in_one_place_is_exit_0(ranks) -> None:
    ranks({0: "wait_for_peers", 1: "wait_for_peers"})
    res = cli("--job", ranks.job)
    assert res.returncode == 0, res.stderr
    assert res.stdout.startswith("stacks: 2 ranks in wait_for_peers (train.py:4)")
    assert "odd ranks out" not in res.stdout


@pytest.mark.parametrize("args, message", [
    (["--pid", "abc"], "not a process id"),
    (["--pid", "4194304000"], "could not dump any rank: process gone before it could be dumped"),
    (["--job", "no-such-job"], "--job no-such-job: no such job on this node"),
    (["--pid", "1", "--job", "auto"], "not allowed with argument"),
    (["--timeout", "0"], "must be above 0"),
])
def test_bad_usage_is_one_line_exit_2(args: list[str], message: str) -> None:
    res = cli(*args)
    assert res.returncode == 2
    assert message in res.stderr and len(res.stderr.strip().splitlines()) == 1
    assert "Traceback" not in res.stderr


def test_no_job_and_several_jobs(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture) -> None:
    from distdoctor.probes import stacks
    from distdoctor.probes.stacks.discover import Job, RankProc

    monkeypatch.setattr(stacks, "find_jobs", lambda: [])
    assert main(["stacks"]) == 2
    assert "no training job found on this node" in capsys.readouterr().err
    two = [Job("10", "torchrun agent 10", [RankProc(11, "0")]),
           Job("20", "Slurm step 5.0", [RankProc(21, "0"), RankProc(22, "1")])]
    monkeypatch.setattr(stacks, "find_jobs", lambda: two)
    assert main(["stacks", "--job", "auto"]) == 2
    err = capsys.readouterr().err.splitlines()
    assert err[0].startswith("  --job 10: torchrun agent 10, 1 rank(s), pids 11")
    assert err[1].startswith("  --job 20: Slurm step 5.0, 2 rank(s), pids 21,22")
    assert err[2] == ("distdoctor: error: 2 jobs on this node (10, 20), pick one with --job ID "
                      "(listed above)")


@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("setpriv"),
                    reason="drops CAP_SYS_PTRACE with setpriv: needs root")
def test_refused_ptrace_says_why_and_what_to_run(tmp_path: Path) -> None:
    # a target that only CAP_SYS_PTRACE may trace (not dumpable), and distdoctor without it:
    # what a container started without SYS_PTRACE sees
    target = subprocess.Popen([sys.executable, "-c", "import ctypes, time\n"
                               "ctypes.CDLL(None).prctl(4, 0, 0, 0, 0)\ntime.sleep(60)"])
    try:
        time.sleep(0.5)
        res = subprocess.run(["setpriv", "--bounding-set=-sys_ptrace", "--inh-caps=-sys_ptrace",
                              sys.executable, "-m", "distdoctor.tui.cli", "stacks", "--pid",
                              str(target.pid)], capture_output=True, text=True, timeout=120)
        assert res.returncode == 2
        assert res.stderr.strip() == (
            "distdoctor: error: could not dump any rank: ptrace refused: this container lacks the "
            "SYS_PTRACE capability (CapEff without CAP_SYS_PTRACE); restart it with `docker run "
            "--cap-add=SYS_PTRACE` (Kubernetes: securityContext.capabilities.add: "
            f"[\"SYS_PTRACE\"]) or run on the host: `sudo distdoctor stacks --pid {target.pid}`")
        assert target.poll() is None  # untouched
    finally:
        target.kill()
        target.wait()


def test_a_dump_cut_short_at_its_timeout_never_leaves_the_rank_stopped() -> None:
    from distdoctor.probes.base import ProbeContext
    from distdoctor.probes.stacks import dump_one, find_pyspy, proc_state

    target = subprocess.Popen([sys.executable, "-c", "import time\nwhile True: time.sleep(0.01)"])
    ctx = ProbeContext()
    try:
        time.sleep(0.5)
        errors = []
        # py-spy killed (its whole group) at every point of its run: before, during, after attach
        for timeout in (0.001, 0.005, 0.01, 0.02, 0.03, 0.05, 0.08, 0.12, 5.0):
            frames, error = dump_one(target.pid, find_pyspy(), timeout=timeout, ctx=ctx)
            errors.append(error)
            assert proc_state(ctx, target.pid) not in ("T", "t"), (timeout, error)
        assert any("timed out" in e for e in errors)
        assert errors[-1] == ""  # and a dump given time works
        assert target.poll() is None
    finally:
        target.kill()
        target.wait()


def test_stacks_imports_neither_torch_nor_textual(ranks) -> None:
    pids = ranks({0: "wait_for_peers"})
    code = ("import contextlib, io, sys\nfrom distdoctor.tui.cli import main\n"
            "with contextlib.redirect_stdout(io.StringIO()): rc = main(sys.argv[1:])\n"
            "print(rc, sorted(m for m in sys.modules if m.split('.')[0] in ('torch', 'textual')))")
    proc = subprocess.run([sys.executable, "-c", code, "stacks", "--pid", str(pids[0])],
                          capture_output=True, text=True, timeout=120)
    assert proc.stdout.split() == ["0", "[]"], proc.stderr
