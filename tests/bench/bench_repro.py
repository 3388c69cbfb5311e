"""Benchmark: `run_repro` (two Gloo ranks) and the whole `distdoctor repro` command against a bare
torchrun of an equivalent script.

Run: `python tests/bench/bench_repro.py [ROUNDS]` with an interpreter that has torch. The three
are alternated so machine load hits them alike; prints each median and the ratios (goal <= 1.2x).
The command adds its start, the knowledge base and the check of the target interpreter
(probes/repro/options.py: torch imported there only when the backend depends on CUDA).
"""
from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from distdoctor.knowledge import load_knowledge
from distdoctor.probes.repro import ReproOptions, run_repro
from distdoctor.probes.repro.proctree import free_port

# What anyone would write by hand to test the same thing: same collectives, no distdoctor.
BARE = """\
import datetime, os, torch, torch.distributed as dist
dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=120))
rank, world = dist.get_rank(), dist.get_world_size()
rows = [torch.zeros(3, dtype=torch.int64) for _ in range(world)]
dist.all_gather(rows, torch.tensor([rank, int(os.environ["LOCAL_RANK"]), world]))
dist.barrier()
t = torch.full((1024,), float(rank + 1))
dist.all_reduce(t)
assert torch.all(t == world * (world + 1) / 2)
b = torch.arange(1024, dtype=torch.float32) if rank == 0 else torch.zeros(1024)
dist.broadcast(b, src=0)
dist.destroy_process_group()
print("done", rank, flush=True)
"""


def bare_run(script: Path) -> float:
    argv = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2", "--nnodes", "1",
            "--master-addr", "127.0.0.1", "--master-port", str(free_port()), str(script)]
    start = time.monotonic()
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONUNBUFFERED": "1"})
    elapsed = time.monotonic() - start
    if proc.returncode != 0:
        raise SystemExit(f"bare torchrun failed: {proc.stderr[-500:]}")
    return elapsed


def cli_run(run_dir: Path) -> float:
    """`distdoctor repro` as typed (backend auto), to its exit."""
    argv = [str(Path(sys.executable).parent / "distdoctor"), "repro", "--python", sys.executable,
            "--timeout", "120", "--run-dir", str(run_dir), "--json"]
    start = time.monotonic()
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=300)
    elapsed = time.monotonic() - start
    if proc.returncode != 0:
        raise SystemExit(f"distdoctor repro failed ({proc.returncode}): {proc.stderr[-500:]}")
    return elapsed


def main() -> int:
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 5
    kb = load_knowledge(use_env=False)
    repro_times: list[float] = []
    bare_times: list[float] = []
    cli_times: list[float] = []
    with tempfile.TemporaryDirectory() as tmp:
        script = Path(tmp) / "bare.py"
        script.write_text(BARE, encoding="utf-8")
        for n in range(rounds):
            start = time.monotonic()
            result = run_repro(ReproOptions(python=sys.executable, backend="gloo", timeout=120,
                                            run_dir=Path(tmp) / f"run{n}"), kb)
            repro_times.append(time.monotonic() - start)
            if result.outcome != "pass":
                raise SystemExit(f"repro did not pass: {result.outcome} ({result.log})")
            bare_times.append(bare_run(script))
            cli_times.append(cli_run(Path(tmp) / f"cli{n}"))
            print(f"round {n + 1}: run_repro {repro_times[-1]:.2f}s  bare torchrun {bare_times[-1]:.2f}s  "
                  f"distdoctor repro {cli_times[-1]:.2f}s")
    bare_med = statistics.median(bare_times)
    print(f"median: bare torchrun {bare_med:.2f}s")
    for label, times in (("run_repro", repro_times), ("distdoctor repro (CLI)", cli_times)):
        ratio = statistics.median(times) / bare_med
        print(f"  {label:24} {statistics.median(times):.2f}s, ratio {ratio:.2f}x (goal <= 1.20x) "
              f"{'OK' if ratio <= 1.2 else 'OVER'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
