"""distdoctor.guard on real torch.distributed Gloo processes (launched by hand with RANK/WORLD_SIZE,
as a user or a scheduler does): crash_guard makes the other ranks fail fast, preflight explains a
world size larger than the processes started and duplicate ranks, each within its timeout."""
from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
PG_TIMEOUT_S = 120  # the collective timeout the crashed job would otherwise wait out
PREFLIGHT_S = 10

CRASH_JOB = f"""
import datetime, threading, time
import torch, torch.distributed as dist
from distdoctor.guard import crash_guard
dist.init_process_group("gloo", timeout=datetime.timedelta(seconds={PG_TIMEOUT_S}))
rank = dist.get_rank()
with crash_guard() as guard:
    for step in range(10_000):
        guard.step = step
        t = torch.ones(4)
        dist.all_reduce(t)
        if rank == 1 and step == 3:
            # recorded case 02: a non-daemon thread would keep the crashed rank alive
            threading.Thread(target=time.sleep, args=(600,)).start()
            raise ValueError("corrupted record in shard-00001.bin")
        time.sleep(0.05)
"""

# Both paths leave without an interpreter teardown over a live Gloo group: torch 2.13 sometimes
# aborts there ("terminate called without an active exception", exit -6), which is not preflight's.
PREFLIGHT_JOB = f"""
import os, sys, time
import torch
import torch.distributed as dist
from distdoctor.guard import PreflightError, preflight
t0 = time.monotonic()
try:
    table = preflight(timeout={PREFLIGHT_S})
except PreflightError as exc:
    print(f"PREFLIGHT-FAILED {{time.monotonic() - t0:.1f}}s {{exc}}", flush=True)
    os._exit(3)
print(f"PREFLIGHT-OK {{time.monotonic() - t0:.1f}}s ranks={{sorted(r['rank'] for r in table)}}", flush=True)
dist.destroy_process_group()
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def launch(tmp_path: Path, code: str, ranks: list[tuple[int, int]], world: int,
           extra: dict[str, str] | None = None) -> list[tuple[int, str, float]]:
    """Start one process per (RANK, LOCAL_RANK); wait for all; (returncode, output, seconds) each."""
    script = tmp_path / "job.py"
    script.write_text(code)
    base = dict(os.environ, PYTHONPATH=str(REPO), MASTER_ADDR="127.0.0.1", MASTER_PORT=str(free_port()),
                WORLD_SIZE=str(world), **(extra or {}))
    procs = []
    for rank, local in ranks:
        env = dict(base, RANK=str(rank), LOCAL_RANK=str(local))
        log = open(tmp_path / f"r{rank}-l{local}-{len(procs)}.log", "w+")
        procs.append((subprocess.Popen([sys.executable, str(script)], stdout=log, stderr=subprocess.STDOUT,
                                       env=env, cwd=tmp_path), log, time.monotonic()))
        time.sleep(0.3)  # the store's host (first process) starts first, as torchrun's agent does
    out = []
    for proc, log, started in procs:
        try:
            proc.wait(timeout=PG_TIMEOUT_S + 60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        took = time.monotonic() - started
        log.seek(0)
        out.append((proc.returncode, log.read(), took))
        log.close()
    return out


def test_crash_guard_makes_the_others_fail_fast(tmp_path: Path) -> None:
    results = launch(tmp_path, CRASH_JOB, [(0, 0), (1, 1), (2, 2)], 3,
                     {"TORCH_FR_DUMP_TEMP_FILE": str(tmp_path / "fr_rank_")})
    for rc, log, took in results:
        assert rc == 1, log[-2000:]
        # a correctness bound (the job did not wait out the 120 s collective timeout), not a speed goal
        assert took < PG_TIMEOUT_S / 2, (took, log[-2000:])
    crashed = results[1][1]
    line = next(x for x in crashed.splitlines() if "crashed at step" in x)
    assert line.startswith("[distdoctor.guard] rank 1 crashed at step 3 (pid ")
    assert line.endswith("ValueError: corrupted record in shard-00001.bin")
    assert "process group: destroyed" in crashed
    # the peers learnt of it from the closed connection, not from a timeout, and said so
    for _rc, log, _ in (results[0], results[2]):
        assert "crashed at step" in log and "Connection closed by peer" in log
    dump = tmp_path / "fr_rank_1.json"
    assert dump.is_file() and b"all_reduce" in dump.read_bytes()


def test_preflight_world_size_larger_than_started(tmp_path: Path) -> None:
    results = launch(tmp_path, PREFLIGHT_JOB, [(0, 0), (1, 1)], 3)
    for rc, log, _ in results:
        assert rc == 3, log[-2000:]
        failed = next(x for x in log.splitlines() if x.startswith("PREFLIGHT-FAILED"))
        assert float(failed.split()[1].rstrip("s")) < PREFLIGHT_S * 4  # ended by its own deadline
        assert "WORLD_SIZE=3" in failed and "rank-env-mismatch" in failed
    assert "only 2 of WORLD_SIZE=3 processes reached the store" in results[0][1]


def test_preflight_duplicate_rank_zero(tmp_path: Path) -> None:
    """Recorded case 22: both processes were started with RANK=0."""
    results = launch(tmp_path, PREFLIGHT_JOB, [(0, 0), (0, 1)], 2)
    logs = [log for _, log, _ in results]
    assert all(rc == 3 for rc, _, _ in results), logs
    assert any("also claims RANK=0 (a duplicate rank)" in log for log in logs)
    assert any("only 1 of WORLD_SIZE=2 processes reached the store" in log for log in logs)


def test_preflight_duplicate_local_rank_and_a_good_start(tmp_path: Path) -> None:
    (tmp_path / "dup").mkdir()
    dup = launch(tmp_path / "dup", PREFLIGHT_JOB, [(0, 0), (1, 0)], 2)
    for rc, log, _ in dup:
        assert rc == 3 and "LOCAL_RANK=0 is claimed by 2 processes" in log, log[-2000:]
    (tmp_path / "ok").mkdir()
    good = launch(tmp_path / "ok", PREFLIGHT_JOB, [(0, 0), (1, 1)], 2)
    for rc, log, _ in good:
        assert rc == 0 and "PREFLIGHT-OK" in log and "ranks=[0, 1]" in log, log[-2000:]
        assert "[distdoctor.guard] preflight: host=" in log and "world_size=2 device=cpu" in log


NCCL_JOB = PREFLIGHT_JOB.replace("import torch\n", "import torch\ntorch.cuda.set_device(0)\n")


@pytest.mark.gpu
def test_preflight_on_nccl_reports_two_ranks_on_one_gpu(tmp_path: Path) -> None:
    """Both ranks on cuda:0 (LOCAL_RANK copy-pasted): the rank table travels over a side Gloo
    group, so preflight names the shared GPU instead of failing inside NCCL."""
    results = launch(tmp_path, NCCL_JOB.replace("preflight(timeout=", "preflight(backend='nccl', timeout="),
                     [(0, 0), (1, 0)], 2)
    for rc, log, _ in results:
        assert rc == 3 and "cuda:0 is used by 2 ranks" in log, log[-2000:]


@pytest.mark.gpu
def test_crash_guard_dumps_the_nccl_flight_recorder(tmp_path: Path) -> None:
    job = CRASH_JOB.replace('"gloo"', '"nccl"').replace("torch.ones(4)", "torch.ones(4, device='cuda')")
    job = job.replace("import torch, torch.distributed as dist\n",
                      "import torch, torch.distributed as dist\ntorch.cuda.set_device(0)\n")
    job = job.replace("rank == 1 and step == 3", "step == 3")
    results = launch(tmp_path, job, [(0, 0)], 1, {"TORCH_FR_DUMP_TEMP_FILE": str(tmp_path / "fr_rank_"),
                                                  "TORCH_FR_BUFFER_SIZE": "100"})
    rc, log, _ = results[0]
    assert rc == 1 and "rank 0 crashed at step 3" in log, log[-2000:]
    assert b"all_reduce" in (tmp_path / "fr_rank_0.json").read_bytes()
