"""`distdoctor run` and `distdoctor watch` on real 2-rank Gloo jobs under torchrun: a hang (rank 1
sleeps before an all_reduce), a crash (rank 1 raises), a healthy job that prints nothing for
longer than the stall window but keeps doing collectives, and `watch --pid` on a job started
here that stays running. Each checks the outcome, the culprit, the evidence, and that no process
of the job is left and its port is free."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from distdoctor.probes.repro.proctree import ProcessTree, free_port, port_is_free

pytestmark = pytest.mark.slow

STALL = "4"
JOB = r'''
import datetime, os, sys, time
import torch
import torch.distributed as dist

KIND = sys.argv[1]
dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=300))
rank = dist.get_rank()
t = torch.ones(4)
dist.all_reduce(t)
open(f"ready.{rank}", "w").close()
if KIND == "hang":
    if rank == 1:
        time.sleep(300)                        # LINE_SLEEP
    dist.all_reduce(t)                         # LINE_ALL_REDUCE
elif KIND == "busyloop":
    if rank == 1:
        n = 0
        while True:                            # LINE_SPIN: a spin that never reaches the collective
            n += 1
    dist.all_reduce(t)
elif KIND == "crash":
    if rank == 1:
        time.sleep(1)
        raise RuntimeError("injected failure on rank 1")
    dist.all_reduce(t)
elif KIND == "silent":
    # nothing printed for 3 stall windows, collectives all along
    end = time.monotonic() + 12
    while True:
        flag = torch.tensor([1.0 if time.monotonic() > end else 0.0])
        dist.broadcast(flag, src=0)
        if flag.item():
            break
        x = torch.randn(64, 64)
        for _ in range(20):
            x = torch.tanh(x @ x.T / 64)
        dist.all_reduce(x)
        time.sleep(0.01)
elif KIND == "eval0":
    # rank 0 evaluates, silent, for three stall windows; rank 1 waits in the barrier
    def evaluate(x):
        total = 0.0
        for _ in range(30):
            x = torch.tanh(x @ x.T / 64)
            total += float(x.sum())
        return total
    if rank == 0:
        end = time.monotonic() + 12
        while time.monotonic() < end:
            evaluate(torch.randn(64, 64))
    dist.barrier()
elif KIND == "straggler":
    end = time.monotonic() + 14
    while True:
        flag = torch.tensor([1.0 if time.monotonic() > end else 0.0])
        dist.broadcast(flag, src=0)
        if flag.item():
            break
        time.sleep(0.45 if rank == 1 else 0.05)     # LINE_STRAGGLE
        dist.all_reduce(t)
dist.destroy_process_group()
print(f"rank {rank} done", flush=True)
'''


def _run(tmp_path: Path, kind: str, *extra: str) -> tuple[subprocess.CompletedProcess, dict, int]:
    (tmp_path / "train.py").write_text(JOB)
    port = free_port()
    cmd = [sys.executable, "-m", "distdoctor.tui.cli", "run", "--stall", STALL, "--json",
           "--evidence-dir", str(tmp_path / "evidence"), *extra, "--",
           sys.executable, "-m", "torch.distributed.run", "--nproc-per-node=2",
           "--master-addr=127.0.0.1", f"--master-port={port}", "train.py", kind]
    env = dict(os.environ, OMP_NUM_THREADS="1", GLOO_SOCKET_IFNAME="lo")
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=180, cwd=tmp_path, env=env)
    if "ptrace refused" in proc.stderr:
        pytest.skip("this machine forbids attaching to processes (py-spy)")
    assert proc.stdout.strip(), proc.stderr[-3000:]
    return proc, json.loads(proc.stdout), port


def _nothing_left(tmp_path: Path, port: int) -> None:
    """No process runs this test's train.py, and the rendezvous port is free."""
    script = str(tmp_path / "train.py")
    left = []
    for p in psutil.process_iter(["cmdline", "cwd", "status"]):
        try:
            if p.info["status"] == psutil.STATUS_ZOMBIE:
                continue
            if "train.py" in " ".join(p.info["cmdline"] or []) and p.info["cwd"] == str(tmp_path):
                left.append(p.pid)
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
    assert not left, f"still running: {left} ({script})"
    assert port_is_free(port)


def test_run_confirms_a_hang_names_the_sleeping_rank_and_ends_the_job(tmp_path: Path) -> None:
    start = time.monotonic()
    proc, out, port = _run(tmp_path, "hang")
    assert proc.returncode == 1, proc.stderr[-2000:]
    assert set(out) == {"outcome", "exit_code", "hang", "verdict", "causes", "stragglers", "evidence", "session"}
    assert out["outcome"] == "hang"
    assert out["verdict"]["culprit"]["ranks"] == ["1"]
    assert out["hang"]["detected_after_s"] >= float(STALL)
    assert out["hang"]["detected_after_s"] < float(STALL) + 10
    stacks = json.loads(Path(out["evidence"]["stacks"]).read_text())
    where = {r["rank"]: r["where"] for r in stacks["ranks"]}
    assert where["0"].startswith("all_reduce (train.py:")
    assert where["1"].startswith("<module> (train.py:")
    assert Path(out["evidence"]["report"]).is_file()
    assert any(c["id"] in ("collective-timeout", "asymmetric-collective") for c in out["causes"])
    watch = json.loads((tmp_path / "evidence" / "watch.json").read_text())
    assert any("no Flight Recorder dump: this torch has no NCCL" in n for n in watch["notes"])  # Gloo: why
    _nothing_left(tmp_path, port)
    assert time.monotonic() - start < 60


def test_run_on_a_crash_names_the_rank_that_raised(tmp_path: Path) -> None:
    proc, out, port = _run(tmp_path, "crash")
    assert proc.returncode == 1
    assert out["outcome"] == "failed" and out["hang"] is None
    assert out["exit_code"] not in (0, None)
    assert out["verdict"]["culprit"]["ranks"] == ["1"]
    assert out["verdict"]["culprit"]["role"] == "crashed"
    assert out["causes"][0]["id"] == "rank-crash-deadlock"
    assert any("attempt_0/1/stderr.log" in p for p in out["evidence"]["logs"])
    _nothing_left(tmp_path, port)


def test_a_silent_job_that_keeps_doing_collectives_is_no_hang(tmp_path: Path) -> None:
    proc, out, port = _run(tmp_path, "silent")
    assert proc.returncode == 0, (tmp_path / "evidence" / "watch.json").read_text()
    assert out["outcome"] == "finished" and out["exit_code"] == 0
    assert out["hang"] is None and out["verdict"] is None and out["causes"] == []
    assert "rank 0 done" in proc.stderr  # the job's own output reaches the terminal (stderr with --json)
    _nothing_left(tmp_path, port)


def test_watch_by_pid_captures_a_hang_and_leaves_the_job_running(tmp_path: Path) -> None:
    (tmp_path / "train.py").write_text(JOB)
    port = free_port()
    env = dict(os.environ, OMP_NUM_THREADS="1", GLOO_SOCKET_IFNAME="lo")
    argv = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node=2", "--master-addr=127.0.0.1",
            f"--master-port={port}", "train.py", "hang"]
    tree = ProcessTree(argv, env, tmp_path, tmp_path / "job.log")
    try:
        deadline = time.monotonic() + 120
        while len(list(tmp_path.glob("ready.*"))) < 2:
            assert tree.proc.poll() is None and time.monotonic() < deadline, (tmp_path / "job.log").read_text()
            time.sleep(0.2)
        ranks = sorted(c.pid for c in psutil.Process(tree.proc.pid).children())
        cmd = [sys.executable, "-m", "distdoctor.tui.cli", "watch", "--pid", *map(str, ranks), "--stall", STALL,
               "--json", "--no-native", "--evidence-dir", str(tmp_path / "evidence")]
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
        if "ptrace refused" in proc.stderr:
            pytest.skip("this machine forbids attaching to processes (py-spy)")
        out = json.loads(proc.stdout)
        assert proc.returncode == 1
        assert out["outcome"] == "hang" and out["exit_code"] is None
        assert out["verdict"]["culprit"]["ranks"] == ["1"]
        assert all(psutil.pid_exists(p) and psutil.Process(p).status() != psutil.STATUS_ZOMBIE for p in ranks)
        assert tree.proc.poll() is None  # watch never ends a job without --kill-on-hang
    finally:
        tree.kill()
        tree.close()
    assert tree.survivors() == []
    _nothing_left(tmp_path, port)


def test_a_straggler_is_named_and_the_job_finishes(tmp_path: Path) -> None:
    """Rank 1 sleeps 0.4 s more than rank 0 every step (a slow reader): the job is healthy, slower."""
    proc, out, port = _run(tmp_path, "straggler")
    assert proc.returncode == 0, (tmp_path / "evidence" / "watch.json").read_text()
    assert out["outcome"] == "finished" and out["hang"] is None
    assert [s["rank"] for s in out["stragglers"]] == ["1"], out["stragglers"]
    _nothing_left(tmp_path, port)


WORLD3 = r'''
import datetime, os
import torch.distributed as dist
open(f"ready.{os.environ['RANK']}", "w").close()
dist.init_process_group("gloo", world_size=3, rank=int(os.environ["RANK"]),
                        timeout=datetime.timedelta(seconds=300))
'''

SPAWNED = r'''
import datetime, os, time
import torch
import torch.distributed as dist
import torch.multiprocessing as mp


def work(i):
    # the torchrun worker's RANK and WORLD_SIZE, inherited: two processes per rank number
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=300))
    t = torch.ones(1)
    dist.all_reduce(t)
    time.sleep(300)


if __name__ == "__main__":
    mp.spawn(work, nprocs=2)
'''


def _run_script(tmp_path: Path, script: str) -> tuple[subprocess.CompletedProcess, dict, int]:
    (tmp_path / "job.py").write_text(script)
    port = free_port()
    cmd = [sys.executable, "-m", "distdoctor.tui.cli", "run", "--stall", STALL, "--json", "--no-native",
           "--evidence-dir", str(tmp_path / "evidence"), "--", sys.executable, "-m", "torch.distributed.run",
           "--nproc-per-node=2", "--master-addr=127.0.0.1", f"--master-port={port}", "job.py"]
    env = dict(os.environ, OMP_NUM_THREADS="1", GLOO_SOCKET_IFNAME="lo")
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=180, cwd=tmp_path, env=env)
    assert proc.stdout.strip(), proc.stderr[-3000:]
    return proc, json.loads(proc.stdout), port


def _left(tmp_path: Path, port: int, name: str = "job.py") -> None:
    left = [p.pid for p in psutil.process_iter(["cmdline", "cwd", "status"])
            if p.info["status"] != psutil.STATUS_ZOMBIE and p.info["cwd"] == str(tmp_path)
            and name in " ".join(p.info["cmdline"] or [])]
    assert not left and port_is_free(port)


def test_every_rank_waiting_in_init_for_a_world_size_never_started(tmp_path: Path) -> None:
    proc, out, port = _run_script(tmp_path, WORLD3)
    assert out["outcome"] == "hang", proc.stderr[-2000:]
    top = out["causes"][0]
    assert top["id"] == "rank-env-mismatch", out["causes"]
    assert any("world_size=3" in r and "started 2" in r for r in top["reasons"])
    _left(tmp_path, port)


def test_mp_spawn_under_torchrun_is_read_from_the_process_tree(tmp_path: Path) -> None:
    proc, out, port = _run_script(tmp_path, SPAWNED)
    assert out["outcome"] in ("hang", "failed"), proc.stderr[-2000:]
    assert "mixed-launchers" in [c["id"] for c in out["causes"]], out["causes"]
    _left(tmp_path, port)


def test_rank_0_evaluating_silently_while_the_others_wait_is_no_hang(tmp_path: Path) -> None:
    proc, out, port = _run(tmp_path, "eval0")
    assert proc.returncode == 0, (tmp_path / "evidence" / "watch.json").read_text()
    assert out["outcome"] == "finished" and out["hang"] is None
    _nothing_left(tmp_path, port)


def test_a_rank_spinning_in_a_busy_loop_is_a_hang_with_that_rank_named(tmp_path: Path) -> None:
    proc, out, port = _run(tmp_path, "busyloop")
    assert out["outcome"] == "hang", (tmp_path / "evidence" / "watch.json").read_text()
    assert out["verdict"]["culprit"]["ranks"] == ["1"]
    _nothing_left(tmp_path, port)


def test_watch_by_job_id_and_run_keep_running_leave_the_job_to_a_human(tmp_path: Path) -> None:
    """`watch --job AGENT_PID` finds the job as `stacks --job` does; `run --keep-running` leaves
    the hung job running after the capture, its output still going to launcher.log."""
    (tmp_path / "train.py").write_text(JOB)
    port = free_port()
    env = dict(os.environ, OMP_NUM_THREADS="1", GLOO_SOCKET_IFNAME="lo")
    cmd = [sys.executable, "-m", "distdoctor.tui.cli", "run", "--stall", STALL, "--json", "--no-native",
           "--keep-running", "--evidence-dir", str(tmp_path / "evidence"), "--", sys.executable, "-m",
           "torch.distributed.run", "--nproc-per-node=2", "--master-addr=127.0.0.1", f"--master-port={port}",
           "train.py", "hang"]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=180, cwd=tmp_path, env=env)
    agents = [p for p in psutil.process_iter(["cmdline", "cwd"])
              if p.info["cwd"] == str(tmp_path) and "torch.distributed.run" in " ".join(p.info["cmdline"] or [])]
    try:
        out = json.loads(proc.stdout)
        assert out["outcome"] == "hang" and "left running" in proc.stderr
        assert len(agents) == 1 and agents[0].is_running()
        ranks = agents[0].children()
        assert len(ranks) == 2 and all(r.status() != psutil.STATUS_ZOMBIE for r in ranks)
        watch = subprocess.run([sys.executable, "-m", "distdoctor.tui.cli", "watch", "--job", str(agents[0].pid),
                                "--stall", STALL, "--json", "--no-native", "--evidence-dir", str(tmp_path / "w")],
                               capture_output=True, text=True, timeout=120)
        got = json.loads(watch.stdout)
        assert watch.returncode == 1 and got["outcome"] == "hang"
        assert got["verdict"]["culprit"]["ranks"] == ["1"]
        assert agents[0].is_running()
    finally:
        for a in agents:
            procs = [a] + a.children(recursive=True)
            for p in procs:
                p.kill()
            psutil.wait_procs(procs, timeout=10)
    _nothing_left(tmp_path, port)


MISMATCH = r'''
import datetime
import torch
import torch.distributed as dist
dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=300))
t = torch.ones(4)
dist.all_reduce(t)
if dist.get_rank() == 1:
    dist.all_gather([torch.ones(8), torch.ones(8)], torch.ones(8))
else:
    dist.all_reduce(t)
'''


def test_ranks_waiting_in_different_collectives_are_an_asymmetric_collective(tmp_path: Path) -> None:
    proc, out, port = _run_script(tmp_path, MISMATCH)
    assert out["outcome"] == "hang", proc.stderr[-2000:]
    top = out["causes"][0]
    assert top["id"] == "asymmetric-collective" and top["basis"] == "evidence", out["causes"]
    assert any("different collectives" in r for r in top["reasons"])
    _left(tmp_path, port)


SPAWN_HANG = r'''
import datetime, os, sys, time
import torch
import torch.distributed as dist
import torch.multiprocessing as mp


def work(rank, world):
    dist.init_process_group("gloo", rank=rank, world_size=world, timeout=datetime.timedelta(seconds=300))
    t = torch.ones(2)
    dist.all_reduce(t)
    if rank == 1:
        time.sleep(300)
    dist.all_reduce(t)


if __name__ == "__main__":
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = sys.argv[1]
    mp.spawn(work, args=(2,), nprocs=2)
'''


def test_a_plain_python_job_that_calls_mp_spawn_is_watched_rank_by_rank(tmp_path: Path) -> None:
    (tmp_path / "job.py").write_text(SPAWN_HANG)
    port = free_port()
    cmd = [sys.executable, "-m", "distdoctor.tui.cli", "run", "--stall", STALL, "--json", "--no-native",
           "--evidence-dir", str(tmp_path / "evidence"), "--", sys.executable, "job.py", str(port)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=180, cwd=tmp_path,
                          env=dict(os.environ, OMP_NUM_THREADS="1", GLOO_SOCKET_IFNAME="lo"))
    out = json.loads(proc.stdout)
    assert out["outcome"] == "hang", proc.stderr[-2000:]
    assert out["verdict"]["culprit"]["ranks"] == ["1"]  # mp.spawn's children, numbered in start order
    _left(tmp_path, port)
