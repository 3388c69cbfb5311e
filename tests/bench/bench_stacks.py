"""Benchmark: `distdoctor stacks` against a bare `py-spy dump --pid` loop over the same ranks
(goal: at most 1.2x the bare loop).

Run: python tests/bench/bench_stacks.py [--nproc N] [--runs R]   (N: 8 by default, one 8-GPU node)
A real hung Gloo job (torchrun, N ranks, rank 1 asleep while the others wait in all_reduce) is
started in a temporary folder; then, R times each, alternating: the bare loop (one `py-spy dump
--pid P` after the other, what an engineer types), and `distdoctor stacks --job AGENT --json`
(the whole command: start, rank discovery over every process, the parallel dumps, analysis).
The job is killed at the end and checked gone.
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(HERE / d) for d in ("kits", "unit", "integration")]

from test_stacks_real import JOB  # noqa: E402  the same job the tests hang

from distdoctor.probes.repro.proctree import ProcessTree, free_port  # noqa: E402
from distdoctor.probes.stacks import find_pyspy  # noqa: E402


def start(tmp: Path, nproc: int) -> tuple[ProcessTree, list[int]]:
    import psutil

    (tmp / "train.py").write_text(JOB)
    env = dict(os.environ, OMP_NUM_THREADS="1")
    argv = [sys.executable, "-m", "torch.distributed.run", f"--nproc-per-node={nproc}",
            "--master-addr=127.0.0.1", f"--master-port={free_port()}", "train.py", "sleep"]
    tree = ProcessTree(argv, env, tmp, tmp / "job.log")
    deadline = time.monotonic() + 300
    while len(list(tmp.glob("ready.*"))) < nproc:
        if tree.proc.poll() is not None or time.monotonic() > deadline:
            sys.exit(f"the job did not start: {(tmp / 'job.log').read_text()[-1500:]}")
        tree.track()
        time.sleep(0.2)
    time.sleep(1.5)
    tree.track()
    return tree, sorted(c.pid for c in psutil.Process(tree.proc.pid).children())


def cpu() -> float:
    """CPU seconds of this process's finished children: a figure the runner's load moves less."""
    use = resource.getrusage(resource.RUSAGE_CHILDREN)
    return use.ru_utime + use.ru_stime


def bare_loop(pyspy: str, pids: list[int]) -> float:
    start = time.perf_counter()
    for pid in pids:
        subprocess.run([pyspy, "dump", "--pid", str(pid)], capture_output=True, timeout=60, check=True)
    return time.perf_counter() - start


def stacks(agent: int, env: dict[str, str]) -> tuple[float, dict]:
    start = time.perf_counter()
    proc = subprocess.run([str(Path(sys.executable).parent / "distdoctor"), "stacks", "--job",
                           str(agent), "--json"], capture_output=True, text=True, timeout=120,
                          env=env)
    took = time.perf_counter() - start
    if proc.returncode not in (0, 1):
        sys.exit(f"distdoctor stacks failed: {proc.stderr.strip()}")
    return took, json.loads(proc.stdout)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nproc", type=int, default=8, help="ranks (default 8: one 8-GPU node)")
    parser.add_argument("--runs", type=int, default=7)
    args = parser.parse_args()
    pyspy = find_pyspy()
    with tempfile.TemporaryDirectory(prefix="bench-stacks-") as tmp:
        # as installed: byte-compiled modules (some setups set PYTHONDONTWRITEBYTECODE, which
        # makes every start compile distdoctor again); the cache goes to the temporary folder
        env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        env["PYTHONPYCACHEPREFIX"] = str(Path(tmp) / "pycache")
        tree, pids = start(Path(tmp), args.nproc)
        try:
            bare, ours = [], []
            doc: dict = {}
            stacks(tree.proc.pid, env)  # warm-up: fills the byte-code cache, not counted
            bare_loop(pyspy, pids)
            bare_cpu = ours_cpu = 0.0
            for _ in range(args.runs):
                before = cpu()
                bare.append(bare_loop(pyspy, pids))
                middle = cpu()
                took, doc = stacks(tree.proc.pid, env)
                ours.append(took)
                bare_cpu += middle - before
                ours_cpu += cpu() - middle
            assert sorted(r["pid"] for r in doc["ranks"]) == pids, "stacks dumped other processes"
            assert [o["rank"] for o in doc["odd"]] == ["1"], doc["odd"]
        finally:
            tree.kill()
            tree.close()
            left = tree.survivors()
    b, o = statistics.median(bare), statistics.median(ours)
    print(f"ranks: {len(pids)} (a real hung Gloo job), runs: {args.runs}, median wall time")
    print(f"  bare loop  `py-spy dump --pid P` x {len(pids)}:  {b * 1000:7.0f} ms "
          f"(min {min(bare) * 1000:.0f}, max {max(bare) * 1000:.0f})")
    print(f"  distdoctor stacks --job ID --json:   {o * 1000:7.0f} ms "
          f"(min {min(ours) * 1000:.0f}, max {max(ours) * 1000:.0f})")
    print(f"  ratio stacks / bare loop: {o / b:.2f}x (goal <= 1.2x)")
    print(f"  CPU per run (user+sys of the commands): bare loop {bare_cpu / args.runs * 1000:.0f} ms, "
          f"stacks {ours_cpu / args.runs * 1000:.0f} ms")
    print(f"  summary: {doc['summary']}")
    print(f"  processes left after the kill: {len(left)}")


if __name__ == "__main__":
    main()
