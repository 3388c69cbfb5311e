"""stacks on real hung Gloo jobs (torchrun, 3 ranks): `distdoctor stacks --job auto --json` names
the odd rank and where it is; the dump leaves every rank running as before, a job that would end
still ends with exit 0, and killing the job leaves no process behind."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from distdoctor.probes.repro.proctree import ProcessTree, free_port

pytestmark = pytest.mark.slow

NPROC = 3
START_S = 180  # three ranks importing torch on a loaded 2-core runner
JOB = r'''
import datetime, os, sys, time
import torch
import torch.distributed as dist

KIND = sys.argv[1]
ODD = 1


def slow_step():
    time.sleep(600)                                # LINE_SLEEP


class Slow(torch.utils.data.Dataset):
    def __len__(self):
        return 8

    def __getitem__(self, i):
        if dist.get_rank() == ODD:
            time.sleep(600)
        return torch.ones(2)


def main():
    # a long timeout: the job must really hang while it is dumped, not time out
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=600))
    rank = dist.get_rank()
    pair = dist.new_group([0, ODD])
    t = torch.ones(4)
    dist.all_reduce(t)
    open(f"ready.{rank}", "w").close()
    if KIND == "collective":
        if rank == ODD:
            dist.broadcast(t, src=0, group=pair)   # LINE_BROADCAST
        else:
            dist.all_reduce(t)                     # LINE_ALL_REDUCE_A
    elif KIND == "sleep":
        if rank == ODD:
            slow_step()
        dist.all_reduce(t)                         # LINE_ALL_REDUCE_B
    elif KIND == "dataloader":
        for batch in torch.utils.data.DataLoader(Slow(), batch_size=2):   # LINE_LOADER
            dist.all_reduce(batch)                 # LINE_ALL_REDUCE_C
    elif KIND == "finish":
        steps = 0
        while True:
            flag = torch.tensor([1.0 if os.path.exists("stop") else 0.0])
            dist.broadcast(flag, src=0)            # rank 0 decides for everyone
            if flag.item():
                break
            t = torch.ones(4) * (rank + 1)
            dist.all_reduce(t)
            assert t.tolist() == [6.0] * 4, t
            steps += 1
            time.sleep(0.05)
        print(f"rank {rank} finished after {steps} steps", flush=True)
    dist.destroy_process_group()


main()
'''


def line_of(marker: str) -> int:
    return next(i for i, line in enumerate(JOB.splitlines(), 1) if marker in line)


class Launched:
    """A torchrun job of this test in tmp_path, killed whole at the end."""

    def __init__(self, tmp_path: Path, kind: str) -> None:
        self.dir = tmp_path
        (tmp_path / "train.py").write_text(JOB)
        env = dict(os.environ, OMP_NUM_THREADS="1", GLOO_SOCKET_IFNAME="lo")
        self.master = f"127.0.0.1:{free_port()}"
        argv = [sys.executable, "-m", "torch.distributed.run", f"--nproc-per-node={NPROC}",
                "--master-addr=127.0.0.1", f"--master-port={self.master.split(':')[1]}",
                "train.py", kind]
        self.tree = ProcessTree(argv, env, tmp_path, tmp_path / "job.log")
        self.agent = self.tree.proc.pid

    def ranks(self) -> list[int]:
        return sorted(c.pid for c in psutil.Process(self.agent).children())

    def wait_ready(self) -> None:
        deadline = time.monotonic() + START_S
        while len(list(self.dir.glob("ready.*"))) < NPROC:
            if self.tree.proc.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"job did not start: {(self.dir / 'job.log').read_text()[-2000:]}")
            self.tree.track()
            time.sleep(0.2)
        time.sleep(1.0)  # from the marker to the hanging call is a line or two

    def kill_and_check_gone(self) -> None:
        known = set(self.tree.known) | set(self.ranks() if psutil.pid_exists(self.agent) else [])
        self.tree.kill()
        self.tree.close()
        assert self.tree.survivors() == []
        assert not [p for p in known if _alive(p)]


def _alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def stacks(job: Launched, *extra: str) -> tuple[int, dict, str]:
    """`distdoctor stacks --job auto --json`; on a shared machine where other jobs run too, auto
    lists them (exit 2): ours must be among them, and it is then picked by its MASTER_ADDR:PORT."""
    cmd = [sys.executable, "-m", "distdoctor.tui.cli", "stacks", "--json", *extra]
    proc = subprocess.run(cmd + ["--job", "auto"], capture_output=True, text=True, timeout=120)
    skip_if_refused(proc)
    if proc.returncode == 2 and "jobs on this node" in proc.stderr:
        assert (f"--job {job.agent}: torchrun agent {job.agent} (also --job {job.master}), "
                f"{NPROC} rank(s)") in proc.stderr
        proc = subprocess.run(cmd + ["--job", job.master], capture_output=True, text=True,
                              timeout=120)
    assert proc.returncode in (0, 1), proc.stderr
    return proc.returncode, json.loads(proc.stdout), proc.stderr


def skip_if_refused(proc: subprocess.CompletedProcess) -> None:
    """Where this machine forbids attaching (ptrace_scope=1 on a CI runner, no SYS_PTRACE), say
    so and skip: stacks' own line is the reason."""
    if proc.returncode == 2 and "ptrace refused" in proc.stderr:
        pytest.skip(proc.stderr.strip())


def settled(job: Launched, want_odd: bool) -> tuple[int, dict]:
    """Dump until every rank has reached its hang (a loaded runner may be a beat late)."""
    for _ in range(5):
        rc, doc, _ = stacks(job)
        if bool(doc["odd"]) == want_odd and all(r["frames"] for r in doc["ranks"]):
            return rc, doc
        time.sleep(2)
    return rc, doc


def states(pids: list[int]) -> list[str]:
    return [psutil.Process(p).status() for p in pids]


@pytest.mark.parametrize("kind, odd_where, majority", [
    ("collective", f"broadcast (train.py:{line_of('LINE_BROADCAST')})",
     f"all_reduce (train.py:{line_of('LINE_ALL_REDUCE_A')})"),
    ("sleep", f"slow_step (train.py:{line_of('LINE_SLEEP')})", f"all_reduce (train.py:{line_of('LINE_ALL_REDUCE_B')})"),
    ("dataloader", f"dataloader (train.py:{line_of('LINE_LOADER')})",
     f"all_reduce (train.py:{line_of('LINE_ALL_REDUCE_C')})"),
])
def test_a_real_hang_names_the_odd_rank(tmp_path: Path, kind: str, odd_where: str, majority: str) -> None:
    job = Launched(tmp_path, kind)
    try:
        job.wait_ready()
        pids = job.ranks()
        rc, doc = settled(job, want_odd=True)
        assert rc == 1
        assert sorted(r["pid"] for r in doc["ranks"]) == pids
        assert [r["rank"] for r in doc["ranks"]] == ["0", "1", "2"]
        assert [(o["rank"], o["where"]) for o in doc["odd"]] == [("1", odd_where)]
        assert [r["where"] for r in doc["ranks"]] == [majority, odd_where, majority]
        assert doc["culprit"]["ranks"] == ["1"] and doc["culprit"]["role"] == "stuck"
        assert doc["summary"] == f"2 ranks in {majority}; rank 1 in {odd_where}"
        # the dump changed nothing: every rank still runs (not stopped), still hung where it was
        assert psutil.STATUS_STOPPED not in states(pids) and job.tree.proc.poll() is None
        _, again, _ = stacks(job)
        assert [r["where"] for r in again["ranks"]] == [r["where"] for r in doc["ranks"]]
    finally:
        job.kill_and_check_gone()


def test_a_job_that_would_finish_still_finishes_after_being_dumped(tmp_path: Path) -> None:
    job = Launched(tmp_path, "finish")
    try:
        job.wait_ready()
        pids = job.ranks()
        for extra in ("--native", "--timeout=30"):
            rc, doc, _ = stacks(job, extra)
            assert sorted(r["pid"] for r in doc["ranks"]) == pids
            assert all(r["frames"] for r in doc["ranks"])
        assert psutil.STATUS_STOPPED not in states(pids)
        (tmp_path / "stop").touch()
        assert job.tree.wait(time.monotonic() + 120) == "exited"
        assert job.tree.returncode == 0
        job.tree.close()
        log = (tmp_path / "job.log").read_text()
        for rank in range(NPROC):
            assert f"rank {rank} finished after" in log
    finally:
        job.kill_and_check_gone()
